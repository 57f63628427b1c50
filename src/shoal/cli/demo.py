"""`shoal demo`: the storage spine end to end on the embedded default, in a temporary dir.

It creates a `logs` table, writes generated log extents through the commit coordinator
(with a schema evolution half-way and an idempotent replay), then runs needle lookups through
stage-1 (catalog) and stage-2 (block stats) pruning and prints what was skipped. The query
lane replaces the lookups with Spark SQL over the HTTP server.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

from shoal.catalog import LedgerEntry
from shoal.config import Config
from shoal.format.base import And, Equals, StringHas, TimeRange

SEC = 1_000_000_000
SERVICES = ["api", "auth", "billing", "search", "checkout", "ingest", "mailer", "cdn"]
WORDS = ["request", "served", "cache", "miss", "hit", "user", "login", "token", "refresh",
         "payment", "declined", "timeout", "upstream", "retry", "connection", "reset"]


def _batch(schema: pa.Schema, rng: random.Random, start_ns: int, n: int, service: str,
           with_region: bool) -> pa.RecordBatch:
    rows = []
    for i in range(n):
        msg = " ".join(rng.choice(WORDS) for _ in range(6))
        row = {"_timestamp": start_ns + i * (60 * SEC // n), "props": None, "service": service,
               "level": rng.choice(["info", "info", "info", "warn", "error"]), "message": msg,
               "trace_id": "%032x" % rng.getrandbits(128), "status": rng.choice([200, 200, 404,
                                                                                  500]),
               "duration_ms": rng.randint(1, 900),
               "attrs": json.dumps({"http": {"method": rng.choice(["GET", "POST"])}}).encode()}
        if with_region:
            row["region"] = rng.choice(["eu-west-1", "us-east-1"])
        rows.append(row)
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def run_demo(*, keep: bool = False) -> int:
    from shoal.client import Shoal
    from shoal.types import DYNAMIC, INT, LONG, STRING, Column

    console = Console()
    root = tempfile.mkdtemp(prefix="shoal-demo-")
    t0 = time.perf_counter()
    db = Shoal(Config(data_dir=root))
    try:
        db.create_table("logs", [Column("service", STRING), Column("level", STRING),
                                 Column("message", STRING), Column("trace_id", STRING),
                                 Column("status", INT), Column("duration_ms", LONG),
                                 Column("attrs", DYNAMIC)])
        rng = random.Random(42)
        base = 1_700_000_000 * SEC
        needle_trace = None
        for minute in range(48):
            with_region = minute >= 24
            if minute == 24:
                db.add_columns("logs", [Column("region", STRING)])
                console.print("[bold]schema evolved[/]: added column region (version 2)")
            info = db.catalog.load_table("logs")
            service = SERVICES[minute % len(SERVICES)]
            batch = _batch(info.schema.arrow(), rng, base + minute * 60 * SEC, 500, service,
                           with_region)
            if minute == 30:
                needle_trace = batch.column(batch.schema.get_field_index("trace_id"))[7].as_py()
            entry = db.coordinator.write_extent(info, [batch])
            db.coordinator.append("logs", [entry],
                                  ledger=[LedgerEntry(f"demo-minute-{minute}", {"rows": 500})])
        # An idempotent replay: the same key again writes nothing and returns the first ack.
        info = db.catalog.load_table("logs")
        again = db.coordinator.write_extent(info, [_batch(info.schema.arrow(), rng, base, 500,
                                                          "api", True)])
        replay = db.coordinator.append("logs", [again],
                                       ledger=[LedgerEntry("demo-minute-3", {"rows": 500})])
        assert replay.replayed is not None
        console.print(f"replayed key demo-minute-3 -> original snapshot "
                      f"{replay.replayed.snapshot_id}, nothing written")
        desc = db.describe("logs")
        console.print(f"table logs: {desc['row_count']} rows in {desc['extent_count']} extents, "
                      f"snapshot {desc['snapshot_id']}, schema version "
                      f"{desc['schema_version']}")

        queries = [
            ("needle: trace_id", Equals("trace_id", needle_trace),
             lambda t: pc.equal(t["trace_id"], needle_trace)),
            ("service + 15 min window", And((Equals("service", "billing"),
                                             TimeRange(base + 10 * 60 * SEC,
                                                       base + 25 * 60 * SEC))),
             lambda t: pc.and_(pc.equal(t["service"], "billing"), pc.and_(
                 pc.greater_equal(t["_timestamp"].cast(pa.int64()), base + 10 * 60 * SEC),
                 pc.less_equal(t["_timestamp"].cast(pa.int64()), base + 25 * 60 * SEC)))),
            ("token: timeout + service", And((StringHas("message", "timeout"),
                                              Equals("service", "auth"))),
             lambda t: pc.and_(pc.match_substring(t["message"], "timeout"),
                               pc.equal(t["service"], "auth"))),
        ]
        out = Table("query", "rows", "extents read/considered", "blocks read", "bytes read",
                    "ms")
        for name, pred, row_filter in queries:
            q0 = time.perf_counter()
            data, stats = db.read("logs", pred, columns=["_timestamp", "service", "message",
                                                         "trace_id", "region"])
            rows = data.filter(row_filter(data)).num_rows  # stage 3: the exact filter
            out.add_row(name, str(rows),
                        f"{stats.extents_read}/{stats.extents_considered}",
                        str(stats.blocks_read), f"{stats.bytes_read:,}",
                        f"{(time.perf_counter() - q0) * 1000:.1f}")
        console.print(out)
        console.print(f"demo finished in {time.perf_counter() - t0:.1f}s"
                      + (f"; data kept in {root}" if keep else ""))
        return 0
    finally:
        db.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
