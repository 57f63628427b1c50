"""Bounds on a PromQL expression, checked on its text before promql-parser sees it.

promql-parser's cost grows faster than the text: an `up + up + ...` chain of 3,000 terms
takes 1.2 GB and seconds to parse, 5,000 nested parentheses end in a RecursionError, and every
level of the tree is another Python frame when it is evaluated. `check_bounds(expr)` reads
the text once with the small tokenizer of `errpos` (strings and comments are skipped, so a
`(` inside a label value counts for nothing) and refuses, at the first token past a bound:

- `MAX_PROMQL_CHARS` characters of text;
- `MAX_PROMQL_DEPTH` nested `(`, `[` and `{`;
- `MAX_PROMQL_OPERATORS` operators (binary and unary arithmetic, comparisons, `and`, `or`,
  `unless`, `atan2`) outside label matchers: a chain of them is a tree as deep as it is long.

Most expressions cannot go over: when the text holds no more brackets than the depth bound
and no more operator characters and words than the operator bound (counts that can only
overstate), the tokenizer does not run. The refusal is a `PromQLParseError` with its line
and column, a 400 `bad_data` as any parse error. The limits are far beyond a dashboard's
query (tens of operators, a few levels) and keep a parse under ~15 MB and a few ms, and an
evaluation inside Python's recursion limit.
"""

from __future__ import annotations

from shoal.frontends.prometheus.promql.errors import PromQLParseError
from shoal.frontends.prometheus.promql.errpos import TOKEN, line_col

MAX_PROMQL_CHARS = 128 << 10
MAX_PROMQL_DEPTH = 64
MAX_PROMQL_OPERATORS = 256

_OPERATORS = frozenset({"+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<="})
_WORD_OPERATORS = frozenset({"and", "or", "unless", "atan2"})


def check_bounds(expr: str) -> None:
    """Refuse `expr` (`PromQLParseError`, positioned) past one of the module's bounds."""
    if len(expr) > MAX_PROMQL_CHARS:
        _refuse(expr, MAX_PROMQL_CHARS,
                f"query longer than {MAX_PROMQL_CHARS} characters")
    if _surely_within(expr):
        return
    depth = braces = operators = 0
    for m in TOKEN.finditer(expr):
        kind = m.lastgroup
        if kind == "open":
            depth += 1
            braces += m.group() == "{"
            if depth > MAX_PROMQL_DEPTH:
                _refuse(expr, m.start(), f"expression nested more than {MAX_PROMQL_DEPTH} "
                                         "levels deep")
        elif kind == "close":
            depth = max(0, depth - 1)
            braces = max(0, braces - (m.group() == "}"))
        elif braces == 0 and ((kind == "op" and m.group() in _OPERATORS) or (
                kind == "ident" and m.group().lower() in _WORD_OPERATORS)):
            operators += 1
            if operators > MAX_PROMQL_OPERATORS:
                _refuse(expr, m.start(), f"expression with more than {MAX_PROMQL_OPERATORS} "
                                         "operators")


def _surely_within(expr: str) -> bool:
    """Counts that can only overstate the depth and the operators are within the bounds."""
    if sum(expr.count(c) for c in "([{") > MAX_PROMQL_DEPTH:
        return False
    lowered = expr.lower()
    operators = sum(expr.count(c) for c in "+-*/%^=!<>") + sum(
        lowered.count(w) for w in _WORD_OPERATORS)
    return operators <= MAX_PROMQL_OPERATORS


def _refuse(expr: str, offset: int, message: str) -> None:
    line, column = line_col(expr, offset)
    raise PromQLParseError(message, line=line, column=column)
