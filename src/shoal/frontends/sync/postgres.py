"""PostgreSQL as a sync source: logical replication (`cdc`) or a cursor column (`poll`).

CDC. The source needs `wal_level=logical`. The sync creates, once, a publication and a
logical replication slot, both named by `sync_slot` (default `shoal_<table>`), the
publication `FOR TABLE` the source table only. The initial snapshot is read in the
transaction snapshot the slot exports when it is created (`CREATE_REPLICATION_SLOT ...
EXPORT_SNAPSHOT` on a replication connection), so it holds exactly the rows committed before
the slot's consistent point and the slot yields exactly the transactions after it. The rows
are read as Arrow through ADBC (the COPY binary protocol, no per-row Python). Changes are read
with `pg_logical_slot_peek_binary_changes` (pgoutput, protocol 1) over an ordinary
connection: peeking does not consume, so a crash loses nothing; once the catalog holds a
batch, `confirm` moves the slot (`pg_replication_slot_advance`), which lets the server drop
the WAL behind it. Positions are commit end LSNs.

Poll. Rows whose cursor is above the last committed one are read in cursor order, up to a
cursor value taken so that rows sharing a value are never split between batches. Positions
are the cursor's integer value (microseconds since the epoch for a timestamp cursor).
Poll mode sees no deletes, and a row updated with a cursor value at or below the last one
committed is not seen either.
"""

from __future__ import annotations

import datetime as dt
import logging
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pyarrow as pa

from shoal.frontends.sync.binding import SyncBinding, SyncSetupError, SyncSourceError
from shoal.frontends.sync.source import ChangeBatch, SnapshotRead
from shoal.types.columns import (BOOL, BYTES, DYNAMIC, INT, LONG, REAL, STRING, TIMESTAMP,
                                 ColumnType)
from shoal.types.schema import Column

log = logging.getLogger("shoal.sync")

# typname -> shoal type; anything else (numeric, uuid, arrays, enums, ...) is its text.
TYPE_MAP: dict[str, ColumnType] = {
    "bool": BOOL, "int2": INT, "int4": INT, "int8": LONG, "oid": LONG,
    "float4": REAL, "float8": REAL,
    "timestamp": TIMESTAMP, "timestamptz": TIMESTAMP, "date": TIMESTAMP,
    "json": DYNAMIC, "jsonb": DYNAMIC, "bytea": BYTES,
}
_TEXT_TYPES = frozenset({"text", "varchar", "bpchar", "name"})
PG_EPOCH_US = 946_684_800_000_000        # 2000-01-01 in microseconds since 1970-01-01
SNAPSHOT_EXTENT_ROWS = 1_000_000
PARALLEL_MIN_ROWS = 200_000    # smaller tables are read in one query


def shoal_type(typname: str) -> ColumnType:
    return TYPE_MAP.get(typname, STRING)


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def row_position(lsn: int, seq: int) -> str:
    """Text that sorts like (commit LSN, place in the transaction)."""
    return f"{lsn:016X}.{seq:010d}"


