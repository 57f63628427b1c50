"""The SDK ingest's one call into the write path: `SentrySink.write(project_id, items)`.

Each event is written on its own with the idempotency key `sentry:<table>:<project>:<id>`
recorded in the ledger in the same commit as its row, so an SDK that resends an event
(its send timed out after shoal had committed it) gets 200 and writes nothing: events are
idempotent on their id for as long as the ledger keeps keys (25 h), far beyond an SDK's
retries. The table is made on first use with `SENTRY_EVENTS_SCHEMA` (mode `drop`); a table
made beforehand under that name is used as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shoal.frontends.sentry.envelope import EnvelopeItem
from shoal.frontends.sentry.events import SENTRY_EVENTS_SCHEMA, map_event, rows_batch
from shoal.ingest.keys import SENTRY_KEY_PREFIX
from shoal.ingest.write_path import WritePath


@dataclass(frozen=True)
class SentryWrite:
    table: str
    event_ids: tuple[str, ...]      # in the order of the items
    rows: int                       # newly written (replays excluded)
    replayed: int


class SentrySink:
    def __init__(self, write_path: WritePath, table: str = "sentry_events", *,
                 clock: Callable[[], float] = time.time) -> None:
        self.write_path = write_path
        self.table = table
        self.clock = clock

    def write(self, project_id: int, items: Sequence[EnvelopeItem], *,
              envelope_event_id: str | None = None) -> SentryWrite:
        """Map every event first (a bad one refuses the request, nothing written), then
        commit each with its key."""
        received = int(self.clock() * 1e6) * 1000
        rows = [map_event(item.payload, project_id=project_id, received_ns=received,
                          where=f"item {n} ({item.type})", kind=item.type,
                          event_id=envelope_event_id if len(items) == 1 else None)
                for n, item in enumerate(items, start=1)]
        written = replayed = 0
        for row in rows:
            key = f"{SENTRY_KEY_PREFIX}{self.table}:{project_id}:{row[1]}"
            ack = self.write_path.ingest_arrow(self.table, rows_batch([row]),
                                               idempotency_key=key, create=SENTRY_EVENTS_SCHEMA)
            if ack.replayed:
                replayed += 1
            else:
                written += ack.rows
        return SentryWrite(self.table, tuple(r[1] for r in rows), written, replayed)
