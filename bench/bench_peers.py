"""shoal against its peers on one day of structured logs: DuckDB (its own table, and over
Parquet), ClickHouse embedded (chdb) and delta-rs, side by side in one run.

    .venv/bin/pip install -c constraints.txt -e '.[bench]'      # chdb (not in `dev`)
    .venv/bin/python bench/bench_peers.py [--rows 2000000] [--repeat 5] [--work DIR]
        [--keep] [--skip-chdb] [--skip-delta] [--sort-by KEY] [--shred-on-write]

Run at the default 2,000,000 rows and at `--rows 8000000`.

Data: `--rows` log lines from bench/logdata.py's `generate_day` (the shared generator's line
shape: RFC 3339 timestamp, service, level, a free-text message, a 128-bit trace id, status,
duration, a nested `attrs` object), spread evenly over one day in time order, with the word
`deadlock` in about one message in 10,000 at random over the day. Written once as NDJSON
(cached under bench/out/), then loaded by every engine from that file, load timed:

- shoal: a fresh data directory, the table created with the typed columns and `attrs
  dynamic`, the file loaded by `shoal ingest` (a subprocess, default chunking), then queried
  through `POST /v1/query` of a `shoal serve` subprocess (engine `auto`, answers as Arrow IPC
  with the stats in `X-Shoal-Stats`: the engine that answered and the bytes it read);
- DuckDB, own table: `CREATE TABLE ... AS SELECT * FROM read_json(...)` with explicit
  columns (`attrs` as JSON) in a database file. `_timestamp` is a `TIMESTAMP` holding UTC,
  not a `TIMESTAMPTZ`: DuckDB truncates a `TIMESTAMPTZ` through its time-zone library, ~8x
  slower on the per-minute count, and the peers should be at their best;
- DuckDB over Parquet: the same `read_json` written by DuckDB's `COPY` as one Parquet file
  (zstd, 122,880-row row groups, DuckDB's default), queried through `read_parquet`;
- chdb (ClickHouse in process): a MergeTree table `ORDER BY (service, _timestamp)` with a
  `tokenbf_v1` skip index on `message`, `attrs` a String holding the JSON text, loaded with
  `INSERT ... SELECT FROM file(..., JSONEachRow)`, queried as a ClickHouse user would
  (`hasToken`, `JSONExtractString`, `toStartOfMinute`); `OPTIMIZE ... FINAL` after the
  insert, inside the load time (one part, as background merges would leave it). `--skip-chdb`
  leaves it out;
- delta-rs: DuckDB's `read_json` streamed as Arrow into `write_deltalake` (zstd), queried
  through the DataFusion that deltalake ships, which has no JSON functions: the JSON-path
  query is "n/a" there. `--skip-delta` leaves it out.

The peers run in this process (2 threads each where they take a setting); shoal pays its
HTTP round trip, which the peers do not. Each query runs once on every engine to warm (the
answers asserted equal across engines, after normalising types, JSON text and row order),
then `--repeat` times with the engines interleaved (their order rotates every repeat, so
outside load hits each alike); the p50 of those runs is reported.

Queries: needle (one trace id, every column); the rare word's rows (shoal `has(message,
'deadlock')`, DuckDB the same whole-token regex, ClickHouse `hasToken`, equal here since the
word only occurs in lowercase); errors per service over the day; count per minute over the
day; the 10 slowest requests of one hour; the count of `attrs.http.method = 'POST'` (shoal
`get_json_object`); one service in 15 minutes: count, avg and p95 (the value at rank
ceil(0.95 n): shoal's `percentile_approx`, DuckDB's `quantile_disc`; ClickHouse and
DataFusion index their sorted values at that rank). Also shoal's HTTP floor (`SELECT 1`).

Targets: every query <= 2x the best peer (the JSON-path query <= 3x); shoal's bytes on disk
<= the Parquet (zstd) file (shoal's extents; the catalog file is reported beside).
Reported per query: p50 per engine, the best peer, shoal / best peer, the engine shoal chose,
the bytes and blocks it read (its stats). Output is Markdown. Generated data lives under `--work` (a
temporary directory unless given; deleted at the end unless `--keep` or `--work`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from logdata import DAY_START, RARE_WORD, generate_day  # noqa: E402

TABLE = "logs"
COLUMNS = ["_timestamp", "service", "level", "message", "trace_id", "status", "duration_ms",
           "attrs"]
DUCK_TYPES = {"_timestamp": "TIMESTAMP", "service": "VARCHAR", "level": "VARCHAR",
              "message": "VARCHAR", "trace_id": "VARCHAR", "status": "INTEGER",
              "duration_ms": "BIGINT"}
CH_STRUCTURE = ("_timestamp DateTime64(6, 'UTC'), service String, level String, "
                "message String, trace_id String, status Int32, duration_ms Int64, "
                "attrs String")
HOUR = (f"{DAY_START} 13:00:00", f"{DAY_START} 14:00:00")
WINDOW = (f"{DAY_START} 09:15:00", f"{DAY_START} 09:30:00")
SERVICE = "svc-7"
TOKEN_RE = f"(?i)(^|[^A-Za-z0-9]){RARE_WORD}($|[^A-Za-z0-9])"   # shoal's has() rule


def read_json(source: Path, *, attrs: str = "JSON") -> str:
    """DuckDB's reader of the NDJSON file with the columns and types spelled out."""
    columns = ", ".join(f"'{k}': '{v}'" for k, v in (DUCK_TYPES | {"attrs": attrs}).items())
    return f"read_json('{source}', format = 'newline_delimited', columns = {{{columns}}})"


