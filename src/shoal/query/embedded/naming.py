"""The names Spark gives the unaliased expressions of a select list.

Spark names such a column by printing the expression it was sent, before its own implicit
casts: columns by their name, string literals without quotes, operators in parentheses
(`(x / 1000)`, `(NOT (a = b))` for `a <> b`), functions by their name, with some arguments
left out filled in (`substring(s, 2, 2147483647)`, `lpad(s, 3,  )`, `locate(a, s, 1)`),
and a few in capitals (`CEIL(x)`, `SQRT(x)`). Spark is sent the statement as sqlglot
prints it, which spells each function one way (`nvl` and `ifnull` as `COALESCE`, `ucase`
as `UPPER`, `instr(s, a)` as `LOCATE(a, s)`): the name printed here is that spelling's.
`spark_name` raises `NotLocal` for a form not rendered here, and Spark, which names it,
answers the statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

from shoal.query.embedded.vetting import NotLocal, describe

# Node type -> the name Spark prints for the function sqlglot sends it.
_FUNCTION_NAMES: dict[type[exp.Expr], str] = {
    exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length", exp.Substring: "substring",
    exp.Concat: "concat", exp.ConcatWs: "concat_ws", exp.Replace: "replace",
    exp.StartsWith: "startswith", exp.EndsWith: "endswith", exp.Contains: "contains",
    exp.Abs: "abs", exp.Ceil: "CEIL", exp.Floor: "FLOOR", exp.Sign: "sign", exp.Sqrt: "SQRT",
    exp.Least: "least", exp.Greatest: "greatest", exp.Coalesce: "coalesce",
    exp.Nullif: "nullif", exp.Nvl2: "nvl2", exp.CountIf: "count_if", exp.Sum: "sum",
    exp.Avg: "avg", exp.Min: "min", exp.Max: "max", exp.Count: "count",
    exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or", exp.ArgMax: "max_by",
    exp.ArgMin: "min_by", exp.First: "first", exp.Last: "last", exp.AnyValue: "any_value",
    exp.ArrayAgg: "collect_list", exp.ArrayUniqueAgg: "collect_set", exp.ArraySize: "size",
    exp.ArrayContains: "array_contains", exp.ArrayToString: "array_join",
    exp.Stddev: "stddev",
    exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop", exp.Variance: "variance",
    exp.VariancePop: "var_pop", exp.Median: "median",
    exp.ApproxDistinct: "approx_count_distinct",
}
# Spark's other spellings sqlglot keeps as plain calls (see SPELLINGS in vetting).
_PLAIN_CALLS = {"every", "some", "mean", "std"}
# A percentage as Spark prints a decimal literal: as written, with its scale.
_PERCENTAGE = re.compile(r"(0|[1-9]\d*)(\.\d+)?")
_BINARY: dict[type[exp.Expr], str] = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.IntDiv: "div",
    exp.EQ: "=", exp.NullSafeEQ: "<=>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
    exp.LTE: "<=", exp.And: "AND", exp.Or: "OR"}
_DISTINCT_OK = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def spark_name(e: exp.Expr) -> str:
    """Spark's name of the unaliased select-list expression `e` (as written), or
    `NotLocal`."""
    return _Renderer().render(e)


class _Renderer:
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
            return f"({r(e.this)} % {r(e.expression)})"
        if isinstance(e, exp.Not):
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
            return self.call("RLIKE", [e.this, e.expression])
        if isinstance(e, exp.Case):
            return self.case(e)
        if isinstance(e, exp.If):
            return f"(IF({r(e.this)}, {r(e.args['true'])}, {r(e.args['false'])}))" \
                if e.args.get("false") is not None else \
                f"(IF({r(e.this)}, {r(e.args['true'])}, NULL))"
        if isinstance(e, exp.Filter):
            where = e.expression.this if isinstance(e.expression, exp.Where) else e.expression
            return f"{r(e.this)} FILTER (WHERE {r(where)})"
        if isinstance(e, exp.IgnoreNulls):      # Spark leaves it out of the name
            return r(e.this)
        if isinstance(e, exp.ArraySort):
            first = e.args.get("nulls_first")
            if e.args.get("asc") is None and not (isinstance(first, exp.Boolean) and first.this):
                raise NotLocal("the name Spark gives array_sort() (its comparator; give it "
                               "an alias)")
            asc = e.args.get("asc")
            order = "false" if isinstance(asc, exp.Boolean) and not asc.this else "true"
            return f"sort_array({r(e.this)}, {order})"
        if isinstance(e, (exp.Quantile, exp.ApproxQuantile)):
            return self.percentile(e)
        if isinstance(e, exp.Anonymous) and str(e.this).lower() in _PLAIN_CALLS:
            return self.call(str(e.this).lower(), list(e.expressions))
        if isinstance(e, exp.ApproxDistinct) and e.args.get("accuracy") is not None:
            raise NotLocal(f"the name Spark gives {describe(e)}")
        if type(e) in _FUNCTION_NAMES or isinstance(e, (exp.Trim, exp.Pad, exp.StrPosition)):
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

    def percentile(self, e: exp.Expr) -> str:
        """percentile(x, p, 1) and percentile_approx(x, p, accuracy): Spark prints the
        frequency and the accuracy it fills in."""
        q = e.args.get("quantile")
        if not (isinstance(q, exp.Literal) and _PERCENTAGE.fullmatch(q.name)):
            raise NotLocal(f"the name Spark gives {describe(e)}")
        if isinstance(e, exp.ApproxQuantile):       # (a kind of exp.Quantile in sqlglot)
            accuracy = e.args.get("accuracy")
            last = self.render(accuracy) if accuracy is not None else "10000"
            return f"percentile_approx({self.render(e.this)}, {q.name}, {last})"
        return f"percentile({self.render(e.this)}, {q.name}, 1)"

    def function(self, e: exp.Expr) -> str:
        name = _FUNCTION_NAMES.get(type(e), "")
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
        if isinstance(e, exp.StrPosition):
            if e.args.get("position") is not None or e.args.get("occurrence") is not None:
                raise NotLocal("the name Spark gives locate() with a start")
            return self.call("locate", [e.args["substr"], e.this])[:-1] + ", 1)"
        return self.call(name, args)
