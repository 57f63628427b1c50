"""Dates, timestamps, intervals and time buckets with Spark's meaning on the embedded engine.

The engine's views hold Spark's timestamps (µs instants) as zone-less µs values read as UTC
wall time, and Spark's session time zone is UTC, so a field of a timestamp (hour, day,
ISO week, ...) is the same field of the same wall time in both engines. Both count days
in the proleptic Gregorian calendar; for years outside 1..9999 (DuckDB and Java number the
years before 1 differently) a value is Spark's to answer (the not-identical mark).

`current_timestamp()`, `now()` and `current_date()` never reach this module: the query
engine replaces them by literals of the statement's start (`pin_statement_time`), so both
engines see one instant.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from shoal.query.embedded.functions.patterns import (DEFAULT_PATTERN, spark_pattern,
                                                     strftime_of, strptime_of)
from shoal.query.embedded.vetting import (FUNCTIONS, INTEGERS, SPARK_ONLY, T, TIMESTAMPS,
                                          Function, NotLocal, call, case_when, cast_to,
                                          describe, family_of, fixed_type, spark_type, widest,
                                          not_identical)

# The µs instants of 0001-01-01 and 10000-01-01 (UTC): the years both engines name alike.
_FIRST_US, _END_US = -62_135_596_800_000_000, 253_402_300_800_000_000
_UNIT_US = {"MICROSECOND": 1, "MILLISECOND": 1_000, "SECOND": 1_000_000,
            "MINUTE": 60_000_000, "HOUR": 3_600_000_000, "DAY": 86_400_000_000,
            "WEEK": 7 * 86_400_000_000}


# ---- helpers ---------------------------------------------------------------------------
def _ts_text(us: int) -> str:
    dt = datetime.fromtimestamp(us // 1_000_000, tz=UTC)
    return f"{dt.year:04d}-" + dt.strftime("%m-%d %H:%M:%S") + f".{us % 1_000_000:06d}"


def _ts(us: int) -> exp.Expr:
    return cast_to(exp.Literal.string(_ts_text(us)), "TIMESTAMP")


def _out_of_years(x: exp.Expr, kind: exp.DType | None) -> exp.Expr:
    """True where `x` (a timestamp or a date) lies outside the years 1..9999."""
    low, high = _ts(_FIRST_US), _ts(_END_US - 1)
    if kind == T.DATE:
        low, high = cast_to(low, "DATE"), cast_to(high, "DATE")
    return exp.Not(this=exp.Paren(this=exp.Between(this=x.copy(), low=low, high=high)))


def _within_years(x: exp.Expr, kind: exp.DType | None, answer: exp.Expr,
                  fn: str) -> exp.Expr:
    return case_when(_out_of_years(x, kind), not_identical(f"{fn}() of a year outside "
                                                           "1..9999"), answer)


def _floor_div(x: exp.Expr, n: int) -> exp.Expr:
    """x / n rounded down, exactly, for a bigint x (DuckDB's // truncates)."""
    floor_mod = exp.Mod(this=exp.Paren(this=exp.Add(
        this=exp.Mod(this=x.copy(), expression=exp.Literal.number(n)),
        expression=exp.Literal.number(n))), expression=exp.Literal.number(n))
    return exp.IntDiv(this=exp.Paren(this=exp.Sub(this=x.copy(), expression=floor_mod)),
                      expression=exp.Literal.number(n))


def _need(node: exp.Expr, arg: exp.Expr | None, families: tuple[str, ...], what: str) -> None:
    if arg is None or isinstance(arg, exp.Null):
        return
    if family_of(arg) not in families:
        raise NotLocal(f"{what}() of {describe(arg)} (only of {' or '.join(families)}s "
                       "locally)")


def _one(what: str, *families: str):
    def vet(node: exp.Expr) -> None:
        args = list(node.args.get("expressions") or []) if isinstance(
            node, exp.Anonymous) else [node.this]
        extra = [k for k, v in node.args.items() if v is not None and k not in (
            "this", "expressions", "safe")]
        if len(args) != 1 or extra:
            raise NotLocal(f"{what}() with these arguments ({describe(node)})")
        _need(node, args[0], families, what)
    return vet


# ---- fields of a timestamp or date -------------------------------------------------------
def _field(fn: str, plus: int = 0):
    """DuckDB's `fn` of the argument as Spark's int (a timestamp argument in years 1..9999;
    a date argument is a date these rules already produced or a literal)."""
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        x = node.this
        value: exp.Expr = call(fn, x)
        if plus:
            value = exp.Add(this=value, expression=exp.Literal.number(plus))
        value = cast_to(value, "INT")
        if kinds[0] in TIMESTAMPS:
            return _within_years(x, kinds[0], value, fn)
        return value
    return rewrite


def _rewrite_to_date(node: exp.Expr, kinds: tuple) -> exp.Expr:
    x = node.this
    if kinds[0] == T.DATE:
        return x
    if kinds[0] in TIMESTAMPS:
        return _within_years(x, kinds[0], cast_to(x, "DATE"), "to_date")
    fmt = node.args.get("format")
    pattern = "yyyy-MM-dd" if fmt is None else spark_pattern(fmt)
    return cast_to(_parsed(x, pattern, "to_date"), "DATE")


def _vet_to_date(node: exp.Expr) -> None:
    extra = [k for k, v in node.args.items() if v is not None and k not in (
        "this", "format", "safe")]
    if extra:
        raise NotLocal(f"to_date() with these arguments ({describe(node)})")
    fmt = node.args.get("format")
    if fmt is not None or family_of(node.this) == "string":
        _need(node, node.this, ("string",), "to_date with a pattern")
        strptime_of("yyyy-MM-dd" if fmt is None else spark_pattern(fmt))
        return
    _need(node, node.this, ("timestamp", "date", "string"), "to_date")


# ---- datetime patterns ------------------------------------------------------------------------
def _parsed(s: exp.Expr, pattern: str, fn: str) -> exp.Expr:
    """Spark's reading of the text `s` with `pattern` (a zone-less timestamp, UTC wall
    time): a text the pattern's expression does not match in full, or DuckDB does not read,
    is Spark's to read (or refuse)."""
    regex, fmt = strptime_of(pattern)
    value = call("try_strptime", s.copy(), exp.Literal.string(fmt))
    read = exp.And(this=call("regexp_full_match", s.copy(), exp.Literal.string(regex)),
                   expression=exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null())))
    return exp.Paren(this=exp.Case(ifs=[
        exp.If(this=exp.Is(this=s.copy(), expression=exp.Null()), true=exp.Null()),
        exp.If(this=read, true=value)],
        default=not_identical(f"{fn}() of a text its pattern may read differently")))


