"""Query benchmark: shoal (Spark and embedded engines) vs Spark over Parquet vs DuckDB over
Parquet, in one run (docs/architecture.md).

    .venv/bin/python bench/bench_query.py [--rows 10000000] [--extents 250] [--repeat 5]
        [--needle-scale 10] [--http-repeat 50] [--work DIR] [--keep]

Generates one day of realistic logs (`_timestamp` ns, `props` JSON on a fifth of the rows,
service (50 values, skewed), level (5), a templated message with an id token, trace_id (32
hex, unique), status int, duration_ms real) as `--extents` extents, each a contiguous time
slice with its rows sorted by time, and writes the same rows twice:

- into shoal: one `db.append` per extent (embedded SQLite catalog + local store, tlm v2,
  zstd, 64k-row blocks, every stat and membership filter the writer builds);
- as Parquet: one file per extent (zstd, 64k-row row groups, min/max statistics, timestamps
  in µs because Spark rejects ns Parquet timestamps).

One Spark session (shoal's, `local[2]`) runs shoal's queries and a temp view over the
Parquet directory; DuckDB reads the same Parquet files. Three queries, each on every engine,
warm (one run to warm, then the median of `--repeat` runs, engines interleaved so outside
load hits each alike), every engine's answer asserted equal:

- needle:     `SELECT * FROM logs WHERE trace_id = '<an existing id>'`
- selective:  count and avg(duration_ms) of one service in a 15-minute window whose message
              has the whole token `timeout` (shoal `has()`, Spark `RLIKE` with the same
              pattern, DuckDB `regexp_matches` with the same RE2-compatible pattern)
- full aggregation: count by minute, service and level, ordered.

shoal runs twice: through Spark (`engine=spark`, the Python DataSource) and through its
embedded engine (`engine=local`: shoal's own pruned read, DuckDB in process).
The needle is also timed end to end through `POST /v1/query` on a `shoal serve` subprocess
over the same data (`--http-repeat` runs, engine `auto`, after 5 warm-up runs).

Another engine row, "shoal plan + Spark Parquet (what-if)", runs shoal's planner (stages 1
and 2 in the catalog and the footers) and hands Spark's native Parquet reader only the files
of the surviving extents: an estimate of what a Parquet execution format would give.

Bytes read: shoal from its query stats; Spark from what its JVM read through read(2)
during the query (/proc/<pid>/io `rchar`, local mode) minus the shuffle bytes read back,
beside the scan node's "size of files read" (whole selected files); DuckDB from its
FileSystem log (bytes of every READ), on a fresh connection so that its file cache starts
empty. Latency: wall time of the call that returns the answer as Arrow (`db.sql`,
`toArrow()`, DuckDB's `to_arrow_table()`), planning included.

Then, with `--needle-scale K` > 1, (K - 1) more days are appended (K times the rows, in
K times the extents) and the needle query runs again on every engine.

Targets (query issue): needle and selective read <= 1% of the table's bytes and beat Spark
over Parquet; full aggregation within 1.5x of Spark over Parquet; needle at K x the data
barely moves. Embedded engine: needle warm p50 <= 30 ms through `POST /v1/query` and <= 0.5x
DuckDB-over-Parquet; selective and full aggregation <= 1x DuckDB-over-Parquet on the
embedded engine. Latency columns give p50 and p99 of the timed runs. Output is Markdown.
Generated data lives under `--work` (a temporary directory unless given; deleted at the end
unless `--keep`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import shoal
from shoal.query.cancel import _Run
from shoal.query.limits import QueryLimits
from shoal.query.planner import analyze, has_pattern
from shoal.query.scan_plan import build_scan_spec
from shoal.types import INT, REAL, STRING, Column

DAY0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
DAY_NS = 86_400 * 10**9
SERVICES = [f"svc-{i}" for i in range(50)]
LEVELS = ["debug", "info", "warn", "error", "fatal"]
LEVEL_WEIGHTS = [0.15, 0.6, 0.15, 0.09, 0.01]
# (template, weight). Some carry the token `timeout` (any case, next to punctuation or `_`),
# some only look like it (`timeouts`, `timeout2`) so that every engine's whole-token rule
# is exercised.
TEMPLATES = [
    ("request served in", 30), ("cache hit for key", 12), ("cache miss for key", 8),
    ("user login succeeded", 6), ("token refresh ok", 5), ("payment declined by issuer", 3),
    ("upstream timeout after retry", 2), ("connection TIMEOUT, closing socket", 1),
    ("read_timeout waiting for replica", 1), ("too many timeouts from shard", 1),
    ("queue worker timeout2 exceeded", 1), ("commit acknowledged by replica", 6),
    ("handler finished job", 8), ("connection reset by peer", 2),
]
STATUSES = [200, 200, 200, 200, 201, 204, 301, 400, 404, 500, 503]
TABLE = "logs"
PQ_VIEW = "pq_logs"
PQ_PRUNED_VIEW = "pq_logs_pruned"


# ---- data -----------------------------------------------------------------------------------

def _hex_ids(rng: np.random.Generator, n: int, width: int = 32) -> pa.Array:
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    data = digits[rng.integers(0, 16, size=(n, width), dtype=np.uint8)].tobytes()
    offsets = np.arange(0, width * n + 1, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _pick(rng: np.random.Generator, values: list[str], n: int,
          weights: list[float] | None = None) -> pa.Array:
    p = None if weights is None else np.asarray(weights, dtype=float) / sum(weights)
    return pc.take(pa.array(values), pa.array(rng.choice(len(values), n, p=p)))


_SERVICE_WEIGHTS = [1.0 / (i + 5) for i in range(len(SERVICES))]


def make_extent(index: int, rows: int, extents_per_day: int, schema: pa.Schema) -> pa.Table:
    """Extent `index`: `rows` log rows, sorted by time, covering its slice of its day."""
    rng = np.random.default_rng(1_000_003 * index + 17)
    span = DAY_NS // extents_per_day
    start = int(DAY0.timestamp()) * 10**9 + index * span
    ts = np.sort(rng.integers(start, start + span, rows, dtype=np.int64))
    req = pc.binary_join_element_wise("req=", _hex_ids(rng, rows, 12), "")
    message = pc.binary_join_element_wise(
        _pick(rng, [t for t, _ in TEMPLATES], rows, [w for _, w in TEMPLATES]), req, " ")
    props_mask = rng.random(rows) < 0.2
    props = pc.binary_join_element_wise(
        '{"host":"node-', pc.cast(pa.array(rng.integers(0, 200, rows)), pa.string()),
        '","region":"', _pick(rng, ["eu", "us", "ap"], rows), '"}', "")
    props = pc.if_else(pa.array(props_mask), props, pa.nulls(rows, pa.string()))
    arrays = {
        "_timestamp": pa.array(ts, pa.timestamp("ns", tz="UTC")),
        "props": props.cast(pa.binary()),
        "service": _pick(rng, SERVICES, rows, _SERVICE_WEIGHTS),
        "level": _pick(rng, LEVELS, rows, LEVEL_WEIGHTS),
        "message": message,
        "trace_id": _hex_ids(rng, rows),
        "status": pa.array(rng.choice(STATUSES, rows), pa.int32()),
        "duration_ms": pa.array(np.round(rng.lognormal(3.0, 1.2, rows), 3), pa.float64()),
    }
    return pa.Table.from_pydict(arrays, schema=schema)


def as_parquet(table: pa.Table) -> pa.Table:
    """The same rows as Spark and DuckDB read them: µs timestamps, props as JSON text."""
    return pa.table({
        "_timestamp": table["_timestamp"].cast(pa.timestamp("us", tz="UTC"), safe=False),
        "props": table["props"].cast(pa.string()),
        **{n: table[n] for n in table.column_names[2:]},
    })


@dataclass
class Dataset:
    rows: int = 0
    extents: int = 0
    shoal_bytes: int = 0
    parquet_bytes: int = 0
    parquet_of: dict[str, str] = field(default_factory=dict)   # extent object path -> file
    write_shoal_s: float = 0.0
    write_parquet_s: float = 0.0
    generate_s: float = 0.0


def write_extents(db: Any, pq_dir: Path, data: Dataset, first: int, count: int,
                  rows_per_extent: int, extents_per_day: int, progress: bool) -> None:
    schema = db.catalog.load_table(TABLE).schema.arrow()
    for i in range(first, first + count):
        t0 = time.perf_counter()
        table = make_extent(i, rows_per_extent, extents_per_day, schema)
        t1 = time.perf_counter()
        outcome = db.append(TABLE, table)
        t2 = time.perf_counter()
        path = pq_dir / f"part-{i:06d}.parquet"
        pq.write_table(as_parquet(table), path, row_group_size=65536, compression="zstd")
        t3 = time.perf_counter()
        entry = outcome.added[0]
        data.parquet_of[entry.object_path] = str(path)
        data.rows += table.num_rows
        data.extents += 1
        data.shoal_bytes += entry.byte_size
        data.parquet_bytes += path.stat().st_size
        data.generate_s += t1 - t0
        data.write_shoal_s += t2 - t1
        data.write_parquet_s += t3 - t2
        if progress and (i - first + 1) % max(1, count // 10) == 0:
            print(f"  wrote {i - first + 1}/{count} extents", file=sys.stderr, flush=True)


# ---- engines --------------------------------------------------------------------------------

@dataclass
class Run:
    table: pa.Table
    bytes_read: int | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class SparkMetrics:
    """Bytes a Spark query read from files: what the JVM process read through read(2)
    (`rchar` of /proc/<pid>/io; local mode, so every task runs in it) minus the shuffle
    bytes its stages read back (from the status store, kept even with the UI off).
    Spark's own task input metric is not used: with the vectorised Parquet reader it counts
    little more than the footers for the full aggregation (96 kB for 6 MB of column chunks
    at 1M rows)."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext._jsc.sc()
        self.pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        self.last_stage = -1
        self.rchar = 0
        self.mark()

    def _stages(self) -> list[Any]:
        self.sc.listenerBus().waitUntilEmpty()
        store = self.sc.statusStore()
        seq = store.stageList(None, False, False, getattr(store, "stageList$default$4")(),
                              getattr(store, "stageList$default$5")())
        return [seq.apply(i) for i in range(seq.size())]

    def _rchar(self) -> int:
        with open(f"/proc/{self.pid}/io") as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
        raise RuntimeError("no rchar in /proc/<pid>/io")

    def mark(self) -> None:
        self.last_stage = max((s.stageId() for s in self._stages()), default=-1)
        self.rchar = self._rchar()

    def bytes_since_mark(self) -> int:
        read = self._rchar() - self.rchar
        stages = [s for s in self._stages() if s.stageId() > self.last_stage]
        shuffle = sum(s.shuffleLocalBytesRead() + s.shuffleRemoteBytesRead() for s in stages)
        return max(0, read - shuffle)


