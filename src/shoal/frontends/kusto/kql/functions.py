"""KQL's functions as Spark SQL: scalar functions (`SCALARS`) and the aggregations of
`summarize` (`AGGREGATES`). Each takes the call and its translated arguments and returns the
translated call; `scalar.py` beside it documents where the semantics are approximated."""

from __future__ import annotations

import re
from collections.abc import Callable

from shoal.frontends.kusto.kql import ast
from shoal.frontends.kusto.kql.sqltext import (NUMERIC, SPARK_TYPES, Context, Sql, literal,
                                               quote_string, semantic, trunc_unit)

Scalars = Context       # what a scalar function reads from the translation


def _arity(e: ast.Call, args: list[Sql], low: int, high: int | None = None) -> None:
    high = low if high is None else high
    if not low <= len(args) <= high:
        want = str(low) if low == high else f"{low} to {high}"
        raise semantic(f"{e.name}() takes {want} arguments, got {len(args)}", e.at)


def _names(*args: Sql) -> frozenset[str]:
    return frozenset().union(*(a.names for a in args))


def _const(e: ast.Call, arg: Sql, kind: str, what: str):
    if not arg.is_const or arg.kind != kind:
        raise semantic(f"{e.name}() takes a constant {what}", e.at)
    return arg.const


# ---- scalar functions -----------------------------------------------------------------------
def _ago(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 1)
    return literal("timestamp", s.now - _const(e, args[0], "timespan", "timespan"), e.at)


def _now(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 0, 1)
    offset = _const(e, args[0], "timespan", "timespan") if args else 0
    return literal("timestamp", s.now + offset, e.at)


def _cast(kind: str) -> Callable[[Scalars, ast.Call, list[Sql]], Sql]:
    def fn(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, 1)
        x = args[0]
        if x.kind == kind and kind != "dynamic":
            return x
        if kind == "timestamp" and x.is_const and isinstance(x.const, str):
            from shoal.frontends.kusto.kql.values import parse_datetime

            return literal("timestamp", parse_datetime(x.const, e.at), e.at)
        if kind == "string" and x.kind == "dynamic":
            return Sql(x.text, "string", x.names)
        # A cast that cannot fail answers as try_cast does; the plain CAST is the form the
        # embedded engine vets.
        how = "CAST" if (x.kind, kind) in _TOTAL_CASTS else "try_cast"
        return Sql(f"{how}({x.text} AS {SPARK_TYPES[kind]})", kind, x.names)
    return fn


# Casts Spark answers for every value (no overflow, no text to read).
_TOTAL_CASTS = frozenset({("int", "long"), ("int", "real"), ("long", "real"),
                          ("int", "string"), ("long", "string"), ("real", "string"),
                          ("bool", "string")})


def _typed_literal(kind: str) -> Callable[[Scalars, ast.Call, list[Sql]], Sql]:
    def fn(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, 1)
        x = args[0]
        if isinstance(e.args[0], ast.Name) and e.args[0].name == "null":
            return Sql(f"CAST(NULL AS {SPARK_TYPES[kind]})", kind, const=None)
        if not x.is_const:
            raise semantic(f"{e.name}() takes a literal", e.at)
        try:
            value = {"long": int, "int": int, "real": float, "bool": bool}[kind](x.const)
        except (TypeError, ValueError, OverflowError):
            raise semantic(f"{e.name}() of {x.const!r}", e.at) from None
        return literal("long" if kind == "int" else kind, value, e.at)
    return fn


def _dynamic(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 1)
    x = args[0]
    if x.kind not in ("string", "dynamic", None):
        raise semantic(f"{e.name}() parses a string", e.at)
    return Sql(x.text, "dynamic", x.names)