def _q(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


class PostgresSource:
    """A PostgreSQL table as a `SyncSource` (see the module docstring)."""

    def __init__(self, binding: SyncBinding) -> None:
        import psycopg

        self.binding = binding
        self.schema_name, self.table_name = binding.source_table.split(".", 1)
        self.qualified = f"{_q(self.schema_name)}.{_q(self.table_name)}"
        self._password = binding.password()
        try:
            extra: dict[str, Any] = ({} if self._password is None
                                     else {"password": self._password})
            self.conn = psycopg.connect(binding.source, autocommit=True, connect_timeout=10,
                                        **extra)
        except psycopg.Error as e:
            raise SyncSourceError(f'table "{binding.table}": cannot connect to '
                                  f"{binding.redacted}: {_first_line(e)}") from None
        self.conn.execute("SET TimeZone = 'UTC'")
        self.conn.execute("SET DateStyle = 'ISO'")
        self._types: dict[int, str] = {}
        self._relations: dict[int, list[tuple[str, int, bool]]] = {}

    # ---- identity and shape ---------------------------------------------------------------
    @property
    def source_id(self) -> str:
        parts = urlsplit(self.binding.source)
        where = f"{parts.hostname}:{parts.port or 5432}{parts.path}"
        if self.binding.mode == "cdc":
            return f"sync:pg:{where}:{self.binding.slot}"
        return f"sync:pg-poll:{where}:{self.binding.source_table}:{self.binding.cursor}"

    def _attributes(self) -> list[tuple[str, str]]:
        rows = self.conn.execute(
            "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = "
            "a.atttypid WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT "
            "a.attisdropped ORDER BY a.attnum", (self.qualified,)).fetchall()
        if not rows:
            raise SyncSetupError(f'sync_table: no table {self.binding.source_table} at '
                                 f"{self.binding.redacted}")
        return [(str(n), str(t)) for n, t in rows]

    def columns(self) -> list[Column]:
        return [Column(n, shoal_type(t)) for n, t in self._attributes()]

    def key(self) -> list[str]:
        rows = self.conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND "
            "i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
            (self.qualified,)).fetchall()
        return [str(r[0]) for r in rows]

    def check_setup(self) -> None:
        attrs = dict(self._attributes())
        if self.binding.mode == "poll":
            cursor = self.binding.cursor or ""
            if cursor not in attrs:
                raise SyncSetupError(f"sync_cursor: {self.binding.source_table} has no column "
                                     f"{cursor!r}")
            if shoal_type(attrs[cursor]) not in (INT, LONG, TIMESTAMP):
                raise SyncSetupError(f"sync_cursor: column {cursor!r} is {attrs[cursor]}; a "
                                     "cursor must be an integer or a timestamp")
            return
        level = self.conn.execute("SHOW wal_level").fetchone()
        if level is None or level[0] != "logical":
            raise SyncSetupError(
                f"sync_mode 'cdc' needs wal_level=logical at {self.binding.redacted} (it is "
                f"{level[0] if level else 'unknown'}): set it in postgresql.conf and restart "
                "the server, or use sync_mode 'poll' with a sync_cursor")
        if not self.key():
            raise SyncSetupError(f"sync_table: {self.binding.source_table} has no primary key; "
                                 "CDC needs one to identify updated and deleted rows")

    # ---- CDC: slot and publication ----------------------------------------------------------
    def _ensure_publication(self) -> None:
        pub = self.binding.slot
        have = self.conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                                 (pub,)).fetchone()
        if have is None:
            self.conn.execute(f"CREATE PUBLICATION {_q(pub)} FOR TABLE {self.qualified}")
            log.info("created publication %s for %s", pub, self.binding.source_table)

    def _drop_slot(self) -> None:
        have = self.conn.execute("SELECT active_pid FROM pg_replication_slots WHERE "
                                 "slot_name = %s", (self.binding.slot,)).fetchone()
        if have is not None:
            log.info("dropping replication slot %s to take a new snapshot", self.binding.slot)
            self.conn.execute("SELECT pg_drop_replication_slot(%s)", (self.binding.slot,))

    def _adbc_uri(self) -> str:
        if self._password is None:
            return self.binding.source
        parts = urlsplit(self.binding.source)
        user = quote(parts.username or "", safe="")
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, f"{user}:{quote(self._password, safe='')}@{host}",
                           parts.path, parts.query, parts.fragment))

    def _select_list(self) -> tuple[str, list[Column]]:
        exprs, cols = [], []
        for name, typ in self._attributes():
            st = shoal_type(typ)
            expr = _q(name)
            if st in (STRING, DYNAMIC) and typ not in _TEXT_TYPES:
                expr = f"{_q(name)}::text"
            elif typ == "date":
                expr = f"{_q(name)}::timestamp"
            exprs.append(f"{expr} AS {_q(name)}")
            cols.append(Column(name, st))
        return ", ".join(exprs), cols

    @contextmanager
    def snapshot(self) -> Iterator[SnapshotRead]:
        if self.binding.mode == "poll":
            with self._poll_snapshot() as snap:
                yield snap
            return
        from psycopg import pq

        self.check_setup()
        self._ensure_publication()
        self._drop_slot()
        conninfo = self.binding.source + ("&" if "?" in self.binding.source else "?") + \
            "replication=database"
        if self._password is not None:
            conninfo += "&password=" + quote(self._password, safe="")
        repl = pq.PGconn.connect(conninfo.encode())
        try:
            if repl.status != pq.ConnStatus.OK:
                raise SyncSourceError(f"cannot open a replication connection to "
                                      f"{self.binding.redacted}: "
                                      f"{_first_line(repl.error_message.decode(errors='replace'))}")
            res = repl.exec_(f"CREATE_REPLICATION_SLOT {_q(self.binding.slot)} LOGICAL pgoutput "
                             "EXPORT_SNAPSHOT".encode())
            if res.status != pq.ExecStatus.TUPLES_OK:
                raise SyncSourceError(f"creating replication slot {self.binding.slot} failed: "
                                      f"{_first_line(res.error_message.decode(errors='replace'))}")
            position = parse_lsn(_cell(res, 1))
            snapshot_name = _cell(res, 2)
            log.info("created replication slot %s at %s", self.binding.slot,
                     lsn_text(position))
            conn, parts, tables = self._read_plan(snapshot_name, position)
            try:
                yield SnapshotRead(position, tables, parts)
            finally:
                conn.close()
        finally:
            repl.finish()

    def _read_plan(self, snapshot_name: str, position: int) -> tuple[Any, list[RangePart],
                                                                     Iterator[pa.Table]]:
        """(the connection holding the snapshot open, the key-range parts, the tables)."""
        select, cols = self._select_list()
        conn = _snapshot_conn(self._adbc_uri(), snapshot_name)
        cur = conn.cursor()
        cur.execute("SELECT (extract(epoch FROM now()) * 1000000)::int8")
        now_us = int(cur.fetchone()[0])
        pos = row_position(position, 0)
        ranges = self._key_ranges(cur)
        parts = [RangePart(self._adbc_uri(), snapshot_name, select, self.qualified,
                           _q(self.key()[0]), lo, hi, tuple(cols), pos, now_us)
                 for lo, hi in ranges]

        def whole() -> Iterator[pa.Table]:
            cur.execute(f"SELECT {select} FROM {self.qualified}")
            yield from _log_tables(cur.fetch_record_batch(), cols, "snapshot", pos, now_us)

        return conn, parts, (_read_parts(parts) if len(parts) > 1 else whole())

    def _key_ranges(self, cur: Any) -> list[tuple[int, int]]:
        """[lo, hi) ranges of an integer primary key, one per parallel reader (none: read
        in one query)."""
        key = self.key()
        types = dict(self._attributes())
        readers = self.binding.snapshot_parallel
        if readers <= 1 or len(key) != 1 or shoal_type(types[key[0]]) not in (INT, LONG):
            return []
        cur.execute(f"SELECT min({_q(key[0])})::int8, max({_q(key[0])})::int8, "
                    f"(SELECT reltuples::int8 FROM pg_class WHERE oid = to_regclass("
                    f"'{self.qualified}')) FROM {self.qualified}")
        lo, hi, estimate = cur.fetchone()
        if lo is None:
            return []
        if estimate is None or estimate < 0:     # never analyzed: the key span instead
            estimate = hi - lo + 1
        if estimate < PARALLEL_MIN_ROWS:
            return []
        step = max(1, (hi - lo + readers) // readers)
        return [(a, min(a + step, hi + 1)) for a in range(lo, hi + 1, step)]

    # ---- CDC: changes -----------------------------------------------------------------------
    def head(self) -> int:
        if self.binding.mode == "poll":
            row = self.conn.execute(f"SELECT max({self._cursor_value()}) FROM "
                                    f"{self.qualified}").fetchone()
            return -1 if row is None or row[0] is None else int(row[0])
        row = self.conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        return parse_lsn(str(row[0]))

    def confirm(self, position: int) -> None:
        if self.binding.mode == "poll":
            return
        row = self.conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                "WHERE slot_name = %s", (self.binding.slot,)).fetchone()
        if row is None:
            raise SyncSourceError(f"replication slot {self.binding.slot} is gone at "
                                  f"{self.binding.redacted}; drop the table's rows or recreate "
                                  "the table to take a new snapshot")
        if row[0] is None or parse_lsn(str(row[0])) < position:
            self.conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)",
                              (self.binding.slot, lsn_text(position)))

    def changes(self, after: int, upto: int | None, limit: int) -> ChangeBatch:
        import psycopg

        if self.binding.mode == "poll":
            return self._poll_changes(after, upto, limit)
        try:
            rows = self.conn.execute(
                "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, %s, "
                "'proto_version', '1', 'publication_names', %s)",
                (self.binding.slot, None if upto is None else lsn_text(upto), limit,
                 self.binding.slot)).fetchall()
        except psycopg.Error as e:
            raise SyncSourceError(f"reading changes of slot {self.binding.slot} at "
                                  f"{self.binding.redacted} failed: {_first_line(e)}") from None
        decoder = _Decoder(self, after)
        for (data,) in rows:
            decoder.message(bytes(data))
        return decoder.batch()

    def relation_columns(self, relid: int) -> list[tuple[str, int, bool]]:
        return self._relations[relid]

    def typname(self, oid: int) -> str:
        name = self._types.get(oid)
        if name is None:
            row = self.conn.execute("SELECT typname FROM pg_type WHERE oid = %s",
                                    (oid,)).fetchone()
            name = self._types[oid] = "text" if row is None else str(row[0])
        return name

    # ---- poll -------------------------------------------------------------------------------
    def _cursor_value(self) -> str:
        c = _q(self.binding.cursor or "")
        typ = dict(self._attributes()).get(self.binding.cursor or "", "int8")
        if shoal_type(typ) == TIMESTAMP:
            return f"(extract(epoch FROM {c}::timestamptz) * 1000000)::int8"
        return f"{c}::int8"

    @contextmanager
    def _poll_snapshot(self) -> Iterator[SnapshotRead]:
        self.check_setup()
        top = self.head()
        yield SnapshotRead(top, self._poll_read(None, top, "snapshot"))

    def _poll_changes(self, after: int, upto: int | None, limit: int) -> ChangeBatch:
        value = self._cursor_value()
        row = self.conn.execute(
            f"SELECT max(v) FROM (SELECT {value} AS v FROM {self.qualified} WHERE {value} > %s"
            f"{'' if upto is None else ' AND ' + value + ' <= %s'} ORDER BY 1 LIMIT %s) s",
            (after, *(() if upto is None else (upto,)), limit)).fetchone()
        if row is None or row[0] is None:
            return ChangeBatch(None, None, self.columns())
        top = int(row[0])
        tables = list(self._poll_read(after, top, "update"))
        rows = pa.concat_tables(tables) if tables else None
        return ChangeBatch(rows, top, self.columns(), 0 if rows is None else rows.num_rows)

    def _poll_read(self, after: int | None, top: int, op: str) -> Iterator[pa.Table]:
        import adbc_driver_postgresql.dbapi as adbc

        if top < 0:
            return
        select, cols = self._select_list()
        value = self._cursor_value()
        where = f"{value} <= {int(top)}" + ("" if after is None else
                                            f" AND {value} > {int(after)}")
        conn = adbc.connect(self._adbc_uri())
        try:
            cur = conn.cursor()
            cur.execute(f"SELECT {select}, {value} AS __shoal_cursor FROM {self.qualified} "
                        f"WHERE {where} ORDER BY {value}")
            tab = cur.fetch_arrow_table()
        finally:
            conn.close()
        cursor = tab.column("__shoal_cursor").combine_chunks().cast(pa.int64())
        positions = pa.array([f"{v:020d}" for v in cursor.to_pylist()], pa.string())
        if shoal_type(dict(self._attributes())[self.binding.cursor or ""]) != TIMESTAMP:
            now_us = int(dt.datetime.now(dt.UTC).timestamp() * 1e6)   # no commit time: now
            cursor = pa.repeat(pa.scalar(now_us, pa.int64()), tab.num_rows)
        tab = tab.drop_columns(["__shoal_cursor"])
        yield _log_table(tab, cols, pa.repeat(op, tab.num_rows).cast(pa.string()), positions,
                         cursor)

    def close(self) -> None:
        self.conn.close()