def scan_file_metrics(df: Any) -> dict[str, int]:
    """Sum of `numFiles` / `filesSize` over the executed plan's file scans."""
    out = {"files": 0, "file_bytes": 0}

    def walk(node: Any) -> None:
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            walk(node.executedPlan())
            return
        if name.endswith("QueryStageExec"):
            walk(node.plan())
            return
        if name == "FileSourceScanExec":
            metrics = node.metrics()
            for key, target in (("numFiles", "files"), ("filesSize", "file_bytes")):
                m = metrics.get(key)
                if m.isDefined():
                    out[target] += int(m.get().value())
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().executedPlan())
    return out


class Engines:
    def __init__(self, db: Any, pq_dir: Path, data: Dataset) -> None:
        import duckdb

        self.db = db
        self.pq_dir = pq_dir
        self.data = data
        self.spark = db.query_engine.spark
        self.spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
        self.metrics = SparkMetrics(self.spark)
        self.register_parquet()
        self.duck = duckdb.connect()
        self.duck.execute("SET TimeZone = 'UTC'")
        self.duck.execute(f"SET threads = {os.cpu_count() or 2}")
        self.duck.execute(f"CREATE VIEW {PQ_VIEW} AS SELECT * FROM "
                          f"read_parquet('{pq_dir}/*.parquet')")
        self.phases: dict[str, list[tuple[float, float]]] = {}

    def register_parquet(self) -> None:
        self.spark.read.parquet(str(self.pq_dir)).createOrReplaceTempView(PQ_VIEW)

    def local(self, sql: str, label: str) -> Run:
        """shoal's embedded engine, its plan (analysis, stages 1-2, vetting) / execute split
        recorded."""
        engine = self.db.query_engine
        t0 = time.perf_counter()
        planned = engine._scans(sql, prune=True)
        route = engine._route(planned, "local")
        t1 = time.perf_counter()
        result = engine._run_local(planned, route, _Run(None))
        t2 = time.perf_counter()
        self.phases.setdefault(label + " (embedded)", []).append((t1 - t0, t2 - t1))
        doc = result.stats.to_json()
        return Run(result.table, doc["bytes_read"], extra=doc)

    # shoal through Spark, with its plan / execute split recorded for the profile table
    def shoal(self, sql: str, label: str) -> Run:
        engine = self.db.query_engine
        t0 = time.perf_counter()
        df, stats, done = engine._plan(sql, prune=True)
        t1 = time.perf_counter()
        stats.engine = "spark"
        try:
            table, _ = engine._collect(df, QueryLimits(), _Run(None))
        finally:
            done()
        t2 = time.perf_counter()
        self.phases.setdefault(label, []).append((t1 - t0, t2 - t1))
        doc = stats.to_json()
        return Run(table, doc["bytes_read"], extra=doc)

    def spark_parquet(self, sql: str) -> Run:
        self.metrics.mark()
        df = self.spark.sql(sql)
        table = df.toArrow()
        files = scan_file_metrics(df)
        return Run(table, self.metrics.bytes_since_mark(), extra=files)

    def shoal_plan_parquet(self, shoal_sql: str, pq_sql: str) -> Run:
        """shoal's stages 1 and 2, then Spark's Parquet reader over the surviving files."""
        engine = self.db.query_engine
        catalog = self.db.catalog
        analysis = analyze(shoal_sql, {t.name: {c.name: c.type for c in t.schema.columns}
                                       for t in catalog.list_tables()})
        (ref,) = analysis.refs
        spec, _ = build_scan_spec(
            catalog, self.db.store, self.db.formats, engine.footers, ref.table,
            predicate=ref.predicate, columns=ref.columns, snapshot_id=None,
            storage_url=self.db.config.resolved_storage_url, s3_endpoint=None,
            parallelism=4)
        files = [self.data.parquet_of[t.path] for part in spec.partitions for t in part]
        if len(files) == self.data.extents:
            view = PQ_VIEW
        else:
            reader = self.spark.read.schema(self.spark.table(PQ_VIEW).schema)
            (reader.parquet(*files) if files else self.spark.createDataFrame(
                [], self.spark.table(PQ_VIEW).schema)).createOrReplaceTempView(PQ_PRUNED_VIEW)
            view = PQ_PRUNED_VIEW
        self.metrics.mark()
        df = self.spark.sql(pq_sql.replace(PQ_VIEW, view))
        table = df.toArrow()
        return Run(table, self.metrics.bytes_since_mark(),
                   extra={"files": len(files)})

    def duckdb(self, sql: str) -> Run:
        return Run(self.duck.sql(sql).to_arrow_table())

    def duckdb_bytes(self, sql: str) -> int:
        """Bytes of every READ DuckDB issues for `sql`, on a fresh connection (empty file
        and metadata caches)."""
        import duckdb

        con = duckdb.connect()
        try:
            con.execute("SET TimeZone = 'UTC'")
            con.execute(f"CREATE VIEW {PQ_VIEW} AS SELECT * FROM "
                        f"read_parquet('{self.pq_dir}/*.parquet')")
            con.execute("CALL enable_logging('FileSystem')")
            con.sql(sql).to_arrow_table()
            rows = con.sql("SELECT message FROM duckdb_logs WHERE type = 'FileSystem'").fetchall()
        finally:
            con.close()
        total = 0
        for (message,) in rows:
            doc = json.loads(message)
            if doc.get("op") == "READ":
                total += int(doc["bytes"])
        return total


