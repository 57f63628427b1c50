"""Prometheus API parameters: times (RFC 3339 or unix seconds) and durations (seconds or
Prometheus's `1h30m` form), as milliseconds; errors worded as Prometheus words them."""

from __future__ import annotations

import math
import re
from datetime import datetime

from shoal.frontends.prometheus.promql.errors import PromQLBadDataError

_DURATION = re.compile(r"^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?\Z")
_UNIT_MS = (365 * 86_400_000, 7 * 86_400_000, 86_400_000, 3_600_000, 60_000, 1000, 1)
# Times are clamped to what a nanosecond timestamp holds (1823-2116): clients send "all of
# history" as far-away times.
MIN_TIME_MS = -(1 << 62) // 1_000_000
MAX_TIME_MS = (1 << 62) // 1_000_000


def clamp_ms(ms: int) -> int:
    return min(max(ms, MIN_TIME_MS), MAX_TIME_MS)


def parse_time(value: str, name: str) -> int:
    """RFC 3339 or unix seconds (fractions allowed) -> ms."""
    try:
        seconds = float(value)
        if math.isfinite(seconds):
            return clamp_ms(round(seconds * 1000))
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        if dt.tzinfo is not None:
            return clamp_ms(round(dt.timestamp() * 1000))
    except ValueError:
        pass
    raise PromQLBadDataError(f'invalid parameter "{name}": cannot parse "{value}" to a valid '
                             f"timestamp")


def parse_duration_ms(value: str, name: str) -> int:
    """Seconds (fractions allowed) or a Prometheus duration -> ms."""
    try:
        seconds = float(value)
        if math.isfinite(seconds) and abs(seconds) < 1e15:
            return round(seconds * 1000)
    except ValueError:
        pass
    m = _DURATION.match(value)
    if value and m is not None:
        parts = [m.group(i) for i in range(2, 15, 2)]
        return sum(int(p) * unit for p, unit in zip(parts, _UNIT_MS, strict=True) if p)
    raise PromQLBadDataError(f'invalid parameter "{name}": cannot parse "{value}" to a valid '
                             f"duration")
