"""PromQL's errors, worded as Prometheus words them, in shoal's error tree.

The HTTP API (`shoal.frontends.prometheus.api`) maps them to Prometheus's error document:
`PromQLBadDataError` (a parse error, a bad parameter) is `bad_data` 400,
`PromQLExecutionError` (e.g. many-to-many matching, too many samples) is `execution` 422.
"""

from __future__ import annotations

from shoal.errors import QueryError, QueryTimeoutError


class PromQLBadDataError(QueryError):
    """A request Prometheus answers with `bad_data`: a parse error or a bad parameter."""

    code = "promql_bad_data"


class PromQLParseError(PromQLBadDataError):
    """The expression does not parse: promql-parser's message at its place, as Prometheus
    words it (`1:16: parse error: unclosed left parenthesis`; `errpos.py` finds the place)."""

    code = "promql_parse"

    def __init__(self, message: str, *, line: int | None = None,
                 column: int | None = None) -> None:
        self.detail = message
        self.line, self.column = line, column
        where = f"{line}:{column}: " if line is not None else ""
        super().__init__(f"{where}parse error: {message}")


class PromQLExecutionError(QueryError):
    """The expression parsed but cannot be evaluated over this data (`execution`)."""

    code = "promql_execution"


class PromQLTooManySamplesError(PromQLExecutionError):
    """More samples than `max_samples` would be held in memory at once."""

    code = "promql_too_many_samples"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__("query processing would load too many samples into memory in query "
                         "execution")


class PromQLTimeoutError(QueryTimeoutError):
    """The evaluation ran past its timeout (the server's `query_timeout_s`, or the request's
    smaller `timeout`); worded as Prometheus words it."""

    code = "promql_timeout"

    def __init__(self, limit_s: float) -> None:
        # QueryTimeoutError's own words name the server setting; skip to its parent's
        QueryError.__init__(
            self, f"query timed out in expression evaluation (timeout {limit_s:g} s)")
        self.limit_s = limit_s