# ---- queries --------------------------------------------------------------------------------

@dataclass
class Query:
    name: str
    shoal: str
    spark: str
    duck: str
    check: Callable[[dict[str, pa.Table]], None]


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _canon(table: pa.Table, sort: bool) -> list[tuple[Any, ...]]:
    cols = []
    for i, f in enumerate(table.schema):
        col = table.column(i)
        if pa.types.is_timestamp(f.type):
            col = col.cast(pa.timestamp("us", tz="UTC"))
        elif pa.types.is_integer(f.type):
            col = col.cast(pa.int64())
        elif pa.types.is_binary(f.type) or pa.types.is_large_string(f.type):
            col = col.cast(pa.string())
        cols.append(col.to_pylist())
    rows = list(zip(*cols, strict=True)) if cols else []
    return sorted(rows, key=repr) if sort else rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def assert_same(results: dict[str, pa.Table], *, sort: bool) -> None:
    names = list(results)
    base = _canon(results[names[0]], sort)
    for name in names[1:]:
        other = _canon(results[name], sort)
        assert len(other) == len(base), (f"{name}: {len(other)} rows, {names[0]}: "
                                          f"{len(base)} rows")
        for r1, r2 in zip(base, other, strict=True):
            assert len(r1) == len(r2) and all(_same(x, y) for x, y in zip(r1, r2, strict=True)), (
                f"{name} differs from {names[0]}: {r2} vs {r1}")


