"""KQL's tokens: names, keywords, literals (strings, numbers, timespans, datetimes), operators.

Every token carries its offset, line and column (1-based) so that errors point where Kusto
points. Some KQL words are lexed as one token although they contain punctuation:
`project-away`, `project-rename` (and the other `name-name` operators), `!has`, `!in`,
`!contains`... (`!` glued to a word), `in~`, and the bodies of `datetime(...)` and
`timespan(...)`, whose contents are not KQL expressions (`datetime(2026-03-01 10:00)`).

Timespan literals are a number glued to a unit (`5m`, `1.5h`, `100ms`, `2d`, `10tick`);
their value is kept in nanoseconds.

String literals, as Kusto writes them: `"..."` and `'...'` with the backslash escapes
`\\` `\"` `\'` `\n` `\t` `\r` (any other escape is a positioned error, as is a line
break inside the quotes); verbatim `@"..."` / `@'...'`, where a backslash stands for itself
and a doubled quote is a quote; multi-line ```...```, taken as written;
`h` before any of them (obfuscated: the same value). A NUL character or a lone surrogate
is refused anywhere in the text (neither can be written in the SQL a query becomes).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

from shoal.errors import KqlSyntaxError

TokenKind = Literal["name", "string", "long", "real", "timespan", "datetime", "op", "end"]

NS_PER_UNIT: dict[str, int] = {
    "d": 86_400_000_000_000, "day": 86_400_000_000_000, "days": 86_400_000_000_000,
    "h": 3_600_000_000_000, "hr": 3_600_000_000_000, "hrs": 3_600_000_000_000,
    "hour": 3_600_000_000_000, "hours": 3_600_000_000_000,
    "m": 60_000_000_000, "min": 60_000_000_000, "minute": 60_000_000_000,
    "minutes": 60_000_000_000,
    "s": 1_000_000_000, "sec": 1_000_000_000, "second": 1_000_000_000,
    "seconds": 1_000_000_000,
    "ms": 1_000_000, "milli": 1_000_000, "millis": 1_000_000, "millisecond": 1_000_000,
    "milliseconds": 1_000_000,
    "microsecond": 1_000, "microseconds": 1_000,
    "tick": 100, "ticks": 100,
}

# The most tokens one query may have (a query's text is read whole into tokens, then a
# tree; ~1 s and ~60 MB at this size, where a dashboard's query has tens to hundreds).
MAX_KQL_TOKENS = 100_000

# Operators made of a word and a dash (`project-away`); the dash joins them.
DASHED = frozenset({"project-away", "project-rename", "project-keep", "project-reorder",
                    "mv-expand", "mv-apply", "make-series", "parse-where", "top-nested",
                    "top-hitters"})
# Words that `!` negates as one operator (`!has`).
NEGATABLE = frozenset({"has", "has_cs", "contains", "contains_cs", "startswith",
                       "startswith_cs", "endswith", "endswith_cs", "in", "in~", "between",
                       "hasprefix", "hassuffix", "has_any", "has_all"})
_SYMBOLS = ("==", "!=", "<>", "<=", ">=", "=~", "!~", "..", "|", "(", ")", "[", "]", "{",
            "}", ",", ".", "=", "<", ">", "+", "-", "*", "/", "%", ";", "$", ":")
_SYMBOLS_2 = frozenset(s for s in _SYMBOLS if len(s) == 2)
_SYMBOLS_1 = frozenset(s for s in _SYMBOLS if len(s) == 1)
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNIT = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str               # as written (keywords keep their case; compare lowered)
    value: object           # str, int, float, ns int (timespan), raw text (datetime)
    offset: int
    line: int
    column: int

    @property
    def word(self) -> str:
        """The lowered text of a name or operator (KQL keywords are lower case)."""
        return self.text.lower() if self.kind == "name" else self.text

    def describe(self) -> str:
        return "end of input" if self.kind == "end" else repr(self.text)


def position(text: str, offset: int) -> tuple[int, int]:
    """(line, column), both 1-based, of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    # where each line starts: a token's line and column by bisection (linear in the text;
    # counting the newlines before every token would be quadratic)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(offset: int) -> tuple[int, int]:
        line = bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    bad = _UNWRITABLE.search(text)
    if bad is not None:
        line, col = where(bad.start())
        raise KqlSyntaxError(line=line, column=col, found=f"U+{ord(bad.group()):04X}",
                             expected="text without NUL characters or lone surrogates")

    def emit(kind: TokenKind, start: int, end: int, value: object) -> None:
        line, col = where(start)
        if len(tokens) == MAX_KQL_TOKENS:
            raise KqlSyntaxError(line=line, column=col, found=repr(text[start:end]),
                                 expected=f"a query of at most {MAX_KQL_TOKENS} tokens")
        tokens.append(Token(kind, text[start:end], value, start, line, col))

    def fail(at: int, expected: str) -> KqlSyntaxError:
        line, col = where(at)
        found = "end of input" if at >= n else repr(text[at])
        return KqlSyntaxError(line=line, column=col, expected=expected, found=found)

    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "'\"" or (c in "@hH" and _string_after_prefix(text, i) and not (
                tokens and tokens[-1].offset + len(tokens[-1].text) == i)):
            i = _string(text, i, emit, fail)
            continue
        if (c == "`" and text.startswith("```", i)) or (c in "hH" and text.startswith(
                "```", i + 1)):
            i = _multiline(text, i, emit, fail)
            continue
        if c.isascii() and c.isdigit():
            m = _NUMBER.match(text, i)
            assert m is not None
            end = m.end()
            unit = _UNIT.match(text, end)
            if unit and unit.group().lower() in NS_PER_UNIT:
                ns = round(float(m.group()) * NS_PER_UNIT[unit.group().lower()])
                emit("timespan", i, unit.end(), ns)
                i = unit.end()
                continue
            if unit:
                raise fail(end, "a timespan unit (d, h, m, s, ms, microsecond, tick) or an "
                                "operator after a number")
            literal = m.group()
            if "." in literal or "e" in literal.lower():
                emit("real", i, end, float(literal))
            else:
                emit("long", i, end, int(literal))
            i = end
            continue
        if c.isascii() and (c.isalpha() or c == "_"):   # KQL names are ASCII
            m = _WORD.match(text, i)
            assert m is not None
            end = m.end()
            word = m.group().lower()
            dashed = _WORD.match(text, end + 1) if text.startswith("-", end) else None
            if dashed and f"{word}-{dashed.group().lower()}" in DASHED:
                end = dashed.end()
            elif word == "in" and text.startswith("~", end):
                end += 1
            elif word in ("datetime", "timespan", "time") and _next_char(text, end) == "(":
                i = _raw_call(text, i, end, emit, fail)
                continue
            emit("name", i, end, text[i:end])
            i = end
            continue
        if c == "!" and i + 1 < n and text[i + 1].isascii() and text[i + 1].isalpha():
            m = _WORD.match(text, i + 1)
            assert m is not None
            end = m.end()
            word = m.group().lower()
            if word == "in" and text.startswith("~", end):
                word, end = "in~", end + 1
            if word in NEGATABLE:
                emit("op", i, end, "!" + word)
                i = end
                continue
            raise fail(i, "an operator ('!' negates has, contains, startswith, endswith, "
                          "in, between)")
        sym = text[i:i + 2]
        if sym not in _SYMBOLS_2:
            sym = c
            if sym not in _SYMBOLS_1:
                raise fail(i, "a name, a literal or an operator")
        emit("op", i, i + len(sym), sym)
        i += len(sym)
    line, col = where(n)
    tokens.append(Token("end", "", None, n, line, col))
    return tokens


