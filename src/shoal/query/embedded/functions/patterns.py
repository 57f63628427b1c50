"""Spark's datetime patterns (`yyyy-MM-dd HH:mm:ss` ...) in DuckDB's strftime/strptime terms.

Only the common letters are translated, each to the strftime code that writes the same text
for the years 1000..9999 (the callers hand other years to Spark): `yyyy y yy MM M MMM MMMM
dd d HH H hh h mm m ss s SSS SSSSSS a E EE EEE EEEE DDD D`, and the separators
`space - : / . , _`. Parsing accepts fewer: fixed-width numbers (`yyyy MM dd HH mm ss SSS
SSSSSS`), each read by a regular expression of its valid range, so a text DuckDB would read
differently never reaches DuckDB's reader. Anything else (quoted text, zones, week-based
years, optional sections) raises `NotLocal`.

sqlglot rewrites a pattern into its own strftime-like form when it parses the statement,
and that form loses letters (`y`, `Y` and `yyyy` all become `%Y`), so the pattern is read
back from the statement's text (`STATEMENT_TEXT`): the string literal whose reading is the
node's, and only when exactly one such literal exists.
"""

from __future__ import annotations

import re
from contextvars import ContextVar

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.time import format_time

from shoal.query.embedded.vetting import NotLocal

# The statement's text as written, while `to_local` vets it.
STATEMENT_TEXT: ContextVar[str] = ContextVar("shoal_statement_text", default="")
DEFAULT_PATTERN = "yyyy-MM-dd HH:mm:ss"

_FORMAT = {"yyyy": "%Y", "y": "%Y", "yy": "%y", "MM": "%m", "M": "%-m", "MMM": "%b",
           "MMMM": "%B", "dd": "%d", "d": "%-d", "HH": "%H", "H": "%-H", "hh": "%I",
           "h": "%-I", "mm": "%M", "m": "%-M", "ss": "%S", "s": "%-S", "SSS": "%g",
           "SSSSSS": "%f", "a": "%p", "E": "%a", "EE": "%a", "EEE": "%a", "EEEE": "%A",
           "DDD": "%j", "D": "%-j"}
_PARSE = {"yyyy": (r"[1-9][0-9]{3}", "%Y"), "MM": (r"(0[1-9]|1[0-2])", "%m"),
          "dd": (r"(0[1-9]|[12][0-9]|3[01])", "%d"), "HH": (r"([01][0-9]|2[0-3])", "%H"),
          "mm": (r"[0-5][0-9]", "%M"), "ss": (r"[0-5][0-9]", "%S"),
          "SSS": (r"[0-9]{3}", "%g"), "SSSSSS": (r"[0-9]{6}", "%f")}
_SEPARATORS = set(" -:/.,_")
_RUN = re.compile(r"([A-Za-z])\1*|.", re.S)
_STRING = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")


def _runs(pattern: str) -> list[str]:
    if not pattern:
        raise NotLocal("an empty datetime pattern")
    return [m.group(0) for m in _RUN.finditer(pattern)]


def strftime_of(pattern: str) -> str:
    """The strftime format writing what Spark's `pattern` writes (years 1000..9999)."""
    out = []
    for run in _runs(pattern):
        if run in _FORMAT:
            out.append(_FORMAT[run])
        elif run in _SEPARATORS:
            out.append(run)
        else:
            raise NotLocal(f"the datetime pattern {pattern!r} ({run!r} is not translated "
                           "locally)")
    return "".join(out)


def strptime_of(pattern: str) -> tuple[str, str]:
    """(regular expression, strptime format) reading what Spark's `pattern` reads, for
    texts the expression matches in full."""
    regex, fmt = [], []
    for run in _runs(pattern):
        if run in _PARSE:
            regex.append(_PARSE[run][0])
            fmt.append(_PARSE[run][1])
        elif run in _SEPARATORS:
            regex.append("[.]" if run == "." else run)
            fmt.append(run)
        else:
            raise NotLocal(f"parsing with the datetime pattern {pattern!r} ({run!r} is not "
                           "read locally)")
    return "".join(regex), "".join(fmt)


def _reading(text: str) -> str | None:
    return format_time(text, Spark.TIME_MAPPING, Spark.TIME_TRIE)


def spark_pattern(fmt: exp.Expr | None, default: str | None = None) -> str:
    """The pattern the user wrote for the format sqlglot read as `fmt`; `default` is the
    function's pattern when none is given."""
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise NotLocal("a datetime pattern that is not a string literal")
    candidates = {m.group(1) if m.group(1) is not None else m.group(2)
                  for m in _STRING.finditer(STATEMENT_TEXT.get())}
    if default is not None:
        candidates.add(default)
    seen = {c for c in candidates if _reading(c) == fmt.name}
    if len(seen) != 1:
        raise NotLocal("a datetime pattern the local engine cannot read back exactly")
    return seen.pop()