def open_source(binding: SyncBinding) -> PostgresSource:
    return PostgresSource(binding)


def _snapshot_conn(uri: str, snapshot_name: str) -> Any:
    """An ADBC connection inside the exported snapshot (every reader sees the same rows)."""
    import adbc_driver_postgresql.dbapi as adbc

    conn = adbc.connect(uri, autocommit=False)
    cur = conn.cursor()
    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    cur.execute(f"SET TRANSACTION SNAPSHOT '{snapshot_name}'")
    return conn


@dataclass(frozen=True)
class RangePart:
    """One range of the primary key of a snapshot, readable anywhere (a thread, a Spark
    task) while the replication connection that exported the snapshot stays open. Holds the
    connection URI, password included: it travels to Spark executors like a JDBC URL."""

    uri: str
    snapshot_name: str
    select: str
    qualified: str
    key: str
    lo: int
    hi: int
    columns: tuple[Column, ...]
    position: str
    now_us: int

    def read(self) -> Iterator[pa.Table]:
        conn = _snapshot_conn(self.uri, self.snapshot_name)
        try:
            cur = conn.cursor()
            cur.execute(f"SELECT {self.select} FROM {self.qualified} WHERE {self.key} >= "
                        f"{self.lo} AND {self.key} < {self.hi}")
            yield from _log_tables(cur.fetch_record_batch(), list(self.columns), "snapshot",
                                   self.position, self.now_us)
        finally:
            conn.close()


