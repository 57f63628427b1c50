"""The catalog operations both paths run, each written once over a `Db`.

`LiteCatalog` (the embedded catalog's hot path on `sqlite3`) and `SqlCatalog` (SQLAlchemy,
SQLite and Postgres) open their own transactions and map their own driver's errors; what
runs inside is here: reading a table row and its schema versions, a snapshot by id or by
commit id, a ledger key, and the statements of a commit. The SQL is
`shoal.catalog.statements`'; the rows it leaves are the same whichever path ran it.

Stored values that do not decode raise `CatalogCorruptError` naming the catalog table and
row (`rows.decoding`); a decoded schema is cached by (table id, version) only when the
caller says its transaction reads committed rows (a committed version never changes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from shoal.catalog import statements as S
from shoal.catalog.base import (DROPPED_SEPARATOR, LedgerEntry, LedgerKeyExistsError,
                                LedgerRecord, ManifestEntry, Snapshot, SourceOffset, TableInfo)
from shoal.catalog.rows import chunks, decoding, manifest_row, snapshot_of
from shoal.errors import (CatalogCorruptError, CommitConflictError, SnapshotNotFoundError,
                          TableNotFoundError)
from shoal.lru import MISSING, Lru
from shoal.types.schema import Schema

Row = Mapping[str, Any]


# ---- tables and schema versions -------------------------------------------------------------
def table_row(db: S.Db, name: str) -> Row:
    """The `tables` row of `name` (properties decoded); `TableNotFoundError` if none. A
    dropped table's stored name is never found here."""
    if DROPPED_SEPARATOR in name:
        raise TableNotFoundError(name)
    with decoding("tables", f'table "{name}"'):
        row = db.one(S.TABLE_BY_NAME, {"name": name})
    if row is None:
        raise TableNotFoundError(name)
    return row


def schema_at(db: S.Db, row: Row, version: int, cache: Lru | None = None) -> Schema:
    """Version `version` of the schema of the table of `row`. `cache`: the transaction
    reads committed rows, so the decoded schema may be kept there."""
    key = (row["id"], version)
    if cache is not None and (hit := cache.get(key)) is not MISSING:
        return cast(Schema, hit)
    where = f'table "{row["name"]}" version {version}'
    with decoding("schema_versions", where):
        found = db.one(S.SCHEMA_VERSION, {"table_id": row["id"], "version": version})
        if found is None:
            raise CatalogCorruptError("schema_versions", where,
                                      "the table's schema version is missing")
        schema = Schema.from_json(found["schema"])
    if cache is not None:
        cache.put(key, schema, 1)
    return schema


def schema_history(db: S.Db, row: Row) -> list[Schema]:
    """Every schema version of the table of `row`, oldest first."""
    with decoding("schema_versions", f'table "{row["name"]}"'):
        return [Schema.from_json(r["schema"])
                for r in db.all(S.SCHEMA_HISTORY, {"table_id": row["id"]})]


def table_info(db: S.Db, row: Row, cache: Lru | None = None) -> TableInfo:
    """The table of `row` at its current schema version (`cache` as in `schema_at`)."""
    with decoding("tables", f'table "{row["name"]}"'):
        properties = dict(row["properties"])
    return TableInfo(id=row["id"], name=row["name"],
                     current_snapshot_id=row["current_snapshot_id"],
                     schema=schema_at(db, row, row["schema_version"], cache),
                     mode=row["mode"], properties=properties, created_at=row["created_at"])


def load_table(db: S.Db, name: str, cache: Lru | None = None) -> TableInfo:
    return table_info(db, table_row(db, name), cache)


# ---- snapshots ------------------------------------------------------------------------------
def snapshot(db: S.Db, row: Row, snapshot_id: int | None) -> Snapshot:
    """Snapshot `snapshot_id` (None: the current one) of the table of `row`."""
    sid = row["current_snapshot_id"] if snapshot_id is None else snapshot_id
    with decoding("snapshots", f'table "{row["name"]}" snapshot {sid}'):
        s = db.one(S.SNAPSHOT_BY_ID, {"table_id": row["id"], "snapshot_id": sid})
        if s is None:
            raise SnapshotNotFoundError(row["name"], sid)
        return snapshot_of(s, s["summary"])


def snapshots(db: S.Db, row: Row) -> list[Snapshot]:
    with decoding("snapshots", f'table "{row["name"]}"'):
        return [snapshot_of(s, s["summary"])
                for s in db.all(S.SNAPSHOTS_OF_TABLE, {"table_id": row["id"]})]


