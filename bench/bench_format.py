"""Benchmark: tlm extents vs plain Arrow IPC files, write and read; tlm v2 vs v3 vs plain
Parquet (docs/storage.md).

    .venv/bin/python bench/bench_format.py [--rows 2000000] [--compression zstd|lz4|none]
        [--block-rows 65536] [--repeat 5] [--attrs distinct|templated] [--no-stat-costs]
        [--query-rows 1000000] [--query-extents 40] [--no-query]

Generates realistic log batches (_timestamp ns, service (20 values), level, a ~10-word
message with ids in it, trace_id (32 hex, unique), status int, duration long, attrs dynamic
JSON with a user id) and measures, in one process, on the same batches and compression:

- write: `pyarrow.ipc` file writer into memory vs `TlmWriter` with every stat (block stats,
  distinct/token sets, membership filters, present paths) into an in-memory store;
- read: `pyarrow.ipc` file reader, every batch, vs `TlmReader.read_block` of every block.

Throughput is the uncompressed Arrow size of the batches divided by wall time (median of
`--repeat` runs, interleaved so that load from elsewhere hits every variant alike). A second
table times each stat on its own, single-threaded (wall and CPU seconds), to show where the
writer's time goes; a compact table is the line for BENCHMARKS.md.

Then the extent versions side by side, on the same batches: tlm v2 (Arrow IPC body), tlm v3
(Parquet body, the default) and plain Parquet written by pyarrow with zstd and otherwise
default options (one row group per block, so block reads compare): bytes, write rows/s
(tlm with every stat), reading one projected string column (`level`, `message`) of every
block and every block whole (a fresh reader each run, open included). Last, `SELECT level,
count(*) ... GROUP BY level` over `--query-rows` rows in `--query-extents` extents on the
embedded engine (`db.sql(..., engine="local")`) with every extent v2, then v3, against
DuckDB over the same rows as Parquet files (pyarrow defaults, zstd). Output is Markdown.

Run it on an otherwise idle host (the header shows the load average at the start): the tlm
writer computes stats on one thread while Arrow compresses IPC buffers on its own pool, so
it needs every CPU and suffers more from outside load than plain IPC does.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal.format.membership import BloomFilter, hash_array
from shoal.format.jsonpaths import exact_json_paths, json_paths
from shoal.format.stats import ExtentStatsBuilder, _IndexedColumn, block_stats, has_whitespace
from shoal.format.tlm import TlmFormat
from shoal.format.tokens import tokenize_array
from shoal.storage.base import ObjectInfo
from shoal.types import DYNAMIC, INT, LONG, STRING, Column, Schema

WORDS = ("connection failed timeout user login request served cache miss hit database query "
         "slow retry upstream error accepted rejected token expired session opened closed "
         "payment authorized declined queue message consumed published").split()


class MemoryStore:
    """Bench-only in-memory object store (keeps the written buffer, no copy)."""

    def __init__(self) -> None:
        self.objects: dict[str, pa.Buffer] = {}

    url = "memory://"

    def put(self, path: str, data: bytes | bytearray | memoryview | pa.Buffer) -> None:
        self.objects[path] = pa.py_buffer(data)

    def open_input(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self.objects[path])

    def get(self, path: str) -> bytes:
        return self.objects[path].to_pybytes()

    def get_range(self, path: str, offset: int, length: int) -> bytes:
        return self.objects[path][offset:offset + length].to_pybytes()

    def size(self, path: str) -> int:
        return self.objects[path].size

    def exists(self, path: str) -> bool:
        return path in self.objects

    def delete(self, path: str) -> None:
        self.objects.pop(path, None)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return iter([ObjectInfo(k, v.size, 0) for k, v in self.objects.items()
                     if k.startswith(prefix)])


# ---- data -----------------------------------------------------------------------------------

def _hex_ids(rng: np.random.Generator, n: int) -> pa.Array:
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    nibbles = rng.integers(0, 16, size=(n, 32), dtype=np.uint8)
    data = digits[nibbles].tobytes()
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _pick(rng: np.random.Generator, values: list[str], n: int) -> pa.Array:
    return pc.take(pa.array(values), pa.array(rng.integers(0, len(values), n)))


LOG_COLUMNS = [Column("service", STRING), Column("level", STRING), Column("message", STRING),
               Column("trace_id", STRING), Column("status", INT), Column("duration", LONG),
               Column("attrs", DYNAMIC)]


def make_table(rows: int, attrs_mode: str, seed: int = 7) -> tuple[Schema, pa.Table]:
    schema = Schema.create(LOG_COLUMNS)
    rng = np.random.default_rng(seed)
    ts = 1_700_000_000_000_000_000 + np.cumsum(rng.integers(0, 2_000_000, rows))
    ids = pc.cast(pa.array(rng.integers(0, 100_000, rows)), pa.string())
    words = [_pick(rng, WORDS, rows) for _ in range(8)]
    message = pc.binary_join_element_wise(*words[:4], pc.binary_join_element_wise(
        "id=", ids, ""), *words[4:], pc.binary_join_element_wise(
        pc.cast(pa.array(rng.integers(0, 5000, rows)), pa.string()), "ms", ""), " ")
    if attrs_mode == "distinct":
        user = pc.cast(pa.array(rng.integers(0, 10**7, rows)), pa.string())
    else:
        user = pc.cast(pa.array(rng.integers(0, 50, rows)), pa.string())
    attrs = pc.binary_join_element_wise(
        '{"http":{"method":"', _pick(rng, ["GET", "POST", "PUT", "DELETE"], rows),
        '","route":"/api/v1/', _pick(rng, ["items", "users", "orders", "carts"], rows),
        '"},"user_id":', user, ',"region":"', _pick(rng, ["eu", "us", "ap"], rows), '"}', "")
    arrays = {
        "_timestamp": pa.array(ts, pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(rows, pa.binary()),
        "service": _pick(rng, [f"svc-{i:02d}" for i in range(20)], rows),
        "level": _pick(rng, ["debug", "info", "warn", "error"], rows),
        "message": message,
        "trace_id": _hex_ids(rng, rows),
        "status": pa.array(rng.choice([200, 201, 204, 301, 400, 404, 500, 503], rows),
                           pa.int32()),
        "duration": pa.array(rng.integers(0, 10**7, rows), pa.int64()),
        "attrs": attrs.cast(pa.binary()),
    }
    return schema, pa.Table.from_pydict(arrays, schema=schema.arrow())


# ---- measurements ---------------------------------------------------------------------------

def timed(fn: Callable[[], object], repeat: int) -> float:
    return timed_cpu(fn, repeat)[0]


def timed_cpu(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU (this process, all threads) seconds of `repeat` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median wall seconds of each function, run round-robin `repeat` times."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def ipc_write(batches: list[pa.RecordBatch], schema: pa.Schema, compression: str | None
              ) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema,
                         options=pa.ipc.IpcWriteOptions(compression=compression)) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue()


def ipc_read(buf: pa.Buffer) -> int:
    reader = pa.ipc.open_file(pa.BufferReader(buf))
    return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def tlm_write(store: MemoryStore, batches: list[pa.RecordBatch], schema: pa.Schema,
              fmt: TlmFormat, block_rows: int) -> str:
    w = fmt.start_extent(store, "bench", schema, block_rows=block_rows)
    for b in batches:
        w.append(b)
    return w.finish().object_path


def tlm_read(store: MemoryStore, path: str, fmt: TlmFormat) -> int:
    reader = fmt.open_extent(store, path)
    return sum(reader.read_block(i).num_rows for i in range(reader.metadata().block_count))


def parquet_write(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Buffer:
    """Plain Parquet as pyarrow writes it with zstd and default options, a row group a
    block."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema, compression="zstd") as w:
        for b in batches:
            w.write_batch(b, row_group_size=b.num_rows)
    return sink.getvalue()