def _read_parts(parts: list[RangePart]) -> Iterator[pa.Table]:
    """The parts read by parallel threads, tables yielded as they come."""
    import queue
    import threading

    out: queue.Queue[pa.Table | BaseException | None] = queue.Queue(maxsize=len(parts))
    cancel = threading.Event()

    def read(part: RangePart) -> None:
        try:
            for tab in part.read():
                if cancel.is_set():
                    return
                out.put(tab)
            out.put(None)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            out.put(e)

    threads = [threading.Thread(target=read, args=(p,), name=f"shoal-sync-snapshot-{i}",
                                daemon=True) for i, p in enumerate(parts)]
    for t in threads:
        t.start()
    done = 0
    try:
        while done < len(threads):
            item = out.get()
            if item is None:
                done += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        cancel.set()
        while any(t.is_alive() for t in threads):   # unblock readers waiting to put
            try:
                out.get(timeout=0.1)
            except queue.Empty:
                continue


def _cell(res: Any, col: int) -> str:
    value = res.get_value(0, col)
    return "" if value is None else bytes(value).decode()


def _first_line(e: object) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


# ---- Arrow shaping ----------------------------------------------------------------------------
def _log_table(tab: pa.Table, cols: list[Column], ops: pa.Array, positions: pa.Array,
               commit_us: pa.Array) -> pa.Table:
    arrays, names = [], []
    for col in cols:
        arr = tab.column(col.name)
        arrays.append(_to_shoal(arr, col.type))
        names.append(col.name)
    ts = pa.compute.multiply(commit_us, 1000).cast(pa.timestamp("ns", tz="UTC"))
    arrays += [ops, positions, ts]
    names += ["_op", "_source_position", "_timestamp"]
    return pa.table(arrays, names=names)