def find_commit(db: S.Db, table: str, commit_id: str) -> Snapshot | None:
    row = table_row(db, table)
    with decoding("snapshots", f'table "{table}" commit {commit_id}'):
        s = db.one(S.SNAPSHOT_BY_COMMIT, {"table_id": row["id"], "commit_id": commit_id})
        return None if s is None else snapshot_of(s, s["summary"])


# ---- ledger and source offsets ----------------------------------------------------------------
def ledger_get(db: S.Db, key: str) -> LedgerRecord | None:
    with decoding("ingest_ledger", f'key "{key}"'):
        r = db.one(S.LEDGER_BY_KEY, {"key": key})
        if r is None:
            return None
        return LedgerRecord(key=r["key"], table_id=r["table_id"], snapshot_id=r["snapshot_id"],
                            ack=dict(r["ack"]), created_at=r["created_at"])


def source_offsets(db: S.Db, source: str) -> dict[str, int]:
    return {str(r["partition"]): int(r["offset"])
            for r in db.all(S.SOURCE_OFFSETS, {"source": source})}


# ---- commit -----------------------------------------------------------------------------------
def commit_rows(db: S.Db, table: str, *, expected: int, now: float, operation: str,
                commit_id: str, add: Sequence[ManifestEntry], remove: Sequence[str],
                schema: Schema | None, ledger: Sequence[LedgerEntry],
                offsets: Sequence[SourceOffset], summary: dict[str, Any]) -> Snapshot:
    """The statements of one commit inside the caller's open write transaction, ending in
    the compare-and-swap; the snapshot they publish once the caller commits.

    A lost race raises `CommitConflictError`; a replayed ledger key (or commit id) fails
    with the driver's integrity error, which the caller maps after rolling back."""
    new_id = expected + 1
    row = db.one(S.TABLE_FOR_UPDATE, {"name": table})
    if row is None:
        raise TableNotFoundError(table)
    table_id, current, version = row["id"], row["current_snapshot_id"], row["schema_version"]
    if current != expected:
        raise CommitConflictError(table, expected, current)
    if schema is not None:
        if schema.version != version + 1:
            raise CommitConflictError(table, expected, current)
        version = schema.version
        db.run(S.INSERT_SCHEMA_VERSION, {"table_id": table_id, "version": version,
                                         "schema": schema.to_json(), "created_at": now})
    db.run(S.INSERT_SNAPSHOT, {"table_id": table_id, "snapshot_id": new_id,
                               "parent_id": expected, "schema_version": version,
                               "operation": operation, "commit_id": commit_id,
                               "created_at": now, "summary": summary})
    if add:
        db.many(S.INSERT_MANIFEST, [manifest_row(table_id, new_id, e) for e in add])
        filters = [{"table_id": table_id, "extent_id": e.extent_id, "column_name": c,
                    "filter": f} for e in add for c, f in e.membership_filters.items()]
        if filters:
            db.many(S.INSERT_FILTER, filters)
    if remove:
        removed = 0
        for chunk in chunks(list(remove)):
            removed += db.run(S.mark_removed(len(chunk)), {
                "snapshot_id": new_id, "table_id": table_id, **S.in_params("e", chunk)})
        if removed != len(set(remove)):
            raise CommitConflictError(table, expected)
    if ledger:
        db.many(S.INSERT_LEDGER, [
            {"key": le.key, "table_id": table_id, "snapshot_id": new_id,
             "ack": {**le.ack, "snapshot_id": new_id}, "created_at": now} for le in ledger])
    if offsets:
        db.many(S.UPSERT_OFFSET, [
            {"source": off.source, "partition": off.partition, "table_id": table_id,
             "offset": off.offset, "snapshot_id": new_id, "updated_at": now}
            for off in offsets])
    if db.run(S.ADVANCE_TABLE, {"new_id": new_id, "schema_version": version,
                                "table_id": table_id, "expected": expected}) != 1:
        raise CommitConflictError(table, expected)
    return Snapshot(table_id=table_id, snapshot_id=new_id, parent_id=expected,
                    schema_version=version, operation=operation, created_at=now,
                    commit_id=commit_id, summary=summary)


def raise_replay(ledger: Sequence[LedgerEntry],
                 ledger_get: Callable[[str], LedgerRecord | None]) -> None:
    """After a commit failed on an integrity error: `LedgerKeyExistsError` with the first
    ack if one of its ledger keys was applied before (looked up with `ledger_get`, on a
    connection of its own: the failed commit's has been given back)."""
    for le in ledger:
        rec = ledger_get(le.key)
        if rec is not None:
            raise LedgerKeyExistsError(rec)
