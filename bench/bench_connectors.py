"""Connector benchmark: the sync's initial snapshot of a PostgreSQL table against the read
limit of the same server, and the change-to-queryable lag.

    .venv/bin/python bench/bench_connectors.py [--rows 1000000] [--rate 1000] [--seconds 10]

A private PostgreSQL (`wal_level=logical`, tests/support/pg_logical.py) gets a table of
`--rows` orders-like rows (int key, text, int, numeric, timestamptz, jsonb). Then:

1. the read limit: `COPY (SELECT ...) TO STDOUT` of the same table (text format) drained by
   psycopg, rows/s over its wall time;
2. the sync's initial snapshot (`SyncPipeline.run(once=True)` on a fresh embedded data
   directory: the slot, the exported snapshot read as Arrow through ADBC, the extents and the
   commit), rows/s over its wall time;
3. lag: a writer commits `--rate` single-row updates per second at the source for
   `--seconds`, each stamped with its commit time; the sync runs continuously (poll interval
   0.05 s); after it catches up, the lag of each change is the time its batch committed in
   the catalog minus its source commit time. Reported p50 and p99.

MySQL/MariaDB figures belong to the MySQL connector (not here yet).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
import psycopg  # noqa: E402

import shoal  # noqa: E402
from shoal.frontends.sync.kind import resolve_sync_binding  # noqa: E402
from shoal.frontends.sync.pipeline import SyncPipeline, SyncProgress  # noqa: E402
from tests.support.pg_logical import start_logical_postgres  # noqa: E402

TABLE = "orders"


def load(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, customer text, qty int, "
                  "price numeric(10,2), created timestamptz, meta jsonb)")
        c.execute(f"INSERT INTO {TABLE} SELECT g, 'customer-' || (g %% 9973), g %% 17, "
                  "g * 0.01, now() - g * interval '1 second', jsonb_build_object('g', g, "
                  "'tag', 't' || (g %% 7)) FROM generate_series(1, %s) g", (rows,))
        c.execute(f"VACUUM ANALYZE {TABLE}")


def copy_out(url: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = 0
    with psycopg.connect(url) as c, c.cursor() as cur:
        with cur.copy(f"COPY (SELECT * FROM {TABLE}) TO STDOUT") as copy:
            for block in copy:
                n += bytes(block).count(b"\n")
    return n, time.perf_counter() - t0


def snapshot(url: str, data_dir: str) -> tuple[int, float, shoal.Shoal]:
    db = shoal.connect(data_dir=data_dir, allowed_hosts="127.0.0.1")
    db.sql(f"CREATE TABLE osync WITH (sync_source='{url}', sync_table='public.{TABLE}')")
    t0 = time.perf_counter()
    pipeline = SyncPipeline(db, resolve_sync_binding(db, "osync"))
    p = pipeline.run(once=True)
    wall = time.perf_counter() - t0
    pipeline.close()
    return p.snapshot_rows, wall, db


def lag(url: str, db: shoal.Shoal, rate: int, seconds: float) -> tuple[float, float, int]:
    binding = resolve_sync_binding(db, "osync")
    assert binding is not None
    binding = type(binding)(**{**binding.__dict__, "poll_interval_s": 0.05})
    stop = threading.Event()
    commits: list[tuple[float, int]] = []     # (wall time, position) of each catalog commit

    def on_commit(p: SyncProgress) -> None:
        commits.append((time.time(), p.position or 0))

    pipeline = SyncPipeline(db, binding, stop=stop, on_commit=on_commit)
    runner = threading.Thread(target=pipeline.run)
    runner.start()
    n = int(rate * seconds)
    with psycopg.connect(url, autocommit=True) as c:
        start = time.time()
        for i in range(n):
            due = start + i / rate
            while time.time() < due:
                pass
            c.execute(f"UPDATE {TABLE} SET qty = qty + 1 WHERE id = %s", (i % 1000 + 1,))
        head = c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    from shoal.frontends.sync.postgres import parse_lsn

    target = parse_lsn(head)
    while not commits or commits[-1][1] < target:
        if not runner.is_alive():
            raise RuntimeError("the sync stopped")
        time.sleep(0.05)
    stop.set()
    runner.join()
    pipeline.close()
    res = db.sql("SELECT _source_position, _timestamp FROM osync WHERE _op = 'update'")
    tab = res.table
    pos = [int(p.split(".")[0], 16) for p in tab.column("_source_position").to_pylist()]
    ts = np.array([t.timestamp() for t in tab.column("_timestamp").to_pylist()])
    cpos = np.array([c[1] for c in commits])
    ctime = np.array([c[0] for c in commits])
    idx = np.searchsorted(cpos, np.array(pos), side="left")
    lags = ctime[idx] - ts
    return float(np.percentile(lags, 50)), float(np.percentile(lags, 99)), len(lags)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    server = start_logical_postgres()
    try:
        load(server.url, args.rows)
        n_copy, t_copy = copy_out(server.url)
        with tempfile.TemporaryDirectory() as tmp:
            n_snap, t_snap, db = snapshot(server.url, tmp + "/data")
            assert n_snap == n_copy == args.rows, (n_snap, n_copy)
            print(f"PostgreSQL COPY TO STDOUT: {n_copy} rows in {t_copy:.2f}s = "
                  f"{n_copy / t_copy:,.0f} rows/s")
            print(f"sync initial snapshot:     {n_snap} rows in {t_snap:.2f}s = "
                  f"{n_snap / t_snap:,.0f} rows/s ({(n_snap / t_snap) / (n_copy / t_copy):.2f}x "
                  "of COPY)")
            p50, p99, n = lag(server.url, db, args.rate, args.seconds)
            print(f"change-to-queryable lag at {args.rate} changes/s ({n} changes): "
                  f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
            db.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