def _to_shoal(arr: pa.ChunkedArray | pa.Array, typ: ColumnType) -> pa.Array:
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if isinstance(arr.type, pa.ExtensionType):
        arr = arr.storage
    target = typ.arrow()
    if pa.types.is_timestamp(arr.type) and arr.type.tz is None:
        arr = arr.cast(pa.timestamp(arr.type.unit, tz="UTC"))
    return arr.cast(target)


def _log_tables(reader: pa.RecordBatchReader, cols: list[Column], op: str, position: str,
                commit_us: int) -> Iterator[pa.Table]:
    pending: list[pa.RecordBatch] = []
    count = 0
    for rb in reader:
        pending.append(rb)
        count += rb.num_rows
        if count >= SNAPSHOT_EXTENT_ROWS:
            yield _constant(pa.Table.from_batches(pending), cols, op, position, commit_us)
            pending, count = [], 0
    if count:
        yield _constant(pa.Table.from_batches(pending), cols, op, position, commit_us)


def _constant(tab: pa.Table, cols: list[Column], op: str, position: str,
              commit_us: int) -> pa.Table:
    n = tab.num_rows
    return _log_table(tab, cols, pa.repeat(op, n).cast(pa.string()),
                      pa.repeat(position, n).cast(pa.string()),
                      pa.repeat(pa.scalar(commit_us, pa.int64()), n))


