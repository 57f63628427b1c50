"""PromQL's regular expressions (label matchers `=~`/`!~`, `label_replace`): RE2, through
google-re2, as Prometheus has them (Go's `regexp` is RE2: the same syntax), fully anchored
with `.` matching a newline (Prometheus compiles `^(?s:<re>)$`).

RE2 runs in time linear in the input, so no pattern can make a query spend unbounded time:
Python's `re` backtracks (`(a+)+b` against a long label value never ends) and could not be
interrupted by the query timeout inside a worker thread.
"""

from __future__ import annotations

from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False      # a bad pattern is the caller's 4xx, not a line on stderr
_OPTIONS.dot_nl = True


class RegexError(ValueError):
    """A pattern RE2 does not accept; the message is RE2's."""


def compile_anchored(pattern: str) -> Any:
    """The compiled pattern; use `.fullmatch(value)` (anchored at both ends)."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        message = e.args[0].decode(errors="replace") if e.args and isinstance(
            e.args[0], bytes) else str(e)
        raise RegexError(message) from None
