"""Where a PromQL parse error is: `line:column` for promql-parser's messages, which name the
problem but not its place (Prometheus says `1:16: parse error: unclosed left parenthesis`).

promql-parser is the parser (a well-kept one; shoal does not write its own); this module only
finds the place its message is about, with a small tokenizer of PromQL's lexical grammar
(strings, numbers and durations, identifiers, operators, brackets, `#` comments):

- "unclosed left parenthesis" -> the end of the input, where the `)` is missing (as
  Prometheus places it);
- "unexpected right parenthesis / brace / bracket" -> the first closer without its opener;
- "unexpected end of input ..." -> the end of the input;
- "unterminated quoted string" -> its opening quote;
- "unknown function with name 'f'" -> `f`;
- "unexpected character ...: 'c'" -> that character;
- anything else ("invalid promql query") -> the first token after the longest token prefix
  that parses on its own (the end of the input when every prefix is incomplete), said as
  `unexpected <token>`: the place a reader should look, possibly a token early when the
  valid part is itself incomplete (`sum by (a) x` points at `by`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from dataclasses import dataclass

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
  | (?P<unterminated>["'`])
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[a-zA-Z0-9]*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>==|!=|=~|!~|>=|<=|[-+*/%^<>=,@:!])
  | (?P<open>[({\[])
  | (?P<close>[)}\]])
  | (?P<other>.)
""", re.X | re.S)

_PAIRS = {")": "(", "}": "{", "]": "["}
_CLOSER_WORD = {"parenthesis": ")", "brace": "}", "bracket": "]"}
_INSIDE = {"braces": "{", "brackets": "["}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int


def tokens(expr: str) -> list[Token]:
    out = []
    for m in TOKEN.finditer(expr):
        kind = m.lastgroup or "other"
        if kind not in ("space", "comment"):
            out.append(Token(kind, m.group(), m.start()))
    return out


def line_col(expr: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    before = expr[:offset]
    line = before.count("\n") + 1
    return line, offset - (before.rfind("\n") + 1) + 1


def _unmatched(toks: list[Token]) -> tuple[list[Token], Token | None]:
    """(openers left open, the first closer without its opener)."""
    stack: list[Token] = []
    for t in toks:
        if t.kind == "open":
            stack.append(t)
        elif t.kind == "close":
            if stack and stack[-1].text == _PAIRS[t.text]:
                stack.pop()
            else:
                return stack, t
    return stack, None


def locate(expr: str, message: str, parses: Callable[[str], bool]) -> tuple[int, str]:
    """(character offset, message to show) of promql-parser's `message` about `expr`;
    `parses(text)` says whether a text parses (the prefix search of the general case)."""
    toks = tokens(expr)
    _opened, stray = _unmatched(toks)
    if message.startswith("unclosed left parenthesis"):
        return len(expr), message          # where the closer is missing, as Prometheus says
    if message.startswith("unexpected right "):
        word = message.split()[2]
        if stray is not None and stray.text == _CLOSER_WORD.get(word):
            # Prometheus places a stray `)` after it (its lexer has read it), `}`/`]` at it
            return stray.start + (stray.text == ")"), message
    if message.startswith("unexpected end of input"):
        return len(expr), message
    if message.startswith("unterminated quoted string"):
        for t in toks:
            if t.kind == "unterminated":
                return t.start, message
    m = re.match(r"unknown function with name '([^']*)'", message)
    if m:
        for t in toks:
            if t.kind == "ident" and t.text == m.group(1):
                return t.start, message
    m = re.match(r"unexpected character.*: '(.)'$", message)
    if m:
        for t in toks:
            if t.kind in ("other", "op") and t.text == m.group(1):
                return t.start, message
    return _first_bad_token(expr, toks, message, parses)


MAX_PROBES = 400      # prefixes parsed at most to place an error: bounded time per request


def _first_bad_token(expr: str, toks: list[Token], message: str,
                     parses: Callable[[str], bool]) -> tuple[int, str]:
    if len(toks) > MAX_PROBES:
        return 0, message
    longest = 0
    for i in range(1, len(toks) + 1):
        end = toks[i - 1].start + len(toks[i - 1].text)
        if parses(expr[:end]):
            longest = i
    rest = toks[longest:]
    if all(_continues(t) for t in rest):
        # only operators / modifiers after a complete expression: it stops too early
        return len(expr), f"unexpected end of input ({message})"
    bad = rest[0]
    for prev, t in pairwise(rest):
        if t.kind == "op" and prev.kind == "op" and t.text not in "+-":
            bad = t                        # two binary operators in a row: the second
            break
    return bad.start, f"unexpected {bad.text!r} ({message})"


_MODIFIERS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                        "and", "or", "unless", "offset", "atan2"})


def _continues(t: Token) -> bool:
    """A token that needs something after it: an operator or a modifier keyword."""
    return t.kind == "op" or (t.kind == "ident" and t.text.lower() in _MODIFIERS)
