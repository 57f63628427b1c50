"""Which regular expressions a query may use: those whose cost is at most polynomial of a
low degree in the length of the text, on every engine.

Spark evaluates `RLIKE`, `regexp_*`, `split` and `LIKE` with Java's backtracking regex
engine, whose matching of some patterns takes exponential (or high polynomial) time, and
whose loop never checks its thread's interrupt: a task stuck in `(.*a){7}$` runs on after
its job is cancelled. The embedded engine (DuckDB) uses RE2, which is linear, but a
statement may reach Spark whatever engine was asked for (`auto` hands failures over), so one
rule applies to every query, checked on the parsed statement before any engine runs:

- the pattern is a string literal (not a column or an expression);
- RE2 compiles it: no backreferences, no lookaround (what only a backtracking engine runs);
- no nested repetition: the body of a repetition that can repeat more than once (`*`, `+`,
  `{n,m}` with m > 1) holds no repetition of variable length and no alternation whose
  branches can start alike (`(a+)+`, `(.*a){7}`, `(\\w+\\s?)*`, `(a|aa)+` are refused;
  `(ab|cd)+`, `[a-z]+`, `(\\d{3}-)+` are fine);
- a degree of at most `MAX_DEGREE`: the unbounded or wide repetitions of the pattern (`*`,
  `+`, `{n,}`, `{n,m}` with m - n >= `WIDE_REPEAT`), plus one when it does not start with
  `^` (RLIKE searches: every start position is tried). Each multiplies the work of a
  failed match by the text's length, so a failed match costs at most about n^2 steps for a
  text of n characters (`error.*timeout`, `^a.*b.*c` are fine; `.*a.*b`, `a.*b.*c` are
  refused). A repetition of one character class followed by a literal the class cannot
  match (`[a-z]+=`, `\\d+\\.`) does not count: its backtracking ends at once. A LIKE
  pattern's degree is its runs of `%` that do not end it (Spark matches LIKE as a regex
  anchored at both ends, `%` as `.*`).

What remains is quadratic: a few seconds for one 30,000-character text on one core, tens of
seconds at 60,000 (`^.*a.*ac`). Such a task does not stop when its job is cancelled either;
the server holds the statement's query slot until Spark shows it ended, so at most
`query_concurrency` of them run at once.

`check_pattern(pattern)` returns why a pattern is refused, or None. The structure is read
with Python's own regex parser (`re._parser`), which reads Java's common syntax; a pattern it
cannot read is refused as unchecked.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

MAX_DEGREE = 2
WIDE_REPEAT = 64

# Python's own regex parser and compiler (modules of the standard library's `re`, read as
# they are: their names have been stable since 3.11).
_c: Any = importlib.import_module("re._constants")
_sre: Any = importlib.import_module("re._parser")
_compiler: Any = importlib.import_module("re._compiler")

_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT) + ((_c.POSSESSIVE_REPEAT,)
                                             if hasattr(_c, "POSSESSIVE_REPEAT") else ())


# Java escapes that Python's parser lacks, as what they are structurally: a Unicode class,
# `\h`, `\R`... stand for one character; `\z` and `\G` are anchors.
_JAVA_ESCAPE = re.compile(r"\\(?:[pP](?:\{[^}]*\}|[A-Za-z])|[hHvVRXe]|c.|[zG])|\\.", re.S)


def _python_syntax(pattern: str) -> str:
    def one(m: re.Match[str]) -> str:
        text = m.group(0)
        if text in ("\\z", "\\G"):
            return "\\Z" if text == "\\z" else ""
        return "." if len(text) > 2 or text[1] in "hHvVRXe" else text
    return _JAVA_ESCAPE.sub(one, _unquote(pattern))


def _unquote(pattern: str) -> str:
    """`pattern` with each Java/RE2 quoted run `\\Q...\\E` (to the end when `\\E` is missing)
    written as Python's escaped literal text: structurally it is a run of plain characters."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            if pattern[i + 1] == "Q":
                end = pattern.find("\\E", i + 2)
                stop = len(pattern) if end < 0 else end
                out.append(re.escape(pattern[i + 2:stop]))
                i = stop if end < 0 else end + 2
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        out.append(pattern[i])
        i += 1
    return "".join(out)


