"""`get_json_object` over shredded dynamic paths answers as it did over the JSON alone.

Tables written with shredding, without, and mixed (extents of both kinds, and extents where
a later block holds a value the engine hands to Spark) give the embedded engine's old answer
(the transpiled CASE over the raw JSON, which a CTE keeps) -- or the same hand-off to Spark;
a predicate on a path reads the sub-column instead of the JSON; on a small sample Spark
agrees."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal
from shoal.format.shred import ShredOptions
from shoal.format.tlm import TlmFormat
from shoal.query.embedded.local_engine import LocalMismatchError
from shoal.types import DYNAMIC, LONG, STRING, Column
from tests.query.conftest import ndjson, rows_at
from tests.query.test_functions_differential import both, fdb  # noqa: F401

KEYS = ["a", "b", "m"]
PATHS = ["a", "m", "a.b", "b.m"]
_names = itertools.count()

scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**66), max_value=2**66)
           | st.floats(allow_nan=False, allow_infinity=False, width=32)
           | st.sampled_from(["GET", "POST", 'q"uote', "back\\slash", "\u00e9t\u00e9",
                              "\U0001f600", "", "{}", "1.5"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=2)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=2),
                      max_leaves=5)
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=3)


@pytest.fixture(scope="module")
def ldb(tmp_path_factory) -> Iterator[shoal.Shoal]:
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("shred")),
                           query_engine="local")
    yield client
    client.close()


@contextmanager
def writing_with(db: shoal.Shoal, shred: ShredOptions | None) -> Iterator[None]:
    """Extents written meanwhile are shredded with `shred` (None: not shredded)."""
    before = db.coordinator.extents.format
    db.coordinator.extents.format = TlmFormat(shred=shred)
    try:
        yield
    finally:
        db.coordinator.extents.format = before


def _table(db: shoal.Shoal, extents: list[tuple[list[dict], ShredOptions | None]],
           block_rows: int = 3) -> str:
    """A table of one extent per (documents, shredding) in `extents`."""
    name = f"sh{next(_names)}"
    db.create_table(name, [Column("k", LONG), Column("attrs", DYNAMIC)])
    info = db.catalog.load_table(name)
    k = 0
    for docs, shred in extents:
        t = pa.table({
            "_timestamp": pa.array(range(k, k + len(docs)), pa.int64()).cast(
                pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(len(docs), pa.binary()),
            "k": pa.array(range(k, k + len(docs)), pa.int64()),
            "attrs": pa.array([json.dumps(d).encode() for d in docs], pa.binary()),
        }).cast(info.schema.arrow())
        k += len(docs)
        with writing_with(db, shred):
            db.coordinator.append(name, [db.coordinator.write_extent(
                info, t.to_batches(), block_rows=block_rows)])
    return name


def _answer(db: shoal.Shoal, sql: str) -> list | str:
    try:
        return db.sql(sql, engine="local").table.to_pylist()
    except LocalMismatchError:
        return "handed to Spark"


def _old(table: str, select: str, where: str = "") -> str:
    """The statement over a CTE: `get_json_object` stays the transpiled CASE over the JSON."""
    return (f"WITH s AS (SELECT k, attrs FROM {table}) SELECT {select} FROM s {where}")


LOOSE = ShredOptions(min_share=0.0)     # shred whatever the first block holds


def _check_tables_answer_as_before(db: shoal.Shoal, first: list[dict],
                                   second: list[dict]) -> None:
    shredded = _table(db, [(first, LOOSE), (second, LOOSE)])
    mixed = _table(db, [(first, None), (second, LOOSE)])
    plain = _table(db, [(first, None), (second, None)])
    select = "k, " + ", ".join(f"get_json_object(attrs, '$.{p}') AS v{i}"
                               for i, p in enumerate(PATHS))
    want_rows = _answer(db, _old(plain, select, "ORDER BY k"))
    for table in (shredded, mixed, plain):
        assert _answer(db, f"SELECT {select} FROM {table} ORDER BY k") == want_rows, table
    for path in PATHS:
        where = f"WHERE get_json_object(attrs, '$.{path}') = 'GET'"
        want_count = _answer(db, _old(plain, "count(*) AS n", where))
        for table in (shredded, mixed, plain):
            assert _answer(db, f"SELECT count(*) AS n FROM {table} {where}") == want_count, \
                (table, path)


_TWO_EXTENTS = (st.lists(documents, min_size=1, max_size=9),
                st.lists(documents, min_size=1, max_size=9))


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(*_TWO_EXTENTS)
def test_shredded_mixed_and_plain_tables_answer_as_before(ldb, first, second):
    _check_tables_answer_as_before(ldb, first, second)


@pytest.mark.slow
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(*_TWO_EXTENTS)
def test_shredded_mixed_and_plain_tables_answer_as_before_at_length(ldb, first, second):
    _check_tables_answer_as_before(ldb, first, second)


def test_ingested_rows_answer_as_before(ldb):
    rows = [{"attrs": {"http": {"method": m, "status": s}, "user": u}}
            for m, s, u in zip(["GET", "POST", "PUT", "POST"] * 5, range(200, 220),
                               ["ann", "b\u00f6b", 'c"d', None] * 5, strict=True)]
    names = []
    for shred in (ShredOptions(), None):
        name = f"sh{next(_names)}"
        ldb.create_table(name, [Column("service", STRING), Column("attrs", DYNAMIC)])
        with writing_with(ldb, shred):
            ldb.ingest_ndjson(name, ndjson(rows_at(0, len(rows), attrs=lambda i: rows[i]["attrs"],
                                                   service="api")))
        names.append(name)
    queries = [
        "SELECT get_json_object(attrs, '$.http.method') AS m, count(*) AS c FROM {t} "
        "GROUP BY get_json_object(attrs, '$.http.method') ORDER BY m",
        "SELECT count(*) AS n FROM {t} WHERE get_json_object(attrs, '$.http.method') = 'POST' "
        "AND get_json_object(attrs, '$.user') IS NOT NULL",
        "SELECT l.service, get_json_object(l.attrs, '$.http.status') AS s FROM {t} l "
        "ORDER BY s DESC LIMIT 3",
        "SELECT attrs, get_json_object(attrs, '$.user') AS u FROM {t} ORDER BY _timestamp",
    ]
    for q in queries:
        shredded, plain = (ldb.sql(q.format(t=t), engine="local").table for t in names)
        assert shredded.equals(plain), q


def test_a_path_predicate_reads_the_sub_column_not_the_json(ldb):
    n = 40_000
    noise = random.Random(7)
    docs = [{"http": {"method": "POST" if i % 7 == 0 else "GET"},
             "trace": noise.randbytes(32).hex()} for i in range(n)]
    shredded = _table(ldb, [(docs, ShredOptions())], block_rows=8192)
    plain = _table(ldb, [(docs, None)], block_rows=8192)
    q = "SELECT count(*) AS n FROM {t} WHERE get_json_object(attrs, '$.http.method') = 'POST'"
    got = {t: ldb.sql(q.format(t=t), engine="local") for t in (shredded, plain)}
    assert got[shredded].table.to_pylist() == got[plain].table.to_pylist() == [{"n": 5715}]
    read = {t: got[t].stats.to_json()["scans"][0]["bytes_read"] for t in got}
    assert read[shredded] * 6 < read[plain], read
    # the shredded table's extent holds the JSON too: a query for it reads it
    whole = ldb.sql(f"SELECT count(attrs) AS n FROM {shredded}", engine="local")
    assert whole.stats.to_json()["scans"][0]["bytes_read"] > read[plain] / 2


def test_an_equality_on_a_path_prunes_blocks_by_the_sub_column(ldb):
    docs = [{"m": "GET" if i < 60 else "POST"} for i in range(90)]
    name = _table(ldb, [(docs, ShredOptions())], block_rows=30)
    answer = ldb.sql(f"SELECT count(*) AS n FROM {name} "
                     "WHERE get_json_object(attrs, '$.m') = 'POST'", engine="local")
    assert answer.table.to_pylist() == [{"n": 30}]
    scan = answer.stats.to_json()["scans"][0]
    assert scan["blocks_pruned"] == 2 and scan["blocks_read"] == 1


def test_a_risky_value_in_a_later_block_goes_to_spark_as_before(ldb):
    docs = [{"m": "GET"}] * 3 + [{"m": 2.5}] + [{"m": "GET"}] * 2
    name = _table(ldb, [(docs, ShredOptions())], block_rows=3)
    assert _answer(ldb, f"SELECT get_json_object(attrs, '$.m') AS m FROM {name}") \
        == "handed to Spark"
    # a block pruned by another column is not read: the old form answered it locally too
    get = "get_json_object(attrs, '$.m') = 'GET'"
    assert _answer(ldb, f"SELECT count(*) AS n FROM {name} WHERE k < 3 AND {get}") \
        == _answer(ldb, _old(name, "count(*) AS n", f"WHERE k < 3 AND {get}")) == [{"n": 3}]


def test_hidden_columns_are_not_table_columns(ldb):
    name = _table(ldb, [([{"m": "GET", "n": 1}] * 4, ShredOptions())])
    star = ldb.sql(f"SELECT * FROM {name}", engine="local").table
    assert star.column_names == ["_timestamp", "props", "k", "attrs"]
    assert [c["name"] for c in ldb.describe(name)["columns"]] == ["_timestamp", "props", "k",
                                                                  "attrs"]
    table, _ = ldb.read(name)
    assert table.column_names == ["_timestamp", "props", "k", "attrs"]


@pytest.mark.spark
def test_spark_agrees_on_a_shredded_table(fdb):  # noqa: F811
    docs = [{"http": {"method": m, "code": c}, "user": u, "ok": b}
            for m, c, u, b in zip(["GET", "POST", "PUT"] * 4, range(12),
                                  ["\u00e9", 'a"b', None, "x"] * 3, [True, False] * 6,
                                  strict=True)]
    name = _table(fdb, [(docs[:6], None), (docs[6:], ShredOptions())])
    both(fdb, f"SELECT k, get_json_object(attrs, '$.http.method') AS m, "
              f"get_json_object(attrs, '$.user') AS u, get_json_object(attrs, '$.ok') AS o "
              f"FROM {name} ORDER BY k")
    both(fdb, f"SELECT get_json_object(attrs, '$.http.code') AS c, count(*) AS n FROM {name} "
              "WHERE get_json_object(attrs, '$.http.method') = 'POST' GROUP BY 1 ORDER BY 1")


@pytest.mark.spark
@pytest.mark.slow
def test_compaction_shreds_the_merged_extent(fdb):  # noqa: F811
    from shoal.maintenance.service import build_worker

    name = f"sh{next(_names)}"
    fdb.create_table(name, [Column("k", LONG), Column("attrs", DYNAMIC)],
                     properties={"compact_min_extents": "4", "target_extent_size": "1MB"})
    info = fdb.catalog.load_table(name)
    for i in range(6):
        docs = [{"m": ("GET", "POST")[(i + j) % 2], "n": i * 10 + j} for j in range(10)]
        t = pa.table({
            "_timestamp": pa.array(range(i * 10, i * 10 + 10), pa.int64()).cast(
                pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(10, pa.binary()), "k": pa.array(range(i * 10, i * 10 + 10)),
            "attrs": pa.array([json.dumps(d).encode() for d in docs], pa.binary())}
        ).cast(info.schema.arrow())
        with writing_with(fdb, ShredOptions() if i % 2 else None):
            fdb.coordinator.append(name, [fdb.coordinator.write_extent(info, t.to_batches())])
    queries = [f"SELECT count(*) AS c FROM {name} WHERE get_json_object(attrs, '$.m') = 'POST'",
               f"SELECT k, get_json_object(attrs, '$.n') AS n FROM {name} ORDER BY k"]
    before = [fdb.sql(q, engine="local").table for q in queries]
    fdb.catalog.enqueue_work("compact", table=name, payload={"table": name})
    outcome = build_worker(fdb).run_one()
    assert outcome is not None and outcome.ok, outcome
    [entry] = fdb.catalog.manifests(name)
    reader = fdb.formats["tlm"].open_extent(fdb.store, entry.object_path)
    stats = reader.metadata().block_stats
    assert {"attrs.$m", "attrs.$n"} <= set(stats[0]["columns"])
    assert reader.metadata().schema.names == ["_timestamp", "props", "k", "attrs"]
    for q, want in zip(queries, before, strict=True):
        assert fdb.sql(q, engine="local").table.equals(want), q


def test_only_a_dynamic_column_straight_from_a_scan_becomes_a_scan_column():
    from shoal.query.embedded.transpile import to_local
    from shoal.query.planner import parse

    views = {"v0": {"k": "BIGINT", "attrs": "STRING", "s": "STRING"}}
    dynamic = {"v0": ["attrs"]}

    def local(sql: str):
        return to_local(parse(sql), views, sql, dynamic)

    plain = local("SELECT count(*) AS n FROM v0 WHERE get_json_object(attrs, '$.a.b') = 'x'")
    assert plain.scan_paths == {"v0": (["attrs.$a.b"], ["attrs"])}
    assert '"attrs.$a.b"' in plain.sql and "json_type" not in plain.sql.lower()
    kept = local("SELECT attrs, get_json_object(t.attrs, '$.a') AS a FROM v0 t")
    assert kept.scan_paths == {"v0": (["attrs.$a"], [])}      # the JSON is still read
    for sql in ("WITH c AS (SELECT attrs FROM v0) SELECT get_json_object(attrs, '$.a') AS a "
                "FROM c",
                "SELECT get_json_object(s, '$.a') AS a FROM v0",
                "SELECT get_json_object(x.attrs, '$.a') AS a FROM (SELECT attrs FROM v0) x"):
        old = local(sql)
        assert old.scan_paths == {} and "json_type" in old.sql.lower(), sql
    both_cases = local("SELECT get_json_object(attrs, '$.a') AS x, "
                       "get_json_object(attrs, '$.A') AS y FROM v0")
    assert both_cases.scan_paths == {"v0": (["attrs.$a"], [])}     # names ignore case
