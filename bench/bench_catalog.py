"""Catalog benchmarks: commit rate under concurrency, and stage-1 planning over 100k extents.

    .venv/bin/python bench/bench_catalog.py [--pg postgresql://postgres@127.0.0.1:5432/test]
        [--manifests 100000] [--commits 400]

1. Commit rate: snapshots/s for 1, 4 and 16 concurrent writers (threads), each commit one
   manifest row through the commit coordinator's retry loop, on SQLite (`LiteCatalog`, what
   `open_catalog` gives, and `SqlCatalog` beside it) and on Postgres.
2. Stage-1 planning: 100,000 manifest rows with realistic stats (one service, a level set, a
   status set, ~40 message tokens; one minute of data each); the latency of
   `plan_extents(service = X AND 15-minute window)`, of a time-range-only plan and of a
   token lookup, median and p95 over 30 runs. Target: <= 50 ms on Postgres for
   time range + equality.

Postgres runs in a throwaway schema that is dropped at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shoal.catalog import open_catalog  # noqa: E402
from shoal.catalog.base import ManifestEntry  # noqa: E402
from shoal.catalog.sql import SqlCatalog  # noqa: E402
from shoal.commit import CommitCoordinator  # noqa: E402
from shoal.format.base import And, Equals, StringHas, TimeRange  # noqa: E402
from shoal.types import INT, STRING, Column, Schema  # noqa: E402
from tests.pg import fresh_schema  # noqa: E402

SCHEMA = Schema.create([Column("service", STRING), Column("level", STRING),
                        Column("message", STRING), Column("status", INT)])
MIN = 60 * 1_000_000_000
WORDS = [f"word{i}" for i in range(400)]


def entry(i: int, rng: random.Random) -> ManifestEntry:
    eid = uuid.uuid4().hex
    return ManifestEntry(
        extent_id=eid, object_path=f"tables/logs.1/extents/{eid}.tlm", byte_size=4 << 20,
        row_count=50_000, block_count=1, min_ts=i * MIN, max_ts=i * MIN + MIN - 1,
        schema_version=1,
        column_stats={"service": {"distinct": [f"svc-{i % 50}"], "tokens": ["svc", str(i % 50)]},
                      "level": {"distinct": ["error", "info", "warn"],
                                "tokens": ["error", "info", "warn"]},
                      "status": {"distinct": [200, 404, 500], "tokens": None},
                      "message": {"distinct": None,
                                  "tokens": sorted(rng.sample(WORDS, 40))}})


def commit_rate(url: str, writers: int, total: int, *, sqlalchemy: bool = False) -> float:
    """`sqlalchemy`: through `SqlCatalog` even for a SQLite file (open_catalog gives
    `LiteCatalog`, its commits on sqlite3)."""
    cat = SqlCatalog(url) if sqlalchemy else open_catalog(url)
    name = f"t{uuid.uuid4().hex[:8]}"
    cat.create_table(name, SCHEMA)

    class NoStore:
        def delete(self, path: str) -> None:
            pass

    coord = CommitCoordinator(cat, NoStore(), None, max_attempts=10_000)  # type: ignore[arg-type]
    per = total // writers
    rng = random.Random(1)

    def run() -> None:
        for i in range(per):
            coord.append(name, [entry(i, rng)])

    threads = [threading.Thread(target=run) for _ in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    assert cat.load_table(name).current_snapshot_id == per * writers + 1
    cat.close()
    return per * writers / dt


def planning(url: str, n: int) -> dict[str, tuple[float, float]]:
    cat = open_catalog(url)
    cat.create_table("logs", SCHEMA)
    rng = random.Random(2)
    chunk = 5000
    t0 = time.perf_counter()
    for start in range(0, n, chunk):
        snap = cat.load_table("logs").current_snapshot_id
        cat.commit("logs", expected_snapshot_id=snap, operation="append",
                   commit_id=uuid.uuid4().hex,
                   add=[entry(i, rng) for i in range(start, min(n, start + chunk))])
    load_s = time.perf_counter() - t0
    if cat.dialect == "postgresql":
        with cat.engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE manifests")
    mid = n // 2
    lookups = {
        "service + 15 min": And((Equals("service", "svc-7"),
                                 TimeRange(mid * MIN, (mid + 15) * MIN - 1))),
        "15 min only": TimeRange(mid * MIN, (mid + 15) * MIN - 1),
        "token + 1 day": And((StringHas("message", "word7"),
                              TimeRange(mid * MIN, (mid + 1440) * MIN - 1))),
    }
    out: dict[str, tuple[float, float]] = {}
    for label, pred in lookups.items():
        times = []
        for _ in range(30):
            t = time.perf_counter()
            plan = cat.plan_extents("logs", pred)
            times.append((time.perf_counter() - t) * 1000)
        assert plan.considered == n
        times.sort()
        out[label] = (statistics.median(times), times[int(len(times) * 0.95) - 1])
    out["_load_s"] = (load_s, 0.0)
    cat.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--manifests", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=400)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    print(f"## commit rate (snapshots/s, {args.commits} commits per run)")
    print("| catalog | 1 writer | 4 writers | 16 writers |\n|---|---|---|---|")
    for label in ("sqlite", "sqlite, SqlCatalog", "postgres"):
        rates = []
        for w in (1, 4, 16):
            if label.startswith("sqlite"):
                rates.append(commit_rate(f"sqlite:///{tmp / uuid.uuid4().hex}.db", w,
                                         args.commits, sqlalchemy=label != "sqlite"))
            else:
                with fresh_schema(args.pg) as url:
                    rates.append(commit_rate(url, w, args.commits))
        print(f"| {label} | " + " | ".join(f"{r:,.0f}" for r in rates) + " |")
    print(f"\n## stage-1 planning over {args.manifests:,} manifest rows (ms, median / p95)")
    print("| catalog | " + " | ".join(["service + 15 min", "15 min only", "token + 1 day"])
          + " | load (s) |\n|---|---|---|---|---|")
    for label in ("sqlite", "postgres"):
        if label == "sqlite":
            res = planning(f"sqlite:///{tmp / 'plan.db'}", args.manifests)
        else:
            with fresh_schema(args.pg) as url:
                res = planning(url, args.manifests)
        cells = [f"{res[k][0]:.1f} / {res[k][1]:.1f}" for k in
                 ("service + 15 min", "15 min only", "token + 1 day")]
        print(f"| {label} | " + " | ".join(cells) + f" | {res['_load_s'][0]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