def make_queries(needle_id: str, window_start: datetime) -> list[Query]:
    lo, hi = window_start, window_start + timedelta(minutes=15)
    pattern = has_pattern("timeout")
    needle_cols = "_timestamp, props, service, level, message, trace_id, status, duration_ms"

    def check_needle(res: dict[str, pa.Table]) -> None:
        for name, t in res.items():
            assert t.num_rows >= 1, f"{name}: the needle was not found"
        assert_same(res, sort=True)

    def check_selective(res: dict[str, pa.Table]) -> None:
        for name, t in res.items():
            assert t.num_rows == 1 and t.column(0)[0].as_py() > 0, f"{name}: {t}"
        assert_same(res, sort=False)

    def check_full(res: dict[str, pa.Table]) -> None:
        assert_same(res, sort=False)

    selective_where = ("service = 'svc-17' AND _timestamp BETWEEN '{lo}' AND '{hi}' AND {has}")
    full = ("SELECT date_trunc('minute', _timestamp) AS minute, service, level, count(*) AS n "
            "FROM {t} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
    return [
        Query("needle",
              f"SELECT * FROM {TABLE} WHERE trace_id = '{needle_id}'",
              f"SELECT {needle_cols} FROM {PQ_VIEW} WHERE trace_id = '{needle_id}'",
              f"SELECT {needle_cols} FROM {PQ_VIEW} WHERE trace_id = '{needle_id}'",
              check_needle),
        Query("selective",
              "SELECT count(*) AS n, avg(duration_ms) AS avg_ms FROM logs WHERE " +
              selective_where.format(lo=_ts(lo), hi=_ts(hi), has="has(message, 'timeout')"),
              f"SELECT count(*) AS n, avg(duration_ms) AS avg_ms FROM {PQ_VIEW} WHERE " +
              selective_where.format(lo=_ts(lo), hi=_ts(hi), has=f"message RLIKE '{pattern}'"),
              f"SELECT count(*) AS n, avg(duration_ms) AS avg_ms FROM {PQ_VIEW} WHERE "
              f"service = 'svc-17' AND _timestamp BETWEEN TIMESTAMPTZ '{_ts(lo)}+00' AND "
              f"TIMESTAMPTZ '{_ts(hi)}+00' AND regexp_matches(message, '{pattern}')",
              check_selective),
        Query("full aggregation", full.format(t=TABLE), full.format(t=PQ_VIEW),
              full.format(t=PQ_VIEW), check_full),
    ]


# ---- measuring ------------------------------------------------------------------------------

ENGINE_NAMES = {"shoal": "shoal through Spark", "local": "shoal embedded (DuckDB)",
                "spark": "Spark over Parquet",
                "duckdb": "DuckDB over Parquet",
                "whatif": "shoal plan + Spark Parquet (what-if)"}


@dataclass
class Measured:
    latency: dict[str, float]           # p50
    runs: dict[str, Run]
    duck_bytes: int
    samples: dict[str, list[float]] = field(default_factory=dict)

    def p99(self, engine: str) -> float:
        return percentile(self.samples[engine], 0.99)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with few samples, p99 is the slowest run)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def warm_up(engines: Engines, q: Query) -> None:
    """One run of `q` on every engine (JIT, Python workers, caches), answers checked."""
    q.check({"shoal": engines.shoal(q.shoal, "warm-up").table,
             "local": engines.local(q.shoal, "warm-up").table,
             "spark": engines.spark_parquet(q.spark).table,
             "duckdb": engines.duckdb(q.duck).table,
             "whatif": engines.shoal_plan_parquet(q.shoal, q.spark).table})


