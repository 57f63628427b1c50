"""Per-table maintenance policy, read from table properties (docs/sql.md, docs/maintenance.md).

Properties (strings as DDL gives them, e.g. `WITH (retention='7d', target_extent_size='64MB')`):

- `retention`: data older than this is removed from the current snapshot (`30s`, `15m`,
  `12h`, `7d`, `2w`; a bare number is seconds). Absent: data is kept forever.
- `snapshot_retention`: how long replaced snapshots stay readable by time travel (default
  `1d`). The newest snapshot at or before `now - snapshot_retention` is kept too, so the
  table stays readable *as of* any instant inside the window; older ones are expired.
- `target_extent_size`: the size compaction aims for (`128MB` default; `B`, `KB`, `MB`,
  `GB`, binary multiples). Extents under half of it count as small.
- `compact_min_extents`: the scheduler enqueues a compaction once a table has at least this
  many small extents (default 16).

A malformed value raises `InvalidSchemaError` naming the property, so a unit fails with a
precise message instead of guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shoal.errors import InvalidSchemaError

DEFAULT_TARGET_EXTENT_BYTES = 128 << 20
DEFAULT_SNAPSHOT_RETENTION_S = 24 * 3600.0
DEFAULT_COMPACT_MIN_EXTENTS = 16
SMALL_FRACTION = 0.5

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$", re.IGNORECASE)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_BYTES = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20,
          "gb": 1 << 30, "gib": 1 << 30}


def parse_duration(value: Any, *, name: str = "retention") -> float:
    """Seconds of `value` (`'7d'`, `'12h'`, `90`)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = _DURATION.match(str(value))
    if not m or float(m.group(1)) <= 0:
        raise InvalidSchemaError(f"table property {name}={value!r}: expected a positive "
                                 "duration like 30s, 15m, 12h, 7d or 2w", column=name)
    return float(m.group(1)) * _SECONDS[(m.group(2) or "s").lower()]


def parse_size(value: Any, *, name: str = "target_extent_size") -> int:
    """Bytes of `value` (`'64MB'`, `'512KB'`, `1048576`)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _SIZE.match(str(value))
    if not m or float(m.group(1)) <= 0:
        raise InvalidSchemaError(f"table property {name}={value!r}: expected a positive "
                                 "size like 512KB, 64MB or 1GB", column=name)
    return int(float(m.group(1)) * _BYTES[(m.group(2) or "b").lower()])


@dataclass(frozen=True)
class TablePolicy:
    retention_s: float | None
    snapshot_retention_s: float
    target_extent_bytes: int
    compact_min_extents: int

    @property
    def small_extent_bytes(self) -> int:
        return int(self.target_extent_bytes * SMALL_FRACTION)

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> TablePolicy:
        retention = props.get("retention")
        snap = props.get("snapshot_retention")
        target = props.get("target_extent_size")
        min_extents = props.get("compact_min_extents", DEFAULT_COMPACT_MIN_EXTENTS)
        try:
            min_extents = int(min_extents)
        except (TypeError, ValueError):
            min_extents = 0
        if min_extents < 2:
            raise InvalidSchemaError(f"table property compact_min_extents={min_extents!r}: "
                                     "expected an integer >= 2", column="compact_min_extents")
        return cls(
            retention_s=None if retention in (None, "") else parse_duration(retention),
            snapshot_retention_s=(DEFAULT_SNAPSHOT_RETENTION_S if snap in (None, "")
                                  else parse_duration(snap, name="snapshot_retention")),
            target_extent_bytes=(DEFAULT_TARGET_EXTENT_BYTES if target in (None, "")
                                 else parse_size(target)),
            compact_min_extents=min_extents)