def _strcat(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    if not args:
        raise semantic("strcat() takes at least one argument", e.at)
    parts = [a.text if a.kind in ("string", "dynamic") else f"CAST({a.text} AS STRING)"
             for a in args]
    return Sql("concat_ws('', " + ", ".join(parts) + ")", "string", _names(*args))


def _iff(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 3)
    return Sql(f"IF({args[0].text}, {args[1].text}, {args[2].text})",
               args[1].kind or args[2].kind, _names(*args))


def _case(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    if len(args) < 3 or len(args) % 2 == 0:
        raise semantic("case(predicate, then, ..., else) takes an odd number (3+) of "
                       "arguments", e.at)
    whens = " ".join(f"WHEN {args[i].text} THEN {args[i + 1].text}"
                     for i in range(0, len(args) - 1, 2))
    return Sql(f"CASE {whens} ELSE {args[-1].text} END", args[1].kind, _names(*args))


def _isnull(negated: bool, empty: bool) -> Callable[[Scalars, ast.Call, list[Sql]], Sql]:
    def fn(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, 1)
        x = args[0]
        if empty and x.kind in ("string", "dynamic", None):
            text = (f"({x.text} IS NOT NULL AND {x.text} <> '')" if negated
                    else f"({x.text} IS NULL OR {x.text} = '')")
        else:
            text = f"({x.text} IS {'NOT ' if negated else ''}NULL)"
        return Sql(text, "bool", x.names)
    return fn


def _not(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 1)
    return Sql(f"(NOT {args[0].text})", "bool", args[0].names)


def _bin(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 2)
    x, size = args
    if x.kind == "timestamp":
        span = _const(e, size, "timespan", "timespan")
        if span <= 0:
            raise semantic("bin() takes a positive timespan", e.at)
        unit = trunc_unit(span)
        if unit is not None:
            return Sql(f"date_trunc({quote_string(unit)}, {x.text})", "timestamp", x.names)
        us = span // 1_000
        if us == 0:
            raise semantic("bin() of a datetime takes a span of at least 1 microsecond", e.at)
        return Sql(f"timestamp_micros(unix_micros({x.text}) - pmod(unix_micros({x.text}), "
                   f"{us}))", "timestamp", x.names)
    if size.kind not in NUMERIC or not size.is_const or size.const <= 0:
        raise semantic("bin() takes a positive constant bin size", e.at)
    if x.kind in ("int", "long") and size.kind == "long":
        return Sql(f"({x.text} - pmod({x.text}, {size.text}))", "long", x.names)
    return Sql(f"(floor({x.text} / {size.text}) * {size.text})", "real", x.names)


_DOTNET = re.compile(r"(yyyy|yy|MM|M|dd|d|HH|H|hh|h|mm|m|ss|s|f{1,7}|F{1,7}|tt)")


def _format_datetime(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 2)
    fmt = _const(e, args[1], "string", "format string")
    java = []
    for part in _DOTNET.split(fmt):
        if not part:
            continue
        if _DOTNET.fullmatch(part):
            java.append("S" * len(part) if part[0] in "fF" else ("a" if part == "tt" else part))
        else:
            java.append("'" + part.replace("'", "''") + "'" if any(c.isalpha() for c in part)
                        else part)
    return Sql(f"date_format({args[0].text}, {quote_string(''.join(java))})", "string",
               args[0].names)


def _simple(sql_name: str, kind: str | None, low: int, high: int | None = None
            ) -> Callable[[Scalars, ast.Call, list[Sql]], Sql]:
    def fn(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, low, high)
        return Sql(f"{sql_name}(" + ", ".join(a.text for a in args) + ")",
                   kind or (args[0].kind if args else None), _names(*args))
    return fn


def _substring(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 2, 3)
    rest = f", {args[2].text}" if len(args) == 3 else ""
    return Sql(f"substring({args[0].text}, ({args[1].text}) + 1{rest})", "string",
               _names(*args))


def _indexof(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 2)
    return Sql(f"(instr({args[0].text}, {args[1].text}) - 1)", "long", _names(*args))


def _trunc(unit: str) -> Callable[[Scalars, ast.Call, list[Sql]], Sql]:
    def fn(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, 1)
        return Sql(f"date_trunc({quote_string(unit)}, {args[0].text})", "timestamp", args[0].names)
    return fn


def _extract(s: Scalars, e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 3)
    regex, group, text = args
    return Sql(f"regexp_extract({text.text}, {regex.text}, {group.text})", "string",
               _names(*args))


SCALARS: dict[str, Callable[[Scalars, ast.Call, list[Sql]], Sql]] = {
    "ago": _ago, "now": _now,
    "tostring": _cast("string"), "toint": _cast("int"), "tolong": _cast("long"),
    "toreal": _cast("real"), "todouble": _cast("real"), "tobool": _cast("bool"),
    "toboolean": _cast("bool"), "todatetime": _cast("timestamp"),
    "long": _typed_literal("long"), "int": _typed_literal("int"),
    "real": _typed_literal("real"), "double": _typed_literal("real"),
    "bool": _typed_literal("bool"),
    "todynamic": _dynamic, "parse_json": _dynamic, "toobject": _dynamic,
    "strcat": _strcat, "iff": _iff, "iif": _iff, "case": _case,
    "isnull": _isnull(False, False), "isnotnull": _isnull(True, False),
    "isempty": _isnull(False, True), "isnotempty": _isnull(True, True),
    "not": _not, "bin": _bin, "floor": _bin,
    "format_datetime": _format_datetime,
    "strlen": _simple("char_length", "long", 1), "tolower": _simple("lower", "string", 1),
    "toupper": _simple("upper", "string", 1), "substring": _substring,
    "indexof": _indexof, "replace_string": _simple("replace", "string", 3),
    "extract": _extract, "coalesce": _simple("coalesce", None, 1, 64),
    "abs": _simple("abs", None, 1), "round": _simple("round", "real", 1, 2),
    "sqrt": _simple("sqrt", "real", 1), "log": _simple("ln", "real", 1),
    "log10": _simple("log10", "real", 1), "exp": _simple("exp", "real", 1),
    "pow": _simple("power", "real", 2),
    "startofday": _trunc("DAY"), "startofmonth": _trunc("MONTH"),
    "startofyear": _trunc("YEAR"),
    "hourofday": _simple("hour", "int", 1), "getyear": _simple("year", "int", 1),
    "getmonth": _simple("month", "int", 1), "dayofmonth": _simple("dayofmonth", "int", 1),
    # shoal's byte functions for header columns (not KQL's; the same names as in SQL)
    "int_from_bytes": _simple("int_from_bytes", "int", 1, 2),
    "bigint_from_bytes": _simple("bigint_from_bytes", "long", 1, 2),
    "double_from_bytes": _simple("double_from_bytes", "real", 1, 2),
}


# ---- aggregations ---------------------------------------------------------------------------
def _agg(sql_name: str, kind: str | None, *, numeric_sum: bool = False
         ) -> Callable[[ast.Call, list[Sql]], Sql]:
    def fn(e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, 1)
        x = args[0]
        out = kind or x.kind
        if numeric_sum:
            out = "long" if x.kind in ("int", "long") else "real"
        return Sql(f"{sql_name}({x.text})", out, x.names, aggregate=True)
    return fn


def _count(e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 0, 1)
    inner = args[0].text if args else "*"
    return Sql(f"count({inner})", "long", _names(*args), aggregate=True)


def _countif(e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 1)
    return Sql(f"count(CASE WHEN {args[0].text} THEN 1 END)", "long", args[0].names,
               aggregate=True)


def _dcount(e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 1, 2)      # the accuracy level is accepted: the count is exact
    return Sql(f"count(DISTINCT {args[0].text})", "long", args[0].names, aggregate=True)


def _dcountif(e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 2, 3)
    return Sql(f"count(DISTINCT CASE WHEN {args[1].text} THEN {args[0].text} END)", "long",
               _names(*args), aggregate=True)


def _conditional(sql_name: str, numeric_sum: bool = False
                 ) -> Callable[[ast.Call, list[Sql]], Sql]:
    def fn(e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, 2)
        x, p = args
        kind = ("long" if x.kind in ("int", "long") else "real") if numeric_sum else (
            "real" if sql_name == "avg" else x.kind)
        return Sql(f"{sql_name}(CASE WHEN {p.text} THEN {x.text} END)", kind,
                   _names(*args), aggregate=True)
    return fn


def percentile_sql(x: Sql, p: float) -> Sql:
    return Sql(f"percentile_approx({x.text}, {p / 100!r}, 1000000)", x.kind, x.names,
               aggregate=True)


def _percentile(e: ast.Call, args: list[Sql]) -> Sql:
    _arity(e, args, 2)
    p = args[1].const if args[1].is_const else None
    if not isinstance(p, (int, float)) or not 0 <= p <= 100:
        raise semantic("percentile() takes a constant percentage 0..100", e.at)
    return percentile_sql(args[0], float(p))


def _make_list(sql_name: str) -> Callable[[ast.Call, list[Sql]], Sql]:
    def fn(e: ast.Call, args: list[Sql]) -> Sql:
        _arity(e, args, 1, 2)
        text = f"{sql_name}({args[0].text})"
        if len(args) == 2:
            text = f"slice({text}, 1, {args[1].text})"
        return Sql(text, "array", args[0].names, aggregate=True)
    return fn


AGGREGATES: dict[str, Callable[[ast.Call, list[Sql]], Sql]] = {
    "count": _count, "countif": _countif, "dcount": _dcount, "dcountif": _dcountif,
    "sum": _agg("sum", None, numeric_sum=True), "avg": _agg("avg", "real"),
    "min": _agg("min", None), "max": _agg("max", None),
    "sumif": _conditional("sum", numeric_sum=True), "avgif": _conditional("avg"),
    "minif": _conditional("min"), "maxif": _conditional("max"),
    "stdev": _agg("stddev_samp", "real"), "variance": _agg("var_samp", "real"),
    "percentile": _percentile,
    "make_list": _make_list("collect_list"), "make_set": _make_list("collect_set"),
    "take_any": _agg("any_value", None), "any": _agg("any_value", None),
}
# Aggregations with more than one output column, expanded by the summarize translation.
MULTI_AGGREGATES = frozenset({"arg_max", "arg_min", "percentiles"})

# The name KQL gives an unnamed aggregation's column: prefix + "_" + the column's name.
AGGREGATE_PREFIX = {"count": "count", "countif": "countif", "dcount": "dcount",
                    "dcountif": "dcountif", "sum": "sum", "avg": "avg", "min": "min",
                    "max": "max", "sumif": "sumif", "avgif": "avgif", "minif": "minif",
                    "maxif": "maxif", "stdev": "stdev", "variance": "variance",
                    "percentile": "percentile", "make_list": "list", "make_set": "set",
                    "take_any": "any", "any": "any"}