# ---- pgoutput -----------------------------------------------------------------------------------
def _parse_text(typname: str) -> Callable[[str], Any]:
    st = shoal_type(typname)
    if st == BOOL:
        return lambda s: s == "t"
    if st in (INT, LONG):
        return int
    if st == REAL:
        return float
    if st == BYTES:
        return lambda s: bytes.fromhex(s[2:]) if s.startswith("\\x") else s.encode()
    if st == DYNAMIC:
        return lambda s: s.encode()
    if st == TIMESTAMP:
        return _parse_timestamp
    return str


def _parse_timestamp(s: str) -> dt.datetime | None:
    if s in ("infinity", "-infinity"):
        return None
    if s.endswith(" BC"):
        return None
    if len(s) > 3 and s[-3] in "+-" and s[-6:-3].count(":") == 0 and s[-3:].lstrip(
            "+-").isdigit():
        s = s + ":00"
    value = dt.datetime.fromisoformat(s)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value


class _Decoder:
    """pgoutput messages -> the rows of the transactions committed after `after`."""

    def __init__(self, source: PostgresSource, after: int) -> None:
        self.source = source
        self.after = after
        self.current: list[tuple[str, dict[str, Any]]] = []
        self.rows: dict[str, list[Any]] = {}
        self.ops: list[str] = []
        self.positions: list[str] = []
        self.times: list[int] = []
        self.position: int | None = None
        self.columns: dict[str, ColumnType] = {c.name: c.type for c in source.columns()}
        self.changes = 0

    def message(self, data: bytes) -> None:
        kind = data[:1]
        if kind == b"B":
            self.current = []
        elif kind == b"C":
            _flags, _commit, end, ts = struct.unpack_from(">bqqq", data, 1)
            if end > self.after and self.current:
                self._emit(end, ts + PG_EPOCH_US)
            if end > self.after:
                self.position = end
            self.current = []
        elif kind == b"R":
            self._relation(data)
        elif kind == b"I":
            relid, = struct.unpack_from(">I", data, 1)
            values, _ = self._tuple(relid, data, 6)
            self.current.append(("insert", values))
        elif kind == b"U":
            relid, = struct.unpack_from(">I", data, 1)
            pos = 5
            old = None
            if data[pos:pos + 1] in (b"K", b"O"):
                old, pos = self._tuple(relid, data, pos + 1)
            new, _ = self._tuple(relid, data, pos + 1)
            if old is not None:
                keys = [n for n, _, k in self.source.relation_columns(relid) if k]
                if any(old.get(k) != new.get(k) for k in keys):
                    self.current.append(("delete", {k: old.get(k) for k in keys}))
            self.current.append(("update", new))
        elif kind == b"D":
            relid, = struct.unpack_from(">I", data, 1)
            old, _ = self._tuple(relid, data, 6)
            self.current.append(("delete", old))
        elif kind == b"T":
            log.warning("table %s was truncated at the source; the change log does not record "
                        "truncations (take a new snapshot to drop the old rows)",
                        self.source.binding.source_table)

    def _relation(self, data: bytes) -> None:
        relid, = struct.unpack_from(">I", data, 1)
        pos = 5
        _ns, pos = _cstring(data, pos)
        _name, pos = _cstring(data, pos)
        pos += 1   # replica identity
        ncols, = struct.unpack_from(">h", data, pos)
        pos += 2
        cols = []
        for _ in range(ncols):
            flags = data[pos]
            name, pos = _cstring(data, pos + 1)
            oid, _typmod = struct.unpack_from(">Ii", data, pos)
            pos += 8
            cols.append((name, oid, bool(flags & 1)))
            self.columns[name] = shoal_type(self.source.typname(oid))
        self.source._relations[relid] = cols

    def _tuple(self, relid: int, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        cols = self.source.relation_columns(relid)
        n, = struct.unpack_from(">h", data, pos)
        pos += 2
        out: dict[str, Any] = {}
        for i in range(n):
            kind = data[pos:pos + 1]
            pos += 1
            name, oid, _ = cols[i]
            if kind == b"t":
                size, = struct.unpack_from(">i", data, pos)
                text = data[pos + 4:pos + 4 + size].decode()
                pos += 4 + size
                out[name] = _parse_text(self.source.typname(oid))(text)
            elif kind == b"n":
                out[name] = None
            # 'u': an unchanged TOASTed value the server did not send: left null
        return out, pos

    def _emit(self, end: int, commit_us: int) -> None:
        for seq, (op, values) in enumerate(self.current):
            self.ops.append(op)
            self.positions.append(row_position(end, seq + 1))
            self.times.append(commit_us)
            start = len(self.ops) - 1
            for name, value in values.items():
                col = self.rows.get(name)
                if col is None:
                    col = self.rows[name] = [None] * start
                col.append(value)
            for col in self.rows.values():
                if len(col) < len(self.ops):
                    col.append(None)
        self.changes += len(self.current)

    def batch(self) -> ChangeBatch:
        columns = [Column(n, t) for n, t in self.columns.items()]
        if not self.ops:
            return ChangeBatch(None, self.position, columns, 0)
        arrays, names = [], []
        for col in columns:
            values = self.rows.get(col.name, [None] * len(self.ops))
            arrays.append(_array(values, col.type))
            names.append(col.name)
        ts = pa.compute.multiply(pa.array(self.times, pa.int64()), 1000).cast(
            pa.timestamp("ns", tz="UTC"))
        arrays += [pa.array(self.ops, pa.string()), pa.array(self.positions, pa.string()), ts]
        names += ["_op", "_source_position", "_timestamp"]
        return ChangeBatch(pa.table(arrays, names=names), self.position, columns, self.changes)


def _array(values: list[Any], typ: ColumnType) -> pa.Array:
    """The values as `typ`; as text when the column's type changed at the source within the
    batch (the pipeline then casts each value, or rejects it, against the table's type)."""
    try:
        return pa.array(values, typ.arrow())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else v.decode(errors="replace")
                         if isinstance(v, bytes) else v.isoformat()
                         if isinstance(v, dt.datetime) else str(v) for v in values],
                        pa.string())


def _cstring(data: bytes, pos: int) -> tuple[str, int]:
    end = data.index(b"\x00", pos)
    return data[pos:end].decode(), end + 1
