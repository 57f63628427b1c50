"""The names Spark gives the unaliased expressions of a select list.

Spark names such a column by printing the expression as the user wrote it, before its own
implicit casts: columns by their name, string literals without quotes, operators in
parentheses (`(x / 1000)`, `(NOT (a = b))` for `a <> b`), functions by the spelling the
user chose (`nvl(a, b)` and `coalesce(a, b)` are one function with two names), with some
arguments the user left out filled in (`substr(s, 2, 2147483647)`, `lpad(s, 3,  )`), and a
few functions in capitals (`CEIL(x)`, `SQRT(x)`). sqlglot reads several spellings as one
node, so the spelling is looked up in the statement's text: where more than one spelling of
a function appears there, or an expression is of a form not rendered here, `spark_name`
raises `NotLocal` and Spark, which names it, answers the statement.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from shoal.query.embedded.vetting import NotLocal, describe

# Node type -> {spelling the user may write: the name Spark prints}.
_SPELLINGS: dict[type[exp.Expr], dict[str, str]] = {
    exp.Lower: {"lower": "lower", "lcase": "lcase"},
    exp.Upper: {"upper": "upper", "ucase": "ucase"},
    exp.Length: {"length": "length", "char_length": "char_length",
                 "character_length": "character_length"},
    exp.Substring: {"substr": "substr", "substring": "substring"},
    exp.Concat: {"concat": "concat"},
    exp.ConcatWs: {"concat_ws": "concat_ws"},
    exp.Replace: {"replace": "replace"},
    exp.StrPosition: {"instr": "instr", "locate": "", "position": ""},
    exp.StartsWith: {"startswith": "startswith"},
    exp.EndsWith: {"endswith": "endswith"},
    exp.Contains: {"contains": "contains"},
    exp.Abs: {"abs": "abs"},
    exp.Ceil: {"ceil": "CEIL", "ceiling": "ceiling"},
    exp.Floor: {"floor": "FLOOR"},
    exp.Sign: {"sign": "sign", "signum": "SIGNUM"},
    exp.Sqrt: {"sqrt": "SQRT"},
    exp.Least: {"least": "least"},
    exp.Greatest: {"greatest": "greatest"},
    exp.Coalesce: {"coalesce": "coalesce", "nvl": "nvl", "ifnull": "ifnull"},
    exp.Nullif: {"nullif": "nullif"},
    exp.Nvl2: {"nvl2": "nvl2"},
    exp.CountIf: {"count_if": "count_if"},
    exp.Sum: {"sum": "sum"},
    exp.Avg: {"avg": "avg"},
    exp.Min: {"min": "min"},
    exp.Max: {"max": "max"},
    exp.Count: {"count": "count"},
    exp.Stddev: {"stddev": "stddev"},
    exp.StddevSamp: {"stddev_samp": "stddev_samp"},
    exp.StddevPop: {"stddev_pop": "stddev_pop"},
    exp.Variance: {"variance": "variance", "var_samp": "var_samp"},
    exp.VariancePop: {"var_pop": "var_pop"},
    exp.LogicalAnd: {"bool_and": "bool_and"},
    exp.LogicalOr: {"bool_or": "bool_or"},
    exp.Trim: {"trim": "trim"},
    exp.Pad: {"lpad": "lpad", "rpad": "rpad"},
    exp.RegexpLike: {"rlike": "RLIKE", "regexp": "", "regexp_like": "", "has": ""},
}
# Spark's other spellings sqlglot keeps as plain calls (see SPELLINGS in vetting).
_PLAIN_CALLS = {"every", "some", "mean", "std"}
_BINARY: dict[type[exp.Expr], str] = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.IntDiv: "div",
    exp.EQ: "=", exp.NullSafeEQ: "<=>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
    exp.LTE: "<=", exp.And: "AND", exp.Or: "OR"}
_DISTINCT_OK = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def adjacent_strings(sql_text: str) -> tuple[bool, bool]:
    """Whether the statement has string literals side by side (`'a' 'b'`, which Spark joins
    into one), and whether two touch (`'it''s'`: Spark reads one literal with a quote in
    it, sqlglot two literals joined)."""
    try:
        tokens = Spark().tokenize(sql_text)
    except SqlglotError:
        return True, True
    side = touch = False
    for a, b in itertools.pairwise(tokens):
        if a.token_type == TokenType.STRING and b.token_type == TokenType.STRING:
            side = True
            touch = touch or b.start == a.end + 1
    return side, touch


def spark_name(e: exp.Expr, sql_text: str) -> str:
    """Spark's name of the unaliased select-list expression `e` (as written), or
    `NotLocal`."""
    return _Renderer(sql_text).render(e)


class _Renderer:
    def __init__(self, sql_text: str) -> None:
        self.text = sql_text
        self.joined_literals = adjacent_strings(sql_text)[0]

    def spelling(self, node: exp.Expr) -> str:
        spellings = _SPELLINGS[type(node)]
        if len(spellings) == 1:
            return next(iter(spellings.values()))
        # The spelling the user wrote is certainly in the text; where another one is too,
        # which one this node was is not known here.
        written = [s for s in spellings if self.written(s)]
        if len(written) != 1 or not spellings[written[0]]:
            raise NotLocal(f"the name Spark gives {describe(node)} (which of its spellings "
                           "was meant; give it an alias)")
        return spellings[written[0]]

    def written(self, word: str) -> bool:
        return re.search(rf"\b{re.escape(word)}\b", self.text, re.I) is not None

    def call(self, name: str, args: list[exp.Expr]) -> str:
        return f"{name}({', '.join(self.render(a) for a in args)})"

    def render(self, e: exp.Expr) -> str:
        r: Callable[[exp.Expr], str] = self.render
        if isinstance(e, exp.Paren):
            return r(e.this)
        if isinstance(e, exp.Column):
            if isinstance(e.this, exp.Star):
                raise NotLocal("a qualified * inside an expression")
            if e.name != e.name.lower():
                raise NotLocal(f"the column {e.name} written in another case than its name")
            return e.name
        if isinstance(e, exp.Literal):
            if e.is_string:
                return e.name
            if re.fullmatch(r"\d+", e.name):
                return str(int(e.name))
            raise NotLocal(f"the name Spark gives the literal {e.name}")
        if isinstance(e, exp.Null):
            return "NULL"
        if isinstance(e, exp.Boolean):
            return "true" if e.this else "false"
        if isinstance(e, exp.Neg):
            if isinstance(e.this, exp.Literal) and re.fullmatch(r"\d+", e.this.name):
                return str(-int(e.this.name))
            return f"(- {r(e.this)})"
        if type(e) in _BINARY:
            return f"({r(e.this)} {_BINARY[type(e)]} {r(e.expression)})"
        if isinstance(e, exp.NEQ):
            return f"(NOT ({r(e.this)} = {r(e.expression)}))"
        if isinstance(e, exp.Mod):
            if self.written("mod"):
                raise NotLocal("the name Spark gives mod() (or a % beside it)")
            return f"({r(e.this)} % {r(e.expression)})"
        if isinstance(e, exp.Not):
            inner = e.this.this if isinstance(e.this, exp.Paren) else e.this
            if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
                return f"({r(inner.this)} IS NOT NULL)"
            return f"(NOT {r(e.this)})"
        if isinstance(e, exp.Is):
            if not isinstance(e.expression, exp.Null):
                raise NotLocal(f"the name Spark gives {describe(e)}")
            return f"({r(e.this)} IS NULL)"
        if isinstance(e, exp.In):
            if e.args.get("query") is not None or not e.expressions:
                raise NotLocal(f"the name Spark gives {describe(e)}")
            return f"({r(e.this)} IN ({', '.join(r(v) for v in e.expressions)}))"
        if isinstance(e, exp.Between):
            return self.call("between", [e.this, e.args["low"], e.args["high"]])
        if isinstance(e, exp.Like):
            if e.args.get("escape") is not None:
                raise NotLocal(f"the name Spark gives {describe(e)}")
            like = f"{r(e.this)} LIKE {r(e.expression)}"
            return f"(NOT {like})" if e.args.get("negate") else like
        if isinstance(e, exp.RegexpLike):
            return self.call(self.spelling(e), [e.this, e.expression])
        if isinstance(e, exp.Case):
            return self.case(e)
        if isinstance(e, exp.If):
            return f"(IF({r(e.this)}, {r(e.args['true'])}, {r(e.args['false'])}))" \
                if e.args.get("false") is not None else \
                f"(IF({r(e.this)}, {r(e.args['true'])}, NULL))"
        if isinstance(e, exp.Filter):
            where = e.expression.this if isinstance(e.expression, exp.Where) else e.expression
            return f"{r(e.this)} FILTER (WHERE {r(where)})"
        if isinstance(e, exp.Anonymous) and str(e.this).lower() in _PLAIN_CALLS:
            return self.call(str(e.this).lower(), list(e.expressions))
        if type(e) in _SPELLINGS:
            return self.function(e)
        raise NotLocal(f"the unaliased expression {describe(e)} (Spark's generated column "
                       "name; give it an alias)")

    def case(self, e: exp.Case) -> str:
        parts = ["CASE"]
        for branch in e.args.get("ifs") or []:
            cond = branch.this
            when = (f"({self.render(e.this)} = {self.render(cond)})" if e.this is not None
                    else self.render(cond))
            parts.append(f"WHEN {when} THEN {self.render(branch.args['true'])}")
        if e.args.get("default") is not None:
            parts.append(f"ELSE {self.render(e.args['default'])}")
        parts.append("END")
        return " ".join(parts)

    def function(self, e: exp.Expr) -> str:
        name = self.spelling(e)
        if isinstance(e, exp.Concat) and self.joined_literals:
            raise NotLocal("the name Spark gives string literals side by side")
        if isinstance(e, exp.Count) and isinstance(e.this, exp.Star):
            return "count(1)"
        if isinstance(e, _DISTINCT_OK) and isinstance(e.this, exp.Distinct):
            inner = e.this.expressions
            return f"{name}(DISTINCT {', '.join(self.render(a) for a in inner)})"
        if isinstance(e, exp.Trim):
            position = str(e.args.get("position") or "").upper()
            fn = {"LEADING": "ltrim", "TRAILING": "rtrim", "BOTH": "trim", "": "trim"}[position]
            if e.args.get("expression") is not None:
                raise NotLocal("the name Spark gives trim() of other characters")
            return self.call(fn, [e.this])
        if isinstance(e, exp.Pad):
            fill = e.args.get("fill_pattern")
            return (f"{'lpad' if e.args.get('is_left') else 'rpad'}({self.render(e.this)}, "
                    f"{self.render(e.expression)}, "
                    f"{self.render(fill) if fill is not None else ' '})")
        args = list(e.iter_expressions())
        if isinstance(e, exp.Substring) and e.args.get("length") is None:
            return self.call(name, args)[:-1] + ", 2147483647)"
        if isinstance(e, exp.StrPosition) and (e.args.get("position") is not None
                                               or e.args.get("occurrence") is not None):
            raise NotLocal("the name Spark gives locate() with a start")
        return self.call(name, args)
