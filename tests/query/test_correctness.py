"""shoal's answers against an independent engine (DuckDB over the same Arrow rows).

Hypothesis builds random tables (several extents of small blocks, nulls, ns timestamps,
tokenised text) and random predicates (equality, IN, ranges on ints and timestamps,
BETWEEN, whole-token `has`, IS NULL, NOT, AND/OR nests); every query must return the same
multiset of rows through shoal — with pruning and without — as DuckDB gives.

DuckDB sees timestamps the way Spark shows them (µs, truncated from ns); `_timestamp_ns`
carries the exact value in both.
"""

from __future__ import annotations

import itertools
from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal
from shoal.types import BOOL, INT, LONG, STRING, Column
from tests.query.conftest import SPARK_MASTER

BASE_NS = 1_772_323_200_000_000_000            # 2026-03-01T00:00:00Z
STEP_NS = 30 * 1_000_000_000                   # instants 30 s apart, over ten minutes
WORDS = ["error", "timeout", "ok", "db", "cache", "miss", "retry42", "x"]
SERVICES = ["api", "web", "db", "auth"]
_names = itertools.count()


@pytest.fixture(scope="module")
def mdb(tmp_path_factory, spark):
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("correctness")),
                           spark_master=SPARK_MASTER)
    yield client
    client.close()


row_st = st.fixed_dictionaries({
    # few distinct µs instants, each with a ns remainder: literals below hit them exactly
    "ts": st.builds(lambda k, r: k * STEP_NS + r, st.integers(0, 20), st.integers(0, 2_999)),
    "svc": st.one_of(st.none(), st.sampled_from(SERVICES)),
    "code": st.one_of(st.none(), st.integers(-5, 5)),
    "big": st.one_of(st.none(), st.integers(-(2**40), 2**40)),
    "flag": st.one_of(st.none(), st.booleans()),
    "msg": st.one_of(st.none(), st.lists(st.sampled_from(WORDS), max_size=4).map(
        lambda ws: "-".join(ws) if len(ws) % 2 else " ".join(ws).upper())),
})
extent_st = st.lists(row_st, min_size=0, max_size=30)
table_st = st.lists(extent_st, min_size=1, max_size=5)


