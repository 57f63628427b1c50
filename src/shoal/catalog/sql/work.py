"""`SqlCatalog`'s work units: a queue of maintenance tasks (compaction, retention, ...) that
workers claim under a lease, renew, and finish.

A unit is `pending`, then `running` under a worker's lease, then `done` or `failed`; a
running unit whose lease expired may be claimed again (its `attempts` counts the claims).
Postgres claims with `FOR UPDATE SKIP LOCKED`, so concurrent workers never wait on each
other; on SQLite the write lock serialises claimers and the lease fields are the claim.
`enqueue_work(dedupe=True)` checks for a pending or running unit of the same kind and table
in the same transaction (serialised per kind and table by an advisory lock on Postgres).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, insert, or_, select, update

from shoal.catalog import operations as ops
from shoal.catalog.base import WorkUnit
from shoal.catalog.rows import DECODE_ERRORS, chunks, decoding
from shoal.catalog.sql import model as T
from shoal.catalog.sql.connections import SqlConnections, inserted_id
from shoal.errors import CatalogCorruptError


class SqlWork(SqlConnections):
    """The `WorkCatalog` role over SQLAlchemy."""

    def enqueue_work(self, kind: str, *, table: str | None = None,
                     payload: dict[str, Any] | None = None, dedupe: bool = False) -> WorkUnit:
        now = self._clock()
        w = T.work_units.c
        with self._write() as db:
            conn = db.conn
            table_id = None if table is None else ops.table_row(db, table)["id"]
            if dedupe:
                if self.dialect == "postgresql":  # serialise enqueuers of this kind and table
                    conn.execute(select(func.pg_advisory_xact_lock(
                        7302452, func.hashtext(f"{kind}:{table_id}"))))
                same_table = w.table_id.is_(None) if table_id is None else w.table_id == table_id
                same = conn.execute(select(w.id).where(
                    w.kind == kind, same_table, w.state.in_(["pending", "running"]))
                    .order_by(w.id).limit(1)).scalar()
                if same is not None:
                    return _units(conn, [same])[0]
            uid = inserted_id(conn.execute(insert(T.work_units).values(
                kind=kind, table_id=table_id, payload=payload or {}, state="pending",
                attempts=0, created_at=now, updated_at=now)))
            return _units(conn, [uid])[0]

    def claim_work(self, worker: str, *, kinds: Sequence[str] | None = None,
                   lease_s: float = 300.0) -> WorkUnit | None:
        """Claim the oldest pending unit, or a running one whose lease expired."""
        now = self._clock()
        w = T.work_units.c
        claimable = or_(w.state == "pending",
                        and_(w.state == "running", w.lease_expires_at < now))
        stmt = select(w.id, w.attempts).where(claimable)
        if kinds:
            stmt = stmt.where(w.kind.in_(list(kinds)))
        stmt = stmt.order_by(w.id).limit(1)
        if self.dialect == "postgresql":
            stmt = stmt.with_for_update(skip_locked=True)
        with self._write() as db:
            r = db.conn.execute(stmt).first()
            if r is None:
                return None
            db.conn.execute(update(T.work_units).where(w.id == r.id).values(
                state="running", lease_owner=worker, lease_expires_at=now + lease_s,
                attempts=r.attempts + 1, updated_at=now))
            return _units(db.conn, [r.id])[0]

    def finish_work(self, unit_id: int, worker: str, *, ok: bool,
                    result: dict[str, Any] | None = None) -> bool:
        """Record the outcome; False if the lease was lost to another worker meanwhile."""
        w = T.work_units.c
        with self._write() as db:
            n = db.conn.execute(update(T.work_units).where(
                w.id == unit_id, w.lease_owner == worker, w.state == "running").values(
                state="done" if ok else "failed", result=result, lease_expires_at=None,
                updated_at=self._clock())).rowcount
            return n == 1

    def renew_work(self, unit_id: int, worker: str, *, lease_s: float = 300.0) -> bool:
        w = T.work_units.c
        now = self._clock()
        with self._write() as db:
            n = db.conn.execute(update(T.work_units).where(
                w.id == unit_id, w.lease_owner == worker, w.state == "running").values(
                lease_expires_at=now + lease_s, updated_at=now)).rowcount
            return n == 1

    def list_work(self, *, kinds: Sequence[str] | None = None,
                  states: Sequence[str] | None = None, table: str | None = None,
                  limit: int = 100) -> list[WorkUnit]:
        w = T.work_units.c
        with self._read() as db:
            stmt = select(w.id)
            if kinds:
                stmt = stmt.where(w.kind.in_(list(kinds)))
            if states:
                stmt = stmt.where(w.state.in_(list(states)))
            if table is not None:
                stmt = stmt.where(w.table_id == ops.table_row(db, table)["id"])
            ids: Sequence[int] = db.conn.execute(
                stmt.order_by(w.id.desc()).limit(limit)).scalars().all()
            return _units(db.conn, ids)


def _units(conn: Connection, ids: Sequence[int]) -> list[WorkUnit]:
    """The work units of `ids`, in that order. Stored JSON is decoded while the rows are
    fetched: if that fails, the units are read again one by one to name the damaged one."""
    w = T.work_units.c
    try:
        rows = {r.id: r for chunk in chunks(list(ids))
                for r in conn.execute(select(T.work_units).where(w.id.in_(chunk)))}
    except DECODE_ERRORS as e:
        for uid in ids:
            with decoding("work_units", f"unit {uid}"):
                conn.execute(select(T.work_units).where(w.id == uid)).one()
        raise CatalogCorruptError("work_units", f"units {list(ids)}",
                                  f"{type(e).__name__}: {e}") from e
    return [_unit(rows[i]) for i in ids]


def _unit(r: Any) -> WorkUnit:
    with decoding("work_units", f"unit {r.id}"):
        return WorkUnit(id=r.id, kind=r.kind, table_id=r.table_id, payload=dict(r.payload),
                        state=r.state, attempts=r.attempts, lease_owner=r.lease_owner,
                        lease_expires_at=r.lease_expires_at,
                        result=None if r.result is None else dict(r.result),
                        created_at=r.created_at, updated_at=r.updated_at)