def parquet_read(buf: pa.Buffer, columns: list[str] | None) -> int:
    f = pq.ParquetFile(pa.BufferReader(buf))
    return sum(f.read_row_group(i, columns=columns, use_threads=False).num_rows
               for i in range(f.num_row_groups))


def tlm_read_columns(store: MemoryStore, path: str, columns: list[str] | None) -> int:
    reader = TlmFormat().open_extent(store, path)
    return sum(reader.read_block(i, columns).num_rows
               for i in range(reader.metadata().block_count))


def fetched(store: MemoryStore, path: str, columns: list[str] | None) -> int:
    """Bytes a fresh reader fetches to open the extent and read `columns` of every block."""
    reader = TlmFormat().open_extent(store, path)
    for i in range(reader.metadata().block_count):
        reader.read_block(i, columns)
    return reader.bytes_read


def versions(batches: list[pa.RecordBatch], schema: pa.Schema, compression: str | None,
             block_rows: int, repeat: int) -> None:
    """tlm v2 vs tlm v3 vs plain Parquet-zstd on the same batches (see the module doc)."""
    rows = sum(b.num_rows for b in batches)
    fmts = {2: TlmFormat(compression=compression, version=2),
            3: TlmFormat(compression=compression, version=3)}
    store = MemoryStore()
    paths = {v: tlm_write(store, batches, schema, f, block_rows) for v, f in fmts.items()}
    plain = parquet_write(batches, schema)
    sizes = {"v2": store.objects[paths[2]].size, "v3": store.objects[paths[3]].size,
             "pq": plain.size}
    w = interleaved({
        "v2": lambda: tlm_write(MemoryStore(), batches, schema, fmts[2], block_rows),
        "v3": lambda: tlm_write(MemoryStore(), batches, schema, fmts[3], block_rows),
        "pq": lambda: parquet_write(batches, schema)}, repeat)
    reads: dict[str, dict[str, float]] = {}
    for label, cols in (("level", ["level"]), ("message", ["message"]), ("all", None)):
        reads[label] = interleaved({
            "v2": lambda c=cols: tlm_read_columns(store, paths[2], c),
            "v3": lambda c=cols: tlm_read_columns(store, paths[3], c),
            "pq": lambda c=cols: parquet_read(plain, c)}, repeat)
    print(f"\n### Extent versions — {rows:,} rows, block_rows={block_rows}, "
          f"compression={compression} (plain Parquet: zstd, pyarrow defaults)\n")
    print("| measure | tlm v2 (IPC) | tlm v3 (Parquet body) | plain Parquet | v3 / v2 "
          "| v3 / Parquet |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| bytes (MB) | {sizes['v2'] / 1e6:.1f} | {sizes['v3'] / 1e6:.1f} "
          f"| {sizes['pq'] / 1e6:.1f} | {sizes['v3'] / sizes['v2']:.2f}x "
          f"| {sizes['v3'] / sizes['pq']:.2f}x |")
    print(f"| write rows/s (tlm: every stat) | {rows / w['v2']:,.0f} | {rows / w['v3']:,.0f} "
          f"| {rows / w['pq']:,.0f} | {w['v2'] / w['v3']:.2f}x | {w['pq'] / w['v3']:.2f}x |")
    for label, cols in (("level", ["level"]), ("message", ["message"])):
        kb = {v: fetched(store, paths[v], cols) / 1e3 for v in (2, 3)}
        print(f"| bytes fetched: open + `{label}` of every block (KB) | {kb[2]:,.0f} "
              f"| {kb[3]:,.0f} | | {kb[3] / kb[2]:.2f}x | |")
    for label, name in (("level", "read `level` of every block (ms)"),
                        ("message", "read `message` of every block (ms)"),
                        ("all", "read every block whole (ms)")):
        r = reads[label]
        print(f"| {name} | {r['v2'] * 1e3:.1f} | {r['v3'] * 1e3:.1f} | {r['pq'] * 1e3:.1f} "
              f"| {r['v2'] / r['v3']:.2f}x | {r['pq'] / r['v3']:.2f}x |")
    print("\n(ratios: how many times faster or smaller v3 is; above 1 favours v3, except for "
          "bytes, where below 1 does)")


