"""The planner in front of Spark (docs/architecture.md): one scan per table reference.

`analyze(sql, table_columns)` parses a statement with sqlglot's Spark dialect and, for every
reference to a shoal table (CTE names shadow tables, as in SQL), works out

- the columns the scan must produce: all of them when the reference's own SELECT has `*`
  or `alias.*`, else every column of the table whose name appears anywhere in the
  statement (conservative: an extra column costs bytes, a missing one breaks the query);
- the predicate pushed to it, lowered to a `BlockPredicate`: conjuncts of its own scope's
  WHERE (and of the ON of the inner/left join that brings it in) that mention only this
  reference's columns and no subquery. Every lowered form is null-rejecting, so pruning a
  row that cannot satisfy it never changes a join's answer;
- time travel: `VERSION AS OF <snapshot id>` / `TIMESTAMP AS OF '<RFC 3339>'`.

It also rewrites shoal's functions into Spark SQL: `has(col, 'token')` becomes a regular
expression with exactly the tokenizer's rule (a maximal run of ASCII letters/digits,
case-insensitive), and one-argument byte functions get their default byte order.

`Analysis.sql_for(views)` renders the statement with each reference replaced by the
temporary view holding its own fresh scan (keeping its alias), which is what makes
self-joins, subqueries and repeated scans correct with Python DataSources.

Timestamps: Spark sees µs (truncated from ns), so a bound on a timestamp column is widened
to the ns values that truncate into it (`<= t` keeps up to t + 999 ns).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, UTC
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.optimizer.scope import Scope, traverse_scope

from shoal.errors import QueryError
from shoal.format.base import (And, BlockPredicate, DynamicPathEquals, DynamicPathExists,
                               Equals, InSet, Or, StringHas, TimeRange)
from shoal.format.tokens import MIN_TOKEN_LEN
from shoal.query.guard import MAX_SQL_DEPTH, SqlSyntaxError, SqlTooDeepError, check_query
from shoal.query.scan_plan import TIMESTAMP_NS
from shoal.types.columns import ColumnType

BYTE_FUNCTIONS = ("int_from_bytes", "bigint_from_bytes", "double_from_bytes")
DEFAULT_BYTE_ORDER = "BIG_ENDIAN"
_TOKEN_RE = re.compile(r"^[A-Za-z0-9]+\Z")
_PATH_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_US = 1_000


@dataclass
class TableRef:
    """One reference to a shoal table in the statement."""

    node: exp.Table
    table: str
    alias: str
    columns: list[str]
    predicate: BlockPredicate | None
    version: str | None = None          # VERSION AS OF
    timestamp: str | None = None        # TIMESTAMP AS OF
    # the conjuncts the predicate was lowered from, and whether unqualified columns name
    # this reference (it is alone in its scope): a foreign table pushes them as SQL
    conjuncts: list[exp.Expr] = field(default_factory=list)
    sole: bool = False


@dataclass
class Analysis:
    tree: exp.Expr
    refs: list[TableRef] = field(default_factory=list)

    def sql_for(self, views: Sequence[str]) -> str:
        """The statement with reference i reading temporary view `views[i]`."""
        return self.tree_for(views).sql(dialect="spark")

    def tree_for(self, views: Sequence[str]) -> exp.Expr:
        """A copy of the parsed statement with reference i reading view `views[i]`."""
        for i, ref in enumerate(self.refs):
            ref.node.meta["shoal_ref"] = i

        def swap(node: exp.Expr) -> exp.Expr:
            i = node.meta.get("shoal_ref") if isinstance(node, exp.Table) else None
            if i is None:
                return node
            ref, view = self.refs[i], views[i]
            return exp.Table(this=exp.to_identifier(view),
                             alias=exp.TableAlias(this=exp.to_identifier(ref.alias)))

        return self.tree.transform(swap, copy=True)


def parse(sql: str) -> exp.Expr:
    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except RecursionError:
        raise SqlTooDeepError(MAX_SQL_DEPTH) from None
    except ParseError as e:
        err = e.errors[0] if e.errors else {}
        line, col = err.get("line"), err.get("col")
        highlight = err.get("highlight") or ""
        if col and highlight and "\n" not in highlight:
            col = max(1, col - len(highlight) + 1)   # sqlglot gives the token's last column
        where = f" at line {line}, col {col}" if line else ""
        raise SqlSyntaxError(f"SQL syntax error{where}: {err.get('description', e)}",
                             line=line, column=col) from None
    if len(trees) != 1:
        raise SqlSyntaxError(f"expected one statement, got {len(trees)}")
    return trees[0]


def analyze(sql: str, table_columns: Mapping[str, Mapping[str, ColumnType]]) -> Analysis:
    """Scans of every shoal table referenced by `sql`. `table_columns`: table name ->
    column name -> type, for every shoal table (others are left to Spark)."""
    tree = parse(sql)
    check_query(tree)          # the allow-list, before anything else walks the tree
    _rewrite_functions(tree)
    analysis = Analysis(tree)
    mentioned = _mentioned_names(tree)
    for scope in traverse_scope(tree):
        select = scope.expression
        # `sources`, not `selected_sources`: the right side of a LEFT SEMI/ANTI JOIN selects
        # nothing but is a table reference all the same.
        for alias, source in scope.sources.items():
            if not isinstance(source, exp.Table):
                continue
            name = _table_name(source)
            if name is None or name not in table_columns:
                continue
            types = table_columns[name]
            if _has_star(select, alias):
                columns = list(types)
            else:
                columns = [c for c in types if c in mentioned]
            if TIMESTAMP_NS in mentioned:
                columns.append(TIMESTAMP_NS)
            if not columns:
                columns = ["_timestamp"]        # count(*) and friends: the narrowest scan
            conjuncts = _pushable_conjuncts(scope, select, source, alias)
            lowered = [p for c in conjuncts
                       if (p := _lower(c, alias, types, sole=len(scope.sources) == 1))
                       is not None]
            predicate = lowered[0] if len(lowered) == 1 else (And(tuple(lowered)) if lowered
                                                               else None)
            version, timestamp = _time_travel(source)
            analysis.refs.append(TableRef(source, name, alias, columns, predicate,
                                          version, timestamp, conjuncts,
                                          len(scope.sources) == 1))
    return analysis


def referenced_tables(tree: exp.Expr) -> set[str]:
    """Names of every plain table reference (CTE names included; the caller filters)."""
    return {n for t in tree.find_all(exp.Table) if (n := _table_name(t)) is not None}


# ---- pieces ---------------------------------------------------------------------------------
def _table_name(t: exp.Table) -> str | None:
    if t.args.get("catalog") is not None:
        return None
    db = t.text("db")
    if db and db.lower() != "shoal":
        return None
    if not isinstance(t.this, exp.Identifier):
        return None                         # table functions, e.g. range(10)
    return t.name.lower()


def _time_travel(t: exp.Table) -> tuple[str | None, str | None]:
    v = t.args.get("version")
    if not isinstance(v, exp.Version):
        return None, None
    value = v.expression
    text = value.name if isinstance(value, exp.Literal) else value.sql(dialect="spark")
    kind = str(v.this).upper()
    if kind == "VERSION":
        return text, None
    if kind == "TIMESTAMP":
        return None, text
    raise QueryError(f"unsupported time travel form {v.sql(dialect='spark')!r} "
                     "(use VERSION AS OF <snapshot id> or TIMESTAMP AS OF '<time>')")


def _mentioned_names(tree: exp.Expr) -> set[str]:
    names = {c.name.lower() for c in tree.find_all(exp.Column) if c.name}
    for join in tree.find_all(exp.Join):
        for ident in join.args.get("using") or []:
            names.add(ident.name.lower())
    return names


def _has_star(select: exp.Expr, alias: str) -> bool:
    if not isinstance(select, exp.Select):
        return False
    for e in select.expressions:
        if isinstance(e, exp.Star):
            return True
        if (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)
                and e.table.lower() == alias.lower()):
            return True
    return False


def _conjuncts(e: exp.Expr | None) -> list[exp.Expr]:
    if e is None:
        return []
    return list(e.flatten()) if isinstance(e, exp.And) else [e]


def _pushable_conjuncts(scope: Scope, select: exp.Expr, source: exp.Table,
                        alias: str) -> list[exp.Expr]:
    if not isinstance(select, exp.Select):
        return []
    where = select.args.get("where")
    out = _conjuncts(where.this if where is not None else None)
    for join in select.args.get("joins") or []:
        if join.this is not source:
            continue
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        if side in ("RIGHT", "FULL") or kind in ("ANTI", "SEMI"):
            continue
        out.extend(_conjuncts(join.args.get("on")))
    return [c for c in out if c.find(exp.Subquery, exp.Select) is None]


def _column_of(e: exp.Expr, alias: str, types: Mapping[str, ColumnType],
               sole: bool) -> str | None:
    """The table column `e` names, if it is a column of this reference."""
    if not isinstance(e, exp.Column) or isinstance(e.this, exp.Star):
        return None
    qualifier = e.table
    name = e.name.lower()
    if name not in types:
        return None
    if qualifier:
        return name if qualifier.lower() == alias.lower() else None
    return name if sole else None


def _lower(e: exp.Expr, alias: str, types: Mapping[str, ColumnType],
           sole: bool) -> BlockPredicate | None:
    """`e` as a BlockPredicate, or None when it cannot (or need not) be pushed."""
    if isinstance(e, exp.Paren):
        return _lower(e.this, alias, types, sole)
    if isinstance(e, exp.And):
        parts = [p for c in e.flatten() if (p := _lower(c, alias, types, sole)) is not None]
        return None if not parts else (parts[0] if len(parts) == 1 else And(tuple(parts)))
    if isinstance(e, exp.Or):
        lowered = [_lower(c, alias, types, sole) for c in e.flatten()]
        arms = [p for p in lowered if p is not None]
        return Or(tuple(arms)) if len(arms) == len(lowered) else None
    if isinstance(e, exp.RegexpLike) and isinstance(e.expression, exp.Literal):
        col = _column_of(e.this, alias, types, sole)
        token = _token_of_has_pattern(e.expression.name)
        if col is not None and token is not None:
            return StringHas(col, token)
        return None
    if isinstance(e, exp.Not) and isinstance(e.this, exp.Is):
        return _lower_not_null(e.this.this, alias, types, sole)
    if isinstance(e, exp.Between):
        col = _column_of(e.this, alias, types, sole)
        if col is None:
            return None
        lo = _lower_cmp(col, types[col], exp.GTE, e.args.get("low"))
        hi = _lower_cmp(col, types[col], exp.LTE, e.args.get("high"))
        parts = [p for p in (lo, hi) if p is not None]
        return None if not parts else (parts[0] if len(parts) == 1 else And(tuple(parts)))
    if isinstance(e, exp.In) and not e.args.get("query"):
        col = _column_of(e.this, alias, types, sole)
        if col is None:
            return None
        values = [_literal_for(types[col], v) for v in e.expressions]
        if not values or any(v is None for v in values):
            return None
        if types[col].kind == "timestamp":
            return Or(tuple(_ts_range(col, exp.EQ, v) for v in values))
        return InSet(col, tuple(values))
    if isinstance(e, (exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        left, right, op = e.this, e.expression, type(e)
        if _json_path(left, alias, types, sole) is None and _column_of(
                left, alias, types, sole) is None:
            left, right, op = right, left, _FLIP.get(op, op)
        jp = _json_path(left, alias, types, sole)
        if jp is not None:
            if not isinstance(right, exp.Literal):
                return None
            if op is exp.EQ and right.is_string:
                # blocks whose shredded sub-column of the path cannot hold the value skip
                return DynamicPathEquals(jp[0], jp[1], right.name)
            return DynamicPathExists(*jp)
        col = _column_of(left, alias, types, sole)
        if col is None:
            return None
        return _lower_cmp(col, types[col], op, right)
    return None


_FLIP: dict[type, type] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}


def _lower_not_null(e: exp.Expr, alias: str, types: Mapping[str, ColumnType],
                    sole: bool) -> BlockPredicate | None:
    jp = _json_path(e, alias, types, sole)
    return DynamicPathExists(*jp) if jp is not None else None


def _json_path(e: exp.Expr, alias: str, types: Mapping[str, ColumnType],
               sole: bool) -> tuple[str, str] | None:
    """(column, dotted path) of `get_json_object(dynamic_col, '$.a.b')`."""
    if not isinstance(e, (exp.JSONExtractScalar, exp.JSONExtract)):
        return None
    col = _column_of(e.this, alias, types, sole)
    if col is None or types[col].kind != "dynamic":
        return None
    path = e.expression
    if not isinstance(path, exp.JSONPath):
        return None
    keys = []
    for part in path.expressions:
        if isinstance(part, exp.JSONPathRoot):
            continue
        if not isinstance(part, exp.JSONPathKey) or not _PATH_KEY_RE.match(str(part.this)):
            return None
        keys.append(str(part.this))
    return (col, ".".join(keys)) if keys else None


def _lower_cmp(col: str, ctype: ColumnType, op: type,
               value_node: exp.Expr | None) -> BlockPredicate | None:
    if value_node is None:
        return None
    value = _literal_for(ctype, value_node)
    if value is None:
        return None
    if ctype.kind == "timestamp":
        return _ts_range(col, op, value)
    if op is exp.EQ:
        return Equals(col, value)
    if ctype.kind in ("int", "long"):
        lo = value + (1 if op is exp.GT else 0) if op in (exp.GT, exp.GTE) else None
        hi = value - (1 if op is exp.LT else 0) if op in (exp.LT, exp.LTE) else None
        return TimeRange(lo, hi, column=col)
    return None


def _ts_range(col: str, op: type, us_ns: int) -> TimeRange:
    """Rows whose ns value, truncated to µs as Spark sees it, satisfies `op us_ns`."""
    if op is exp.EQ:
        return TimeRange(us_ns, us_ns + _US - 1, column=col)
    if op is exp.GTE:
        return TimeRange(us_ns, None, column=col)
    if op is exp.GT:
        return TimeRange(us_ns + _US, None, column=col)
    if op is exp.LTE:
        return TimeRange(None, us_ns + _US - 1, column=col)
    return TimeRange(None, us_ns - 1, column=col)       # LT


def _literal_for(ctype: ColumnType, node: exp.Expr) -> Any:
    """The storage value of a literal compared with a column of `ctype`, or None."""
    if isinstance(node, exp.Paren):
        return _literal_for(ctype, node.this)
    kind = ctype.kind
    if kind == "timestamp":
        if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(
                exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ,
                exp.DataType.Type.TIMESTAMPLTZ):
            node = node.this
        if isinstance(node, exp.Literal) and node.is_string:
            return _timestamp_us_as_ns(node.name)
        return None
    if not isinstance(node, exp.Literal):
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and kind in (
                "int", "long"):
            inner = _literal_for(ctype, node.this)
            return -inner if inner is not None else None
        return None
    if kind == "string":
        return node.name if node.is_string else None
    if kind in ("int", "long"):
        if node.is_string or not re.fullmatch(r"\d+", node.name):
            return None
        return int(node.name)
    return None


_TS_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(\.\d+)?)?"
                    r"\s*(Z|[+-]\d{2}:?\d{2})?$")


def _timestamp_us_as_ns(text: str) -> int | None:
    """A Spark timestamp literal (session time zone UTC) in ns, truncated to µs like
    Spark does; None when it is not a plain literal we are sure how Spark reads."""
    m = _TS_RE.match(text.strip())
    if not m:
        return None
    date, clock, frac, zone = m.groups()
    clock = clock or "00:00:00"
    if clock.count(":") == 1:
        clock += ":00"
    try:
        dt = datetime.fromisoformat(f"{date}T{clock}")
    except ValueError:
        return None
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    else:
        offset = 0
    seconds = int(dt.replace(tzinfo=UTC).timestamp()) - offset
    micros = int((frac or ".0")[1:7].ljust(6, "0"))
    return (seconds * 1_000_000 + micros) * _US


# ---- function rewrites ----------------------------------------------------------------------
def has_pattern(token: str) -> str:
    return f"(?i)(^|[^A-Za-z0-9]){token}($|[^A-Za-z0-9])"


def _token_of_has_pattern(pattern: str) -> str | None:
    m = re.fullmatch(r"\(\?i\)\(\^\|\[\^A-Za-z0-9\]\)([A-Za-z0-9]+)\(\$\|\[\^A-Za-z0-9\]\)",
                     pattern)
    return m.group(1).lower() if m else None


def _rewrite_functions(tree: exp.Expr) -> None:
    for fn in list(tree.find_all(exp.Anonymous)):
        name = str(fn.this).lower()
        args = fn.expressions
        if name == "has":
            if len(args) != 2 or not isinstance(args[1], exp.Literal) or not args[1].is_string:
                raise QueryError("has(column, 'token') takes a column and a string literal")
            token = args[1].name
            if len(token) < MIN_TOKEN_LEN or not _TOKEN_RE.match(token):
                raise QueryError(
                    f"has() looks up one token: {MIN_TOKEN_LEN}+ ASCII letters or digits, "
                    f"got {token!r}")
            fn.replace(exp.RegexpLike(this=args[0],
                                      expression=exp.Literal.string(has_pattern(token))))
        elif name in BYTE_FUNCTIONS:
            if len(args) == 1:
                fn.append("expressions", exp.Literal.string(DEFAULT_BYTE_ORDER))
            elif len(args) != 2:
                raise QueryError(f"{name}(bytes [, 'BIG_ENDIAN'|'LITTLE_ENDIAN']) takes 1 or "
                                 f"2 arguments, got {len(args)}")
