"""String functions with Spark's meaning on the embedded engine."""

from __future__ import annotations

from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, INT_LIMIT, INTEGERS, SPARK_ONLY, T, Function,
                                          NotLocal, call, case_when, cast_to, describe, fixed_type,
                                          int_literal, need, not_identical, spark_type,
                                          string_args)


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


def _non_ascii(*texts: exp.Expr) -> exp.Expr:
    # strlen counts bytes, length code points: they differ exactly beyond ASCII.
    tests = [exp.NEQ(this=call("strlen", t.copy()), expression=call("length", t.copy()))
             for t in texts]
    out: exp.Expr = tests[0]
    for t in tests[1:]:
        out = exp.Or(this=out, expression=t)
    return out


def _vet_instr(node: exp.Expr) -> None:
    if node.args.get("occurrence") is not None:
        raise NotLocal("instr() with an occurrence")
    pos = node.args.get("position")
    if pos is not None:
        v = int_literal(pos)
        if v is None or abs(v) > INT_LIMIT:
            raise NotLocal("locate() with a start position that is not an integer literal")
    need(node, node.this, "string", "instr")
    need(node, node.args.get("substr"), "string", "instr")


def _rewrite_instr(node: exp.Expr, kinds: tuple) -> exp.Expr:
    s, sub = node.this, node.args["substr"]
    found = cast_to(call("strpos", s.copy(), sub.copy()), "INT")
    pos = node.args.get("position")
    if pos is None:
        return found
    # Spark's locate(sub, s, pos): null for a null text, 0 for pos < 1, 1 for an empty
    # sub whatever pos is, else the position of sub at or after pos (0 when absent).
    p = int_literal(pos)
    assert p is not None
    nulls = exp.Or(this=exp.Is(this=s.copy(), expression=exp.Null()),
                   expression=exp.Is(this=sub.copy(), expression=exp.Null()))
    zero = exp.Literal.number(0)
    if p < 1:
        return case_when(nulls, exp.Null(), cast_to(zero, "INT"))
    tail = call("strpos", call("substring", s.copy(), exp.Literal.number(p)), sub.copy())
    at = case_when(exp.EQ(this=tail.copy(), expression=zero), zero,
                   exp.Add(this=tail, expression=exp.Literal.number(p - 1)))
    empty = exp.EQ(this=sub.copy(), expression=exp.Literal.string(""))
    answer = exp.Paren(this=exp.Case(ifs=[exp.If(this=nulls, true=exp.Null()),
                                          exp.If(this=empty, true=exp.Literal.number(1))],
                                     default=at))
    return cast_to(answer, "INT")


def _int_count(name: str, key: str):
    """A vetting step: a string and an int count (`key`)."""
    def vet(node: exp.Expr) -> None:
        need(node, node.this, "string", name)
        if spark_type(node.args[key]) not in (T.TINYINT, T.SMALLINT, T.INT):
            raise NotLocal(f"{name}() with a count that is not an int")
    return vet


def _vet_left_right(node: exp.Expr) -> None:
    need(node, node.this, "string", node.key)
    n = int_literal(node.expression)
    if n is None or abs(n) > INT_LIMIT:
        raise NotLocal(f"{node.key}() with a length that is not an integer literal")


def _rewrite_left(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark: substring(s, 1, n).
    return _rewrite_substring(exp.Substring(this=node.this, start=exp.Literal.number(1),
                                            length=node.expression), kinds)


def _rewrite_right(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark: '' for n <= 0 (null for null), else substring(s, -n).
    n = int_literal(node.expression)
    assert n is not None
    if n <= 0:
        return call("substring", node.this, exp.Literal.number(1), exp.Literal.number(0))
    return _rewrite_substring(exp.Substring(this=node.this, start=exp.Literal.number(-n)),
                              kinds)


def _vet_chr(node: exp.Expr) -> None:
    args = node.expressions
    if len(args) != 1 or node.args.get("charset"):
        raise NotLocal("chr() with other than one argument")
    if spark_type(args[0]) not in INTEGERS:
        raise NotLocal(f"chr() of {describe(args[0])} (only of integers locally)")


def _rewrite_chr(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark: '' below zero, else the character of the low byte (U+0000 .. U+00FF).
    n = node.expressions[0]
    low = cast_to(exp.Mod(this=n.copy(), expression=exp.Literal.number(256)), "INT")
    return case_when(exp.LT(this=n.copy(), expression=exp.Literal.number(0)),
                     exp.Literal.string(""), call("chr", low))


def _vet_levenshtein(node: exp.Expr) -> None:
    for key in ("ins_cost", "del_cost", "sub_cost", "max_dist"):
        if node.args.get(key) is not None:
            raise NotLocal("levenshtein() with a threshold")
    need(node, node.this, "string", "levenshtein")
    need(node, node.expression, "string", "levenshtein")


def _rewrite_levenshtein(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # DuckDB's counts bytes, Spark's characters: text beyond ASCII is Spark's.
    a, b = node.this, node.expression
    return case_when(_non_ascii(a, b), not_identical("levenshtein() of non-ASCII text"),
                     cast_to(call("levenshtein", a, b), "INT"))


def _rewrite_reverse(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # DuckDB reverses grapheme clusters (a letter and its combining marks stay in order),
    # Spark code points: text beyond ASCII is Spark's.
    s = node.this
    return case_when(_non_ascii(s), not_identical("reverse() of non-ASCII text"),
                     call("reverse", s))


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
    exp.StrPosition: Function("instr, locate, position", _vet_instr, fixed_type(T.INT),
                              _rewrite_instr, "code point position, 0 when absent; a start "
                              "position as an integer literal (Spark's rules below 1 and for "
                              "an empty needle)"),
    exp.Left: Function("left", _vet_left_right, fixed_type(T.VARCHAR), _rewrite_left,
                       "an integer literal length; '' for a length below 1"),
    exp.Right: Function("right", _vet_left_right, fixed_type(T.VARCHAR), _rewrite_right,
                        "an integer literal length; '' for a length below 1"),
    exp.Repeat: Function("repeat", _int_count("repeat", "times"), fixed_type(T.VARCHAR), None,
                         "an int count; '' below 1"),
    exp.Translate: Function("translate", string_args("translate", (3, 3)),
                            fixed_type(T.VARCHAR), None,
                            "by code point; the first of repeated characters wins"),
    exp.Ascii: Function("ascii", string_args("ascii", (1, 1)), fixed_type(T.INT), None,
                        "the first code point; 0 for ''"),
    exp.Chr: Function("chr, char", _vet_chr, fixed_type(T.VARCHAR), _rewrite_chr,
                      "of integers; the low byte's character, '' below zero"),
    exp.Levenshtein: Function("levenshtein", _vet_levenshtein, fixed_type(T.INT),
                              _rewrite_levenshtein,
                              "without a threshold; non-ASCII text goes to Spark"),
    exp.Reverse: Function("reverse", string_args("reverse", (1, 1)), fixed_type(T.VARCHAR),
                          _rewrite_reverse, "ASCII text; other text goes to Spark"),
    exp.StartsWith: Function("startswith", string_args("startswith", (2, 2)),
                             fixed_type(T.BOOLEAN), None, "of strings"),
    exp.EndsWith: Function("endswith", string_args("endswith", (2, 2)), fixed_type(T.BOOLEAN),
                           None, "of strings"),
    exp.Contains: Function("contains", string_args("contains", (2, 2)), fixed_type(T.BOOLEAN),
                           None, "of strings"),
})

SPARK_ONLY.update({
    "initcap": "Java's and DuckDB's word rules and case mapping differ",
    "btrim": "not vetted",
})
