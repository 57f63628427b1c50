"""Bounds on one statement's cost: wall time, and the rows and bytes of its answer.

`QueryLimits` is what an edge (the HTTP server) passes to `QueryEngine.execute`; the
Python API passes none and keeps Spark's own behaviour. `cap_table` cuts an answer to the
caps and says which cap cut it.

Caps keep a prefix of the answer, so an ordered query keeps its first rows. The row cap is
applied in Spark too (the engine collects at most `max_rows + 1` rows); the byte cap counts
Arrow bytes (`pa.Table.nbytes`, which counts only what a slice references).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

ROWS_CAP = "query_max_rows"      # the setting named in stats["truncated_by"]
BYTES_CAP = "query_max_bytes"


@dataclass(frozen=True)
class QueryLimits:
    timeout_s: float | None = None
    max_rows: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s!r}")
        for name in ("max_rows", "max_bytes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value!r}")


def cap_table(table: pa.Table, *, max_rows: int | None = None,
              max_bytes: int | None = None) -> tuple[pa.Table, str | None]:
    """The longest prefix of `table` within both caps, and the cap that cut it (None when
    the whole table fits)."""
    cut: str | None = None
    if max_rows is not None and table.num_rows > max_rows:
        table, cut = table.slice(0, max_rows), ROWS_CAP
    if max_bytes is not None and table.nbytes > max_bytes:
        lo, hi = 0, table.num_rows - 1      # the prefix of `lo` rows fits; `hi + 1` does not
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if table.slice(0, mid).nbytes <= max_bytes:
                lo = mid
            else:
                hi = mid - 1
        table, cut = table.slice(0, lo), BYTES_CAP
    return table, cut
