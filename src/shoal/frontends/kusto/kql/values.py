"""KQL literal values: datetimes (ns since the epoch, UTC) and their Spark SQL forms."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from shoal.errors import KqlSyntaxError
from shoal.frontends.kusto.kql.lexer import Token

_DATETIME = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})"
                       r"(?:\.(\d{1,9}))?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$")


def parse_datetime(text: str, at: Token) -> int:
    """The ns since the epoch of a KQL datetime literal's contents (UTC unless it names an
    offset)."""
    m = _DATETIME.match(text.strip())
    if m is None:
        raise KqlSyntaxError(line=at.line, column=at.column, found=repr(text),
                             expected="a datetime such as 2026-03-01, 2026-03-01 10:00 or "
                                      "2026-03-01T10:00:00.5Z")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    try:
        dt = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                      int(second or 0), tzinfo=UTC)
    except ValueError:
        raise KqlSyntaxError(line=at.line, column=at.column, found=repr(text),
                             expected="a valid calendar date and time") from None
    offset = 0
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    seconds = int(dt.timestamp()) - offset
    return seconds * 1_000_000_000 + int((frac or "0").ljust(9, "0"))


def spark_timestamp(ns: int) -> str:
    """`CAST('<UTC wall time>' AS TIMESTAMP)`: the planner pushes it down and both engines
    read it alike (the session is UTC). Spark keeps µs: the ns below are truncated."""
    us = ns // 1_000
    dt = datetime.fromtimestamp(us // 1_000_000, tz=UTC)
    text = dt.strftime("%Y-%m-%d %H:%M:%S")
    if us % 1_000_000:
        text += f".{us % 1_000_000:06d}"
    return f"CAST('{text}' AS TIMESTAMP)"


def now_ns() -> int:
    return int(datetime.now(UTC).timestamp() * 1_000_000) * 1_000
