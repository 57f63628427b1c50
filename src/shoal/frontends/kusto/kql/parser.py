"""A recursive-descent parser for shoal's KQL subset: tokens (`lexer`) in, a `Query` out.

Grammar (lowest precedence first):

    query      := (let ';')* pipeline ';'?
    let        := 'let' name '=' (pipeline | expr)
    pipeline   := source ('|' operator)*
    operator   := where | project | summarize | ... | top-nested | make-series | join | lookup
                | parse | parse-where | mv-expand | getschema | as | render
    parse      := ('parse' | 'parse-where') ['kind' '=' ('simple' | 'regex') ['flags' '=' name]]
                  expr 'with' ('*' | string | name [':' type])+
    mv-expand  := 'mv-expand' ['kind' '=' 'array'] ['with_itemindex' '=' name]
                  [name '='] expr ['to' 'typeof' '(' type ')'] (',' ...)* ['limit' N]
    lookup     := 'lookup' ['kind' '=' ('leftouter' | 'inner')] source-or-(pipeline) 'on' keys
    top-nested := 'top-nested' [N] 'of' [name '='] expr ['with' 'others' '=' expr]
                  'by' [name '='] aggregation ['asc' | 'desc'] (',' top-nested)*
    make-series:= 'make-series' [name '='] aggregation ['default' '=' expr] (',' ...)*
                  'on' axis ['from' start] ['to' end] 'step' size ['by' [name '='] expr, ...]
    source     := name | table('t' [, version=N | asof=datetime(..)]) | union legs
                | '(' pipeline ')' | 'materialize' '(' pipeline ')'
                | 'print' [name '='] expr, ... | 'range' name 'from' expr 'to' expr 'step' expr
    expr       := and ('or' and)*
    and        := compare ('and' compare)*
    compare    := additive [cmp-op additive | [!]in [~] '(' list ')' | [!]between '(' a '..' b ')'
                            | matches regex additive]
    additive   := multiply (('+' | '-') multiply)*
    multiply   := unary (('*' | '/' | '%') unary)*
    unary      := '-' unary | postfix
    postfix    := primary ('.' name | '[' string | long ']')*
    primary    := literal | name | name '(' args ')' | '(' expr ')' | ['name']

Errors are `KqlSyntaxError` naming line, column, the token found and what was expected.
"""

from __future__ import annotations

from dataclasses import fields
from shoal.errors import KqlSyntaxError
from shoal.frontends.kusto.kql import ast
from shoal.frontends.kusto.kql.lexer import Token, tokenize

COMPARISONS = frozenset({"==", "!=", "<>", "<", "<=", ">", ">=", "=~", "!~"})
STRING_OPS = frozenset({"has", "has_cs", "contains", "contains_cs", "startswith",
                        "startswith_cs", "endswith", "endswith_cs", "hasprefix", "hassuffix"})
JOIN_KINDS = frozenset({"inner", "innerunique", "leftouter", "rightouter", "fullouter",
                        "leftsemi", "leftanti", "anti", "leftantisemi", "rightsemi",
                        "rightanti", "rightantisemi"})
_OPERATORS = ("where, filter, project, project-away, project-rename, extend, summarize, take, "
              "limit, top, top-nested, sort, order, distinct, count, make-series, union, join, "
              "lookup, parse, parse-where, mv-expand, getschema, as or render")
# The types a `parse` column or `mv-expand ... to typeof()` may name (Kusto's spellings).
PARSE_TYPES = {"string": "string", "long": "long", "int": "int", "real": "real",
               "double": "real", "bool": "bool", "boolean": "bool", "datetime": "timestamp",
               "date": "timestamp", "dynamic": "dynamic"}
LOOKUP_KINDS = frozenset({"leftouter", "inner"})


