"""shoal's SQL DDL, handled before Spark sees a statement (docs/sql.md).

`parse_ddl(sql)` recognises the four statements shoal owns and returns None for anything
else (SELECT, WITH, EXPLAIN, CREATE VIEW, DESCRIBE FUNCTION, ...), which the caller hands to
Spark:

    CREATE TABLE [IF NOT EXISTS] t [(c TYPE [NOT NULL] [DEFAULT literal]
                                          [HEADERS | HEADER('key')], ...)]
        [WITH (mode = 'evolve', retention = '7d', kafka_topic = '...', key = literal, ...)]
    ALTER TABLE t ADD [COLUMN | COLUMNS] c TYPE [...], ...     (or a parenthesised list)
    ALTER TABLE t RENAME COLUMN a TO b
    ALTER TABLE t DROP COLUMN [IF EXISTS] c
    ALTER TABLE t ALTER | CHANGE [COLUMN] c TYPE wider_type
    ALTER TABLE t SET TBLPROPERTIES ('sort_by' = 'service, _timestamp', ...)
    ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] ('sort_by', ...)
    ALTER TABLE t RENAME TO u
    DROP TABLE [IF EXISTS] t
    UNDROP TABLE t
    DESCRIBE | DESC [TABLE] t
    SHOW TABLES
    SHOW TBLPROPERTIES t
    DELETE FROM t [[AS] alias] [WHERE predicate]
    TRUNCATE TABLE t

A statement that starts like one of these is shoal's: if it does not parse, `DdlSyntaxError`
names the line and column of the offending token, what was expected and what was found.
Keywords are case-insensitive; unquoted identifiers fold to lower case, `"quoted"` and
`` `quoted` `` ones are kept as written. A type is a word with an optional bracketed tail
(`vector(3)`, `ARRAY<STRUCT<key STRING, value BYTES>>`) read by `shoal.types.parse_type`.
The parser checks syntax only: names, header bindings, defaults and widening are checked by
`Schema.create` / `Schema.evolve` when the statement runs, exactly as for the HTTP API.

`ADD COLUMN` adds columns only: a name the table already has with another type is refused
(`ColumnExistsError`, 409) and a widening must be asked for with `ALTER COLUMN ... TYPE`.
RENAME COLUMN, DROP COLUMN and ALTER COLUMN each commit the next schema version
(`shoal.types.schema`); rows written before read through it.

`execute_ddl(stmt, db)` runs a statement against a `shoal.query.database.Database` and returns a
pyarrow table: CREATE/ALTER/UNDROP one row describing the table, DROP one row (name,
status), DESCRIBE one row per column, SHOW TABLES one row per table, SHOW TBLPROPERTIES one
(key, value) row per property. WITH keys other than `mode` become table properties.
DELETE and TRUNCATE are parsed here (the predicate is kept as text, for the planner) and
run by `shoal.query.delete`, which needs the planner and the embedded engine.
SET/UNSET TBLPROPERTIES change any property, `mode` included (UNSET gives it back its
default), and the result is checked as at CREATE (`shoal.lifecycle`): bindings, allowed
locations, the maintenance policy, the sort key. A key may be written as a string or a bare
name; unsetting a property the table does not have changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, Tokenizer, TokenType

from shoal.errors import (ColumnExistsError, DdlSyntaxError, InvalidSchemaError,
                          TableAlreadyExistsError)
from shoal.types import Column, ColumnType, parse_type
from shoal.types.schema import header_type_error, widening_allowed

if TYPE_CHECKING:
    from shoal.query.database import Database


@dataclass(frozen=True)
class CreateTable:
    name: str
    columns: tuple[Column, ...]
    if_not_exists: bool = False
    mode: str = "evolve"                  # validated by the catalog, as over HTTP
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AlterTableAddColumns:
    name: str
    columns: tuple[Column, ...]           # new columns, or wider types of existing ones


@dataclass(frozen=True)
class AlterTableColumn:
    """RENAME COLUMN `column` TO `new_name`, DROP COLUMN `column`, or ALTER COLUMN `column`
    TYPE `new_type`."""

    name: str
    action: str                           # "rename" | "drop" | "type"
    column: str
    new_name: str | None = None
    new_type: ColumnType | None = None
    if_exists: bool = False               # DROP COLUMN IF EXISTS


@dataclass(frozen=True)
class AlterTableSetProperties:
    name: str
    properties: dict[str, Any]            # a None value unsets the property


@dataclass(frozen=True)
class RenameTable:
    name: str
    new_name: str


@dataclass(frozen=True)
class DropTable:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class UndropTable:
    name: str


@dataclass(frozen=True)
class ShowTblProperties:
    name: str


@dataclass(frozen=True)
class DescribeTable:
    name: str


@dataclass(frozen=True)
class ShowTables:
    pass


@dataclass(frozen=True)
class DeleteRows:
    name: str
    where: str | None                     # the predicate's SQL text; None deletes every row
    alias: str | None = None
    # The statement as `SELECT*FROM t [alias] WHERE <predicate>`, spaced as written (so the
    # planner's errors name the user's lines and columns); None without a WHERE.
    select_sql: str | None = None


@dataclass(frozen=True)
class TruncateTable:
    name: str


DdlStatement = (CreateTable | AlterTableAddColumns | AlterTableSetProperties | DescribeTable
                | ShowTables | AlterTableColumn | RenameTable | DropTable | UndropTable
                | ShowTblProperties | DeleteRows | TruncateTable)
# The statements that change the catalog or a table's rows (admin scope); the others only
# read.
CHANGING_STATEMENTS = (CreateTable, AlterTableAddColumns, AlterTableSetProperties,
                       AlterTableColumn, RenameTable, DropTable, UndropTable, DeleteRows,
                       TruncateTable)

# The table properties shoal itself reads for maintenance and layout (any property may be
# set or unset; these are checked by `shoal.maintenance.policy`, `shoal.types.sortkey` and
# `shoal.types.conventions`).
ALTERABLE_PROPERTIES = ("sort_by", "block_rows", "retention", "snapshot_retention",
                        "target_extent_size", "compact_min_extents", "timestamp_unit", "props")
_STRING_PROPERTIES = ("mode", "retention", "sort_by")

TABLE_RESULT_SCHEMA = pa.schema([
    ("name", pa.string()), ("status", pa.string()), ("schema_version", pa.int64()),
    ("snapshot_id", pa.int64()), ("mode", pa.string()), ("retention", pa.string()),
    ("columns", pa.string()), ("properties", pa.string())])
DESCRIBE_SCHEMA = pa.schema([
    ("name", pa.string()), ("type", pa.string()), ("nullable", pa.bool_()),
    ("default", pa.string()), ("header", pa.string())])
DROP_RESULT_SCHEMA = pa.schema([("name", pa.string()), ("status", pa.string())])
TBLPROPERTIES_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string())])
SHOW_TABLES_SCHEMA = pa.schema([
    ("name", pa.string()), ("schema_version", pa.int64()), ("row_count", pa.int64()),
    ("extent_count", pa.int64()), ("snapshot_id", pa.int64())])


class _DdlTokenizer(Tokenizer):
    """sqlglot's tokenizer with both SQL and Spark identifier quotes.

    No "commands": sqlglot would read everything after e.g. SHOW as one string.
    """

    QUOTES: ClassVar[list[str | tuple[str, str]]] = ["'"]
    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ['"', "`"]
    COMMANDS: ClassVar[set[TokenType]] = set()


_QUOTED = (TokenType.STRING, TokenType.IDENTIFIER)
# `DESCRIBE <word> ...` forms that are Spark's, not a shoal table.
_SPARK_DESCRIBE = {"FUNCTION", "QUERY", "DATABASE", "SCHEMA", "NAMESPACE", "CATALOG",
                   "EXTENDED", "FORMATTED", "SELECT", "WITH", "FROM", "VALUES"}
_CONSTRAINTS = {"NOT", "DEFAULT", "HEADERS", "HEADER"}
_CLOSERS = {TokenType.L_PAREN: ")", TokenType.LT: ">"}


def _word(tok: Token | None) -> str | None:
    """The upper-cased text of an unquoted token, None for quoted ones and the end."""
    if tok is None or tok.token_type in _QUOTED:
        return None
    return tok.text.upper()


def _is_shoal_statement(tokens: Sequence[Token]) -> bool:
    head = [_word(t) for t in tokens[:3]] + [None, None, None]
    if head[0] in ("CREATE", "ALTER", "DROP", "UNDROP"):
        return head[1] == "TABLE"
    if head[0] == "SHOW":
        return head[1] in ("TABLES", "TBLPROPERTIES")
    if head[0] == "DELETE":
        return head[1] == "FROM"
    if head[0] == "TRUNCATE":
        return head[1] == "TABLE"
    if head[0] in ("DESCRIBE", "DESC"):
        if head[1] == "TABLE":
            return head[2] not in ("EXTENDED", "FORMATTED")
        if len(tokens) < 2:
            return True
        nxt = tokens[1]
        return nxt.token_type == TokenType.IDENTIFIER or (
            nxt.text[:1].isalpha() and head[1] not in _SPARK_DESCRIBE)
    return False


def parse_ddl(sql: str) -> DdlStatement | None:
    """The DDL statement `sql` is, or None when it is not one shoal owns."""
    tokenizer = _DdlTokenizer()
    try:
        tokens = tokenizer.tokenize(sql)
    except TokenError:
        if _is_shoal_statement(tokenizer.tokens):  # the tokens read before the failure
            raise _token_error(sql, tokenizer.tokens) from None
        return None
    if not _is_shoal_statement(tokens):
        return None
    return _Parser(sql, tokens).statement()


def _position(sql: str, offset: int) -> tuple[int, int]:
    line = sql.count("\n", 0, offset) + 1
    return line, offset - sql.rfind("\n", 0, offset)


def _token_error(sql: str, read: Sequence[Token]) -> DdlSyntaxError:
    """An unterminated quote or comment (or another untokenizable text) after `read`."""
    offset = read[-1].end + 1 if read else 0
    while offset < len(sql) and sql[offset].isspace():
        offset += 1
    line, col = _position(sql, offset)
    rest = sql[offset:]
    if rest[:1] in ("'", '"', "`"):
        return DdlSyntaxError(line=line, column=col, expected=f"a closing {rest[0]}",
                              found="end of input")
    if rest.startswith("/*"):
        return DdlSyntaxError(line=line, column=col, expected='"*/" closing the comment',
                              found="end of input")
    return DdlSyntaxError(line=line, column=col, expected="a token",
                          found=json.dumps(rest[:20]))


def _either(options: Sequence[str]) -> str:
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]


class _Parser:
    """Recursive descent over sqlglot tokens; one method per grammar rule."""

    def __init__(self, sql: str, tokens: list[Token]) -> None:
        self.sql = sql
        self.tokens = tokens
        self.i = 0

    # -- token helpers ----------------------------------------------------------------------
    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def error(self, expected: str) -> DdlSyntaxError:
        """A syntax error at the next token (or at the end of the input)."""
        return self.error_at(self.peek(), expected)

    def error_at(self, tok: Token | None, expected: str) -> DdlSyntaxError:
        if tok is None:
            line, col = _position(self.sql, len(self.sql.rstrip()))
            return DdlSyntaxError(line=line, column=col, expected=expected, found="end of input")
        line, col = _position(self.sql, tok.start)
        text = self.sql[tok.start:tok.end + 1]
        quote = "'" if '"' in text else '"'
        return DdlSyntaxError(line=line, column=col, expected=expected,
                              found=f"{quote}{text}{quote}")

    def at(self, *words: str) -> bool:
        return _word(self.peek()) in words

    def at_type(self, token_type: TokenType) -> bool:
        tok = self.peek()
        return tok is not None and tok.token_type == token_type

    def accept(self, word: str) -> bool:
        if self.at(word):
            self.i += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.accept(word):
            raise self.error(word)

    def expect_type(self, token_type: TokenType, shown: str) -> Token:
        if not self.at_type(token_type):
            raise self.error(shown)
        return self.advance()

    def at_end(self) -> bool:
        return self.peek() is None or self.at_type(TokenType.SEMICOLON)

    def name(self, what: str) -> str:
        """An identifier: quoted ones verbatim, bare words folded to lower case."""
        tok = self.peek()
        if tok is not None and tok.token_type == TokenType.IDENTIFIER:
            return self.advance().text
        if tok is not None and tok.token_type != TokenType.STRING and (
                tok.text[:1].isalpha() or tok.text[:1] == "_"):
            return self.advance().text.lower()
        raise self.error(what)

    # -- statements -------------------------------------------------------------------------
    def statement(self) -> DdlStatement:
        head = _word(self.advance())
        stmt: DdlStatement
        if head == "CREATE":
            stmt = self.create_table()
        elif head == "ALTER":
            stmt = self.alter_table()
        elif head == "DROP":
            self.expect("TABLE")
            if_exists = self.accept("IF")
            if if_exists:
                self.expect("EXISTS")
            stmt = DropTable(self.name("a table name"), if_exists)
        elif head == "UNDROP":
            self.expect("TABLE")
            stmt = UndropTable(self.name("a table name"))
        elif head == "SHOW" and self.accept("TBLPROPERTIES"):
            stmt = ShowTblProperties(self.name("a table name"))
        elif head == "SHOW":
            self.expect("TABLES")
            stmt = ShowTables()
        elif head == "DELETE":
            return self.delete_rows()
        elif head == "TRUNCATE":
            self.expect("TABLE")
            stmt = TruncateTable(self.name("a table name"))
        else:
            self.accept("TABLE")
            stmt = DescribeTable(self.name("a table name"))
        if self.at_type(TokenType.SEMICOLON):
            self.advance()
        if self.peek() is not None:
            raise self.error("end of statement")
        return stmt

    def delete_rows(self) -> DeleteRows:
        """`FROM t [[AS] alias] [WHERE <predicate to the end>]`; the predicate's syntax is
        the planner's to check."""
        self.expect("FROM")
        name = self.name("a table name")
        alias = None
        if self.accept("AS"):
            alias = self.name("an alias")
        elif not self.at_end() and not self.at("WHERE"):
            alias = self.name("WHERE, an alias or end of statement")
        if self.at_end():
            return DeleteRows(name, None, alias)
        self.expect("WHERE")
        last = len(self.tokens)
        if self.tokens[-1].token_type == TokenType.SEMICOLON:
            last -= 1
        if self.i >= last:
            raise self.error("a predicate")
        first = self.tokens[self.i]
        if any(t.token_type == TokenType.SEMICOLON for t in self.tokens[self.i:last]):
            raise self.error_at(next(t for t in self.tokens[self.i:last]
                                     if t.token_type == TokenType.SEMICOLON),
                                "one statement")
        end = self.tokens[last - 1].end + 1
        head = self.tokens[0]
        if self.sql[head.end + 1:head.end + 2] == " ":
            select = self.sql[:head.start] + "SELECT*" + self.sql[head.end + 2:end]
        else:
            select = self.sql[:head.start] + "SELECT *" + self.sql[head.end + 1:end]
        return DeleteRows(name, self.sql[first.start:end], alias, select)

    def create_table(self) -> CreateTable:
        self.expect("TABLE")
        if_not_exists = self.accept("IF")
        if if_not_exists:
            self.expect("NOT")
            self.expect("EXISTS")
        name = self.name("a table name")
        columns: list[Column] = []
        followers = ["WITH", "end of statement"]
        if self.at_type(TokenType.L_PAREN):
            self.advance()
            if not self.at_type(TokenType.R_PAREN):
                columns = self.column_list(in_parens=True)
            self.expect_type(TokenType.R_PAREN, '")"')
        else:
            followers.insert(0, '"("')
        mode = "evolve"
        properties: dict[str, Any] = {}
        if self.accept("WITH"):
            mode, properties = self.table_options()
        elif not self.at_end():
            raise self.error(_either(followers))
        return CreateTable(name, tuple(columns), if_not_exists, mode, properties)

    def alter_table(self) -> (AlterTableAddColumns | AlterTableSetProperties | AlterTableColumn
                              | RenameTable):
        self.expect("TABLE")
        name = self.name("a table name")
        if self.at("RENAME", "DROP", "ALTER", "CHANGE"):
            return self.alter_column(name)
        if self.accept("SET"):
            self.expect("TBLPROPERTIES")
            return AlterTableSetProperties(name, self.set_properties())
        if self.accept("UNSET"):
            self.expect("TBLPROPERTIES")
            if self.accept("IF"):
                self.expect("EXISTS")
            return AlterTableSetProperties(name, self.unset_properties())
        if not self.accept("ADD"):
            raise self.error("ADD, RENAME TO, RENAME COLUMN, DROP COLUMN, ALTER COLUMN, "
                             "SET TBLPROPERTIES or UNSET TBLPROPERTIES")
        if not self.accept("COLUMN"):
            self.accept("COLUMNS")
        if self.at_type(TokenType.L_PAREN):
            self.advance()
            columns = self.column_list(in_parens=True)
            self.expect_type(TokenType.R_PAREN, '")"')
        else:
            columns = self.column_list(in_parens=False)
        return AlterTableAddColumns(name, tuple(columns))

    def alter_column(self, name: str) -> AlterTableColumn | RenameTable:
        """RENAME TO u | RENAME COLUMN a TO b | DROP COLUMN [IF EXISTS] c
        | ALTER|CHANGE [COLUMN] c TYPE t."""
        head = _word(self.advance())
        if head == "RENAME" and self.accept("TO"):
            renamed = RenameTable(name, self.name("a table name"))
            if not self.at_end():
                raise self.error("end of statement")
            return renamed
        if head == "RENAME":
            if not self.at("COLUMN"):
                raise self.error("TO or COLUMN")
            self.expect("COLUMN")
            column = self.name("a column name")
            self.expect("TO")
            stmt = AlterTableColumn(name, "rename", column, new_name=self.name("a column name"))
        elif head == "DROP":
            self.expect("COLUMN")
            if_exists = self.accept("IF")
            if if_exists:
                self.expect("EXISTS")
            stmt = AlterTableColumn(name, "drop", self.name("a column name"),
                                    if_exists=if_exists)
        else:
            self.accept("COLUMN")
            column = self.name("a column name")
            self.expect("TYPE")
            type_text = self.column_type()
            try:
                new_type = parse_type(type_text)
            except InvalidSchemaError as e:
                raise InvalidSchemaError(f'column "{column}": {e}', column=column) from None
            stmt = AlterTableColumn(name, "type", column, new_type=new_type)
        if not self.at_end():
            raise self.error("end of statement")
        return stmt

    # -- columns ----------------------------------------------------------------------------
    def column_list(self, *, in_parens: bool) -> list[Column]:
        columns = [self.column(in_parens=in_parens)]
        while self.at_type(TokenType.COMMA):
            self.advance()
            columns.append(self.column(in_parens=in_parens))
        return columns

    def column(self, *, in_parens: bool) -> Column:
        """`name TYPE constraint*`, followed by "," or the end of the list."""
        name = self.name("a column name")
        type_text = self.column_type()
        nullable, default, header = True, None, None
        given: set[str] = set()
        while True:
            if "NOT NULL" not in given and self.accept("NOT"):
                self.expect("NULL")
                nullable = False
                given.add("NOT NULL")
            elif "DEFAULT" not in given and self.accept("DEFAULT"):
                default = self.literal()
                given.add("DEFAULT")
            elif "header" not in given and self.accept("HEADERS"):
                header = "*"
                given.add("header")
            elif "header" not in given and self.accept("HEADER"):
                self.expect_type(TokenType.L_PAREN, '"("')
                header = self.expect_type(TokenType.STRING, "a header key in single quotes").text
                self.expect_type(TokenType.R_PAREN, '")"')
                given.add("header")
            else:
                break
        if not (self.at_type(TokenType.COMMA)
                or (self.at_type(TokenType.R_PAREN) if in_parens else self.at_end())):
            options = [o for o in ("NOT NULL", "DEFAULT") if o not in given]
            if "header" not in given:
                options += ["HEADERS", "HEADER('key')"]
            options += ['","', '")"'] if in_parens else ['","', "end of statement"]
            raise self.error(_either(options))
        try:
            ctype = parse_type(type_text)
        except InvalidSchemaError as e:
            if header is not None:
                raise header_type_error(name, header, type_text) from None
            raise InvalidSchemaError(f'column "{name}": {e}', column=name) from None
        return Column(name, ctype, nullable=nullable, default=default, header=header)

    def column_type(self) -> str:
        """A type's source text: a word, then an optional balanced `(...)` or `<...>`."""
        first = self.peek()
        if (first is None or first.token_type in _QUOTED or not first.text[:1].isalpha()
                or _word(first) in _CONSTRAINTS):
            raise self.error("a column type")
        last = self.advance()
        tok = self.peek()
        if tok is not None and tok.token_type in _CLOSERS:
            closers = [_CLOSERS[self.advance().token_type]]
            while closers:
                tok = self.peek()
                if tok is None:
                    raise self.error(f'"{closers[-1]}"')
                if tok.token_type in _CLOSERS:
                    closers.append(_CLOSERS[tok.token_type])
                elif tok.token_type in (TokenType.R_PAREN, TokenType.GT):
                    if tok.text != closers[-1]:
                        raise self.error(f'"{closers[-1]}"')
                    closers.pop()
                last = self.advance()
        return self.sql[first.start:last.end + 1]

    def literal(self) -> Any:
        """A DEFAULT or property value: a string, a signed number, true, false or null."""
        tok = self.peek()
        if tok is not None and tok.token_type == TokenType.STRING:
            return self.advance().text
        sign = ""
        if self.at_type(TokenType.DASH) or self.at_type(TokenType.PLUS):
            sign = self.advance().text
        if self.at_type(TokenType.NUMBER):
            tok = self.advance()
            for number in (int, float):
                try:
                    return number(sign + tok.text)
                except ValueError:
                    continue
            raise self.error_at(tok, "a number")
        if not sign:
            for word, value in (("TRUE", True), ("FALSE", False), ("NULL", None)):
                if self.accept(word):
                    return value
        raise self.error("a number" if sign else "a literal (string, number, true, false, null)")

    # -- WITH (...) -------------------------------------------------------------------------
    def table_options(self) -> tuple[str, dict[str, Any]]:
        self.expect_type(TokenType.L_PAREN, '"("')
        mode, properties = "evolve", {}
        seen: set[str] = set()
        while True:
            key_tok = self.peek()
            key = self.name("a property name")
            if key in seen:
                raise self.error_at(key_tok, f'a property other than "{key}" (given twice)')
            seen.add(key)
            self.expect_type(TokenType.EQ, '"="')
            if key in _STRING_PROPERTIES:
                value = self.expect_type(TokenType.STRING, f"{key} as a string literal").text
                if key == "mode":
                    mode = value
                elif key == "retention" and not value.strip():
                    raise InvalidSchemaError("retention must not be empty")
                else:
                    properties[key] = value.strip()
            else:
                properties[key] = self.literal()
            if not self.at_type(TokenType.COMMA):
                break
            self.advance()
        self.expect_type(TokenType.R_PAREN, '"," or ")"')
        return mode, properties

    # -- SET / UNSET TBLPROPERTIES ------------------------------------------------------------
    def property_key(self, seen: set[str]) -> str:
        """A property name, as a string or a bare name, once per list."""
        tok = self.peek()
        if tok is not None and tok.token_type == TokenType.STRING:
            key = self.advance().text.lower().strip()
            if not key:
                raise self.error_at(tok, "a property name")
        else:
            key = self.name("a property name")
        if key in seen:
            raise self.error_at(tok, f'a property other than "{key}" (given twice)')
        seen.add(key)
        return key

    def set_properties(self) -> dict[str, Any]:
        self.expect_type(TokenType.L_PAREN, '"("')
        properties: dict[str, Any] = {}
        seen: set[str] = set()
        while True:
            key = self.property_key(seen)
            self.expect_type(TokenType.EQ, '"="')
            if key in _STRING_PROPERTIES:
                properties[key] = self.expect_type(
                    TokenType.STRING, f"{key} as a string literal").text.strip()
            else:
                properties[key] = self.literal()
            if not self.at_type(TokenType.COMMA):
                break
            self.advance()
        self.expect_type(TokenType.R_PAREN, '"," or ")"')
        return properties

    def unset_properties(self) -> dict[str, Any]:
        self.expect_type(TokenType.L_PAREN, '"("')
        properties: dict[str, Any] = {}
        seen: set[str] = set()
        while True:
            properties[self.property_key(seen)] = None
            if not self.at_type(TokenType.COMMA):
                break
            self.advance()
        self.expect_type(TokenType.R_PAREN, '"," or ")"')
        return properties