def _re2_error(pattern: str) -> str | None:
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as e:
        text = e.args[0] if e.args else e
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return str(text)
    return None


def check_pattern(pattern: str) -> str | None:
    """Why `pattern` (a Java regular expression) is refused, or None when it is allowed."""
    problem = _re2_error(pattern)
    if problem is not None:
        return f"not a linear-time regular expression ({problem})"
    try:
        parsed = _sre.parse(_python_syntax(pattern))
    except (re.error, OverflowError, RecursionError) as e:
        return f"a regular expression that cannot be checked ({e})"
    wide = 0
    stack: list[tuple[Any, bool, Any]] = [(parsed, False, None)]
    while stack:   # (items, inside a repetition, the item after them)
        items, in_repeat, follow = stack.pop()
        for i, (op, av) in enumerate(items):
            after = items[i + 1] if i + 1 < len(items) else follow
            if op in _REPEATS:
                lo, hi, body = av
                variable = hi != lo
                if (hi == _c.MAXREPEAT or hi - lo >= WIDE_REPEAT) and not _stops_at(
                        parsed, body, after):
                    wide += 1
                if in_repeat and variable:
                    return "nested repetition (a repeated group holds a repetition)"
                stack.append((body, in_repeat or hi > 1, None))
            elif op == _c.BRANCH:
                branches = av[1]
                if in_repeat and not _distinct_starts(branches):
                    return ("a repeated alternation whose branches can start with the same "
                            "character")
                stack.extend((b, in_repeat, after) for b in branches)
            elif op == _c.SUBPATTERN:
                stack.append((av[-1], in_repeat, after))
            elif op in (_c.ASSERT, _c.ASSERT_NOT):
                return "lookaround"
            elif op == _c.GROUPREF or op == getattr(_c, "GROUPREF_EXISTS", None):
                return "a backreference"
            elif op == getattr(_c, "ATOMIC_GROUP", None):
                stack.append((av, in_repeat, after))
    anchored = bool(parsed.data) and parsed.data[0][0] == _c.AT and parsed.data[0][1] in (
        _c.AT_BEGINNING, _c.AT_BEGINNING_STRING)
    degree = wide + (0 if anchored else 1)
    if degree > MAX_DEGREE:
        return (f"{wide} unbounded repetitions{'' if anchored else ' in a search'} "
                f"(degree {degree}, at most {MAX_DEGREE}: each multiplies a failed match's "
                "work by the text's length; anchor it with ^ or use fewer .* / +)")
    return None


def _stops_at(parsed: Any, body: Any, after: Any) -> bool:
    """Whether a repetition of one character class (`[a-z]+`, `\\d*`) is followed by a
    literal character the class cannot match: its backtracking then ends at once (`\\w+=`
    costs like a possessive `\\w++=`), so it does not multiply a failed match's work."""
    if after is None or after[0] != _c.LITERAL or len(body) != 1:
        return False
    if body[0][0] not in (_c.IN, _c.LITERAL, _c.NOT_LITERAL, _c.ANY):
        return False
    try:
        one = _sre.SubPattern(parsed.state, [body[0]])
        return _compiler.compile(one, parsed.state.flags).fullmatch(chr(after[1])) is None
    except (re.error, TypeError, ValueError, OverflowError):    # not provable: it counts
        return False


def _distinct_starts(branches: list[Any]) -> bool:
    """Whether every branch starts with a literal character and no two with the same one."""
    seen: set[int] = set()
    for branch in branches:
        items = list(branch)
        while items and items[0][0] == _c.SUBPATTERN:
            items = list(items[0][1][-1])
        if not items or items[0][0] != _c.LITERAL or items[0][1] in seen:
            return False
        seen.add(items[0][1])
    return True


def check_like(pattern: str) -> str | None:
    """Why a LIKE pattern is refused (its `%` become `.*` in Spark's regex), or None."""
    runs = [m.end() for m in re.finditer(r"(?<!\\)%+", pattern)]
    degree = sum(1 for end in runs if end < len(pattern))
    if degree > MAX_DEGREE:
        return (f"a LIKE pattern with {degree} runs of % before its end (at most "
                f"{MAX_DEGREE}: each multiplies a failed match's work by the text's length)")
    return None