# ---- queries --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Query:
    id: str
    shoal: str
    duck: str             # over the name `logs` (a table, or a view over the Parquet file)
    ch: str
    delta: str | None     # DataFusion's dialect; None: the peer cannot say it
    sort: bool            # compare as a multiset (the statement fixes no order)
    target: float = 2.0


def queries(needle: str) -> list[Query]:
    cols = ", ".join(COLUMNS)

    def ts(w: str) -> str:              # shoal, DuckDB, DataFusion: a UTC wall-clock literal
        return f"TIMESTAMP '{w}'"

    def cts(w: str) -> str:
        return f"toDateTime64('{w}', 6, 'UTC')"

    def same(text: str, **dialects: Any) -> dict[str, Any]:
        return {"shoal": text, "duck": text, "delta": text} | dialects

    slow = ("SELECT _timestamp, service, trace_id, duration_ms FROM logs WHERE "
            "_timestamp >= {lo} AND _timestamp < {hi} "
            "ORDER BY duration_ms DESC, trace_id LIMIT 10")
    window = ("FROM logs WHERE service = '{s}' AND _timestamp >= {lo} AND _timestamp < {hi}")
    win, cwin = (window.format(s=SERVICE, lo=f(WINDOW[0]), hi=f(WINDOW[1])) for f in (ts, cts))
    # p95 is the value at rank ceil(0.95 n) (shoal's percentile_approx). ClickHouse's
    # quantileExact* take rank floor(0.95 n) + 1, one further when 0.95 n is whole, so
    # ClickHouse and DataFusion spell the rank out.
    rank = "CAST(ceil(0.95 * count(*)) AS BIGINT)"
    return [
        Query("needle (one trace id, every column)",
              **same(f"SELECT {cols} FROM logs WHERE trace_id = '{needle}'",
                     shoal=f"SELECT * FROM logs WHERE trace_id = '{needle}'",
                     ch=f"SELECT {cols} FROM logs WHERE trace_id = '{needle}'"), sort=True),
        Query(f"rare word '{RARE_WORD}' rows",
              shoal=f"SELECT * FROM logs WHERE has(message, '{RARE_WORD}')",
              duck=f"SELECT {cols} FROM logs WHERE regexp_matches(message, '{TOKEN_RE}')",
              ch=f"SELECT {cols} FROM logs WHERE hasToken(message, '{RARE_WORD}')",
              delta=f"SELECT {cols} FROM logs WHERE regexp_like(message, '{TOKEN_RE}')",
              sort=True),
        Query("errors per service, whole day",
              **same("SELECT service, count(*) AS errors FROM logs WHERE level = 'error' "
                     "GROUP BY service ORDER BY service",
                     ch="SELECT service, count() AS errors FROM logs WHERE level = 'error' "
                        "GROUP BY service ORDER BY service"), sort=False),
        Query("count per minute, whole day",
              # a DateTime leaves chdb's Arrow answer as seconds: the cast keeps it a time
              **same("SELECT date_trunc('minute', _timestamp) AS minute, count(*) AS n "
                     "FROM logs GROUP BY 1 ORDER BY 1",
                     ch="SELECT toDateTime64(toStartOfMinute(_timestamp), 0, 'UTC') AS minute, "
                        "count() AS n FROM logs GROUP BY minute ORDER BY minute"), sort=False),
        Query("10 slowest in one hour",
              **same(slow.format(lo=ts(HOUR[0]), hi=ts(HOUR[1])),
                     ch=slow.format(lo=cts(HOUR[0]), hi=cts(HOUR[1]))), sort=False),
        Query("attrs.http.method = 'POST' count",
              shoal="SELECT count(*) AS n FROM logs "
                    "WHERE get_json_object(attrs, '$.http.method') = 'POST'",
              duck="SELECT count(*) AS n FROM logs WHERE attrs->>'$.http.method' = 'POST'",
              ch="SELECT count() AS n FROM logs "
                 "WHERE JSONExtractString(attrs, 'http', 'method') = 'POST'",
              delta=None, sort=False, target=3.0),
        Query("one service, 15 minutes: count/avg/p95",
              shoal="SELECT count(*) AS n, avg(duration_ms) AS avg_ms, "
                    f"percentile_approx(duration_ms, 0.95) AS p95 {win}",
              duck="SELECT count(*) AS n, avg(duration_ms) AS avg_ms, "
                   f"quantile_disc(duration_ms, 0.95) AS p95 {win}",
              ch="SELECT count() AS n, avg(duration_ms) AS avg_ms, "
                 f"arraySort(groupArray(duration_ms))[{rank}] AS p95 {cwin}",
              delta="SELECT count(*) AS n, avg(duration_ms) AS avg_ms, "
                    f"array_element(array_sort(array_agg(duration_ms)), {rank}) AS p95 {win}",
              sort=False),
    ]