# Formatting: the years 1000..9999 (Spark pads `yyyy` to four digits, `y` not at all).
_FORMAT_FIRST_US = -30_610_224_000_000_000


def _formatted(ts: exp.Expr, pattern: str, fn: str) -> exp.Expr:
    text = call("strftime", ts.copy(), exp.Literal.string(strftime_of(pattern)))
    outside = exp.Not(this=exp.Paren(this=exp.Between(
        this=ts.copy(), low=_ts(_FORMAT_FIRST_US), high=_ts(_END_US - 1))))
    return case_when(outside, not_identical(f"{fn}() of a year outside 1000..9999"), text)


def _vet_date_format(node: exp.Expr) -> None:
    _need(node, node.this, ("timestamp",), "date_format")
    strftime_of(spark_pattern(node.args.get("format")))


def _rewrite_date_format(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return _formatted(node.this, spark_pattern(node.args.get("format")), "date_format")


def _vet_from_unixtime(node: exp.Expr) -> None:
    arg = node.this
    if not isinstance(arg, exp.Null) and spark_type(arg) not in INTEGERS:
        raise NotLocal(f"from_unixtime() of {describe(arg)} (only of integers locally)")
    strftime_of(spark_pattern(node.args.get("format"), DEFAULT_PATTERN))


def _rewrite_from_unixtime(node: exp.Expr, kinds: tuple) -> exp.Expr:
    seconds = cast_to(node.this, "BIGINT")
    inside = exp.Paren(this=exp.Between(
        this=seconds.copy(), low=exp.Literal.number(_FORMAT_FIRST_US // 1_000_000),
        high=exp.Literal.number(_END_US // 1_000_000 - 1)))
    ts = call("make_timestamp", exp.Mul(this=seconds.copy(),
                                        expression=exp.Literal.number(1_000_000)))
    text = call("strftime", ts, exp.Literal.string(strftime_of(spark_pattern(
        node.args.get("format"), DEFAULT_PATTERN))))
    return case_when(exp.Not(this=inside), not_identical(
        "from_unixtime() of a year outside 1000..9999"), text)


def _vet_unix_timestamp(node: exp.Expr) -> None:
    if node.this is None:
        raise NotLocal("unix_timestamp() without an argument")
    _need(node, node.this, ("timestamp", "string"), "unix_timestamp")
    pattern = spark_pattern(node.args.get("format"), DEFAULT_PATTERN)
    if family_of(node.this) == "string":
        strptime_of(pattern)
    else:
        strftime_of(pattern)        # ignored for a timestamp, but a pattern Spark accepts


def _rewrite_unix_timestamp(node: exp.Expr, kinds: tuple) -> exp.Expr:
    ts = node.this
    if kinds[0] not in TIMESTAMPS:
        ts = _parsed(ts, spark_pattern(node.args.get("format"), DEFAULT_PATTERN),
                     "unix_timestamp")
    # Spark divides the µs toward zero here (unix_seconds rounds down).
    return exp.IntDiv(this=call("epoch_us", ts), expression=exp.Literal.number(1_000_000))


def _vet_to_timestamp(node: exp.Expr) -> None:
    extra = [k for k, v in node.args.items() if v is not None and k not in (
        "this", "format", "safe")]
    if extra:
        raise NotLocal(f"to_timestamp() with these arguments ({describe(node)})")
    _need(node, node.this, ("string",), "to_timestamp with a pattern")
    strptime_of(spark_pattern(node.args.get("format")))


def _rewrite_to_timestamp(node: exp.Expr, kinds: tuple) -> exp.Expr:
    return _parsed(node.this, spark_pattern(node.args.get("format")), "to_timestamp")


def _vet_time_of(node: exp.Expr) -> None:
    extra = [k for k, v in node.args.items() if v is not None and k != "this"]
    if extra:
        raise NotLocal(f"{describe(node)}")
    _need(node, node.this, ("timestamp",), "date_format")


# ---- epoch numbers ------------------------------------------------------------------------
def _unix(n: int):
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        us = call("epoch_us", node.this)
        return us if n == 1 else _floor_div(us, n)
    return rewrite


def _from_epoch(fn: str, n: int):
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        us = exp.Mul(this=cast_to(node.expressions[0], "BIGINT"),
                     expression=exp.Literal.number(n)) if n != 1 else cast_to(
                         node.expressions[0], "BIGINT")
        # Spark's range is the whole bigint of µs; DuckDB's stops short of it.
        outside = exp.Not(this=exp.Paren(this=exp.Between(
            this=us.copy(), low=exp.Literal.number(_FIRST_US),
            high=exp.Literal.number(_END_US - 1))))
        return case_when(outside, not_identical(f"{fn}() of a year outside 1..9999"),
                         call("make_timestamp", us))
    return rewrite


def _vet_integer_arg(fn: str):
    def vet(node: exp.Expr) -> None:
        if len(node.expressions) != 1:
            raise NotLocal(f"{fn}() with {len(node.expressions)} arguments")
        arg = node.expressions[0]
        if not isinstance(arg, exp.Null) and spark_type(arg) not in INTEGERS:
            raise NotLocal(f"{fn}() of {describe(arg)} (only of integers locally)")
    return vet


# ---- dates ----------------------------------------------------------------------------------
def _vet_date_add(node: exp.Expr) -> None:
    unit = node.args.get("unit")
    if unit is not None and unit.name.upper() != "DAY":
        raise NotLocal(f"date_add by {unit.name}")
    _need(node, node.this, ("timestamp", "date"), "date_add")
    days = node.expression
    if not isinstance(days, exp.Null) and spark_type(days) not in (T.TINYINT, T.SMALLINT,
                                                                   T.INT):
        raise NotLocal("date_add/date_sub by a number of days that is not an int")


def _rewrite_date_add(node: exp.Expr, kinds: tuple) -> exp.Expr:
    day = node.this if kinds[0] == T.DATE else cast_to(node.this, "DATE")
    moved = exp.Add(this=day, expression=cast_to(node.expression, "INT"))
    return _within_years(moved, T.DATE, moved.copy(), "date_add")


def _vet_datediff(node: exp.Expr) -> None:
    if node.args.get("unit") is not None:
        raise NotLocal("datediff with a unit")
    for side in (node.this, node.expression):
        _need(node, side, ("timestamp", "date"), "datediff")


def _rewrite_datediff(node: exp.Expr, kinds: tuple) -> exp.Expr:
    days = exp.Sub(this=cast_to(node.this, "DATE"), expression=cast_to(node.expression, "DATE"))
    return cast_to(days, "INT")


# ---- pmod -------------------------------------------------------------------------------------
def _vet_pmod(node: exp.Expr) -> None:
    if len(node.expressions) != 2:
        raise NotLocal(f"pmod() with {len(node.expressions)} arguments")
    for arg in node.expressions:
        if not isinstance(arg, exp.Null) and spark_type(arg) not in INTEGERS:
            raise NotLocal(f"pmod() of {describe(arg)} (only of integers locally)")


def _pmod_type(node: exp.Expr) -> exp.DType | None:
    return widest(list(node.expressions))


def _rewrite_pmod(node: exp.Expr, kinds: tuple) -> exp.Expr:
    a, n = node.expressions
    want = exp.DataType.build(_pmod_type(node) or T.BIGINT).sql("duckdb")
    r = exp.Paren(this=exp.Mod(this=a.copy(), expression=n.copy()))
    # Spark: r = a % n; r < 0 ? (r + n) % n : r, and a zero divisor raises (ANSI).
    fixed = exp.Mod(this=exp.Paren(this=exp.Add(this=r.copy(), expression=n.copy())),
                    expression=n.copy())
    answer = case_when(exp.LT(this=r.copy(), expression=exp.Literal.number(0)), fixed, r)
    return case_when(exp.EQ(this=n.copy(), expression=exp.Literal.number(0)),
                     not_identical("pmod by zero"), cast_to(answer, want))


# ---- intervals --------------------------------------------------------------------------------
def interval_us(node: exp.Interval) -> int:
    """The µs of a day-time interval literal `INTERVAL n unit` (n an integer), or
    `NotLocal`."""
    unit = node.args.get("unit")
    name = unit.name.upper() if isinstance(unit, exp.Var) else ""
    name = name[:-1] if name.endswith("S") else name
    value = node.this
    if name not in _UNIT_US or not isinstance(value, exp.Literal):
        raise NotLocal(f"the interval {describe(node)} (only INTERVAL n DAY|HOUR|MINUTE|"
                       "SECOND|MILLISECOND|MICROSECOND|WEEK locally)")
    text = value.name.strip()
    if not re.fullmatch(r"[+-]?\d{1,12}", text):
        raise NotLocal(f"the interval {describe(node)} (an integer count only)")
    return int(text) * _UNIT_US[name]


def _vet_interval(node: exp.Expr) -> None:
    assert isinstance(node, exp.Interval)
    interval_us(node)
    parent = node.parent
    if not (isinstance(parent, (exp.Add, exp.Sub)) and shifts_time(parent)):
        raise NotLocal(f"the interval {describe(node)} outside timestamp arithmetic")


def _rewrite_interval(node: exp.Expr, kinds: tuple) -> exp.Expr:
    assert isinstance(node, exp.Interval)
    return call("to_microseconds", cast_to(exp.Literal.number(interval_us(node)), "BIGINT"))


def shifts_time(node: exp.Expr) -> bool:
    """Whether `node` (+ or -) moves a timestamp by an interval literal; `NotLocal` where
    an interval takes part in any other way."""
    a, b = node.this, node.expression
    if not isinstance(a, exp.Interval) and not isinstance(b, exp.Interval):
        return False
    if isinstance(a, exp.Interval) and (isinstance(node, exp.Sub) or isinstance(
            b, exp.Interval)):
        raise NotLocal(f"{describe(node)} (only a timestamp plus or minus an interval)")
    moved = b if isinstance(a, exp.Interval) else a
    if family_of(moved) not in ("timestamp", "null"):
        raise NotLocal(f"{describe(node)} (interval arithmetic on a timestamp only)")
    return True


# ---- the statement's time ---------------------------------------------------------------------
_NOW_WORDS = re.compile(r"(?i)\b(current_timestamp|current_date|now)\b")


def pin_statement_time(sql: str, now_us: int) -> str:
    """`sql` with `current_timestamp()`, `now()` and `current_date()` replaced by literals
    of the instant `now_us` (UTC), so every engine that answers it sees the same time. Only
    those calls' text changes (the rest stays as written). Unchanged when the statement
    names none of them, or names one in an unaliased column (whose name Spark derives from
    the call)."""
    if not _NOW_WORDS.search(sql):
        return sql
    try:
        tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
        tokens = Spark().tokenize(sql)
    except SqlglotError:
        return sql      # the planner reports the statement's syntax error
    calls = [n for n in tree.walk() if isinstance(n, (exp.CurrentTimestamp, exp.CurrentDate))
             or (isinstance(n, exp.Anonymous) and str(n.this).lower() == "now"
                 and not n.expressions)]
    if not calls or any(n.this is not None for n in calls if not isinstance(n, exp.Anonymous)):
        return sql
    for select in tree.find_all(exp.Select):
        for column in select.selects:
            if not isinstance(column, exp.Alias) and any(
                    c is column or column in list(_ancestors(c)) for c in calls):
                return sql
    text = _ts_text(now_us)
    spans: list[tuple[int, int, str]] = []
    for k, tok in enumerate(tokens):
        after = [t.token_type for t in tokens[k + 1:k + 3]]
        called = after == [TokenType.L_PAREN, TokenType.R_PAREN]
        end = tokens[k + 2].end if called else tok.end
        if tok.token_type == TokenType.CURRENT_TIMESTAMP or (
                tok.token_type == TokenType.VAR and tok.text.lower() == "now" and called):
            spans.append((tok.start, end, f"TIMESTAMP '{text}'"))
        elif tok.token_type == TokenType.CURRENT_DATE:
            spans.append((tok.start, end, f"DATE '{text[:10]}'"))
    if len(spans) != len(calls):
        return sql      # a spelling not read here: Spark evaluates it
    for start, end, literal in reversed(spans):
        sql = sql[:start] + literal + sql[end + 1:]
    return sql


def _ancestors(node: exp.Expr):
    p = node.parent
    while p is not None:
        yield p
        p = p.parent


FUNCTIONS.update({
    exp.Hour: Function("hour", _one("hour", "timestamp"), fixed_type(T.INT), _field("hour"),
                       "of a timestamp (UTC)"),
    exp.Minute: Function("minute", _one("minute", "timestamp"), fixed_type(T.INT),
                         _field("minute"), "of a timestamp (UTC)"),
    exp.Second: Function("second", _one("second", "timestamp"), fixed_type(T.INT),
                         _field("second"), "of a timestamp, whole seconds"),
    exp.Day: Function("day", _one("day", "date"), fixed_type(T.INT), _field("day"),
                      "of a date or timestamp"),
    exp.DayOfMonth: Function("dayofmonth", _one("dayofmonth", "date"), fixed_type(T.INT),
                             _field("day"), "of a date or timestamp"),
    exp.Month: Function("month", _one("month", "date"), fixed_type(T.INT), _field("month"),
                        "of a date or timestamp"),
    exp.Year: Function("year", _one("year", "date"), fixed_type(T.INT), _field("year"),
                       "of a date or timestamp"),
    exp.Quarter: Function("quarter", _one("quarter", "timestamp", "date"), fixed_type(T.INT),
                          _field("quarter"), "of a date or timestamp"),
    exp.DayOfWeek: Function("dayofweek", _one("dayofweek", "date"), fixed_type(T.INT),
                            _field("dayofweek", plus=1), "1 = Sunday .. 7 = Saturday"),
    exp.DayOfYear: Function("dayofyear", _one("dayofyear", "date"), fixed_type(T.INT),
                            _field("dayofyear"), "of a date or timestamp"),
    exp.WeekOfYear: Function("weekofyear", _one("weekofyear", "date"), fixed_type(T.INT),
                             _field("weekofyear"), "ISO week (Monday first, week 1 has "
                             "4 days or more)"),
    exp.TsOrDsToDate: Function("to_date", _vet_to_date, fixed_type(T.DATE),
                               _rewrite_to_date, "of a timestamp or date (years 1..9999); "
                               "of a string: `yyyy-MM-dd`, or a fixed-width pattern (other "
                               "texts go to Spark)"),
    exp.TimeToStr: Function("date_format", _vet_date_format, fixed_type(T.VARCHAR),
                            _rewrite_date_format, "of a timestamp, the common pattern "
                            "letters; years 1000..9999"),
    exp.TimeStrToTime: Function("(timestamp argument of date_format)", _vet_time_of,
                                fixed_type(T.TIMESTAMPTZ), lambda n, k: n.this,
                                "a timestamp as it is"),
    exp.UnixToStr: Function("from_unixtime", _vet_from_unixtime, fixed_type(T.VARCHAR),
                            _rewrite_from_unixtime, "of integer seconds, the common pattern "
                            "letters (default `yyyy-MM-dd HH:mm:ss`); years 1000..9999"),
    exp.StrToUnix: Function("unix_timestamp", _vet_unix_timestamp, fixed_type(T.BIGINT),
                            _rewrite_unix_timestamp, "of a timestamp (toward zero, as "
                            "Spark), or of a string read with a fixed-width pattern"),
    exp.StrToTime: Function("to_timestamp", _vet_to_timestamp, fixed_type(T.TIMESTAMPTZ),
                            _rewrite_to_timestamp, "of a string with a fixed-width pattern "
                            "(`yyyy MM dd HH mm ss SSS SSSSSS`); other texts go to Spark"),
    exp.UnixMicros: Function("unix_micros", _one("unix_micros", "timestamp"),
                             fixed_type(T.BIGINT), _unix(1), "µs since 1970 (UTC)"),
    exp.UnixMillis: Function("unix_millis", _one("unix_millis", "timestamp"),
                             fixed_type(T.BIGINT), _unix(1_000), "rounded down"),
    exp.UnixSeconds: Function("unix_seconds", _one("unix_seconds", "timestamp"),
                              fixed_type(T.BIGINT), _unix(1_000_000), "rounded down"),
    "timestamp_micros": Function("timestamp_micros", _vet_integer_arg("timestamp_micros"),
                                 fixed_type(T.TIMESTAMPTZ),
                                 _from_epoch("timestamp_micros", 1),
                                 "of an integer; years 1..9999 (others go to Spark)"),
    "timestamp_millis": Function("timestamp_millis", _vet_integer_arg("timestamp_millis"),
                                 fixed_type(T.TIMESTAMPTZ),
                                 _from_epoch("timestamp_millis", 1_000),
                                 "of an integer; years 1..9999 (others go to Spark)"),
    "timestamp_seconds": Function("timestamp_seconds", _vet_integer_arg("timestamp_seconds"),
                                  fixed_type(T.TIMESTAMPTZ),
                                  _from_epoch("timestamp_seconds", 1_000_000),
                                  "of an integer (not a fraction); years 1..9999"),
    exp.TsOrDsAdd: Function("date_add, date_sub", _vet_date_add, fixed_type(T.DATE),
                            _rewrite_date_add, "of a date or timestamp by int days; years "
                            "1..9999"),
    exp.DateDiff: Function("datediff", _vet_datediff, fixed_type(T.INT), _rewrite_datediff,
                           "days between two dates or timestamps"),
    "pmod": Function("pmod", _vet_pmod, _pmod_type, _rewrite_pmod,
                     "of integers; a zero divisor goes to Spark"),
    exp.Interval: Function("interval", _vet_interval, lambda n: None, _rewrite_interval,
                           "`timestamp ± INTERVAL n unit`, n an integer, unit DAY, HOUR, "
                           "MINUTE, SECOND, MILLISECOND, MICROSECOND or WEEK"),
})

SPARK_ONLY.update({
    "to_timestamp without a pattern": "the reading of a string cast to a timestamp is not "
                                      "reproduced",
    "add_months, months_between": "month arithmetic is not proven equal",
    "window": "Spark drops the rows whose timestamp is null (a filter, not a value); "
              "bucket with date_trunc or timestamp_seconds(unix_seconds(ts) - "
              "pmod(unix_seconds(ts), w))",
})