def _next_char(text: str, i: int) -> str:
    while i < len(text) and text[i].isspace():
        i += 1
    return text[i] if i < len(text) else ""


def _raw_call(text: str, start: int, name_end: int, emit, fail) -> int:
    """`datetime(<anything but ')'>)`: one token whose value is the stripped contents."""
    open_at = text.index("(", name_end)
    close = text.find(")", open_at)
    if close < 0:
        raise fail(len(text), "')' closing " + text[start:name_end] + "(")
    inner = text[open_at + 1:close].strip()
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        inner = inner[1:-1]
    kind = "datetime" if text[start:name_end].lower() == "datetime" else "timespan"
    if kind == "timespan":
        return _timespan_call(text, start, close, inner, emit, fail)
    emit(kind, start, close + 1, inner)
    return close + 1


def _timespan_call(text: str, start: int, close: int, inner: str, emit, fail) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)", inner)
    if m is None or (m.group(2) and m.group(2).lower() not in NS_PER_UNIT):
        raise fail(start, "timespan(<number><unit>)")
    unit = m.group(2).lower() or "d"
    emit("timespan", start, close + 1, round(float(m.group(1)) * NS_PER_UNIT[unit]))
    return close + 1


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
_UNWRITABLE = re.compile("[\0\ud800-\udfff]")


def _string_after_prefix(text: str, i: int) -> bool:
    """`@'`, `h'`, `h@'` (either quote) start at `i`."""
    j = i + 1 if text[i] in "hH" else i
    if text.startswith("@", j):
        j += 1
    return j > i and j < len(text) and text[j] in "'\""


def _multiline(text: str, i: int, emit, fail) -> int:
    """```...```: the text between the fences as written (no escapes)."""
    start = i
    if text[i] in "hH":
        i += 1
    end = text.find("```", i + 3)
    if end < 0:
        raise fail(start, "a closing ``` for the multi-line string")
    emit("string", start, end + 3, text[i + 3:end])
    return end + 3


def _string(text: str, i: int, emit, fail) -> int:
    """A string literal: '...' or "..." with backslash escapes, @'...' verbatim (a doubled
    quote is a quote), h'...' / h@'...' obfuscated (the same value)."""
    start = i
    if text[i] in "hH":
        i += 1
    verbatim = text[i] == "@"
    if verbatim:
        i += 1
    quote = text[i]
    i += 1
    out: list[str] = []
    while True:
        if i >= len(text) or text[i] == "\n":
            raise fail(start, f"a closing {quote} for the string")
        c = text[i]
        if c == quote:
            if verbatim and text.startswith(quote * 2, i):
                out.append(quote)
                i += 2
                continue
            break
        if c == "\\" and not verbatim:
            if i + 1 >= len(text) or text[i + 1] not in _ESCAPES:
                raise fail(i, "a known escape (\\n \\t \\r \\\\ \\' \\\")")
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    emit("string", start, i + 1, "".join(out))
    return i + 1
