"""The shared write path: coerce -> evolve -> idempotency -> staging buffer -> commit.

Every frontend that receives NDJSON (REST, CLI ingest, file-drop) calls
`WritePath.ingest_ndjson()`; frontends that decode to Arrow themselves (OTLP) call
`WritePath.ingest_arrow()`. A call returns only when the snapshot holding its rows is
committed (acked = durable and visible), or raises without having written anything visible:

- `TableNotFoundError` (unknown table), `PayloadError` (bad lines, atomic mode),
  `SchemaConflictError`/`IncompatibleSchemaChangeError` (evolution lost a race clearly),
  `BackpressureError` (the staging buffer is full: retry after `retry_after_s`).

Idempotency: a key already in the ledger returns the first ack with `replayed=True` and
writes nothing; the ledger row is committed in the same transaction as the data. A key is
bound to the table it was first applied to: the same key for another table raises
`IdempotencyKeyConflictError` (409) instead of a replay that would drop the rows silently,
also when both requests race (the loser's commit finds the key in the ledger).
(`filedrop:{sha256}` keys are written by the file-drop pipeline straight to the catalog,
global by design, docs/storage.md; they never pass here.)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from shoal.catalog.base import Catalog, LedgerEntry, LedgerRecord, TableInfo
from shoal.commit import CommitCoordinator
from shoal.errors import (IdempotencyKeyConflictError, LineError, PayloadError,
                          ReadOnlyTableError, TableAlreadyExistsError, TableNotFoundError)
from shoal.ingest.buffer import Arrival, StagingBuffer
from shoal.types.conventions import DEFAULT_CONVENTIONS, IngestConventions, IngestWarning
from shoal.types.schema import Schema, SchemaMode

if TYPE_CHECKING:
    from shoal.ingest._values import UnknownFieldPolicy
    from shoal.ingest.coerce import Coerced


class Coercer(Protocol):
    """What turns an NDJSON body into rows: `shoal.ingest.coerce.coerce_ndjson` (in this
    process, the default) or `CoercionPool.coerce` (worker processes, `shoal.ingest.pool`)."""

    def __call__(self, body: bytes, schema: Schema, *, unknown: UnknownFieldPolicy,
                 ingest_time_ns: int,
                 max_errors: int = 100, unknown_fields: Sequence[str] | None = None,
                 conventions: IngestConventions = DEFAULT_CONVENTIONS) -> Coerced: ...


@dataclass(frozen=True)
class IngestAck:
    table: str
    snapshot_id: int
    rows: int
    replayed: bool = False
    new_columns: list[str] = field(default_factory=list)
    rejected: list[LineError] = field(default_factory=list)   # the first ones (capped)
    extent_ids: list[str] = field(default_factory=list)
    rejected_count: int | None = None   # lines rejected in all; None = len(rejected)
    # Accepted, but likely not meant (epoch seconds read as nanoseconds, ...).
    warnings: list[IngestWarning] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rejected_count is None:
            object.__setattr__(self, "rejected_count", len({r.line for r in self.rejected}))

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "snapshot_id": self.snapshot_id, "rows": self.rows,
                "replayed": self.replayed, "new_columns": self.new_columns,
                "rejected": [r.to_json() for r in self.rejected],
                "rejected_count": self.rejected_count, "extent_ids": self.extent_ids,
                "warnings": [w.to_json() for w in self.warnings]}

    def ledger_ack(self) -> dict[str, Any]:
        """What the ledger keeps to answer a replay (snapshot id is added by the catalog)."""
        return {"table": self.table, "rows": self.rows, "new_columns": self.new_columns,
                "rejected": [r.to_json() for r in self.rejected],
                "rejected_count": self.rejected_count, "extent_ids": self.extent_ids,
                "warnings": [w.to_json() for w in self.warnings]}

    @classmethod
    def from_ledger(cls, ack: dict[str, Any]) -> IngestAck:
        return cls(table=ack["table"], snapshot_id=ack["snapshot_id"], rows=ack["rows"],
                   replayed=True, new_columns=list(ack.get("new_columns", [])),
                   rejected=[LineError(r["line"], r["field"], r["message"])
                             for r in ack.get("rejected", [])],
                   extent_ids=list(ack.get("extent_ids", [])),
                   rejected_count=ack.get("rejected_count"),
                   warnings=[IngestWarning.from_json(w) for w in ack.get("warnings", [])])


class WritePath:
    def __init__(self, catalog: Catalog, coordinator: CommitCoordinator, *,
                 buffer: StagingBuffer | None = None, evolution_cap: int = 32,
                 max_errors: int = 100, coercer: Coercer | None = None) -> None:
        self.catalog = catalog
        # None: `coerce_ndjson` in this process. The server sets a worker pool's `coerce`
        # here for as long as it runs (`shoal serve --coerce-workers N`).
        self.coercer = coercer
        self.coordinator = coordinator
        self.buffer = buffer or StagingBuffer(catalog, coordinator)
        self.evolution_cap = evolution_cap
        self.max_errors = max_errors

    def arrive(self, table: str) -> Arrival:
        """Announce a request for `table` before its body is even read (the REST route):
        pass it as `arrival=` to `ingest_ndjson`/`ingest_arrow`, and close it if the request
        never gets there. See `shoal.ingest.buffer` (the debounce waits only for arrivals)."""
        return self.buffer.arrive(table)

    def ingest_ndjson(self, table: str, body: bytes, *, mode: SchemaMode | None = None,
                      partial: bool = False, idempotency_key: str | None = None,
                      arrival: Arrival | None = None) -> IngestAck:
        with arrival or self.buffer.arrive(table) as coming:
            return self._ingest_ndjson(table, body, mode=mode, partial=partial,
                                       idempotency_key=idempotency_key, arrival=coming)

    def _ingest_ndjson(self, table: str, body: bytes, *, mode: SchemaMode | None,
                       partial: bool, idempotency_key: str | None,
                       arrival: Arrival) -> IngestAck:
        from shoal.ingest.coerce import UNKNOWN_POLICY, coerce_ndjson
        from shoal.ingest.evolve import plan_evolution

        replay = self._replay(table, idempotency_key)
        if replay is not None:
            return replay
        coerce: Coercer = self.coercer or coerce_ndjson
        info = _writable(self.catalog.load_table(table))
        mode = mode or info.mode
        conventions = IngestConventions.of(info.properties)
        new_columns: list[str] = []
        body = bytes(body)
        # One msgspec pass both validates the lines and finds their unknown keys (what
        # `scan_unknown_fields` returns): in evolve mode the body is coerced again only when
        # those keys add columns.
        coerced = coerce(body, info.schema, unknown=UNKNOWN_POLICY[mode],
                         ingest_time_ns=time.time_ns(), max_errors=self.max_errors,
                         conventions=conventions)
        if mode == "evolve" and coerced.unknown_fields:
            unknown = coerced.unknown_fields
            plan = plan_evolution(unknown, info.schema, cap=self.evolution_cap)
            if plan.new_columns:
                info = self._evolve(info, plan.new_columns)
                new_columns = [c.name for c in plan.new_columns]
                coerced = coerce(
                    body, info.schema, unknown="props", ingest_time_ns=time.time_ns(),
                    max_errors=self.max_errors,
                    unknown_fields=[u for u in unknown if u not in info.schema],
                    conventions=conventions)
        if coerced.rejected_lines and not partial:
            raise PayloadError(coerced.errors, total_errors=coerced.rejected_count)
        return self._submit(info, coerced.batch, new_columns=new_columns,
                            rejected=coerced.errors, rejected_count=coerced.rejected_count,
                            idempotency_key=idempotency_key, arrival=arrival,
                            warnings=coerced.warnings)

    # ---- Arrow input (frontends that decode to Arrow themselves, e.g. OTLP) -------------------
    def ingest_arrow(self, table: str, data: pa.RecordBatch | pa.Table, *,
                     mode: SchemaMode | None = None, idempotency_key: str | None = None,
                     rejected: Sequence[LineError] = (),
                     create: Schema | None = None,
                     arrival: Arrival | None = None) -> IngestAck:
        """Arrow rows through the same evolve -> ledger -> buffer -> commit as NDJSON.

        Columns are matched by name and shaped to the table (`shoal.ingest.arrow_input`);
        unknown columns follow `mode` (default: the table's): evolve adds them with their
        own types, drop ignores them, reject raises `PayloadError`. `rejected` are records
        the frontend refused before building `data`: they are part of the ack, so a replay
        answers them too. Same acks, errors and idempotency as `ingest_ndjson`.

        `create`: a frontend's standard table (OTLP, Prometheus) made on first use with this
        schema in mode `drop` when `table` does not exist; a concurrent first request that
        made it meanwhile is harmless (the table is there either way).
        """
        with arrival or self.buffer.arrive(table) as coming:
            if create is not None:
                try:
                    return self._ingest_arrow(table, data, mode=mode,
                                              idempotency_key=idempotency_key,
                                              rejected=rejected, arrival=coming)
                except TableNotFoundError:
                    with contextlib.suppress(TableAlreadyExistsError):
                        self.catalog.create_table(table, create, mode="drop")
            return self._ingest_arrow(table, data, mode=mode, idempotency_key=idempotency_key,
                                      rejected=rejected, arrival=coming)

    def _ingest_arrow(self, table: str, data: pa.RecordBatch | pa.Table, *,
                      mode: SchemaMode | None, idempotency_key: str | None,
                      rejected: Sequence[LineError], arrival: Arrival) -> IngestAck:
        from shoal.ingest.arrow_input import (arrow_epoch_warnings, as_batch,
                                              plan_arrow_evolution, reject_no_props,
                                              reject_unknown, shape_batch, unknown_columns)

        replay = self._replay(table, idempotency_key)
        if replay is not None:
            return replay
        info = _writable(self.catalog.load_table(table))
        mode = mode or info.mode
        conventions = IngestConventions.of(info.properties)
        batch = as_batch(data)
        new_columns: list[str] = []
        if mode == "reject":
            reject_unknown(table, unknown_columns(batch, info.schema))
        elif mode == "evolve":
            adds = plan_arrow_evolution(batch, info.schema, cap=self.evolution_cap)
            if not conventions.props:   # what cannot become a column is refused, not dropped
                added = {c.name for c in adds}
                reject_no_props([n for n in unknown_columns(batch, info.schema)
                                 if n not in added])
            if adds:
                info = self._evolve(info, adds)
                new_columns = [c.name for c in adds]
        warnings = arrow_epoch_warnings(batch, info.schema, conventions)
        shaped = shape_batch(batch, info.schema, table=table, ingest_time_ns=time.time_ns(),
                             conventions=conventions)
        return self._submit(info, shaped, new_columns=new_columns, rejected=list(rejected),
                            idempotency_key=idempotency_key, arrival=arrival,
                            warnings=warnings)

    def _replay(self, table: str, idempotency_key: str | None) -> IngestAck | None:
        """The original ack of a key applied to `table` (marked replayed), else None;
        `IdempotencyKeyConflictError` if the key was applied to another table."""
        if idempotency_key is None:
            return None
        rec = self.catalog.ledger_get(idempotency_key)
        return None if rec is None else _replay_of(rec, table)

    def _submit(self, info: TableInfo, batch: pa.RecordBatch, *, new_columns: list[str],
                rejected: list[LineError], idempotency_key: str | None,
                arrival: Arrival, rejected_count: int | None = None,
                warnings: Sequence[IngestWarning] = ()) -> IngestAck:
        """Buffer `batch` (with its ledger row) and wait for the commit holding it; a key that
        landed meanwhile (a concurrent request) answers that request's ack."""
        draft = IngestAck(table=info.name, snapshot_id=0, rows=batch.num_rows,
                          new_columns=new_columns, rejected=rejected,
                          rejected_count=rejected_count, warnings=list(warnings))
        if batch.num_rows == 0 and idempotency_key is None:
            # Nothing to write and no key to record: no commit, no empty snapshot; the ack
            # names the table's current snapshot (which holds everything acked before).
            return replace(draft, snapshot_id=info.current_snapshot_id)
        ledger = ([LedgerEntry(idempotency_key, draft.ledger_ack())]
                  if idempotency_key is not None else [])
        result = self.buffer.submit(info.name, info.schema, batch, ledger=ledger,
                                    arrival=arrival)
        if result.replayed is not None:  # the key landed meanwhile: here, or elsewhere
            assert idempotency_key is not None
            return _replay_of(result.replayed, info.name)
        return IngestAck(table=info.name, snapshot_id=result.snapshot_id, rows=batch.num_rows,
                         new_columns=new_columns, rejected=rejected,
                         extent_ids=result.extent_ids, rejected_count=draft.rejected_count,
                         warnings=draft.warnings)

    def _evolve(self, info: TableInfo, columns: list[Any]) -> TableInfo:
        # Rows buffered under the old schema go out first: one flush = one schema version.
        self.buffer.flush(info.name)
        return self.coordinator.evolve_schema(info.name, columns, base=info.schema)

    def close(self) -> None:
        self.buffer.close()


def _replay_of(rec: LedgerRecord, table: str) -> IngestAck:
    """The replay answer of a ledger row for a request to `table`."""
    first = rec.ack.get("table")
    if first != table:
        raise IdempotencyKeyConflictError(rec.key, table=table, first_table=str(first))
    return IngestAck.from_ledger(rec.ack)


def _writable(info: TableInfo) -> TableInfo:
    """`info`, unless it is a foreign table (its `source` property set): those only read
    their source, so every write path refuses them before coercing anything."""
    if str(info.properties.get("source") or "").strip():
        raise ReadOnlyTableError(info.name)
    return info