def measure(engines: Engines, q: Query, repeat: int, label: str, *,
            warm: bool = False) -> Measured:
    fns: dict[str, Callable[[], Run]] = {
        "shoal": lambda: engines.shoal(q.shoal, label),
        "local": lambda: engines.local(q.shoal, label),
        "spark": lambda: engines.spark_parquet(q.spark),
        "duckdb": lambda: engines.duckdb(q.duck),
        "whatif": lambda: engines.shoal_plan_parquet(q.shoal, q.spark),
    }
    if warm:
        warm_up(engines, q)
    engines.phases[label] = []
    engines.phases[label + " (embedded)"] = []
    times: dict[str, list[float]] = {name: [] for name in fns}
    last: dict[str, Run] = {}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            last[name] = fn()
            times[name].append(time.perf_counter() - t0)
    q.check({name: r.table for name, r in last.items()})
    return Measured({n: statistics.median(t) for n, t in times.items()}, last,
                    engines.duckdb_bytes(q.duck), times)


@dataclass
class HttpNeedle:
    samples: list[float]
    engine: str
    reason: str


def http_needle(work: Path, sql: str, repeat: int) -> HttpNeedle:
    """The needle end to end through `POST /v1/query` on a `shoal serve` subprocess over the
    bench's data (engine auto; Spark not started unless a query needs it)."""
    import httpx

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.server import start_server

    server = start_server(work / "shoal", extra_args=["--lazy-spark"])
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            doc: dict[str, Any] = {}
            for _ in range(5):
                r = http.post("/v1/query", json={"sql": sql})
                r.raise_for_status()
                doc = r.json()
                assert doc["rows"], doc
            samples = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                r = http.post("/v1/query", json={"sql": sql})
                r.raise_for_status()
                samples.append(time.perf_counter() - t0)
            return HttpNeedle(samples, doc["stats"]["engine"], doc["stats"]["engine_reason"])
    finally:
        server.stop()


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    if n >= 10**9:
        return f"{n / 1e9:,.2f} GB"
    if n >= 10**6:
        return f"{n / 1e6:,.1f} MB"
    if n >= 10**3:
        return f"{n / 1e3:,.1f} kB"
    return f"{n} B"


