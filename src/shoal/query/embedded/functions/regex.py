"""Regular expressions, LIKE / ILIKE and split() with Spark's meaning on the embedded engine.

Spark reads a pattern with Java's `java.util.regex`, DuckDB with RE2. `java_regex` reads a
pattern in a subset both read alike and gives RE2's spelling of it, or refuses it: literal
characters, escaped punctuation, `\\d \\w` (ASCII in both), `\\s` (spelled out: RE2's lacks
the vertical tab), `\\t \\n \\r \\f`, `\\A \\z`, classes of literals and ASCII ranges,
groups (plain and `(?:`), alternation, the quantifiers `* + ? {n} {n,} {n,m}` and their
lazy forms, `^`, `.` and `$`. Three things are read alike only for some texts, and a text
that is not one of them goes to Spark (the not-identical mark):
- `.`: Java's stops at \\r, U+0085, U+2028 and U+2029 as well as \\n, RE2's only at \\n;
- `$`: Java's also matches before a line terminator that ends the text, RE2's only at the
  end;
- a pattern that can match the empty string, where matches are repeated (replace, count):
  after an empty match Java steps one UTF-16 unit, into the middle of a character beyond
  U+FFFF, RE2 one character.
Everything else (lookaround, back references, flags, possessive quantifiers, `\\b`, Unicode
classes, nested classes) is refused with the reason, and the statement goes to Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from shoal.query.embedded.vetting import (FUNCTIONS, SPARK_ONLY, T, Function, NotLocal, call,
                                          case_when, cast_to, describe, family_of, fixed_type,
                                          int_literal, need, not_identical)

# Java's line terminators beyond \n: where `.` stops in Java and not in RE2.
_DOT_STOPS = "[\\r\\x{85}\\x{2028}\\x{2029}]"
# Every line terminator: where Java's `$` can match before the end of the text.
_LINE_ENDS = "[\\n\\r\\x{85}\\x{2028}\\x{2029}]"
_BEYOND_BMP = "[\\x{10000}-\\x{10FFFF}]"
_SPACE = "\\t\\n\\x0B\\f\\r "          # Java's \s (RE2's lacks \x0B)
_META = set("\\.[]{}()*+?^$|")
_PUNCT_ESCAPES = set(".[]{}()*+?^$|\\/-")    # `\c`: the character c in both dialects
_CONTROL_ESCAPES = {"t": "\\t", "n": "\\n", "r": "\\r", "f": "\\f"}
_QUANT_LIMIT = 1000                          # RE2 refuses larger counted repetitions


@dataclass
class Regex:
    """A pattern read alike by both dialects: RE2's spelling, its number of groups, and
    the texts for which it is read alike."""
    re2: str
    groups: int
    dot: bool               # uses `.`
    dollar: bool            # uses `$`
    empty: bool             # can match the empty string


class _Reader:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.groups = 0
        self.dot = self.dollar = False

    def refuse(self, why: str) -> NotLocal:
        return NotLocal(f"the regular expression {self.p!r}: {why} (Java's and RE2's "
                        "dialects may read it differently)")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def alternation(self) -> bool:
        empty = self.sequence()
        while self.peek() == "|":
            self.i += 1
            self.out.append("|")
            empty = self.sequence() or empty
        return empty

    def sequence(self) -> bool:
        empty = True
        while self.peek() not in (None, "|", ")"):
            atom_empty = self.atom()
            empty = self.quantifier(atom_empty) and empty
        return empty

    def atom(self) -> bool:
        c = self.p[self.i]
        self.i += 1
        if c == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
                self.out.append("(?:")
            elif self.peek() == "?":
                raise self.refuse("a group with flags, a name or lookaround")
            else:
                self.groups += 1
                self.out.append("(")
            empty = self.alternation()
            if self.peek() != ")":
                raise self.refuse("an unclosed group")
            self.i += 1
            self.out.append(")")
            return empty
        if c == "[":
            self.char_class()
            return False
        if c in "^$":
            self.dollar = self.dollar or c == "$"
            self.out.append(c)
            return True
        if c == ".":
            self.dot = True
            self.out.append(".")
            return False
        if c == "\\":
            return self.escape(in_class=False)
        if c in _META or c == "\0":
            raise self.refuse(f"{c!r} where a character is expected")
        self.out.append(c)
        return False

    def escape(self, *, in_class: bool) -> bool:
        c = self.peek()
        if c is None:
            raise self.refuse("a trailing backslash")
        self.i += 1
        if c in _PUNCT_ESCAPES:
            self.out.append("\\" + c)
            return False
        if c in _CONTROL_ESCAPES:
            self.out.append(_CONTROL_ESCAPES[c])
            return False
        if c in "dw" or (c in "DW" and not in_class):
            self.out.append("\\" + c)
            return False
        if c == "s":
            self.out.append(_SPACE if in_class else f"[{_SPACE}]")
            return False
        if c == "S" and not in_class:
            self.out.append(f"[^{_SPACE}]")
            return False
        if c in "Az" and not in_class:
            self.out.append("\\" + c)
            return True
        raise self.refuse(f"the escape \\{c}")

    def char_class(self) -> None:
        self.out.append("[")
        if self.peek() == "^":
            self.i += 1
            self.out.append("^")
        count = 0
        while True:
            c = self.peek()
            if c is None:
                raise self.refuse("an unclosed class")
            if c == "]" and count:
                self.i += 1
                self.out.append("]")
                return
            if c in "[]&-^" or c == "\0":
                # Java nests and intersects classes; a leading ] or a loose - or ^ is read
                # differently: written escaped they mean the character in both.
                raise self.refuse(f"{c!r} unescaped in a character class")
            count += 1
            self.i += 1
            if c == "\\":
                self.escape(in_class=True)
                continue
            if self.peek() == "-" and self.p[self.i + 1:self.i + 2] not in ("", "]"):
                hi = self.p[self.i + 1]
                if not (c.isascii() and c.isalnum() and hi.isascii() and hi.isalnum()
                        and c <= hi):
                    raise self.refuse(f"the range {c}-{hi}")
                self.i += 2
                self.out.append(f"{c}-{hi}")
                continue
            self.out.append(c)

    def quantifier(self, atom_empty: bool) -> bool:
        c = self.peek()
        if c is None or c not in "*+?{":
            return atom_empty
        self.i += 1
        if c == "{":
            end = self.p.find("}", self.i)
            body = self.p[self.i:end] if end >= 0 else ""
            lo, _, hi = body.partition(",")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise self.refuse("a { that is not a counted repetition")
            n = int(lo)
            m = int(hi) if hi else None
            if n > _QUANT_LIMIT or (m is not None and not n <= m <= _QUANT_LIMIT):
                raise self.refuse("a counted repetition RE2 cannot take")
            self.i = end + 1
            self.out.append("{" + body + "}")
            minimum = n
        else:
            self.out.append(c)
            minimum = 1 if c == "+" else 0
        if self.peek() == "?":
            self.i += 1
            self.out.append("?")
        elif self.peek() == "+":
            raise self.refuse("a possessive quantifier")
        following = self.peek()
        if following is not None and following in "*+?{":
            raise self.refuse("a repeated quantifier")
        return atom_empty or minimum == 0


def java_regex(pattern: str) -> Regex:
    """`pattern` (Java's dialect) in RE2's spelling, or `NotLocal` with the reason."""
    reader = _Reader(pattern)
    empty = reader.alternation()
    if reader.i != len(pattern):
        raise reader.refuse("an unbalanced )")
    return Regex("".join(reader.out), reader.groups, reader.dot, reader.dollar, empty)


def _literal_pattern(node: exp.Expr, what: str) -> Regex:
    pattern = node.args.get("expression")
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise NotLocal(f"{what} with a pattern that is not a string literal")
    need(node, node.this, "string", what)
    return java_regex(pattern.name)


def _guarded(text: exp.Expr, rx: Regex, answer: exp.Expr, what: str, *,
             repeated: bool = False) -> exp.Expr:
    """`answer`, or the not-identical mark for a text the two dialects read apart."""
    risky = []
    if rx.dollar:
        risky.append(_LINE_ENDS)
    elif rx.dot:
        risky.append(_DOT_STOPS)
    if repeated and rx.empty:
        risky.append(_BEYOND_BMP)
    if not risky:
        return answer
    test = call("regexp_matches", text.copy(), exp.Literal.string("|".join(risky)))
    return case_when(test, not_identical(f"{what} over a line terminator or a character "
                                         "beyond U+FFFF"), answer)


# ---- rlike ----------------------------------------------------------------------------------
# KQL's `has` term: a case-insensitive whole-token match, written with Java's (?i).
_HAS_PREFIX, _HAS_SUFFIX = "(?i)(^|[^A-Za-z0-9])", "($|[^A-Za-z0-9])"
_TERM_END = "($|[^A-Za-z0-9])"


def _has_token(pattern: str) -> str | None:
    if pattern.startswith(_HAS_PREFIX) and pattern.endswith(_HAS_SUFFIX):
        token = pattern[len(_HAS_PREFIX):-len(_HAS_SUFFIX)]
        if token and token.isascii() and token.isalnum():
            return token
    return None


def _rlike_pattern(pattern: str) -> tuple[str, Regex]:
    """The pattern RLIKE hands RE2 and how it is read. RE2's (?i) folds Unicode (K and the
    Kelvin sign), Java's only ASCII: `has`'s token is spelled as classes instead. A pattern
    ending in `($|[^A-Za-z0-9])` (KQL's term end) needs no guard for its `$`: wherever
    Java's `$` matches before a final line terminator, the class matches that terminator,
    and nothing follows it."""
    token = _has_token(pattern)
    if token is not None:
        spelled = "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in token)
        pattern = f"(^|[^A-Za-z0-9]){spelled}{_TERM_END}"
    rx = java_regex(pattern)
    if pattern.endswith(_TERM_END):
        body = java_regex(pattern[:-len(_TERM_END)])
        rx = Regex(rx.re2, rx.groups, body.dot, body.dollar, rx.empty)
    return pattern, rx


def _vet_rlike(node: exp.Expr) -> None:
    if node.args.get("flag") is not None:
        raise NotLocal("regular expression flags")
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise NotLocal("RLIKE with a pattern that is not a string literal")
    _rlike_pattern(pattern.name)
    if family_of(node.this) != "string":
        raise NotLocal(f"RLIKE on {describe(node.this)}")


def _rewrite_rlike(node: exp.Expr, kinds: tuple) -> exp.Expr:
    _, rx = _rlike_pattern(node.expression.name)
    answer = call("regexp_matches", node.this.copy(), exp.Literal.string(rx.re2))
    return _guarded(node.this, rx, answer, "rlike")


# ---- regexp_extract, regexp_replace, regexp_count, regexp_substr ----------------------------
def _vet_extract(node: exp.Expr) -> None:
    rx = _literal_pattern(node, "regexp_extract")
    group = node.args.get("group")
    idx = 1 if group is None else int_literal(group)
    if idx is None:
        raise NotLocal("regexp_extract() with a group index that is not an integer literal")
    if not 0 <= idx <= rx.groups:
        raise NotLocal(f"regexp_extract() of group {idx} of a pattern with {rx.groups} "
                       "(Spark raises)")
    for key in ("parameters", "position", "occurrence"):
        if node.args.get(key) is not None:
            raise NotLocal(f"regexp_extract() with a {key}")


def _rewrite_extract(node: exp.Expr, kinds: tuple) -> exp.Expr:
    rx = _literal_pattern(node, "regexp_extract")
    group = node.args.get("group")
    idx = 1 if group is None else int_literal(group)
    answer = call("regexp_extract", node.this.copy(), exp.Literal.string(rx.re2),
                  exp.Literal.number(idx))
    return _guarded(node.this, rx, answer, "regexp_extract")


def _replacement(text: str, groups: int) -> str:
    """Java's replacement (`$n` a group, `\\c` the character c) in RE2's (`\\n`, `\\\\`)."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise NotLocal("a replacement ending in a backslash (Spark raises)")
            c = text[i + 1]
            i += 2
            out.append("\\\\" if c == "\\" else c)
            continue
        if c == "$":
            d = text[i + 1:i + 2]
            if not d.isdigit() or int(d) > groups:
                raise NotLocal(f"the replacement {text!r}: a $ that is not a group of the "
                               "pattern (Spark raises or reads it by name)")
            out.append("\\" + d)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _no_empty_match(rx: Regex, name: str) -> None:
    # After a match, Java tries an empty match at the very next position, RE2 does not
    # (`regexp_replace(',a', 'a*', '-')`: '-,--' in Spark, '-,-' in DuckDB).
    if rx.empty:
        raise NotLocal(f"{name}() with a pattern that can match the empty string (Java and "
                       "RE2 repeat empty matches differently)")


def _vet_replace(node: exp.Expr) -> None:
    rx = _literal_pattern(node, "regexp_replace")
    _no_empty_match(rx, "regexp_replace")
    if rx.groups > 9:
        raise NotLocal("regexp_replace() of a pattern with more than 9 groups")
    r = node.args.get("replacement")
    if not (isinstance(r, exp.Literal) and r.is_string):
        raise NotLocal("regexp_replace() with a replacement that is not a string literal")
    _replacement(r.name, rx.groups)
    for key in ("position", "occurrence", "modifiers"):
        if node.args.get(key) is not None:
            raise NotLocal(f"regexp_replace() with a {key}")


def _rewrite_replace(node: exp.Expr, kinds: tuple) -> exp.Expr:
    rx = _literal_pattern(node, "regexp_replace")
    r = _replacement(node.args["replacement"].name, rx.groups)
    answer = call("regexp_replace", node.this.copy(), exp.Literal.string(rx.re2),
                  exp.Literal.string(r), exp.Literal.string("g"))
    return _guarded(node.this, rx, answer, "regexp_replace", repeated=True)


def _vet_count_substr(name: str):
    def vet(node: exp.Expr) -> None:
        rx = _literal_pattern(node, name)
        if name == "regexp_count":
            _no_empty_match(rx, name)
        for key in ("position", "occurrence", "parameters", "group"):
            if node.args.get(key) is not None:
                raise NotLocal(f"{name}() with a {key}")
    return vet


def _rewrite_count(node: exp.Expr, kinds: tuple) -> exp.Expr:
    rx = _literal_pattern(node, "regexp_count")
    answer = cast_to(call("len", call("regexp_extract_all", node.this.copy(),
                                      exp.Literal.string(rx.re2))), "INT")
    return _guarded(node.this, rx, answer, "regexp_count", repeated=True)


def _rewrite_substr(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark: the first match, null when there is none or it is empty.
    rx = _literal_pattern(node, "regexp_substr")
    answer = call("nullif", call("regexp_extract", node.this.copy(),
                                 exp.Literal.string(rx.re2), exp.Literal.number(0)),
                  exp.Literal.string(""))
    return _guarded(node.this, rx, answer, "regexp_substr")


# ---- LIKE, ILIKE, ESCAPE --------------------------------------------------------------------
def _like_pattern(node: exp.Expr, escape: str, what: str) -> str:
    pattern = node.args.get("expression")
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise NotLocal(f"{what} with a pattern that is not a string literal")
    if family_of(node.this) != "string":
        raise NotLocal(f"{what} on {describe(node.this)}")
    text = pattern.name
    i = 0
    while i < len(text):        # Spark raises on an escape before anything but _ % or itself
        if text[i] == escape:
            if text[i + 1:i + 2] not in ("_", "%", escape):
                raise NotLocal(f"the {what} pattern {text!r} (an escape Spark refuses)")
            i += 1
        i += 1
    return text


def _escape_char(node: exp.Expr) -> str:
    parent = node.parent
    if isinstance(parent, exp.Escape) and parent.this is node:
        esc = parent.expression
        if not (isinstance(esc, exp.Literal) and esc.is_string and len(esc.name) == 1):
            raise NotLocal("an ESCAPE that is not one character")
        return esc.name
    return "\\"             # Spark's default escape character


def _vet_like(node: exp.Expr) -> None:
    _like_pattern(node, _escape_char(node), "LIKE")


def _rewrite_like(node: exp.Expr, kinds: tuple) -> exp.Expr:
    esc = _escape_char(node)
    if esc == "\\" and "\\" in node.expression.name and not isinstance(node.parent,
                                                                        exp.Escape):
        # DuckDB's LIKE has no default escape: name Spark's.
        return exp.Escape(this=node.copy(), expression=exp.Literal.string("\\"))
    return node.copy()


def _vet_escape(node: exp.Expr) -> None:
    if not isinstance(node.this, exp.Like):
        raise NotLocal(f"ESCAPE on {describe(node.this)}")


def _vet_ilike(node: exp.Expr) -> None:
    if isinstance(node.parent, exp.Escape):
        raise NotLocal("ILIKE ... ESCAPE")
    text = _like_pattern(node, "\\", "ILIKE")
    if not text.isascii():
        raise NotLocal("ILIKE with a pattern beyond ASCII (Java's and DuckDB's case mapping "
                       "differ)")


def _rewrite_ilike(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark: lower(text) LIKE lower(pattern), Java's lower case; ASCII text only here.
    s = node.this
    differs = exp.NEQ(this=call("strlen", s.copy()), expression=call("length", s.copy()))
    like: exp.Expr = exp.Like(this=call("lower", s.copy()),
                              expression=exp.Literal.string(node.expression.name.lower()))
    if "\\" in node.expression.name:
        like = exp.Escape(this=like, expression=exp.Literal.string("\\"))
    return case_when(differs, not_identical("ilike of non-ASCII text"), like)


# ---- split and its arrays -------------------------------------------------------------------
def _vet_split(node: exp.Expr) -> None:
    need(node, node.this, "string", "split")
    delim = node.expression
    if not (isinstance(delim, exp.Literal) and delim.is_string and delim.name
            and not (set(delim.name) & _META) and "\0" not in delim.name):
        raise NotLocal("split() on a delimiter that is not a literal free of regular "
                       "expression metacharacters")
    limit = node.args.get("limit")
    if limit is not None:
        n = int_literal(limit)
        if n is None or n > 0:
            raise NotLocal("split() with a positive or non-literal limit")


def _rewrite_split(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark keeps trailing empty strings (limit -1); so does string_split.
    return call("string_split", node.this.copy(), node.expression.copy())


def _split_type(node: exp.Expr) -> exp.DType:
    return T.ARRAY


def _vet_size(node: exp.Expr) -> None:
    if not isinstance(node.this, exp.RegexpSplit):
        raise NotLocal(f"size() of {describe(node.this)} (only of split() locally)")


def _vet_element(node: exp.Expr) -> None:
    if not isinstance(node.this, exp.RegexpSplit):
        raise NotLocal(f"an element of {describe(node.this)} (only of split() locally)")
    if len(node.expressions) != 1:
        raise NotLocal("an array subscript of more than one index")
    k = int_literal(node.expressions[0])
    offset = node.args.get("offset") or 0
    if k is None or (offset == 0 and k < 0) or (offset == 1 and k == 0):
        raise NotLocal("an array index that is not a valid integer literal")


def _rewrite_element(node: exp.Expr, kinds: tuple) -> exp.Expr:
    # Spark (ANSI) raises past the end for [] and element_at and answers null for
    # try_element_at; DuckDB answers null: a missing element goes to Spark unless `safe`.
    arr = node.this
    k = int_literal(node.expressions[0])
    assert k is not None
    offset = node.args.get("offset") or 0
    one_based = k + 1 if offset == 0 else k
    size = call("len", arr.copy())
    missing = exp.GT(this=exp.Literal.number(abs(one_based)), expression=size)
    element = call("list_extract", arr.copy(), exp.Literal.number(one_based)
                   if one_based > 0 else exp.Neg(this=exp.Literal.number(-one_based)))
    if node.args.get("safe"):
        return element
    return case_when(missing, not_identical("an array index past the end"), element)


FUNCTIONS.update({
    exp.RegexpLike: Function("rlike, regexp_like", _vet_rlike, fixed_type(T.BOOLEAN),
                             _rewrite_rlike, "a literal pattern in the subset both regex "
                             "dialects read alike; `.` or `$` over line terminators goes "
                             "to Spark"),
    exp.RegexpExtract: Function("regexp_extract", _vet_extract, fixed_type(T.VARCHAR),
                                _rewrite_extract, "a literal pattern and group index; '' "
                                "when nothing matches"),
    exp.RegexpReplace: Function("regexp_replace", _vet_replace, fixed_type(T.VARCHAR),
                                _rewrite_replace, "literal pattern and replacement ($n "
                                "groups); an empty match over text beyond U+FFFF goes to "
                                "Spark"),
    exp.RegexpCount: Function("regexp_count", _vet_count_substr("regexp_count"),
                              fixed_type(T.INT), _rewrite_count,
                              "a literal pattern; an empty match over text beyond U+FFFF "
                              "goes to Spark"),
    exp.RegexpSubstr: Function("regexp_substr", _vet_count_substr("regexp_substr"),
                               fixed_type(T.VARCHAR), _rewrite_substr,
                               "a literal pattern; null when nothing (or only '') matches"),
    exp.Like: Function("like", _vet_like, fixed_type(T.BOOLEAN), _rewrite_like,
                       "a literal pattern; `\\` (or the ESCAPE character) escapes _ % and "
                       "itself"),
    exp.ILike: Function("ilike", _vet_ilike, fixed_type(T.BOOLEAN), _rewrite_ilike,
                        "an ASCII literal pattern; non-ASCII text goes to Spark"),
    exp.Escape: Function("escape", _vet_escape, fixed_type(T.BOOLEAN), None,
                         "LIKE ... ESCAPE 'c' with one character"),
    exp.RegexpSplit: Function("split", _vet_split, _split_type, _rewrite_split,
                              "a literal delimiter without regex metacharacters; trailing "
                              "empty strings kept; no positive limit"),
    exp.ArraySize: Function("size", _vet_size, fixed_type(T.INT),
                            lambda n, k: cast_to(call("len", n.this), "INT"),
                            "of split(); null for null"),
    exp.Bracket: Function("element_at, try_element_at, [ ]", _vet_element,
                          fixed_type(T.VARCHAR), _rewrite_element,
                          "of split() with a literal index; past the end goes to Spark "
                          "(which raises)"),
})

SPARK_ONLY.update({
    "regexp_extract_all": "an array answer",
    "regexp, regexp_instr": "not vetted",
})

__all__ = ["Regex", "java_regex"]