# -- execution ------------------------------------------------------------------------------
def execute_ddl(stmt: DdlStatement, db: Database) -> pa.Table:
    """Run a parsed DDL statement; schema problems raise the catalog's `SchemaError`s."""
    if isinstance(stmt, CreateTable):
        status = "created"
        try:
            db.create_table(stmt.name, stmt.columns, mode=stmt.mode,  # type: ignore[arg-type]
                            properties=dict(stmt.properties))
        except TableAlreadyExistsError:
            if not stmt.if_not_exists:
                raise
            status = "exists"
        return _table_result(db.describe(stmt.name), status)
    if isinstance(stmt, AlterTableAddColumns):
        before = db.describe(stmt.name)["schema_version"]
        _check_additions(db, stmt)
        db.add_columns(stmt.name, stmt.columns)
        doc = db.describe(stmt.name)
        return _table_result(doc, "altered" if doc["schema_version"] != before else "unchanged")
    if isinstance(stmt, AlterTableColumn):
        return _alter_column(stmt, db)
    if isinstance(stmt, AlterTableSetProperties):
        before = db.describe(stmt.name)["properties"]
        db.set_properties(stmt.name, dict(stmt.properties))
        doc = db.describe(stmt.name)
        return _table_result(doc, "altered" if doc["properties"] != before else "unchanged")
    if isinstance(stmt, RenameTable):
        db.rename_table(stmt.name, stmt.new_name)
        return _table_result(db.describe(stmt.new_name), "renamed")
    if isinstance(stmt, DropTable):
        dropped = db.drop_table(stmt.name, if_exists=stmt.if_exists)
        return pa.Table.from_pylist([{"name": stmt.name,
                                      "status": "dropped" if dropped else "absent"}],
                                    schema=DROP_RESULT_SCHEMA)
    if isinstance(stmt, UndropTable):
        db.undrop_table(stmt.name)
        return _table_result(db.describe(stmt.name), "undropped")
    if isinstance(stmt, ShowTblProperties):
        info = db.catalog.load_table(stmt.name)
        from shoal.masking import mask_properties

        items = {**mask_properties(info.properties), "mode": info.mode}
        return pa.Table.from_pylist(
            [{"key": k, "value": v if isinstance(v, str) else json.dumps(v)}
             for k, v in sorted(items.items())], schema=TBLPROPERTIES_SCHEMA)
    if isinstance(stmt, DescribeTable):
        columns = [Column.from_json(c) for c in db.describe(stmt.name)["columns"]]
        return pa.Table.from_pylist(
            [{"name": c.name, "type": str(c.type), "nullable": c.nullable,
              "default": None if c.default is None else sql_literal(c.default),
              "header": c.header} for c in columns], schema=DESCRIBE_SCHEMA)
    return pa.Table.from_pylist(
        [{k: doc[k] for k in SHOW_TABLES_SCHEMA.names} for doc in db.tables()],
        schema=SHOW_TABLES_SCHEMA)


