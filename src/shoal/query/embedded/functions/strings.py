"""String functions with Spark's meaning on the embedded engine."""

from __future__ import annotations

from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, INT_LIMIT, SPARK_ONLY, T, Function, NotLocal,
                                          call, case_when, cast_to, fixed_type, int_literal, need,
                                          not_identical, spark_type, string_args)


def _ascii_only(fn: str):
    def rewrite(node: exp.Expr, kinds: tuple) -> exp.Expr:
        s = node.this
        # Java's case mapping and DuckDB's differ beyond ASCII (final sigma, dotted I, ß):
        # a non-ASCII value is Spark's to map. strlen counts bytes, length code points.
        differs = exp.NEQ(this=call("strlen", s.copy()), expression=call("length", s.copy()))
        return case_when(differs, not_identical(f"{fn}() of non-ASCII text"), call(fn, s))
    return rewrite


def _vet_trim(node: exp.Expr) -> None:
    if node.args.get("expression") is not None or node.args.get("collation") is not None:
        raise NotLocal("trim() of characters other than spaces")
    need(node, node.this, "string", "trim")


def _rewrite_trim(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # DuckDB's one-argument trim also strips other white space (U+00A0): name the space.
    fn = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(
        str(node.args.get("position") or "").upper(), "trim")
    return call(fn, node.this, exp.Literal.string(" "))


def _vet_substring(node: exp.Expr) -> None:
    need(node, node.this, "string", "substring")
    for key in ("start", "length"):
        arg = node.args.get(key)
        if arg is None and key == "length":
            continue
        v = int_literal(arg)
        if v is None or abs(v) > INT_LIMIT:
            raise NotLocal(f"substring() with a {key} that is not an integer literal")


def _rewrite_substring(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark: start = pos - 1 (pos > 0), length + pos (pos < 0), 0 (pos = 0); end = start +
    # len, computed before start is clamped to 0; nothing when start >= end.
    s = node.this
    pos = int_literal(node.args["start"])
    ln = node.args.get("length")
    n = int_literal(ln) if ln is not None else None
    assert pos is not None          # vetted: an integer literal
    if pos > 0:
        start: exp.Expr = exp.Literal.number(pos - 1)
    elif pos < 0:
        start = exp.Paren(this=exp.Sub(this=call("length", s.copy()),
                                       expression=exp.Literal.number(-pos)))
    else:
        start = exp.Literal.number(0)
    from_ = call("greatest", start.copy(), exp.Literal.number(0))
    one_based = exp.Add(this=from_.copy(), expression=exp.Literal.number(1))
    if n is None:
        return call("substring", s, one_based)
    end = exp.Paren(this=exp.Add(this=start, expression=exp.Literal.number(n))
                    ) if n >= 0 else exp.Paren(this=exp.Sub(
                        this=start, expression=exp.Literal.number(-n)))
    taken = exp.Sub(this=end.copy(), expression=from_.copy())
    empty = call("substring", s.copy(), exp.Literal.number(1), exp.Literal.number(0))
    return case_when(exp.GTE(this=from_, expression=end), empty,     # '' (null for null)
                 call("substring", s, one_based, taken))


def _vet_pad(node: exp.Expr) -> None:
    need(node, node.this, "string", "lpad/rpad")
    if spark_type(node.expression) not in (T.TINYINT, T.SMALLINT, T.INT):
        raise NotLocal("lpad/rpad with a length that is not an int")
    fill = node.args.get("fill_pattern")
    # An empty pad: Spark gives the text (cut to the length), DuckDB raises.
    if fill is not None and not (isinstance(fill, exp.Literal) and fill.is_string
                                 and fill.name):
        raise NotLocal("lpad/rpad with a pad that is not a non-empty string literal")


def _vet_instr(node: exp.Expr) -> None:
    if node.args.get("position") is not None or node.args.get("occurrence") is not None:
        raise NotLocal("locate() with a start position")
    need(node, node.this, "string", "instr")
    need(node, node.args.get("substr"), "string", "instr")


FUNCTIONS.update({
    exp.Lower: Function("lower, lcase", string_args("lower"), fixed_type(T.VARCHAR),
                        _ascii_only("lower"), "ASCII text; other text goes to Spark"),
    exp.Upper: Function("upper, ucase", string_args("upper"), fixed_type(T.VARCHAR),
                        _ascii_only("upper"), "ASCII text; other text goes to Spark"),
    exp.Length: Function("length, char_length, character_length", string_args("length"),
                         fixed_type(T.INT), lambda n, k: cast_to(call("length", n.this), "INT"),
                         "code points, as Spark counts"),
    exp.Trim: Function("trim, ltrim, rtrim", _vet_trim, fixed_type(T.VARCHAR), _rewrite_trim,
                       "spaces only (Spark's rule); trimming other characters goes to Spark"),
    exp.Substring: Function("substring, substr", _vet_substring, fixed_type(T.VARCHAR),
                            _rewrite_substring,
                            "integer literal start and length; Spark's rules for zero and "
                            "negative starts"),
    exp.Concat: Function("concat", string_args("concat", (1, 1000)), fixed_type(T.VARCHAR),
                         lambda n, k: cast_to(n.copy(), "VARCHAR"),     # `'a' || NULL`
                         "of strings; null if any argument is null"),
    exp.ConcatWs: Function("concat_ws", string_args("concat_ws", (2, 1000)), fixed_type(T.VARCHAR),
                           None, "of strings (not arrays); null arguments skipped"),
    exp.Replace: Function("replace", string_args("replace", (3, 3)), fixed_type(T.VARCHAR), None,
                          "three arguments"),
    exp.Pad: Function("lpad, rpad", _vet_pad, fixed_type(T.VARCHAR), None,
                      "a non-empty literal pad; a shorter length cuts the text"),
    exp.StrPosition: Function("instr", _vet_instr, fixed_type(T.INT),
                              lambda n, k: cast_to(call("strpos", n.this, n.args["substr"]),
                                                 "INT"),
                              "code point position, 0 when absent"),
    exp.StartsWith: Function("startswith", string_args("startswith", (2, 2)),
                             fixed_type(T.BOOLEAN), None, "of strings"),
    exp.EndsWith: Function("endswith", string_args("endswith", (2, 2)), fixed_type(T.BOOLEAN),
                           None, "of strings"),
    exp.Contains: Function("contains", string_args("contains", (2, 2)), fixed_type(T.BOOLEAN),
                           None, "of strings"),
})

SPARK_ONLY.update({
    "split": "Spark's delimiter is a Java regular expression",
    "regexp_extract, regexp_replace": "Java's and RE2's regular expressions differ",
})