# ---- answers --------------------------------------------------------------------------------

def _value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return (v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc)
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str) and v[:1] in "{[":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def canon(table: pa.Table, sort: bool) -> list[tuple[Any, ...]]:
    """The answer's rows as tuples of plain Python values (timestamps aware UTC, JSON text
    parsed, integers of any width alike), in its order or sorted."""
    cols = [[_value(v) for v in table.column(i).to_pylist()] for i in range(table.num_columns)]
    rows = list(zip(*cols)) if cols else []
    return sorted(rows, key=repr) if sort else rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (a is not None and b is not None
                and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9))
    return bool(a == b)


def assert_same(q: Query, answers: dict[str, pa.Table]) -> None:
    """Every engine's answer equals the first one's (types normalised). Answers are
    compared on the last engine's column names: shoal's `SELECT *` also holds the table's
    implicit `props` column, which the peers do not have."""
    names = list(answers)
    wanted = answers[names[-1]].column_names
    answers = {k: t.select(wanted) if set(wanted) <= set(t.column_names) else t
               for k, t in answers.items()}
    base = canon(answers[names[0]], q.sort)
    assert base, f"{q.id}: {names[0]} answered no rows"
    for name in names[1:]:
        other = canon(answers[name], q.sort)
        assert len(other) == len(base), (
            f"{q.id}: {name} has {len(other)} rows, {names[0]} {len(base)}")
        for r1, r2 in zip(base, other):
            assert len(r1) == len(r2) and all(_same(x, y) for x, y in zip(r1, r2)), (
                f"{q.id}: {name} differs from {names[0]}:\n  {r2}\n  {r1}")


# ---- engines --------------------------------------------------------------------------------

@dataclass
class Answer:
    table: pa.Table
    stats: dict[str, Any] = field(default_factory=dict)