def _check_additions(db: Database, stmt: AlterTableAddColumns) -> None:
    """ADD COLUMN adds: an existing name with another type is a conflict, never a widening."""
    schema = db.catalog.load_table(stmt.name).schema
    for col in stmt.columns:
        cur = schema.get(col.name)
        if cur is not None and cur.type != col.type:
            raise ColumnExistsError(stmt.name, col.name, str(cur.type), str(col.type),
                                    widening=widening_allowed(cur.type, col.type)
                                    and cur.header is None)


def _alter_column(stmt: AlterTableColumn, db: Database) -> pa.Table:
    before = db.describe(stmt.name)["schema_version"]
    if stmt.action == "rename":
        db.rename_column(stmt.name, stmt.column, stmt.new_name or "")
    elif stmt.action == "drop":
        if not (stmt.if_exists and stmt.column not in db.catalog.load_table(stmt.name).schema):
            db.drop_column(stmt.name, stmt.column)
    else:
        assert stmt.new_type is not None
        db.alter_column_type(stmt.name, stmt.column, stmt.new_type)
    doc = db.describe(stmt.name)
    return _table_result(doc, "altered" if doc["schema_version"] != before else "unchanged")


def _table_result(doc: dict[str, Any], status: str) -> pa.Table:
    columns = ", ".join(column_ddl(Column.from_json(c)) for c in doc["columns"])
    return pa.Table.from_pylist([{
        "name": doc["name"], "status": status, "schema_version": doc["schema_version"],
        "snapshot_id": doc["snapshot_id"], "mode": doc["mode"], "retention": doc["retention"],
        "columns": columns, "properties": json.dumps(doc["properties"], sort_keys=True),
    }], schema=TABLE_RESULT_SCHEMA)


def sql_literal(value: Any) -> str:
    """A default as DDL spells it; values DDL cannot spell (JSON objects) as JSON text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return "'" + text.replace("'", "''") + "'"


def column_ddl(col: Column) -> str:
    """A column as a CREATE TABLE would declare it."""
    parts = [col.name, str(col.type)]
    if not col.nullable:
        parts.append("NOT NULL")
    if col.default is not None:
        parts.append(f"DEFAULT {sql_literal(col.default)}")
    if col.header == "*":
        parts.append("HEADERS")
    elif col.header is not None:
        parts.append(f"HEADER({sql_literal(col.header)})")
    return " ".join(parts)
