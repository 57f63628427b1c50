"""Bounds on one statement's cost: wall time, and the rows and bytes of its answer.

`QueryLimits` is what an edge (the HTTP server) passes to `QueryEngine.execute`; the
Python API passes none and keeps Spark's own behaviour. `cap_table` cuts an answer to the
caps and says which cap cut it.

Caps keep a prefix of the answer, so an ordered query keeps its first rows. The row cap is
applied in Spark too (the engine collects at most `max_rows + 1` rows); the byte cap counts
Arrow bytes (`pa.Table.nbytes`, which counts only what a slice references).
`collect_capped` applies the caps to an answer that arrives as batches (the embedded
engine's): it stops reading, and closes the source (which stops the engine), at the first
batch over a cap, so no more than one batch beyond the caps is ever held.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
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


def collect_capped(batches: Generator[pa.RecordBatch, None, None], schema: pa.Schema, *,
                   max_rows: int | None = None, max_bytes: int | None = None,
                   check: Callable[[], None] | None = None) -> tuple[pa.Table, str | None]:
    """`cap_table` of the answer `batches` make, read only as far as the caps: the source
    is closed at the first batch that goes over one (or when reading fails). `check` is
    called before each batch (a deadline's or a cancel's raise)."""
    kept: list[pa.RecordBatch] = []
    rows = nbytes = 0
    cut: str | None = None
    try:
        for batch in batches:
            if check is not None:
                check()
            if batch.num_rows == 0:
                continue
            part, cut = cap_table(
                pa.Table.from_batches([batch]),
                max_rows=None if max_rows is None else max_rows - rows,
                max_bytes=None if max_bytes is None else max_bytes - nbytes)
            for b in part.to_batches():
                if b.num_rows:
                    kept.append(b)
                    rows += b.num_rows
                    nbytes += b.nbytes
            if cut is not None:
                break
    finally:
        batches.close()
    return (pa.Table.from_batches(kept) if kept else schema.empty_table()), cut