# Bounds that keep parsing and translating in bounded stack and memory (a query past one is
# a positioned 400 `kql_syntax`, never a RecursionError): scalar and tabular nesting, the
# depth of any expression tree (operator chains such as `1 + 1 + ... + 1` build deep trees
# without nesting), and the number of `let` statements (the lexer bounds the tokens,
# `MAX_KQL_TOKENS`). The translation checks the first two again with every `let` expanded,
# and bounds the SQL it writes (`sqltext.MAX_KQL_SQL_CHARS`, `MAX_KQL_SQL_WRITTEN`).
MAX_KQL_NESTING = 64
MAX_KQL_EXPR_DEPTH = 200
MAX_KQL_LETS = 128


def parse(text: str) -> ast.Query:
    return _Parser(tokenize(text)).query()


def _expr_depth(root: ast.Expr) -> int:
    """The depth of an expression tree, walked without recursion."""
    deepest, todo = 0, [(root, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        for f in fields(node):
            value = getattr(node, f.name)
            children = value if isinstance(value, tuple) else (value,)
            todo.extend((c, depth + 1) for c in children if isinstance(c, ast.Expr))
    return deepest


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.nesting = 0        # open scalar expressions (parentheses, calls, unary minus)
        self.pipelines = 0      # open tabular expressions (joins, unions, lets, parentheses)

    # ---- helpers -----------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def advance(self) -> Token:
        t = self.tokens[self.i]
        if t.kind != "end":
            self.i += 1
        return t

    def fail(self, expected: str, at: Token | None = None) -> KqlSyntaxError:
        t = at or self.tok
        return KqlSyntaxError(line=t.line, column=t.column, expected=expected,
                              found=t.describe())

    def is_op(self, *texts: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in texts

    def is_word(self, *words: str) -> bool:
        return self.tok.kind == "name" and self.tok.word in words

    def expect_op(self, text: str) -> Token:
        if not self.is_op(text):
            raise self.fail(f"'{text}'")
        return self.advance()

    def expect_word(self, *words: str) -> Token:
        if not self.is_word(*words):
            raise self.fail(" or ".join(f"'{w}'" for w in words))
        return self.advance()

    def name(self, what: str = "a name") -> Token:
        if self.tok.kind == "name":
            return self.advance()
        if self.is_op("[") and self.peek().kind == "string" and self.peek(2).text == "]":
            self.advance()
            t = self.advance()
            self.advance()
            return t
        raise self.fail(what)

    def integer(self, what: str) -> int:
        if self.tok.kind != "long":
            raise self.fail(what)
        return int(self.advance().value)  # type: ignore[call-overload]

    # ---- statements --------------------------------------------------------------------------
    def query(self) -> ast.Query:
        lets: list[ast.Let] = []
        while self.is_word("let"):
            if len(lets) == MAX_KQL_LETS:
                raise self.fail(f"at most {MAX_KQL_LETS} let statements")
            lets.append(self.let())
            self.expect_op(";")
        body = self.pipeline()
        if self.is_op(";"):
            self.advance()
        if self.tok.kind != "end":
            raise self.fail("'|' or the end of the query")
        return ast.Query(tuple(lets), body)

    def let(self) -> ast.Let:
        at = self.advance()
        name = self.name("the name of the let").text
        self.expect_op("=")
        value: ast.Expr | ast.Pipeline
        value = self.pipeline() if self._tabular_ahead() else self.expr()
        return ast.Let(at, name, value)

    def _tabular_ahead(self) -> bool:
        t, nxt = self.tok, self.peek()
        if t.kind == "name" and t.word == "union":
            return True
        if t.kind == "name" and t.word in ("table", "materialize") and nxt.text == "(":
            return True
        if t.kind == "name" and t.word in ("print", "range") and nxt.kind == "name":
            return True
        if self.is_op("("):
            depth, k = 0, 0
            while True:
                tk = self.peek(k)
                if tk.kind == "end":
                    return False
                if tk.text == "(" and tk.kind == "op":
                    depth += 1
                elif tk.text == ")" and tk.kind == "op":
                    depth -= 1
                    if depth == 0:
                        return False
                elif tk.text == "|" and tk.kind == "op" and depth == 1:
                    return True
                k += 1
        return t.kind == "name" and nxt.kind == "op" and nxt.text == "|"

    # ---- tabular -----------------------------------------------------------------------------
    def pipeline(self) -> ast.Pipeline:
        self.pipelines += 1
        if self.pipelines > MAX_KQL_NESTING:
            raise self.fail(f"tabular expressions nested at most {MAX_KQL_NESTING} deep")
        source = self.source()
        ops: list[ast.Operator] = []
        while self.is_op("|"):
            self.advance()
            ops.append(self.operator())
        self.pipelines -= 1
        return ast.Pipeline(source, tuple(ops))

    def source(self) -> ast.Source | ast.Pipeline:
        if self.is_op("(") or (self.is_word("materialize") and self.peek().text == "("):
            # materialize(): a hint to compute once; the one statement computes it inline
            if not self.is_op("("):
                self.advance()
            self.advance()
            inner = self.pipeline()
            self.expect_op(")")
            return inner
        if self.is_word("print") and self.peek().kind != "end" and self.peek().text not in (
                "|", ";", ")", ","):
            at = self.advance()
            return ast.PrintSource(at, tuple(self.assignments()))
        if self.is_word("range") and self.peek().kind == "name":
            at = self.advance()
            name = self.name("the range's column name").text
            self.expect_word("from")
            start = self.additive()
            self.expect_word("to")
            stop = self.additive()
            self.expect_word("step")
            return ast.RangeSource(at, name, start, stop, self.additive())
        if self.is_word("union"):
            at = self.advance()
            with_source, legs = self.union_legs()
            return ast.UnionSource(at, tuple(legs), with_source)
        if self.is_word("table") and self.peek().text == "(":
            return self.table_call()
        at = self.name("a table name, union or a let name")
        return ast.TableSource(at, str(at.value))

    def table_call(self) -> ast.TableSource:
        at = self.advance()
        self.expect_op("(")
        if self.tok.kind != "string":
            raise self.fail("the table name as a string")
        name = str(self.advance().value)
        version = timestamp = None
        while self.is_op(","):
            self.advance()
            key = self.expect_word("version", "asof")
            self.expect_op("=")
            if key.word == "version":
                version = self.integer("a snapshot id")
            else:
                if self.tok.kind != "datetime":
                    raise self.fail("datetime(...)")
                timestamp = self.advance()
        self.expect_op(")")
        ts = None
        if timestamp is not None:
            from shoal.frontends.kusto.kql.values import parse_datetime

            ts = parse_datetime(str(timestamp.value), timestamp)
        return ast.TableSource(at, name, version, ts)

    def union_legs(self) -> tuple[str | None, list[ast.Pipeline]]:
        with_source = None
        while self.tok.kind == "name" and self.peek().text == "=":
            key = self.advance()
            self.advance()
            value = self.name("a value")
            if key.word == "withsource":
                with_source = value.text
            elif key.word != "kind" or value.word not in ("outer", "inner"):
                raise self.fail("withsource=Name or kind=outer", key)
        legs = [self.union_leg()]
        while self.is_op(","):
            self.advance()
            legs.append(self.union_leg())
        return with_source, legs

    def union_leg(self) -> ast.Pipeline:
        if self.is_op("("):
            self.advance()
            leg = self.pipeline()
            self.expect_op(")")
            return leg
        return ast.Pipeline(self.source(), ())

    def operator(self) -> ast.Operator:
        t = self.tok
        if t.kind != "name":
            raise self.fail(f"a tabular operator ({_OPERATORS})")
        word = t.word
        self.advance()
        if word in ("where", "filter"):
            return ast.Where(t, self.expr())
        if word == "project":
            return ast.Project(t, tuple(self.assignments()))
        if word == "extend":
            return ast.Extend(t, tuple(self.assignments()))
        if word == "project-away":
            names = [self.name_expr()]
            while self.is_op(","):
                self.advance()
                names.append(self.name_expr())
            return ast.ProjectAway(t, tuple(names))
        if word == "project-rename":
            renames = []
            while True:
                new = self.name("the new column name").text
                self.expect_op("=")
                renames.append((new, self.name_expr()))
                if not self.is_op(","):
                    break
                self.advance()
            return ast.ProjectRename(t, tuple(renames))
        if word == "summarize":
            aggregates: list[ast.Assignment] = []
            if not self.is_word("by"):
                aggregates = self.assignments()
            by: list[ast.Assignment] = []
            if self.is_word("by"):
                self.advance()
                by = self.assignments()
            if not aggregates and not by:
                raise self.fail("an aggregation or 'by'")
            return ast.Summarize(t, tuple(aggregates), tuple(by))
        if word in ("take", "limit"):
            return ast.Take(t, self.expr())
        if word == "top":
            count = self.additive()
            self.expect_word("by")
            return ast.Top(t, count, tuple(self.sort_keys()))
        if word == "top-nested":
            return self.top_nested(t)
        if word == "make-series":
            return self.make_series(t)
        if word in ("sort", "order"):
            self.expect_word("by")
            return ast.Sort(t, tuple(self.sort_keys()))
        if word == "distinct":
            if self.is_op("*"):
                return ast.Distinct(t, (ast.Star(self.advance()),))
            items = [self.expr()]
            while self.is_op(","):
                self.advance()
                items.append(self.expr())
            return ast.Distinct(t, tuple(items))
        if word == "count":
            return ast.Count(t)
        if word == "union":
            with_source, legs = self.union_legs()
            return ast.Union(t, tuple(legs), with_source)
        if word == "join":
            return self.join(t)
        if word == "lookup":
            return self.join(t, lookup=True)
        if word in ("parse", "parse-where"):
            return self.parse_op(t, keep_only_parsed=word == "parse-where")
        if word == "mv-expand":
            return self.mv_expand(t)
        if word == "getschema":
            return ast.GetSchema(t)
        if word == "as":
            while self.tok.kind == "name" and self.peek().text == ".":     # hint.x=y: ignored
                self.advance()
                self.advance()
                self.name()
                self.expect_op("=")
                self.advance()
            return ast.As(t, self.name("the name the rows so far are known by").text)
        if word == "render":
            return self.render(t)
        raise self.fail(f"a tabular operator ({_OPERATORS})", t)

    def name_expr(self) -> ast.Name:
        t = self.name("a column name")
        return ast.Name(t, str(t.value))

    def assignments(self) -> list[ast.Assignment]:
        items = [self.assignment()]
        while self.is_op(","):
            self.advance()
            items.append(self.assignment())
        return items

    def assignment(self) -> ast.Assignment:
        if self.tok.kind == "name" and self.peek().kind == "op" and self.peek().text == "=":
            name = self.advance().text
            self.advance()
            return ast.Assignment(name, self.expr())
        if (self.is_op("[") and self.peek().kind == "string" and self.peek(2).text == "]"
                and self.peek(3).kind == "op" and self.peek(3).text == "="):
            name = str(self.name().value)               # ['a b'] = ...
            self.advance()
            return ast.Assignment(name, self.expr())
        return ast.Assignment(None, self.expr())

    def sort_keys(self) -> list[ast.SortKey]:
        keys = [self.sort_key()]
        while self.is_op(","):
            self.advance()
            keys.append(self.sort_key())
        return keys

    def sort_key(self) -> ast.SortKey:
        e = self.expr()
        descending, nulls_first = True, None
        if self.is_word("asc", "desc"):
            descending = self.advance().word == "desc"
        if self.is_word("nulls"):
            self.advance()
            nulls_first = self.expect_word("first", "last").word == "first"
        return ast.SortKey(e, descending, nulls_first)

    def top_nested(self, at: Token) -> ast.TopNested:
        levels = [self.nested_level(at)]
        while self.is_op(","):
            self.advance()
            levels.append(self.nested_level(self.expect_word("top-nested")))
        return ast.TopNested(at, tuple(levels))

    def nested_level(self, at: Token) -> ast.NestedLevel:
        count = None if self.is_word("of") else self.additive()
        self.expect_word("of")
        value = self.assignment()
        others = None
        if self.is_word("with"):
            self.advance()
            self.expect_word("others")
            self.expect_op("=")
            others = self.additive()
        self.expect_word("by")
        aggregate = self.assignment()
        descending = True
        if self.is_word("asc", "desc"):
            descending = self.advance().word == "desc"
        return ast.NestedLevel(at, count, value, others, aggregate, descending)

    def make_series(self, at: Token) -> ast.MakeSeries:
        aggregates = [self.series_aggregate()]
        while self.is_op(","):
            self.advance()
            aggregates.append(self.series_aggregate())
        self.expect_word("on")
        axis = self.additive()
        if self.is_word("in"):
            raise self.fail("'from', 'to' or 'step' (the 'in range(...)' form is not supported: "
                            "write from start to end step size)")
        start = end = None
        if self.is_word("from"):
            self.advance()
            start = self.additive()
        if self.is_word("to"):
            self.advance()
            end = self.additive()
        self.expect_word("step")
        step = self.additive()
        by: list[ast.Assignment] = []
        if self.is_word("by"):
            self.advance()
            by = self.assignments()
        return ast.MakeSeries(at, tuple(aggregates), axis, start, end, step, tuple(by))

    def series_aggregate(self) -> ast.SeriesAggregate:
        a = self.assignment()
        default = None
        if self.is_word("default"):
            self.advance()
            self.expect_op("=")
            default = self.additive()
        return ast.SeriesAggregate(a.name, a.expr, default)

    def parse_op(self, at: Token, *, keep_only_parsed: bool) -> ast.Parse:
        regex, flags = False, ""
        while self.tok.kind == "name" and self.peek().text == "=" and self.is_word(
                "kind", "flags"):
            key = self.advance()
            self.advance()
            value = self.name("a parse kind (simple, regex)" if key.word == "kind"
                              else "regex flags (i, m, s)")
            if key.word == "kind":
                if value.word not in ("simple", "regex"):
                    raise self.fail("a parse kind (simple or regex; relaxed is not supported)",
                                    value)
                regex = value.word == "regex"
            else:
                if not regex:
                    raise self.fail("flags= only after kind=regex", key)
                bad = next((c for c in value.text if c not in "ims"), None)
                if bad is not None:
                    raise self.fail("regex flags among i, m, s (U is not supported)", value)
                flags = value.text
        source = self.expr()
        self.expect_word("with")
        parts: list[ast.ParsePart] = []
        while True:
            t = self.tok
            if self.is_op("*"):
                self.advance()
                parts.append(ast.ParsePart(t, "star"))
            elif t.kind == "string":
                text = self.primary()       # adjacent string literals are one
                assert isinstance(text, ast.Literal)
                parts.append(ast.ParsePart(t, "text", str(text.value)))
            elif t.kind == "name" or (self.is_op("[") and self.peek().kind == "string"):
                name = self.name("a column name")
                kind = "string"
                if self.is_op(":"):
                    self.advance()
                    type_tok = self.name("a column type")
                    if type_tok.word not in PARSE_TYPES:
                        raise self.fail("a column type (" + ", ".join(PARSE_TYPES) + ")",
                                        type_tok)
                    kind = PARSE_TYPES[type_tok.word]
                parts.append(ast.ParsePart(name, "column", str(name.value), kind))
            elif self.is_op(",") and parts:
                self.advance()
                continue
            else:
                break
        if not any(p.kind == "column" for p in parts):
            raise self.fail("a parse pattern: '*', string constants and columns (name or "
                            "name:type)")
        return ast.Parse(at, source, tuple(parts), regex, flags, keep_only_parsed)

    def mv_expand(self, at: Token) -> ast.MvExpand:
        index = None
        while self.tok.kind == "name" and self.peek().text == "=" and self.is_word(
                "kind", "bagexpansion", "with_itemindex"):
            key = self.advance()
            self.advance()
            value = self.name("a value")
            if key.word == "with_itemindex":
                index = value.text
            elif value.word != "array":
                raise self.fail("kind=array (shoal expands arrays, not property bags)", value)
        items = [self.expand_item()]
        while self.is_op(","):
            self.advance()
            items.append(self.expand_item())
        limit = None
        if self.is_word("limit"):
            self.advance()
            limit = self.additive()
        return ast.MvExpand(at, tuple(items), index, limit)

    def expand_item(self) -> ast.ExpandItem:
        a = self.assignment()
        kind = None
        if self.is_word("to"):
            self.advance()
            self.expect_word("typeof")
            self.expect_op("(")
            type_tok = self.name("a type")
            if type_tok.word not in PARSE_TYPES:
                raise self.fail("a type (" + ", ".join(PARSE_TYPES) + ")", type_tok)
            kind = PARSE_TYPES[type_tok.word]
            self.expect_op(")")
        return ast.ExpandItem(a.name, a.expr, kind)

    def join(self, at: Token, *, lookup: bool = False) -> ast.Join:
        kind = "leftouter" if lookup else "innerunique"
        while self.tok.kind == "name" and self.peek().text in ("=", "."):
            key = self.advance()
            if key.word == "hint":          # hint.strategy=shuffle: accepted, ignored
                self.advance()
                self.name()
                self.expect_op("=")
                self.name()
                continue
            self.expect_op("=")
            if key.word != "kind":
                raise self.fail("kind=inner|leftouter|...", key)
            value = self.name("a join kind")
            kinds = LOOKUP_KINDS if lookup else JOIN_KINDS
            if value.word not in kinds:
                raise self.fail(f"a {'lookup' if lookup else 'join'} kind ("
                                + ", ".join(sorted(kinds)) + ")", value)
            kind = value.word
        if self.is_op("("):
            self.advance()
            right = self.pipeline()
            self.expect_op(")")
        else:
            right = ast.Pipeline(self.source(), ())
        self.expect_word("on")
        conditions = [self.join_condition()]
        while self.is_op(",") or self.is_word("and"):
            self.advance()
            conditions.append(self.join_condition())
        return ast.Join(at, kind, right, tuple(conditions), lookup)

    def join_condition(self) -> ast.JoinOn:
        at = self.tok
        if self.is_op("$"):
            left = self.side("left")
            self.expect_op("==")
            right = self.side("right")
            return ast.JoinOn(left, right, at)
        name = self.name("a key column or $left.column == $right.column").text
        return ast.JoinOn(name, name, at)

    def side(self, which: str) -> str:
        self.expect_op("$")
        self.expect_word(which)
        self.expect_op(".")
        return self.name("a column name").text

    def render(self, at: Token) -> ast.Render:
        viz = self.name("a visualization (timechart, barchart, table, ...)").word
        props: dict[str, object] = {}
        if self.is_word("with"):
            self.advance()
            self.expect_op("(")
            while not self.is_op(")"):
                key = self.name("a property name").text
                self.expect_op("=")
                value = self.tok
                if value.kind in ("string", "long", "real"):
                    props[key] = value.value
                elif value.kind == "name":
                    props[key] = value.text
                else:
                    raise self.fail("a property value")
                self.advance()
                if self.is_op(","):
                    self.advance()
            self.advance()
        if self.tok.kind != "end" and not self.is_op(";"):
            raise self.fail("the end of the query (render comes last)")
        return ast.Render(at, viz, props)

    # ---- scalar expressions -----------------------------------------------------------------
    def expr(self) -> ast.Expr:
        at = self.tok
        self._enter()
        left = self.conjunction()
        while self.is_word("or"):
            op = self.advance()
            left = ast.Binary(op, "or", left, self.conjunction())
        self.nesting -= 1
        if self.nesting == 0 and _expr_depth(left) > MAX_KQL_EXPR_DEPTH:
            raise self.fail(f"an expression at most {MAX_KQL_EXPR_DEPTH} operators deep", at)
        return left

    def _enter(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_KQL_NESTING:
            raise self.fail(f"expressions nested at most {MAX_KQL_NESTING} deep")

    def conjunction(self) -> ast.Expr:
        left = self.compare()
        while self.is_word("and"):
            at = self.advance()
            left = ast.Binary(at, "and", left, self.compare())
        return left

    def compare(self) -> ast.Expr:
        left = self.additive()
        t = self.tok
        if t.kind == "op" and t.text in COMPARISONS:
            self.advance()
            return ast.Binary(t, t.text, left, self.additive())
        negated = t.kind == "op" and t.text.startswith("!") and t.text[1:].isalpha()
        word = t.text[1:].lower() if negated else (t.word if t.kind == "name" else "")
        if t.kind == "op" and t.text in ("!in", "!in~"):
            negated, word = True, t.text[1:]
        if word in STRING_OPS:
            self.advance()
            return ast.Binary(t, ("!" if negated else "") + word, left, self.additive())
        if word in ("in", "in~"):
            self.advance()
            self.expect_op("(")
            values = [self.expr()]
            while self.is_op(","):
                self.advance()
                values.append(self.expr())
            self.expect_op(")")
            return ast.InList(t, left, tuple(values), negated, word == "in~")
        if word == "between":
            self.advance()
            self.expect_op("(")
            low = self.additive()
            self.expect_op("..")
            high = self.additive()
            self.expect_op(")")
            return ast.Between(t, left, low, high, negated)
        if word == "matches" and not negated:
            self.advance()
            self.expect_word("regex")
            return ast.Binary(t, "matches regex", left, self.additive())
        return left

    def additive(self) -> ast.Expr:
        left = self.multiply()
        while self.is_op("+", "-"):
            at = self.advance()
            left = ast.Binary(at, at.text, left, self.multiply())
        return left

    def multiply(self) -> ast.Expr:
        left = self.unary()
        while self.is_op("*", "/", "%"):
            at = self.advance()
            left = ast.Binary(at, at.text, left, self.unary())
        return left

    def unary(self) -> ast.Expr:
        if self.is_op("-"):
            at = self.advance()
            self._enter()
            operand = self.unary()
            self.nesting -= 1
            if isinstance(operand, ast.Literal) and operand.kind in ("long", "real",
                                                                     "timespan"):
                return ast.Literal(at, operand.kind, -operand.value)  # type: ignore[operator]
            return ast.Unary(at, "-", operand)
        return self.postfix()

    def postfix(self) -> ast.Expr:
        e = self.primary()
        while True:
            if self.is_op("."):
                at = self.advance()
                key = self.name("a property name after '.'")
                e = ast.Member(at, e, key.text)
            elif self.is_op("["):
                at = self.advance()
                if self.tok.kind not in ("string", "long"):
                    raise self.fail("a string key or an array index")
                key_tok = self.advance()
                self.expect_op("]")
                e = ast.Member(at, e, key_tok.value)  # type: ignore[arg-type]
            else:
                return e

    def primary(self) -> ast.Expr:
        t = self.tok
        if t.kind == "string":              # adjacent literals are one ("a" 'b' @"c")
            parts = [str(self.advance().value)]
            while self.tok.kind == "string":
                parts.append(str(self.advance().value))
            return ast.Literal(t, "string", "".join(parts))
        if t.kind in ("long", "real", "timespan"):
            self.advance()
            return ast.Literal(t, t.kind, t.value)
        if t.kind == "datetime":
            from shoal.frontends.kusto.kql.values import parse_datetime

            self.advance()
            return ast.Literal(t, "datetime", parse_datetime(str(t.value), t))
        if t.kind == "name":
            if t.word in ("true", "false") and self.peek().text != "(":
                self.advance()
                return ast.Literal(t, "bool", t.word == "true")
            self.advance()
            if self.is_op("("):
                self.advance()
                args: list[ast.Expr] = []
                if not self.is_op(")"):
                    args.append(self.argument())
                    while self.is_op(","):
                        self.advance()
                        args.append(self.argument())
                self.expect_op(")")
                return ast.Call(t, t.word, tuple(args))
            return ast.Name(t, t.text)
        if self.is_op("("):
            self.advance()
            inner = self.expr()
            self.expect_op(")")
            return inner
        if self.is_op("[") and self.peek().kind == "string":
            name = self.name()
            return ast.Name(name, str(name.value))
        raise self.fail("a scalar expression")

    def argument(self) -> ast.Expr:
        if self.is_op("*"):
            return ast.Star(self.advance())
        return self.expr()