def _ts_literal(ns: int) -> str:
    from datetime import datetime, timezone
    us = ns // 1_000
    dt = datetime.fromtimestamp(us // 1_000_000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S") + f".{us % 1_000_000:06d}"


@st.composite
def atom(draw) -> tuple[str, str]:
    """(Spark SQL, DuckDB SQL) of one leaf predicate."""
    kind = draw(st.sampled_from(["svc_eq", "svc_in", "code_cmp", "big_between", "ts_cmp",
                                 "ts_cmp", "has", "null", "flag"]))
    if kind == "svc_eq":
        s = f"svc = '{draw(st.sampled_from(SERVICES + ['zzz']))}'"
        return s, s
    if kind == "svc_in":
        vals = draw(st.lists(st.sampled_from(SERVICES), min_size=1, max_size=3))
        s = "svc IN (" + ", ".join(f"'{v}'" for v in vals) + ")"
        return s, s
    if kind == "code_cmp":
        s = f"code {draw(st.sampled_from(['=', '<', '<=', '>', '>=']))} {draw(st.integers(-6, 6))}"
        return s, s
    if kind == "big_between":
        a, b = sorted(draw(st.lists(st.integers(-(2**41), 2**41), min_size=2, max_size=2)))
        s = f"big BETWEEN {a} AND {b}"
        return s, s
    if kind == "ts_cmp":
        op = draw(st.sampled_from(["=", "<", "<=", ">", ">="]))
        near = draw(st.integers(-1, 21)) * STEP_NS + draw(st.sampled_from([-1000, 0, 1000,
                                                                          2000]))
        lit = _ts_literal(BASE_NS + near)
        return f"_timestamp {op} '{lit}'", f"_timestamp {op} TIMESTAMP '{lit}'"
    if kind == "has":
        w = draw(st.sampled_from(WORDS[:-1] + ["Timeout", "nothing"]))
        pattern = f"(^|[^A-Za-z0-9]){w.lower()}($|[^A-Za-z0-9])"
        return f"has(msg, '{w}')", f"regexp_matches(msg, '{pattern}', 'i')"
    if kind == "null":
        col = draw(st.sampled_from(["svc", "code", "msg"]))
        neg = draw(st.booleans())
        s = f"{col} IS {'NOT ' if neg else ''}NULL"
        return s, s
    s = f"flag = {draw(st.sampled_from(['true', 'false']))}"
    return s, s


def predicate(depth: int = 2):
    if depth == 0:
        return atom()
    sub = predicate(depth - 1)

    def combine(parts):
        op, children = parts
        if op == "NOT":
            spark, duck = children[0]
            return f"NOT ({spark})", f"NOT ({duck})"
        return (f" {op} ".join(f"({s})" for s, _ in children),
                f" {op} ".join(f"({d})" for _, d in children))
    return st.one_of(atom(), st.tuples(st.sampled_from(["AND", "OR", "NOT"]),
                                       st.lists(sub, min_size=2, max_size=3)).map(combine))


def _write(db, extents: list[list[dict]]) -> tuple[str, pa.Table]:
    name = f"t{next(_names)}"
    db.create_table(name, [Column("svc", STRING), Column("code", INT), Column("big", LONG),
                           Column("flag", BOOL), Column("msg", STRING)])
    info = db.catalog.load_table(name)
    schema = info.schema.arrow()
    parts = []
    for rows in extents:
        if not rows:
            continue
        rows = sorted(rows, key=lambda r: r["ts"])
        t = pa.table({
            "_timestamp": pa.array([BASE_NS + r["ts"] for r in rows], pa.int64()).cast(
                pa.timestamp("ns", tz="UTC")),
            "props": pa.nulls(len(rows), pa.binary()),
            "svc": [r["svc"] for r in rows], "code": pa.array([r["code"] for r in rows],
                                                              pa.int32()),
            "big": pa.array([r["big"] for r in rows], pa.int64()),
            "flag": [r["flag"] for r in rows], "msg": [r["msg"] for r in rows],
        }).cast(schema)
        # 7-row blocks: stage 2 gets real work inside every extent
        entry = db.coordinator.write_extent(info, t.to_batches(), block_rows=7)
        db.coordinator.append(name, [entry])
        parts.append(t)
    whole = (pa.concat_tables(parts) if parts else schema.empty_table())
    return name, whole


def _duck_rows(whole: pa.Table, where: str) -> Counter:
    view = pa.table({
        "svc": whole["svc"], "code": whole["code"], "big": whole["big"],
        "flag": whole["flag"], "msg": whole["msg"],
        "_timestamp_ns": whole["_timestamp"].cast(pa.int64()),
        "_timestamp": whole["_timestamp"].cast(pa.timestamp("us", tz="UTC"), safe=False)
        .cast(pa.int64()).cast(pa.timestamp("us")),
    })
    con = duckdb.connect()
    con.register("t", view)
    got = con.execute(f"SELECT svc, code, big, flag, msg, _timestamp_ns FROM t "
                      f"WHERE {where}").fetchall()
    con.close()
    return Counter(got)


def _shoal_rows(db, name: str, where: str, prune: bool) -> tuple[Counter, dict]:
    r = db.sql(f"SELECT svc, code, big, flag, msg, _timestamp_ns FROM {name} WHERE {where}",
               prune=prune)
    return Counter(tuple(row.values()) for row in r.table.to_pylist()), r.stats.to_json()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(extents=table_st, preds=st.lists(predicate(), min_size=2, max_size=2))
def test_random_tables_and_predicates_agree_with_duckdb(mdb, extents, preds):
    name, whole = _write(mdb, extents)
    for spark_where, duck_where in preds:
        expected = _duck_rows(whole, duck_where)
        pruned, stats = _shoal_rows(mdb, name, spark_where, prune=True)
        assert pruned == expected, spark_where
        unpruned, full = _shoal_rows(mdb, name, spark_where, prune=False)
        assert unpruned == expected, spark_where
        assert full["extents_pruned"] == full["blocks_pruned"] == 0
        assert stats["blocks_read"] <= full["blocks_read"]


@pytest.mark.parametrize("op, expected", [("=", 1), ("<=", 1), (">=", 1), ("<", 0), (">", 0)])
def test_timestamp_bounds_at_the_truncated_microsecond(mdb, op, expected):
    """A row at ...005.000000123 s shows as ...005.000000 in Spark: `<=` that instant must
    find it even though its ns value is above the literal (pruning must widen the bound)."""
    name, _ = _write(mdb, [[{"ts": 5_000_000_123, "svc": "api", "code": 1, "big": 1,
                              "flag": True, "msg": "x"}]])
    lit = _ts_literal(BASE_NS + 5_000_000_000)
    got, stats = _shoal_rows(mdb, name, f"_timestamp {op} '{lit}'", prune=True)
    assert sum(got.values()) == expected
    assert stats["extents_read"] == expected          # and the other way round: pruned