class Engine:
    name = ""
    dialect = ""          # the Query field holding this engine's text
    load_s = 0.0
    disk_bytes = 0

    def run(self, q: Query) -> Answer:
        return self.execute(getattr(q, self.dialect))

    def execute(self, text: str) -> Answer:
        raise NotImplementedError

    def close(self) -> None:
        pass


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Shoal(Engine):
    """shoal: `shoal ingest` into a fresh data directory, then `shoal serve`."""
    name = "shoal"
    dialect = "shoal"
    sort_by: str | None = None          # the table's sort key (--sort-by)
    shred_on_write = False              # --shred-on-write

    def __init__(self, work: Path, source: Path) -> None:
        import shoal
        from tests.query.everyday_corpus import LOG_COLUMNS

        self.data_dir = work / "shoal"
        db = shoal.connect(data_dir=str(self.data_dir))
        db.create_table(TABLE, LOG_COLUMNS, properties=(
            {"sort_by": self.sort_by} if self.sort_by else None))
        db.close()
        # this checkout's shoal, and none of the caller's SHOAL_* settings (as for the server)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
        if self.shred_on_write:
            env["SHOAL_SHRED_ON_WRITE"] = "1"
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "shoal", "--data-dir", str(self.data_dir),
                              "ingest", str(source), "--table", TABLE],
                             capture_output=True, text=True, env=env, check=False)
        self.load_s = time.perf_counter() - t0
        if out.returncode != 0:
            raise RuntimeError(f"shoal ingest failed ({out.returncode}):\n{out.stderr}")
        print(f"  shoal: {out.stdout.strip()}", file=sys.stderr)
        # the extents (what the Parquet target compares); the catalog's file is reported apart
        self.disk_bytes = dir_bytes(self.data_dir / "objects")
        self.catalog_bytes = dir_bytes(self.data_dir) - self.disk_bytes
        from tests.support.server import start_server

        self.server = start_server(self.data_dir, extra_args=["--lazy-spark"],
                                   env={"PYTHONPATH": env["PYTHONPATH"]})

    def execute(self, text: str) -> Answer:
        req = urllib.request.Request(
            f"{self.server.url}/v1/query", data=json.dumps({"sql": text}).encode(),
            headers={"Content-Type": "application/json",
                     "Accept": "application/vnd.apache.arrow.stream"})
        with urllib.request.urlopen(req, timeout=600) as r:
            stats = json.loads(r.headers.get("X-Shoal-Stats") or "{}")
            body = r.read()
        return Answer(pa.ipc.open_stream(body).read_all(), stats)

    def close(self) -> None:
        self.server.stop()


class DuckTable(Engine):
    name = "DuckDB table"
    dialect = "duck"

    def __init__(self, work: Path, source: Path) -> None:
        path = work / "duck.db"
        self.con = duckdb.connect(str(path), config={"threads": 2})
        t0 = time.perf_counter()
        self.con.execute(f"CREATE TABLE logs AS SELECT * FROM {read_json(source)}")
        self.con.execute("CHECKPOINT")
        self.load_s = time.perf_counter() - t0
        self.disk_bytes = path.stat().st_size

    def execute(self, text: str) -> Answer:
        return Answer(self.con.execute(text).to_arrow_table())

    def close(self) -> None:
        self.con.close()


class DuckParquet(Engine):
    name = "DuckDB/Parquet"
    dialect = "duck"

    def __init__(self, work: Path, source: Path) -> None:
        path = work / "logs.parquet"
        self.con = duckdb.connect(config={"threads": 2})
        t0 = time.perf_counter()
        self.con.execute(f"COPY (SELECT * FROM {read_json(source)}) "
                         f"TO '{path}' (FORMAT parquet, COMPRESSION zstd)")
        self.load_s = time.perf_counter() - t0
        self.disk_bytes = path.stat().st_size
        self.con.execute(f"CREATE VIEW logs AS SELECT * FROM read_parquet('{path}')")

    def execute(self, text: str) -> Answer:
        return Answer(self.con.execute(text).to_arrow_table())

    def close(self) -> None:
        self.con.close()


class Chdb(Engine):
    name = "chdb"
    dialect = "ch"

    def __init__(self, work: Path, source: Path) -> None:
        from chdb import session

        path = work / "chdb"
        self.sess = session.Session(str(path))
        self.sess.query("CREATE DATABASE IF NOT EXISTS bench")
        self.sess.query("USE bench")
        self.sess.query(
            f"CREATE TABLE logs ({CH_STRUCTURE}, "
            "INDEX message_tokens message TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 1) "
            "ENGINE = MergeTree ORDER BY (service, _timestamp)")
        structure = CH_STRUCTURE.replace("'", "\\'")
        t0 = time.perf_counter()
        self.sess.query(
            f"INSERT INTO logs SELECT * FROM file('{source}', JSONEachRow, '{structure}') "
            "SETTINGS input_format_json_read_objects_as_strings = 1, "
            "date_time_input_format = 'best_effort', max_threads = 2")
        self.sess.query("OPTIMIZE TABLE logs FINAL")
        self.load_s = time.perf_counter() - t0
        self.disk_bytes = int(self.sess.query(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'bench' AND "
            "table = 'logs' AND active", "CSV").bytes().strip())

    def execute(self, text: str) -> Answer:
        return Answer(self.sess.query(text + " SETTINGS max_threads = 2", "ArrowTable"))

    def close(self) -> None:
        self.sess.close()


