"""What a database must provide to be synced into a change-log table.

A `SyncSource` is opened for one binding. The pipeline asks it, in this order:

- `snapshot()`: a context manager giving a `SnapshotRead`, the rows of the whole source
  table as Arrow tables and the position they are consistent with. Changes after that
  position are exactly the ones `changes()` returns from it, so snapshot + changes is the
  table's history without a gap or an overlap.
- `changes(after, upto, limit)`: the next whole transactions committed after position
  `after` (and at or before `upto` when given), about `limit` row changes at most unless one
  transaction is bigger; an empty batch when there is nothing new.
- `confirm(position)`: called only once the rows up to `position` are committed in the
  catalog; the source may then forget them (PostgreSQL advances its replication slot).
- `head()`: the source's current position (what `--once` runs up to).

Positions are integers that grow in source order (a PostgreSQL LSN, a cursor value); the
catalog keeps the last one committed (`SourceOffset(source_id, "0", position)`) in the same
transaction as the rows. Each row also carries `_source_position`, a text that sorts in
source order within one source (position of its transaction, then its place in it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa

from shoal.types.schema import Column

OP_COLUMN = "_op"
POSITION_COLUMN = "_source_position"
OPS = ("snapshot", "insert", "update", "delete")
LOG_COLUMNS = (OP_COLUMN, POSITION_COLUMN)


class SnapshotPart(Protocol):
    """A piece of a snapshot that can be read in another process (a Spark task)."""

    def read(self) -> Iterator[pa.Table]: ...


@dataclass(frozen=True)
class SnapshotRead:
    position: int                           # the source position the rows are consistent with
    tables: Iterator[pa.Table]              # source columns + _op/_source_position/_timestamp
    parts: Sequence[SnapshotPart] = ()      # the same rows in picklable pieces (when > 1)


@dataclass(frozen=True)
class ChangeBatch:
    """Whole transactions of the source, in commit order."""

    rows: pa.Table | None                   # None when the transactions touched no row
    position: int | None                    # of the last transaction (None: nothing new)
    columns: list[Column] = field(default_factory=list)   # the source's columns now
    changes: int = 0


class SyncSource(Protocol):
    """One source table as seen by a sync pipeline (see the module docstring)."""

    @property
    def source_id(self) -> str:
        """The catalog's name of this source's progress (unique per source table)."""
        ...

    def columns(self) -> list[Column]:
        """The source table's columns as shoal columns (the documented type mapping)."""
        ...

    def key(self) -> list[str]:
        """The source table's primary key columns."""
        ...

    def check_setup(self) -> None:
        """Raise `SyncSetupError` when the source cannot serve this binding's mode."""
        ...

    def snapshot(self) -> AbstractContextManager[SnapshotRead]: ...

    def changes(self, after: int, upto: int | None, limit: int) -> ChangeBatch: ...

    def confirm(self, position: int) -> None: ...

    def head(self) -> int: ...

    def close(self) -> None: ...


def current_state_sql(table: str, key: list[str], columns: list[str]) -> str:
    """SQL (the same text on both engines) for the source table's current state from its
    change log: the latest row per primary key, rows whose latest change is a delete left
    out, `columns` selected."""
    part = ", ".join(f"`{k}`" for k in key)
    cols = ", ".join(f"`{c}`" for c in columns)
    return (f"SELECT {cols} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {part} ORDER BY "
            f"_source_position DESC) AS _rn FROM `{table}`) AS _log "
            "WHERE _rn = 1 AND _op <> 'delete'")