def pct(n: int | None, total: int) -> str:
    return "n/a" if n is None else f"{100 * n / total:.2f}%"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


# ---- main -----------------------------------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--extents", type=int, default=250, help="extents (and Parquet files) "
                   "for --rows; each covers 1/extents of the day")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per query and engine "
                   "(after one warm-up run); the median is reported")
    p.add_argument("--needle-scale", type=int, default=10,
                   help="rerun the needle at this multiple of the data (1 = skip)")
    p.add_argument("--scale-repeat", type=int, default=3, help="timed runs of the needle at "
                   "scale (Spark over Parquet scans every file there)")
    p.add_argument("--http-repeat", type=int, default=50, help="timed needle runs through "
                   "POST /v1/query on a shoal serve subprocess (0 = skip)")
    p.add_argument("--work", type=Path, default=None, help="where the data goes "
                   "(default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the generated data")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args()
    if args.repeat < 3 or args.scale_repeat < 3:
        p.error("--repeat and --scale-repeat must be at least 3")
    rows_per_extent = args.rows // args.extents

    load = os.getloadavg()[0]
    started = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="shoal-bench-query-"))
    work.mkdir(parents=True, exist_ok=True)
    pq_dir = work / "parquet"
    shutil.rmtree(pq_dir, ignore_errors=True)
    shutil.rmtree(work / "shoal", ignore_errors=True)
    pq_dir.mkdir()
    progress = not args.quiet

    def say(text: str) -> None:
        if progress:
            print(f"[{time.perf_counter() - started:7.1f}s] {text}", file=sys.stderr,
                  flush=True)

    try:
        db = shoal.connect(data_dir=str(work / "shoal"), spark_master="local[2]")
        db.create_table(TABLE, [Column("service", STRING), Column("level", STRING),
                                Column("message", STRING), Column("trace_id", STRING),
                                Column("status", INT), Column("duration_ms", REAL)])
        data = Dataset()
        say(f"writing {args.rows:,} rows as {args.extents} extents + Parquet files")
        write_extents(db, pq_dir, data, 0, args.extents, rows_per_extent, args.extents,
                      progress)
        base = Dataset(**{k: v for k, v in data.__dict__.items() if k != "parquet_of"})

        # an existing trace id from the middle of the day; a window at 14:00
        mid = make_extent(args.extents // 2, rows_per_extent, args.extents,
                          db.catalog.load_table(TABLE).schema.arrow())
        needle_id = mid["trace_id"][rows_per_extent // 3].as_py()
        queries = make_queries(needle_id, DAY0 + timedelta(hours=14, minutes=7))

        say("starting Spark, registering the Parquet view, opening DuckDB")
        t0 = time.perf_counter()
        engines = Engines(db, pq_dir, data)
        engines.spark.sql("SELECT 1").collect()
        spark_start = time.perf_counter() - t0

        say("warm-up: every query once on every engine")
        for q in queries:
            warm_up(engines, q)
        results: dict[str, Measured] = {}
        for q in queries:
            say(f"query: {q.name}")
            results[q.name] = measure(engines, q, args.repeat, q.name)
        http: HttpNeedle | None = None
        if args.http_repeat > 0:
            say("query: needle through POST /v1/query (shoal serve, engine auto)")
            http = http_needle(work, queries[0].shoal, args.http_repeat)

        scaled: Measured | None = None
        if args.needle_scale > 1:
            extra = args.extents * (args.needle_scale - 1)
            say(f"writing {extra * rows_per_extent:,} more rows ({extra} extents) for the "
                f"needle at {args.needle_scale}x")
            write_extents(db, pq_dir, data, args.extents, extra, rows_per_extent,
                          args.extents, progress)
            engines.register_parquet()
            say("query: needle at scale")
            scaled = measure(engines, queries[0], args.scale_repeat, "needle at scale",
                             warm=True)
        elapsed = time.perf_counter() - started
        report(args, base, data, results, scaled, engines, spark_start, load, elapsed, http)
        db.close()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def report(args: argparse.Namespace, base: Dataset, data: Dataset,
           results: dict[str, Measured], scaled: Measured | None, engines: Engines,
           spark_start: float, load: float, elapsed: float,
           http: HttpNeedle | None = None) -> None:
    import duckdb
    import pyspark

    print(f"## query: shoal vs Spark and DuckDB over Parquet — {base.rows:,} rows in "
          f"{base.extents} extents\n")
    print(f"`.venv/bin/python bench/bench_query.py {' '.join(sys.argv[1:])}`\n")
    print(f"Host: {platform.machine()}, {os.cpu_count()} CPUs (load {load:.2f} at start), "
          f"Python {platform.python_version()}, pyspark {pyspark.__version__} "
          f"(`local[2]`, one session for shoal and Parquet), duckdb {duckdb.__version__}, "
          f"pyarrow {pa.__version__}. Warm: one run, then p50 / p99 (nearest rank) of "
          f"{args.repeat} (engines interleaved). Every engine's answer is asserted equal; "
          f"load {os.getloadavg()[0]:.2f} at the end.\n")
    print(f"Data: one day, {base.rows // base.extents:,} rows per extent (one 64k block / "
          f"row group each), rows sorted by time in each extent. shoal (tlm v2, zstd): "
          f"{fmt_bytes(base.shoal_bytes)}, written in {base.write_shoal_s:.1f} s "
          f"({base.rows / base.write_shoal_s / 1e6:.2f} M rows/s, `db.append` per extent); "
          f"Parquet (zstd, dictionary, min/max stats): {fmt_bytes(base.parquet_bytes)}, "
          f"written in {base.write_parquet_s:.1f} s; generation {base.generate_s:.1f} s; "
          f"Spark start {spark_start:.1f} s (not in any figure).\n")
    print("Bytes read: shoal = its query stats (`bytes_read`; warm, so footers are cached); "
          "Spark = bytes the JVM read through read(2) during the query (`rchar`) minus the "
          "shuffle bytes its stages read back, with the scan's \"size of files read\" "
          "(whole selected files) in brackets; DuckDB = sum of its FileSystem-log READs on a "
          "fresh connection (its file cache empty; the timed runs use a warm connection whose "
          "external file cache may serve reads from memory). % is of the engine's own table "
          "size (shoal: tlm bytes; others: Parquet bytes).\n")
    print("| query | engine | p50 ms | p99 ms | bytes read | % of table | vs Spark-Parquet "
          "latency | vs DuckDB-Parquet latency | vs Spark-Parquet bytes |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for qname, m in results.items():
        s_lat = m.latency["spark"]
        d_lat = m.latency["duckdb"]
        s_bytes = m.runs["spark"].bytes_read
        for eng in ("local", "shoal", "spark", "duckdb", "whatif"):
            run = m.runs[eng]
            lat = m.latency[eng]
            if eng == "duckdb":
                nbytes: int | None = m.duck_bytes
            else:
                nbytes = run.bytes_read
            total = base.shoal_bytes if eng in ("shoal", "local") else base.parquet_bytes
            shown = fmt_bytes(nbytes)
            if eng == "spark":
                shown += f" ({fmt_bytes(run.extra['file_bytes'])}, {run.extra['files']} files)"
            if eng in ("shoal", "local"):
                shown += (f" ({run.extra['extents_read']}/{run.extra['extents_considered']} "
                          f"extents, {run.extra['blocks_read']} blocks)")
            if eng == "whatif":
                shown += f" ({run.extra['files']} files)"
            ratio_b = ("—" if eng == "spark" or not s_bytes or nbytes is None
                       else f"{nbytes / s_bytes:.3f}x")
            ratio_l = "—" if eng == "spark" else f"{lat / s_lat:.2f}x"
            ratio_d = "—" if eng == "duckdb" else f"{lat / d_lat:.2f}x"
            print(f"| {qname} | {ENGINE_NAMES[eng]} | {lat * 1000:,.1f} | "
                  f"{m.p99(eng) * 1000:,.1f} | {shown} | {pct(nbytes, total)} | {ratio_l} | "
                  f"{ratio_d} | {ratio_b} |")

    print("\nWhere shoal's time goes (median of the timed runs): planning = sqlglot analysis, "
          "catalog stage 1, stage 2 on cached footers, the scan views (embedded: the vetting "
          "and transpilation instead); execution = Spark running the rewritten statement over "
          "the Python DataSource and `toArrow()` (embedded: shoal's read of the planned "
          "blocks + DuckDB).\n")
    print("| query | planning ms | execution ms |\n|---|---:|---:|")
    for label, phases in engines.phases.items():
        if phases and label != "warm-up":
            print(f"| {label} | {statistics.median(p[0] for p in phases) * 1000:,.0f} | "
                  f"{statistics.median(p[1] for p in phases) * 1000:,.0f} |")

    needle, sel, full = results["needle"], results["selective"], results["full aggregation"]
    print("\nTargets:\n")
    print("| target | figure | verdict |\n|---|---|---|")
    for name, m in (("needle", needle), ("selective", sel)):
        frac = m.runs["shoal"].bytes_read / base.shoal_bytes
        print(f"| {name}: shoal reads <= 1% of the bytes | {100 * frac:.2f}% | "
              f"{verdict(frac <= 0.01)} |")
        ratio = m.latency["shoal"] / m.latency["spark"]
        print(f"| {name}: shoal beats Spark-Parquet latency | {ratio:.2f}x "
              f"({m.latency['shoal'] * 1000:,.0f} vs {m.latency['spark'] * 1000:,.0f} ms) | "
              f"{verdict(ratio < 1)} |")
    ratio = full.latency["shoal"] / full.latency["spark"]
    print(f"| full aggregation within 1.5x of Spark-Parquet | {ratio:.2f}x "
          f"({full.latency['shoal'] * 1000:,.0f} vs {full.latency['spark'] * 1000:,.0f} ms) | "
          f"{verdict(ratio <= 1.5)} |")
    if http is not None:
        p50 = statistics.median(http.samples)
        print(f"| needle p50 <= 30 ms through `POST /v1/query` (engine {http.engine}) | "
              f"{p50 * 1000:,.1f} ms (p99 {percentile(http.samples, 0.99) * 1000:,.1f} ms, "
              f"{len(http.samples)} runs) | {verdict(p50 <= 0.030)} |")
    for name, m, limit in (("needle", needle, 0.5), ("selective", sel, 1.0),
                           ("full aggregation", full, 1.0)):
        ratio = m.latency["local"] / m.latency["duckdb"]
        print(f"| {name}: embedded p50 <= {limit}x DuckDB-over-Parquet | {ratio:.2f}x "
              f"({m.latency['local'] * 1000:,.1f} vs {m.latency['duckdb'] * 1000:,.1f} ms) | "
              f"{verdict(ratio <= limit)} |")
    if http is not None:
        print(f"\n`POST /v1/query` needle: engine {http.engine} ({http.reason}).")
    if scaled is not None:
        k = data.rows / base.rows
        grow = scaled.latency["shoal"] / needle.latency["shoal"]
        print(f"| needle at {k:.0f}x the data barely moves (<= 1.5x) | {grow:.2f}x "
              f"({needle.latency['shoal'] * 1000:,.0f} -> "
              f"{scaled.latency['shoal'] * 1000:,.0f} ms) | {verdict(grow <= 1.5)} |")

        print(f"\nNeedle at {k:.0f}x: {data.rows:,} rows in {data.extents} extents "
              f"(shoal {fmt_bytes(data.shoal_bytes)}, Parquet {fmt_bytes(data.parquet_bytes)}; "
              f"the extra {data.extents - base.extents} extents written in "
              f"{data.write_shoal_s - base.write_shoal_s:.1f} s shoal, "
              f"{data.write_parquet_s - base.write_parquet_s:.1f} s Parquet).\n")
        print(f"Median of {args.scale_repeat} warm runs.\n")
        print("| engine | 1x ms | scaled ms | growth | scaled bytes read | % of table |")
        print("|---|---:|---:|---:|---:|---:|")
        for eng in ("local", "shoal", "spark", "duckdb", "whatif"):
            run = scaled.runs[eng]
            nbytes = scaled.duck_bytes if eng == "duckdb" else run.bytes_read
            total = data.shoal_bytes if eng in ("shoal", "local") else data.parquet_bytes
            a, b = needle.latency[eng], scaled.latency[eng]
            print(f"| {ENGINE_NAMES[eng]} | {a * 1000:,.0f} | {b * 1000:,.0f} | {b / a:.2f}x | "
                  f"{fmt_bytes(nbytes)} | {pct(nbytes, total)} |")
        sj = scaled.runs["shoal"].extra
        print(f"\nshoal at scale: {sj['extents_read']}/{sj['extents_considered']} extents read, "
              f"{sj['blocks_read']} blocks.")
    print(f"\nTotal wall time {elapsed / 60:.1f} min.")


if __name__ == "__main__":
    sys.exit(main())
