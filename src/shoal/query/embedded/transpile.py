"""Spark SQL -> the embedded engine's dialect, only where the answer is certainly identical.

Users write Spark SQL whatever engine runs it. `to_local(tree, views)` takes the
planner's statement with every table reference already reading its scan view and returns
the statement in DuckDB's dialect plus the names Spark would give the answer's columns --
or raises `NotLocal` with the reason when any part of it might answer differently.

The check is an allow-list on the statement after sqlglot has resolved every column
(`qualify`) and typed every expression (`annotate_types`) against the views' Spark types:

- relational shapes: SELECT (DISTINCT), joins of every kind, WHERE, GROUP BY, HAVING,
  ORDER BY (Spark sorts NULLs first ascending, last descending: made explicit), LIMIT,
  WITH, UNION [ALL], IN / EXISTS / scalar subqueries, correlated or not;
- operators: comparisons, AND/OR/NOT, IS [NOT] NULL, IN lists, BETWEEN, `<=>`, `+ - *` on
  integers and doubles (an overflow raises in both engines: ANSI), LIKE without escapes,
  RLIKE with a pattern both regex dialects read alike (`has()`'s rewrite included);
- functions: count, sum, avg, min, max, coalesce, CASE/IF, `date_trunc` (year .. second),
  `get_json_object` on simple `$.key.key` paths, shoal's byte functions, and the string and
  math functions of `FUNCTIONS` (with `/`, DIV and %): each entry vets its arguments, gives
  Spark's result type and, where DuckDB's own function answers differently, the DuckDB
  expression with Spark's answer. Where only some values would differ (a zero divisor, text
  beyond ASCII for case mapping, a double beyond bigint) the expression raises the
  not-identical mark on such a row, and the statement goes to Spark. `SPARK_ONLY` names the
  everyday functions left to Spark and why; `function_table_markdown()` renders both for
  docs/sql.md;
- types: both sides of a comparison of one family (numbers, strings, booleans, timestamps,
  binary); a string literal compared with a timestamp is parsed here exactly as Spark reads
  it (UTC session) or not at all. No decimal literals, casts, window functions,
  arrays in comparisons, or anything sqlglot cannot type.

Names: an alias, a plain column's name, a `*` expanded over its sources, and the names Spark
gives `count(*)` ("count(1)") and `count|sum|avg|min|max(column)`. Any other unaliased
expression goes to Spark, which names it. Every output column carries the Spark type the
statement has (`spark_types`), which the engine casts its answer to (exactly, or it fails).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from shoal.query.planner import BYTE_FUNCTIONS, _timestamp_us_as_ns
from datetime import UTC

T = exp.DataType.Type
_NUMERIC = {T.INT: "number", T.BIGINT: "number", T.DOUBLE: "number", T.FLOAT: "number",
            T.SMALLINT: "number", T.TINYINT: "number"}
# Spark's TIMESTAMP is a zone-aware instant (sqlglot: TIMESTAMPTZ / TIMESTAMPLTZ).
_TIMESTAMPS = (T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPLTZ)
_FAMILY = {**_NUMERIC, T.VARCHAR: "string", T.TEXT: "string", T.BOOLEAN: "boolean",
           T.BINARY: "binary", T.VARBINARY: "binary", **dict.fromkeys(_TIMESTAMPS, "timestamp")}
_ARROW = {T.INT: pa.int32(), T.BIGINT: pa.int64(), T.DOUBLE: pa.float64(),
          T.FLOAT: pa.float32(), T.VARCHAR: pa.string(), T.TEXT: pa.string(),
          T.BOOLEAN: pa.bool_(), T.BINARY: pa.binary(), T.VARBINARY: pa.binary(),
          **dict.fromkeys(_TIMESTAMPS, pa.timestamp("us", tz="UTC"))}
# Spark's numeric widening (TypeCoercion): the wider of two is the later one here.
_WIDENING = [T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.FLOAT, T.DOUBLE]
_BYTE_TYPES = {"int_from_bytes": T.INT, "bigint_from_bytes": T.BIGINT,
               "double_from_bytes": T.DOUBLE}
_TRUNC_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}
_NAMED_AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
# Structure and operators whose meaning is the same in both engines once their operands
# pass the type rules below.
_PLAIN = (exp.Select, exp.Union, exp.From, exp.Join, exp.Where, exp.Group, exp.Having,
          exp.Order, exp.Ordered, exp.Limit, exp.Distinct, exp.With, exp.CTE, exp.Subquery,
          exp.TableAlias, exp.Table, exp.Column, exp.Identifier, exp.Alias, exp.Star,
          exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.And, exp.Or, exp.Not, exp.Is,
          exp.Exists, exp.Tuple, exp.Case, exp.If, exp.Coalesce, exp.Count, exp.Sum,
          exp.Avg, exp.Min, exp.Max, exp.Neg, exp.Var, exp.JSONPath, exp.JSONPathRoot,
          exp.JSONPathKey, exp.Boolean)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul)
_PATH_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# RLIKE patterns read alike by Java's regex and RE2: literal characters, groups without
# flags, alternation, classes of literals and ranges, quantifiers, a leading ^, \d, \w and
# escaped punctuation. No `.` or `$` (line terminators differ), no `\s`, no flags.
_SAFE_REGEX = re.compile(r"""^\^?(?:[A-Za-z0-9 _\-:/=,;@#%&'"<>~!]|\((?!\?)|\)|\||[*+?]|
    \{\d+(?:,\d*)?\}|\\[dw]|\\[.\[\]{}()*+?^$|\\/-]|\[\^?(?:[A-Za-z0-9 _:/=,;@#%&'"<>~!.]|
    \\[.\[\]\\^-]|-(?!\]))+\])*$""", re.VERBOSE)
# DuckDB raises this (`error()`) where a value would not be rendered as Spark renders it;
# the engine then hands the statement to Spark.
NOT_IDENTICAL_MARK = "shoal:not-identical"
_HAS_RE = re.compile(r"^\(\?i\)\(\^\|\[\^A-Za-z0-9\]\)([A-Za-z0-9]+)\(\$\|\[\^A-Za-z0-9\]\)\Z")


class NotLocal(Exception):
    """The embedded engine must not answer this statement; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LocalStatement:
    sql: str                        # DuckDB SQL over the scan views
    names: list[str]                # Spark's names of the answer's columns, in order
    spark_types: list[pa.DataType]  # and their Arrow types as Spark's answer has them
    functions: frozenset[str] = frozenset()     # shoal's functions the SQL calls


def spark_sql_type(kind: str) -> str:
    """The Spark SQL type of a view column of shoal type `kind` (its Arrow shape, see
    `shoal.query.scan_read`)."""
    return {"bool": "BOOLEAN", "int": "INT", "long": "BIGINT", "real": "DOUBLE",
            "string": "STRING", "timestamp": "TIMESTAMP", "dynamic": "STRING",
            "bytes": "BINARY", "vector": "ARRAY<FLOAT>",
            "headers": "ARRAY<STRUCT<key STRING, value BINARY>>"}[kind]


def to_local(tree: exp.Expr, views: Mapping[str, Mapping[str, str]],
             sql_text: str) -> LocalStatement:
    """DuckDB SQL for the Spark statement `tree` over `views` (view -> column -> Spark SQL
    type), or `NotLocal`. `sql_text` is what the user wrote (for lexical checks)."""
    if "\\" in sql_text:
        raise NotLocal("backslash escapes in the statement (Spark and DuckDB read them "
                       "differently)")
    original = tree.copy()
    try:
        typed = qualify(tree.copy(), dialect="spark", schema=dict(views),
                        validate_qualify_columns=True, identify=False)
        typed = annotate_types(typed, schema=dict(views), dialect="spark")
    except (OptimizeError, SqlglotError) as e:
        raise NotLocal(f"the statement could not be resolved for the local engine ({e})"
                       ) from e
    except Exception as e:      # sqlglot's optimizer on an unusual tree: Spark decides
        raise NotLocal(f"the statement could not be typed ({type(e).__name__}: {e})"
                       ) from e
    for lit in typed.find_all(exp.Literal):       # the narrowest reason first
        _vet(lit)
    for node in typed.walk():
        _vet(node)
    names = _output_names(original, typed)
    types = [_arrow_type(s) for s in _leftmost(typed).selects]
    functions = frozenset(str(a.this).lower() for a in typed.find_all(exp.Anonymous))
    # The vetted functions first, innermost first (a rewrite copies its operands), with
    # their operands' Spark types taken before anything is rewritten.
    pending = [(node, _operand_kinds(node)) for node in reversed(list(typed.walk()))
               if type(node) in FUNCTIONS and FUNCTIONS[type(node)].rewrite is not None]
    for node, kinds in pending:
        rewrite = FUNCTIONS[type(node)].rewrite
        assert rewrite is not None
        node.replace(rewrite(node, kinds))
    for node in list(typed.walk()):
        _rewrite(node)
    try:
        sql = typed.sql(dialect="duckdb", identify=True)
    except SqlglotError as e:
        raise NotLocal(f"no DuckDB form for the statement ({e})") from None
    return LocalStatement(sql, names, types, functions)


# ---- the allow-list -------------------------------------------------------------------------
def _type(node: exp.Expr) -> exp.DType | None:
    """The Spark type of `node`: sqlglot's annotation, except where Spark's rules are
    applied here (literals, shoal's functions, the branches of COALESCE / CASE / IF)."""
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in _BYTE_TYPES:
        return _BYTE_TYPES[str(node.this).lower()]
    if isinstance(node, exp.Paren):
        return _type(node.this)
    rule = FUNCTIONS.get(type(node))
    if rule is not None:
        return rule.result(node)
    if isinstance(node, exp.Neg):
        return _type(node.this)
    if isinstance(node, exp.TimestampTrunc):
        return T.TIMESTAMPTZ
    if isinstance(node, exp.Column) and not node.table:
        target = _select_alias(node)        # ORDER BY / GROUP BY naming a projection
        if target is not None:
            return _type(target)
    if isinstance(node, exp.Literal) and not node.is_string:
        if not re.fullmatch(r"\d+", node.name):
            return None
        return T.INT if int(node.name) < 2**31 else T.BIGINT
    if isinstance(node, (exp.Coalesce, exp.Case, exp.If)):
        if isinstance(node, exp.Coalesce):
            branches = [node.this, *node.expressions]
        elif isinstance(node, exp.If):
            branches = [node.args.get("true"), node.args.get("false")]
        else:
            branches = [i.args.get("true") for i in node.args.get("ifs") or []]
            branches.append(node.args.get("default"))
        kinds = {_type(b) for b in branches if b is not None and not isinstance(b, exp.Null)}
        if len(kinds) == 1:
            return kinds.pop()
        known = [k for k in kinds if k in _WIDENING]
        if kinds and len(known) == len(kinds):
            return max(known, key=_WIDENING.index)
        return None
    t = node.type
    if t is None or t.this in (T.UNKNOWN, T.NULL):
        return None
    return t.this


def _select_alias(col: exp.Column) -> exp.Expr | None:
    select = col.find_ancestor(exp.Select)
    if select is None:
        return None
    for e in select.selects:
        if isinstance(e, exp.Alias) and e.alias == col.name:
            return e.this
    return None


def _family(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Null):
        return "null"
    t = _type(node)
    return _FAMILY.get(t) if t is not None else None


def _describe(node: exp.Expr) -> str:
    text = node.sql(dialect="spark")
    return text if len(text) <= 80 else text[:77] + "..."


def _vet(node: exp.Expr) -> None:
    if isinstance(node, exp.Literal):
        if not node.is_string and not re.fullmatch(r"\d+", node.name):
            raise NotLocal(f"the decimal literal {node.name} (decimal arithmetic)")
        return
    if isinstance(node, exp.Union):
        return
    if isinstance(node, (exp.Intersect, exp.Except)):
        raise NotLocal(f"{node.key.upper()} (set semantics differ between the engines)")
    if isinstance(node, exp.Distinct) and node.args.get("on") is not None:
        raise NotLocal("DISTINCT ON")
    if isinstance(node, exp.Ordered):
        if _family(node.this) is None:
            raise NotLocal(f"ORDER BY {_describe(node.this)} (not a plain scalar type)")
        return
    if isinstance(node, _COMPARISONS):
        _same_family(node, node.this, node.expression)
        return
    if isinstance(node, exp.Between):
        for bound in (node.args.get("low"), node.args.get("high")):
            _same_family(node, node.this, bound)
        return
    if isinstance(node, exp.In):
        if node.args.get("query") is not None:
            query = node.args["query"]
            sel = _leftmost(query.this if isinstance(query, exp.Subquery) else query)
            if len(sel.selects) != 1:
                raise NotLocal(f"IN over {len(sel.selects)} columns")
            _same_family(node, node.this, sel.selects[0])
        else:
            for value in node.expressions:
                _same_family(node, node.this, value)
        return
    rule = FUNCTIONS.get(type(node))
    if rule is not None:
        rule.vet(node)
        return
    if isinstance(node, _ARITHMETIC):
        for side in (node.this, node.expression):
            if _family(side) != "number":
                raise NotLocal(f"arithmetic on {_describe(side)} (only on numbers locally)")
        return
    if isinstance(node, (exp.Sum, exp.Avg)):
        if _family(node.this) != "number":
            raise NotLocal(f"{node.key}() over {_describe(node.this)}")
        return
    if isinstance(node, (exp.Min, exp.Max)):
        if _family(node.this) is None:
            raise NotLocal(f"{node.key}() over {_describe(node.this)} (not a plain scalar)")
        return
    if isinstance(node, exp.Coalesce):
        args = [node.this, *node.expressions]
        for a in args[1:]:
            _same_family(node, args[0], a)
        return
    if isinstance(node, exp.Like):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise NotLocal("LIKE with a pattern that is not a string literal")
        if node.args.get("escape") is not None:
            raise NotLocal("LIKE ... ESCAPE")
        if _family(node.this) != "string":
            raise NotLocal(f"LIKE on {_describe(node.this)}")
        return
    if isinstance(node, exp.RegexpLike):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise NotLocal("RLIKE with a pattern that is not a string literal")
        if node.args.get("flag") is not None:
            raise NotLocal("regular expression flags")
        if not (_HAS_RE.match(pattern.name) or _SAFE_REGEX.match(pattern.name)):
            raise NotLocal(f"the regular expression {pattern.name!r} (Java's and RE2's "
                           "dialects may read it differently)")
        if _family(node.this) != "string":
            raise NotLocal(f"RLIKE on {_describe(node.this)}")
        return
    if isinstance(node, exp.TimestampTrunc):
        unit = node.args.get("unit")
        name = unit.name.upper() if isinstance(unit, (exp.Var, exp.Literal)) else ""
        if name not in _TRUNC_UNITS:
            raise NotLocal(f"date_trunc unit {name or (unit and _describe(unit))!r}")
        if _family(node.this) != "timestamp":
            raise NotLocal(f"date_trunc of {_describe(node.this)}")
        return
    if isinstance(node, exp.JSONExtractScalar):
        path = node.expression
        keys = path.expressions[1:] if isinstance(path, exp.JSONPath) else None
        if not keys or not all(isinstance(k, exp.JSONPathKey) and _PATH_KEY.match(
                str(k.this)) for k in keys) or not isinstance(
                path.expressions[0], exp.JSONPathRoot):
            raise NotLocal(f"the JSON path of {_describe(node)} (only $.key.key locally)")
        if _family(node.this) != "string":
            raise NotLocal(f"get_json_object on {_describe(node.this)}")
        return
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name not in BYTE_FUNCTIONS:
            raise NotLocal(f"function {name}() is not on the local engine's vetted list")
        order = node.expressions[1] if len(node.expressions) > 1 else None
        if not (isinstance(order, exp.Literal) and order.is_string):
            raise NotLocal(f"{name}() with a byte order that is not a string literal")
        return
    if isinstance(node, exp.Cast) and _is_ts_literal(node):
        return
    if isinstance(node, exp.Cast):
        raise NotLocal(f"CAST ({_describe(node)}): ANSI casts and their text forms differ")
    if isinstance(node, exp.DataType) and isinstance(node.parent, exp.Cast) and _is_ts_literal(
            node.parent):
        return
    if isinstance(node, exp.Window):
        raise NotLocal("window functions")
    if isinstance(node, _PLAIN):
        return
    if isinstance(node, exp.Func):
        raise NotLocal(f"function {node.sql_name().lower()}() is not on the local engine's "
                       "vetted list")
    raise NotLocal(f"{node.key.upper()} ({_describe(node)}) is not on the local engine's "
                   "vetted list")


def _is_ts_literal(cast: exp.Cast) -> bool:
    return (isinstance(cast.this, exp.Literal) and cast.this.is_string
            and cast.to.is_type(*_TIMESTAMPS))


def _same_family(node: exp.Expr, a: exp.Expr, b: exp.Expr | None) -> None:
    if b is None:
        return
    fa, fb = _family(a), _family(b)
    if fa == "null" or fb == "null":
        return
    if {fa, fb} == {"timestamp", "string"}:
        lit = b if fa == "timestamp" else a
        if isinstance(lit, exp.Literal) and lit.is_string:
            if _timestamp_us_as_ns(lit.name) is None:
                raise NotLocal(f"the timestamp literal {lit.name!r} (not a form whose "
                               "reading is certain)")
            return
    if fa is None or fb is None or fa != fb:
        raise NotLocal(f"{_describe(node)} compares {fa or 'an untyped value'} with "
                       f"{fb or 'an untyped value'} (Spark's implicit casts)")


# ---- the function surface: Spark's meaning on the embedded engine ---------------------------
_INTEGERS = (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT)
_INT_LIMIT = 2**31 - 1


def _mark(why: str) -> exp.Expr:
    """DuckDB's `error()` carrying the not-identical mark and why: the row is one the
    embedded engine would answer differently, so the statement goes to Spark."""
    return exp.Anonymous(this="error", expressions=[exp.Literal.string(
        f"{NOT_IDENTICAL_MARK}: {why}")])


def _fn(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _cast(e: exp.Expr, to: str) -> exp.Expr:
    return exp.Cast(this=e, to=exp.DataType.build(to))


def _case(when: exp.Expr, then: exp.Expr, default: exp.Expr) -> exp.Expr:
    return exp.Paren(this=exp.Case(ifs=[exp.If(this=when, true=then)], default=default))


def _int_literal(e: exp.Expr | None) -> int | None:
    """The value of an integer literal (`-2` included), else None."""
    if isinstance(e, exp.Paren):
        return _int_literal(e.this)
    if isinstance(e, exp.Neg):
        v = _int_literal(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string and re.fullmatch(r"\d+", e.name):
        return int(e.name)
    return None


def _operand_kinds(node: exp.Expr) -> tuple[exp.DType | None, exp.DType | None]:
    a, b = node.this, node.args.get("expression")
    return (_type(a) if isinstance(a, exp.Expr) else None,
            _type(b) if isinstance(b, exp.Expr) else None)


def _widest(args: list[exp.Expr]) -> exp.DType | None:
    kinds = {_type(a) for a in args if not isinstance(a, exp.Null)}
    if len(kinds) == 1:
        return kinds.pop()
    if kinds and all(k in _WIDENING for k in kinds):
        return max(kinds, key=lambda k: _WIDENING.index(k) if k is not None else -1)
    families = {_FAMILY.get(k) for k in kinds if k is not None}   # STRING, VARCHAR
    if families == {"string"}:
        return T.VARCHAR
    if families == {"timestamp"}:
        return T.TIMESTAMPTZ
    return None


def _need(node: exp.Expr, arg: exp.Expr | None, family: str, what: str) -> None:
    if arg is None or isinstance(arg, exp.Null):
        return
    if _family(arg) != family:
        raise NotLocal(f"{what}() on {_describe(arg)} (only on {family}s locally)")


@dataclass(frozen=True)
class Function:
    """One Spark function the embedded engine answers: its names, how a call is vetted,
    its Spark result type, and the DuckDB expression with Spark's answer (None: DuckDB's
    own function already answers as Spark does). `note` is what docs/sql.md says."""
    names: str
    vet: Callable[[exp.Expr], None]
    result: Callable[[exp.Expr], exp.DType | None]
    rewrite: Callable[[exp.Expr, tuple], exp.Expr] | None
    note: str


def _vet_args(name: str, family: str, count: tuple[int, int] | None = None):
    """A vetting step: `count` (min, max) arguments when given, each of `family`."""
    def vet(node: exp.Expr) -> None:
        args = list(node.iter_expressions())
        if count is not None and not count[0] <= len(args) <= count[1]:
            raise NotLocal(f"{name}() with {len(args)} arguments")
        for a in args:
            _need(node, a, family, name)
    return vet


def _strings(name: str, count: tuple[int, int] | None = None):
    return _vet_args(name, "string", count)


def _ascii_only(fn: str):
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        s = node.this
        # Java's case mapping and DuckDB's differ beyond ASCII (final sigma, dotted I, ß):
        # a non-ASCII value is Spark's to map. strlen counts bytes, length code points.
        return _case(exp.NEQ(this=_fn("strlen", s.copy()), expression=_fn("length", s.copy())),
                     _mark(f"{fn}() of non-ASCII text"), _fn(fn, s))
    return rewrite


def _vet_trim(node: exp.Expr) -> None:
    if node.args.get("expression") is not None or node.args.get("collation") is not None:
        raise NotLocal("trim() of characters other than spaces")
    _need(node, node.this, "string", "trim")


def _rewrite_trim(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # DuckDB's one-argument trim also strips other white space (U+00A0): name the space.
    fn = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(
        str(node.args.get("position") or "").upper(), "trim")
    return _fn(fn, node.this, exp.Literal.string(" "))


def _vet_substring(node: exp.Expr) -> None:
    _need(node, node.this, "string", "substring")
    for key in ("start", "length"):
        arg = node.args.get(key)
        if arg is None and key == "length":
            continue
        v = _int_literal(arg)
        if v is None or abs(v) > _INT_LIMIT:
            raise NotLocal(f"substring() with a {key} that is not an integer literal")


def _rewrite_substring(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark: start = pos - 1 (pos > 0), length + pos (pos < 0), 0 (pos = 0); end = start +
    # len, computed before start is clamped to 0; nothing when start >= end.
    s = node.this
    pos = _int_literal(node.args["start"])
    ln = node.args.get("length")
    n = _int_literal(ln) if ln is not None else None
    assert pos is not None          # vetted: an integer literal
    if pos > 0:
        start: exp.Expr = exp.Literal.number(pos - 1)
    elif pos < 0:
        start = exp.Paren(this=exp.Sub(this=_fn("length", s.copy()),
                                       expression=exp.Literal.number(-pos)))
    else:
        start = exp.Literal.number(0)
    from_ = _fn("greatest", start.copy(), exp.Literal.number(0))
    one_based = exp.Add(this=from_.copy(), expression=exp.Literal.number(1))
    if n is None:
        return _fn("substring", s, one_based)
    end = exp.Paren(this=exp.Add(this=start, expression=exp.Literal.number(n))
                    ) if n >= 0 else exp.Paren(this=exp.Sub(
                        this=start, expression=exp.Literal.number(-n)))
    taken = exp.Sub(this=end.copy(), expression=from_.copy())
    empty = _fn("substring", s.copy(), exp.Literal.number(1), exp.Literal.number(0))
    return _case(exp.GTE(this=from_, expression=end), empty,     # '' (null for null)
                 _fn("substring", s, one_based, taken))


def _vet_pad(node: exp.Expr) -> None:
    _need(node, node.this, "string", "lpad/rpad")
    if _type(node.expression) not in (T.TINYINT, T.SMALLINT, T.INT):
        raise NotLocal("lpad/rpad with a length that is not an int")
    fill = node.args.get("fill_pattern")
    # An empty pad: Spark gives the text (cut to the length), DuckDB raises.
    if fill is not None and not (isinstance(fill, exp.Literal) and fill.is_string
                                 and fill.name):
        raise NotLocal("lpad/rpad with a pad that is not a non-empty string literal")


def _vet_instr(node: exp.Expr) -> None:
    if node.args.get("position") is not None or node.args.get("occurrence") is not None:
        raise NotLocal("locate() with a start position")
    _need(node, node.this, "string", "instr")
    _need(node, node.args.get("substr"), "string", "instr")


def _vet_numbers(name: str, arity: int = 1):
    return _vet_args(name, "number", (arity, arity))


def _rewrite_ceil_floor(fn: str):
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        x = node.this
        if kinds[0] in _INTEGERS:
            return _cast(x, "BIGINT")
        # Spark answers a bigint; past its range (and NaN) the answers differ: Spark's.
        out = exp.Not(this=exp.Paren(this=exp.Between(
            this=x.copy(), low=exp.Literal.number("-9.2e18"),
            high=exp.Literal.number("9.2e18"))))
        return _case(out, _mark(f"{fn}() beyond bigint"), _cast(_fn(fn, x), "BIGINT"))
    return rewrite


def _rewrite_sign(node: exp.Expr, kinds: tuple) -> exp.Expr:
    x = node.this
    if kinds[0] in _INTEGERS:
        return _cast(_fn("sign", x), "DOUBLE")
    # Java's signum keeps -0.0 and NaN; DuckDB's sign answers 0 for both.
    keep = exp.Or(this=exp.EQ(this=x.copy(), expression=exp.Literal.number(0)),
                  expression=_fn("isnan", x.copy()))
    return _case(keep, _cast(x.copy(), "DOUBLE"), _cast(_fn("sign", x), "DOUBLE"))


def _rewrite_sqrt(node: exp.Expr, kinds: tuple) -> exp.Expr:
    x = node.this       # Spark: NaN below zero; DuckDB raises
    return _case(exp.LT(this=x.copy(), expression=exp.Literal.number(0)),
                 _cast(exp.Literal.string("NaN"), "DOUBLE"), _fn("sqrt", _cast(x, "DOUBLE")))


def _vet_least(node: exp.Expr) -> None:
    args = [node.this, *node.expressions]
    if len(args) < 2:
        raise NotLocal("least/greatest of one value")
    for a in args[1:]:
        _same_family(node, args[0], a)
    if _family(args[0]) not in ("number", "string", "timestamp"):
        raise NotLocal(f"least/greatest of {_describe(args[0])}")
    if _widest(args) is None:
        raise NotLocal("least/greatest over mixed types")


def _vet_binary_numbers(name: str, integers: bool = False):
    def vet(node: exp.Expr) -> None:
        for side in (node.this, node.expression):
            if _family(side) != "number" or (integers and _type(side) not in _INTEGERS):
                raise NotLocal(f"{name} on {_describe(side)} (only on "
                               f"{'integers' if integers else 'numbers'} locally)")
    return vet


def _zero_divisor(node: exp.Expr, answer: exp.Expr, what: str) -> exp.Expr:
    # Spark (ANSI) raises on a zero divisor, DuckDB answers null: Spark's to say.
    return _case(exp.EQ(this=node.expression.copy(), expression=exp.Literal.number(0)),
                 _mark(f"{what} by zero"), answer)


def _rewrite_divide(node: exp.Expr, kinds: tuple) -> exp.Expr:
    q = exp.Div(this=_cast(node.this.copy(), "DOUBLE"),
                expression=_cast(node.expression.copy(), "DOUBLE"))
    return _zero_divisor(node, q, "division")


def _rewrite_intdiv(node: exp.Expr, kinds: tuple) -> exp.Expr:
    q = exp.IntDiv(this=_cast(node.this.copy(), "BIGINT"),
                   expression=_cast(node.expression.copy(), "BIGINT"))
    return _zero_divisor(node, q, "div")


def _rewrite_mod(node: exp.Expr, kinds: tuple) -> exp.Expr:
    r: exp.Expr = exp.Mod(this=node.this.copy(), expression=node.expression.copy())
    if kinds[0] in _INTEGERS and kinds[1] in _INTEGERS:
        # Java answers 0 for MIN % -1, DuckDB raises an overflow.
        r = _case(exp.EQ(this=node.expression.copy(), expression=exp.Literal.number(-1)),
                  exp.Sub(this=node.this.copy(), expression=node.this.copy()), r)
    return _zero_divisor(node, r, "remainder")


def _same(node: exp.Expr) -> exp.DType | None:
    return _type(node.this)


def _fixed(t: exp.DType) -> Callable[[exp.Expr], exp.DType]:
    return lambda node: t


FUNCTIONS: dict[type[exp.Expr], Function] = {
    exp.Lower: Function("lower, lcase", _strings("lower"), _fixed(T.VARCHAR),
                        _ascii_only("lower"), "ASCII text; other text goes to Spark"),
    exp.Upper: Function("upper, ucase", _strings("upper"), _fixed(T.VARCHAR),
                        _ascii_only("upper"), "ASCII text; other text goes to Spark"),
    exp.Length: Function("length, char_length, character_length", _strings("length"),
                         _fixed(T.INT), lambda n, k: _cast(_fn("length", n.this), "INT"),
                         "code points, as Spark counts"),
    exp.Trim: Function("trim, ltrim, rtrim", _vet_trim, _fixed(T.VARCHAR), _rewrite_trim,
                       "spaces only (Spark's rule); trimming other characters goes to Spark"),
    exp.Substring: Function("substring, substr", _vet_substring, _fixed(T.VARCHAR),
                            _rewrite_substring,
                            "integer literal start and length; Spark's rules for zero and "
                            "negative starts"),
    exp.Concat: Function("concat", _strings("concat", (1, 1000)), _fixed(T.VARCHAR),
                         lambda n, k: _cast(n.copy(), "VARCHAR"),     # `'a' || NULL`
                         "of strings; null if any argument is null"),
    exp.ConcatWs: Function("concat_ws", _strings("concat_ws", (2, 1000)), _fixed(T.VARCHAR),
                           None, "of strings (not arrays); null arguments skipped"),
    exp.Replace: Function("replace", _strings("replace", (3, 3)), _fixed(T.VARCHAR), None,
                          "three arguments"),
    exp.Pad: Function("lpad, rpad", _vet_pad, _fixed(T.VARCHAR), None,
                      "a non-empty literal pad; a shorter length cuts the text"),
    exp.StrPosition: Function("instr", _vet_instr, _fixed(T.INT),
                              lambda n, k: _cast(_fn("strpos", n.this, n.args["substr"]),
                                                 "INT"),
                              "code point position, 0 when absent"),
    exp.StartsWith: Function("startswith", _strings("startswith", (2, 2)),
                             _fixed(T.BOOLEAN), None, "of strings"),
    exp.EndsWith: Function("endswith", _strings("endswith", (2, 2)), _fixed(T.BOOLEAN),
                           None, "of strings"),
    exp.Contains: Function("contains", _strings("contains", (2, 2)), _fixed(T.BOOLEAN),
                           None, "of strings"),
    exp.Abs: Function("abs", _vet_numbers("abs"), _same, None,
                      "an overflow (abs of the smallest integer) raises in both"),
    exp.Ceil: Function("ceil, ceiling", _vet_numbers("ceil"), _fixed(T.BIGINT),
                       _rewrite_ceil_floor("ceil"),
                       "bigint answer; without a scale; a double beyond bigint or NaN goes "
                       "to Spark"),
    exp.Floor: Function("floor", _vet_numbers("floor"), _fixed(T.BIGINT),
                        _rewrite_ceil_floor("floor"),
                        "bigint answer; without a scale; a double beyond bigint or NaN goes "
                        "to Spark"),
    exp.Sign: Function("sign, signum", _vet_numbers("sign"), _fixed(T.DOUBLE),
                       _rewrite_sign, "double answer; keeps -0.0 and NaN as Java does"),
    exp.Sqrt: Function("sqrt", _vet_numbers("sqrt"), _fixed(T.DOUBLE), _rewrite_sqrt,
                       "NaN below zero, as Spark"),
    exp.Least: Function("least", _vet_least, lambda n: _widest([n.this, *n.expressions]),
                        None, "nulls skipped; NaN above every number"),
    exp.Greatest: Function("greatest", _vet_least,
                           lambda n: _widest([n.this, *n.expressions]), None,
                           "nulls skipped; NaN above every number"),
    exp.Div: Function("/", _vet_binary_numbers("/"), _fixed(T.DOUBLE), _rewrite_divide,
                      "double answer; a zero divisor goes to Spark (which raises)"),
    exp.IntDiv: Function("div", _vet_binary_numbers("DIV", integers=True), _fixed(T.BIGINT),
                         _rewrite_intdiv,
                         "integers, bigint answer; a zero divisor goes to Spark"),
    exp.Mod: Function("%, mod", _vet_binary_numbers("%"),
                      lambda n: _widest([n.this, n.expression]), _rewrite_mod,
                      "sign of the dividend; a zero divisor goes to Spark"),
}

# Functions users reach for that stay on Spark, and why (docs/sql.md lists them).
SPARK_ONLY: dict[str, str] = {
    "round, bround": "Spark rounds the decimal form Java prints for a double (this JVM's "
                     "Double.toString is not always the shortest form), not proven equal",
    "pow, power, exp, ln, log, log10, log2": "Java's and the C library's results may "
                                             "differ in the last bit",
    "split": "Spark's delimiter is a Java regular expression",
    "regexp_extract, regexp_replace": "Java's and RE2's regular expressions differ",
}


def function_table_markdown() -> str:
    """The table docs/sql.md shows: what the embedded engine answers, and what stays on
    Spark, from the same table `to_local` vets with."""
    lines = ["| function | engine | rule |", "|---|---|---|"]
    for f in FUNCTIONS.values():
        lines.append(f"| `{f.names}` | embedded | {f.note} |")
    for names, why in SPARK_ONLY.items():
        lines.append(f"| `{names}` | Spark | {why} |")
    return "\n".join(lines) + "\n"


# ---- output names and types -----------------------------------------------------------------
def _leftmost(node: exp.Expr) -> exp.Select:
    while not isinstance(node, exp.Select):
        if isinstance(node, (exp.SetOperation, exp.Subquery)):
            node = node.this
        else:
            raise NotLocal(f"a {node.key.upper()} at the top of the statement")
    return node


def _output_names(original: exp.Expr, typed: exp.Expr) -> list[str]:
    """Spark's column names of the answer, from the statement as written (`original`) and
    its star expansions (`typed`)."""
    written = _leftmost(original).selects
    expanded = _leftmost(typed).selects
    stars = [e for e in written if _is_star(e)]
    if len(stars) > 1:
        raise NotLocal("more than one * in the select list")
    if stars and any(a.alias != a.alias.lower() for a in original.find_all(exp.Alias)):
        raise NotLocal("* over columns with mixed-case aliases")
    width = len(expanded) - (len(written) - len(stars))
    names: list[str] = []
    i = 0
    for e in written:
        if _is_star(e):
            names.extend(x.alias_or_name for x in expanded[i:i + width])
            i += width
            continue
        names.append(_spark_name(e))
        i += 1
    if i != len(expanded):
        raise NotLocal("the select list could not be matched to its expansion")
    return names


def _is_star(e: exp.Expr) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this,
                                                                                  exp.Star))


def _spark_name(e: exp.Expr) -> str:
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        if e.name != e.name.lower():
            raise NotLocal(f"the column {e.name} written in another case than its name")
        return e.name
    fn = _NAMED_AGGREGATES.get(type(e))
    if fn is not None:
        arg = e.this
        if isinstance(arg, exp.Star) and fn == "count":
            return "count(1)"
        distinct = isinstance(arg, exp.Distinct)
        if distinct and len(arg.expressions) == 1:
            arg = arg.expressions[0]
        if isinstance(arg, exp.Column) and not arg.table and arg.name == arg.name.lower():
            return f"{fn}(DISTINCT {arg.name})" if distinct else f"{fn}({arg.name})"
    raise NotLocal(f"the unaliased expression {_describe(e)} (Spark's generated column "
                   "name; give it an alias)")


def _arrow_type(select: exp.Expr) -> pa.DataType:
    node = select.this if isinstance(select, exp.Alias) else select
    t = _type(node)
    if t in _ARROW:
        return _ARROW[t]
    dtype = node.type
    if dtype is not None and dtype.this == T.ARRAY:
        inner = dtype.expressions[0] if dtype.expressions else None
        if inner is not None and inner.this == T.FLOAT:
            return pa.list_(pa.field("element", pa.float32()))
        if inner is not None and inner.this == T.STRUCT:
            return pa.list_(pa.field("element", pa.struct(
                [pa.field("key", pa.string()), pa.field("value", pa.binary())])))
    raise NotLocal(f"the output column {_describe(select)} has a type the local engine "
                   f"does not reproduce ({dtype.sql('spark') if dtype else 'unknown'})")


# ---- rewrites into DuckDB's reading ---------------------------------------------------------
def _rewrite(node: exp.Expr) -> None:
    if isinstance(node, exp.RegexpLike):
        m = _HAS_RE.match(node.expression.name)
        if m:       # RE2's (?i) folds Unicode (K and the Kelvin sign); Java's does not
            token = "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c
                            for c in m.group(1))
            node.set("expression", exp.Literal.string(
                f"(^|[^A-Za-z0-9]){token}($|[^A-Za-z0-9])"))
        return
    if isinstance(node, _COMPARISONS):
        _replace_ts_literal(node.this, node.expression)
        _replace_ts_literal(node.expression, node.this)
        return
    if isinstance(node, exp.Between):
        _replace_ts_literal(node.this, node.args.get("low"))
        _replace_ts_literal(node.this, node.args.get("high"))
        return
    if isinstance(node, exp.In):
        for value in node.expressions:
            _replace_ts_literal(node.this, value)
        return
    if isinstance(node, exp.Cast) and _is_ts_literal(node):
        ns = _timestamp_us_as_ns(node.this.name)
        if ns is None:
            raise NotLocal(f"the timestamp literal {node.this.name!r}")
        node.replace(_ts_literal(ns))
        return
    if isinstance(node, exp.JSONExtractScalar):
        # Spark re-renders JSON numbers and nested values with Jackson (1.0E7), DuckDB with
        # yyjson (10000000.0): only strings, integers, booleans and nulls are answered here.
        kind = exp.Anonymous(this="json_type", expressions=[node.this.copy(),
                                                            node.expression.copy()])
        risky = exp.In(this=kind, expressions=[exp.Literal.string(k) for k in
                                               ("DOUBLE", "OBJECT", "ARRAY")])
        fail = _mark("a JSON number or object")
        node.replace(exp.Case(ifs=[exp.If(this=risky, true=fail)], default=node.copy()))


def _replace_ts_literal(column: exp.Expr, value: exp.Expr | None) -> None:
    """A string literal compared with a timestamp, read as Spark reads it (UTC)."""
    if value is None or not (isinstance(value, exp.Literal) and value.is_string):
        return
    if _family(column) != "timestamp":
        return
    ns = _timestamp_us_as_ns(value.name)
    if ns is None:
        raise NotLocal(f"the timestamp literal {value.name!r}")
    value.replace(_ts_literal(ns))


def _ts_literal(ns: int) -> exp.Expr:
    """A DuckDB TIMESTAMP (no zone: the local engine reads timestamps as UTC wall time)."""
    from datetime import datetime

    us = ns // 1_000
    dt = datetime.fromtimestamp(us // 1_000_000, tz=UTC)
    text = dt.strftime("%Y-%m-%d %H:%M:%S") + f".{us % 1_000_000:06d}"
    return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("TIMESTAMP"))