class Delta(Engine):
    """delta-rs: the rows written as a Delta table (zstd Parquet), queried through the
    DataFusion that deltalake ships (no JSON functions: the JSON-path query is n/a)."""
    name = "delta-rs"
    dialect = "delta"

    def __init__(self, work: Path, source: Path) -> None:
        from deltalake import DeltaTable, QueryBuilder, WriterProperties, write_deltalake

        path = work / "delta"
        t0 = time.perf_counter()
        # deltalake reads no NDJSON itself: DuckDB's reader turns it into Arrow (timed too)
        con = duckdb.connect(config={"threads": 2})
        rows = con.execute(f"SELECT * FROM {read_json(source, attrs='VARCHAR')}"
                           ).to_arrow_reader()
        write_deltalake(str(path), rows, writer_properties=WriterProperties(compression="ZSTD"))
        self.load_s = time.perf_counter() - t0
        con.close()
        self.disk_bytes = dir_bytes(path)
        self.qb = QueryBuilder().register(TABLE, DeltaTable(str(path)))

    def execute(self, text: str) -> Answer:
        return Answer(pa.table(self.qb.execute(text).read_all()))


# ---- measuring ------------------------------------------------------------------------------

@dataclass
class Measured:
    q: Query
    samples: dict[str, list[float]]
    shoal_engine: str
    shoal_reason: str
    shoal_bytes_read: int | None
    shoal_blocks: str
    rows: int

    def p50(self, engine: str) -> float:
        return statistics.median(self.samples[engine])

    def p50_ms(self, engine: str) -> str:
        return ms(self.p50(engine)) if engine in self.samples else "n/a"


def timed(fn: Callable[[], Answer]) -> tuple[float, Answer]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(engines: list[Engine], q: Query, repeat: int) -> Measured:
    engines = [e for e in engines if getattr(q, e.dialect) is not None]
    answers = {e.name: e.run(q) for e in engines}                  # warm
    assert_same(q, {k: a.table for k, a in answers.items()})
    samples: dict[str, list[float]] = {e.name: [] for e in engines}
    stats = answers["shoal"].stats
    for r in range(repeat):
        k = r % len(engines)
        for e in engines[k:] + engines[:k]:
            s, ans = timed(lambda e=e: e.run(q))
            samples[e.name].append(s)
            if e.name == "shoal":
                stats = ans.stats
    return Measured(q, samples, str(stats.get("engine")), str(stats.get("engine_reason")),
                    stats.get("bytes_read"),
                    f"{stats.get('blocks_read')}/{stats.get('blocks_considered')}",
                    answers["shoal"].table.num_rows)


def floor_ms(engine: Engine, repeat: int) -> float:
    """p50 of a statement that reads no table through `POST /v1/query`: the round trip
    shoal pays on every query and the in-process peers do not."""
    engine.execute("SELECT 1 AS one")
    return statistics.median(timed(lambda: engine.execute("SELECT 1 AS one"))[0]
                             for _ in range(max(5, repeat)))