def group_by_level(rows: int, extents: int, repeat: int) -> None:
    """`GROUP BY level` on the embedded engine over v2 and v3 extents vs DuckDB over Parquet."""
    import duckdb

    import shoal

    _, table = make_table(rows, "templated", seed=11)
    per = -(-rows // extents)
    pieces = [table.slice(i, per) for i in range(0, rows, per)]
    root = tempfile.mkdtemp(prefix="bench-format-")
    sql = "SELECT level, count(*) AS c FROM logs GROUP BY level ORDER BY level"
    try:
        dbs = {}
        sizes = {}
        for v in (2, 3):
            db = shoal.connect(data_dir=f"{root}/v{v}")
            db.create_table("logs", LOG_COLUMNS)
            db.coordinator.extents.format = TlmFormat(version=v)  # type: ignore[assignment]
            target = db.catalog.load_table("logs").schema.arrow()
            for piece in pieces:
                db.append("logs", pa.Table.from_arrays(piece.columns, schema=target))
            sizes[f"v{v}"] = sum(e.byte_size for e in db.catalog.manifests("logs"))
            dbs[f"v{v}"] = db
        os.makedirs(f"{root}/parquet")
        for i, piece in enumerate(pieces):
            pq.write_table(piece, f"{root}/parquet/{i:03d}.parquet", compression="zstd")
        sizes["duckdb"] = sum(os.path.getsize(f"{root}/parquet/{n}")
                              for n in os.listdir(f"{root}/parquet"))
        con = duckdb.connect()
        duck_sql = sql.replace("FROM logs", f"FROM read_parquet('{root}/parquet/*.parquet')")
        answers = {k: db.sql(sql, engine="local").table.to_pylist() for k, db in dbs.items()}
        duck = [dict(zip(("level", "c"), r, strict=True)) for r in con.sql(duck_sql).fetchall()]
        assert answers["v2"] == answers["v3"] == duck, (answers, duck)
        local3 = dbs["v3"].query_engine.local
        fast = local3.bodies

        def v3_blocks() -> Any:     # the same extents through the block-by-block reader
            local3.bodies = None
            try:
                return dbs["v3"].sql(sql, engine="local")
            finally:
                local3.bodies = fast

        assert v3_blocks().table.to_pylist() == answers["v3"]
        t = interleaved({
            "v2": lambda: dbs["v2"].sql(sql, engine="local"),
            "v3": lambda: dbs["v3"].sql(sql, engine="local"),
            "v3b": v3_blocks,
            "duckdb": lambda: con.sql(duck_sql).fetchall()}, max(repeat, 7))
        print(f"\n### `GROUP BY level` — {rows:,} rows in {len(pieces)} extents, embedded "
              f"engine (median of {max(repeat, 7)}, interleaved)\n")
        print("| engine and files | ms | bytes on disk (MB) | vs DuckDB over Parquet |")
        print("|---|---:|---:|---:|")
        sizes["v3b"] = sizes["v3"]
        for k, name in (("v2", "shoal local engine, tlm v2 extents"),
                        ("v3", "shoal local engine, tlm v3 extents"),
                        ("v3b", "shoal local engine, tlm v3 extents, block-by-block reader"),
                        ("duckdb", "DuckDB over Parquet files (pyarrow defaults, zstd)")):
            print(f"| {name} | {t[k] * 1e3:.1f} | {sizes[k] / 1e6:.1f} "
                  f"| {t[k] / t['duckdb']:.2f}x |")
        for db in dbs.values():
            db.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def stat_costs(batches: list[pa.RecordBatch], schema: pa.Schema, repeat: int
               ) -> list[tuple[str, float, float]]:
    """(name, wall s, CPU s) per stat over all blocks, each alone and single-threaded."""
    col = {name: [b.column(name) for b in batches] for name in schema.names}

    def uniques(name: str) -> list[pa.Array]:
        return [pc.drop_null(pc.unique(a)) for a in col[name]]

    def bloom(name: str) -> None:
        # what the writer does for a column that is mostly distinct per block: every row
        # hashed (vectorised), sized by a distinct-count estimate, bits set
        hashes = [hash_array(a) for a in col[name]]
        BloomFilter.from_hashes(np.concatenate([h[0] for h in hashes]),
                                np.concatenate([h[1] for h in hashes]))

    def tokens() -> None:
        for n in ("service", "level"):
            for u in uniques(n):
                tokenize_array(u)
        _IndexedColumn("message", True, False)._add_tokens(pc.unique(col["message"][0]))

    def everything() -> None:
        builder = ExtentStatsBuilder(schema)
        for b in batches:
            builder.add_block(b)
        builder.finish()

    return [
        ("block stats (min/max/nulls, every column)",
         *timed_cpu(lambda: [block_stats(b) for b in batches], repeat)),
        ("distinct: unique per block, low-cardinality columns (service, level, status)",
         *timed_cpu(lambda: [uniques(n) for n in ("service", "level", "status")], repeat)),
        ("tokens: service + level (unique first), message block 0 in growing chunks until "
         "the 10,000 cap overflows", *timed_cpu(tokens, repeat)),
        ("bloom filter: trace_id (numpy hash of every row, HLL sizing, bits)",
         *timed_cpu(lambda: bloom("trace_id"), repeat)),
        ("bloom filter: duration (int64)", *timed_cpu(lambda: bloom("duration"), repeat)),
        ("message: whitespace check of block 0 (free text: no bloom filter)",
         *timed_cpu(lambda: has_whitespace(col["message"][0]), repeat)),
        ("present paths: attrs (key skeletons per block, one value parsed per skeleton)",
         *timed_cpu(lambda: [json_paths(a) for a in col["attrs"]], repeat)),
        ("present paths, previous method: attrs (unique, Arrow JSON reader on every value)",
         *timed_cpu(lambda: [exact_json_paths(u) for u in uniques("attrs")], repeat)),
        ("all stats together (ExtentStatsBuilder, what the writer runs)",
         *timed_cpu(everything, repeat)),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--block-rows", type=int, default=65536)
    p.add_argument("--compression", choices=["zstd", "lz4", "none"], default="zstd")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--attrs", choices=["distinct", "templated"], default="distinct")
    p.add_argument("--no-stat-costs", action="store_true")
    p.add_argument("--query-rows", type=int, default=1_000_000)
    p.add_argument("--query-extents", type=int, default=40)
    p.add_argument("--no-query", action="store_true")
    p.add_argument("--only-versions", action="store_true",
                   help="skip the IPC comparison and the stat costs")
    args = p.parse_args()
    compression = None if args.compression == "none" else args.compression

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    schema, table = make_table(args.rows, args.attrs)
    batches = table.to_batches(max_chunksize=args.block_rows)
    arrow_schema = schema.arrow()
    mb = table.nbytes / 1e6
    gen = time.perf_counter() - t0

    if args.only_versions:
        print(f"Host: {platform.machine()}, {os.cpu_count()} CPUs (load {load:.2f}), Python "
              f"{platform.python_version()}, pyarrow {pa.__version__}; {mb:.0f} MB Arrow, "
              f"attrs={args.attrs}; median of {args.repeat} (interleaved)")
        versions(batches, arrow_schema, compression, args.block_rows, args.repeat)
        if not args.no_query:
            group_by_level(args.query_rows, args.query_extents, args.repeat)
        return

    # The IPC comparison is of v2, whose body is Arrow IPC; v3 is compared below.
    fmt = TlmFormat(compression=compression, version=2)
    no_filters = TlmFormat(compression=compression, membership_filters=False, version=2)
    store = MemoryStore()
    plain = ipc_write(batches, arrow_schema, compression)
    path = tlm_write(store, batches, arrow_schema, fmt, args.block_rows)
    tlm_size = store.objects[path].size
    assert ipc_read(plain) == tlm_read(store, path, fmt) == args.rows

    # A fresh store per run: written extents are dropped, memory stays flat. Variants run
    # round-robin, so load from elsewhere on the host hits each alike.
    def framing_only() -> None:
        with mock.patch.object(ExtentStatsBuilder, "add_block",
                               lambda self, batch, stat=None: block_stats(batch)):
            tlm_write(MemoryStore(), batches, arrow_schema, fmt, args.block_rows)

    w = interleaved({
        "ipc": lambda: ipc_write(batches, arrow_schema, compression),
        "tlm": lambda: tlm_write(MemoryStore(), batches, arrow_schema, fmt, args.block_rows),
        "nof": lambda: tlm_write(MemoryStore(), batches, arrow_schema, no_filters,
                                 args.block_rows),
        "frame": framing_only,
    }, args.repeat)
    r = interleaved({"ipc": lambda: ipc_read(plain), "tlm": lambda: tlm_read(store, path, fmt)},
                    args.repeat)

    print(f"### tlm v2 vs plain Arrow IPC — {args.rows:,} rows, {mb:.0f} MB Arrow, "
          f"compression={args.compression}, block_rows={args.block_rows}, "
          f"attrs={args.attrs}\n")
    print(f"Host: {platform.machine()}, {os.cpu_count()} CPUs (load {load:.2f}), Python "
          f"{platform.python_version()}, pyarrow {pa.__version__}, numpy {np.__version__}; "
          f"data generated in {gen:.1f} s; median of {args.repeat} (interleaved); sizes: IPC "
          f"{plain.size / 1e6:.1f} MB, tlm {tlm_size / 1e6:.1f} MB\n")
    print("| operation | seconds | MB/s | ratio vs IPC |")
    print("|---|---:|---:|---:|")
    rows = [("write: plain IPC", w["ipc"], w["ipc"]),
            ("write: tlm, all stats", w["tlm"], w["ipc"]),
            ("write: tlm, all stats but membership filters", w["nof"], w["ipc"]),
            ("write: tlm, framing + block stats only (bench-only: extent stats off)",
             w["frame"], w["ipc"]),
            ("read all blocks: plain IPC", r["ipc"], r["ipc"]),
            ("read all blocks: tlm", r["tlm"], r["ipc"])]
    for name, sec, base in rows:
        print(f"| {name} | {sec:.3f} | {mb / sec:,.0f} | {base / sec:.2f}x |")
    if not args.no_stat_costs:
        print("\nWhere the writer's stats time goes (each alone, single-threaded; the writer "
              "overlaps stats with IPC serialisation on a second thread, and Arrow compresses "
              "IPC buffers on its own thread pool):\n")
        print("| stat | seconds | CPU s | MB/s |")
        print("|---|---:|---:|---:|")
        for name, sec, cpu in stat_costs(batches, arrow_schema, args.repeat):
            print(f"| {name} | {sec:.3f} | {cpu:.3f} | {mb / sec:,.0f} |")
    print("\nFor BENCHMARKS.md:\n")
    print("| rows | compression | IPC write s | tlm write s | write ratio | IPC read s "
          "| tlm read s | read ratio |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.rows:,} | {args.compression} | {w['ipc']:.2f} | {w['tlm']:.2f} "
          f"| {w['ipc'] / w['tlm']:.2f}x | {r['ipc']:.2f} | {r['tlm']:.2f} "
          f"| {r['ipc'] / r['tlm']:.2f}x |")
    versions(batches, arrow_schema, compression, args.block_rows, args.repeat)
    if not args.no_query:
        group_by_level(args.query_rows, args.query_extents, args.repeat)


if __name__ == "__main__":
    main()