def find_needle(source: Path) -> str:
    """The trace id of the first line past the middle of the file."""
    with open(source, "rb") as f:
        f.seek(source.stat().st_size // 2)
        f.readline()
        return str(json.loads(f.readline())["trace_id"])


# ---- report ---------------------------------------------------------------------------------

def ms(s: float) -> str:
    return f"{s * 1e3:,.1f}"


def mb(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 1e6:,.1f} MB"


def report(args: argparse.Namespace, engines: list[Engine], results: list[Measured],
           floor: float, load: tuple[float, float]) -> None:
    peers = [e.name for e in engines if e.name != "shoal"]
    print(f"\n`.venv/bin/python bench/bench_peers.py {' '.join(sys.argv[1:])}` "
          f"({args.rows:,} rows; {platform.machine()}, {os.cpu_count()} cores; load "
          f"average {load[0]:.1f} at start, {load[1]:.1f} at end; p50 of {args.repeat} warm "
          f"runs, engines interleaved; shoal through `POST /v1/query`, Arrow IPC answers)\n")
    print(f"| query | {' | '.join(e.name + ' p50 ms' for e in engines)} | best peer | "
          "shoal / best peer | target | met | shoal engine | shoal bytes read | shoal blocks "
          "read/considered | rows |")
    print(f"|---|{'---|' * len(engines)}---|---|---|---|---|---|---|---|")
    for m in results:
        best = min((e for e in peers if e in m.samples), key=m.p50)
        ratio = m.p50("shoal") / m.p50(best)
        met = "met" if ratio <= m.q.target else "MISSED"
        print(f"| {m.q.id} | {' | '.join(m.p50_ms(e.name) for e in engines)} | {best} | "
              f"{ratio:.2f}x | <= {m.q.target:g}x | {met} | {m.shoal_engine} | "
              f"{mb(m.shoal_bytes_read)} | {m.shoal_blocks} | {m.rows:,} |")
    print(f"\nshoal's HTTP round trip (`SELECT 1` through `POST /v1/query`): p50 "
          f"{floor * 1e3:.1f} ms, inside every shoal figure above.")
    print("\nLoad from the NDJSON file, and bytes on disk:\n")
    print("| engine | load s | rows/s | bytes on disk | vs Parquet (zstd) |")
    print("|---|---|---|---|---|")
    pq_bytes = next(e.disk_bytes for e in engines if e.name == "DuckDB/Parquet")
    for e in engines:
        print(f"| {e.name} | {e.load_s:.1f} | {args.rows / e.load_s:,.0f} | {mb(e.disk_bytes)} "
              f"| {e.disk_bytes / pq_bytes:.2f}x |")
    shoal = engines[0]
    assert isinstance(shoal, Shoal)
    shoal_bytes = shoal.disk_bytes
    print(f"\nTarget: shoal's bytes on disk <= Parquet (zstd): {shoal_bytes / pq_bytes:.2f}x, "
          f"{'met' if shoal_bytes <= pq_bytes else 'MISSED'} (shoal's extents; its catalog "
          f"file adds {mb(shoal.catalog_bytes)})")
    odd = [m for m in results if m.shoal_engine != "local"]
    if odd:
        print("\nshoal answered on Spark:")
        for m in odd:
            print(f"- {m.q.id}: {m.shoal_reason}")


def load(work: Path, source: Path, kinds: list[type[Engine]]) -> list[Engine]:
    """Every engine loaded from `source` (shoal first); on a failure, the ones already
    loaded are closed."""
    engines: list[Engine] = []
    try:
        for kind in kinds:
            print(f"loading {kind.name}", file=sys.stderr, flush=True)
            engines.append(kind(work, source))
    except BaseException:
        for e in engines:
            e.close()
        raise
    return engines


def run_queries(engines: list[Engine], source: Path, repeat: int) -> list[Measured]:
    results = []
    for q in queries(find_needle(source)):
        print(f"query: {q.id}", file=sys.stderr, flush=True)
        results.append(measure(engines, q, repeat))
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--work", help="directory for the engines' data (kept)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--skip-chdb", action="store_true", help="leave ClickHouse (chdb) out")
    p.add_argument("--skip-delta", action="store_true", help="leave delta-rs out")
    p.add_argument("--sort-by", default=None,
                   help="shoal's table gets this sort key (e.g. 'service, _timestamp', "
                        "chdb's ORDER BY)")
    p.add_argument("--shred-on-write", action="store_true",
                   help="shoal ingest writes shredded dynamic paths (SHOAL_SHRED_ON_WRITE)")
    args = p.parse_args()
    Shoal.sort_by = args.sort_by
    Shoal.shred_on_write = args.shred_on_write
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        raise SystemExit(f"--work {work} is not empty: every engine loads afresh")
    load0 = os.getloadavg()[0]
    kinds: list[type[Engine]] = [Shoal, DuckTable, DuckParquet]
    if not args.skip_chdb:
        kinds.append(Chdb)
    if not args.skip_delta:
        kinds.append(Delta)
    try:
        t0 = time.perf_counter()
        source = generate_day(args.rows)
        print(f"data: {source} ({source.stat().st_size / 1e6:,.0f} MB, "
              f"{time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        engines = load(work, source, kinds)
        try:
            results = run_queries(engines, source, args.repeat)
            floor = floor_ms(engines[0], args.repeat)
        finally:
            for e in engines:
                e.close()
        report(args, engines, results, floor, (load0, os.getloadavg()[0]))
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
