"""The coercion worker pool (`shoal.ingest.pool`): real worker processes, compared with
`coerce_ndjson` in this process, which is the reference."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.errors import CoercionWorkerLostError, InternalError
from shoal.ingest.coerce import Coerced, coerce_ndjson
from shoal.ingest.pool import CoercionPool
from shoal.types import DYNAMIC, INT, LONG, REAL, STRING, TIMESTAMP, Column, Schema, vector
from tests.support.waiting import eventually

NOW = 1_700_000_000_000_000_000

SCHEMA = Schema.create([Column("service", STRING), Column("status", INT),
                        Column("duration", LONG), Column("ratio", REAL),
                        Column("at", TIMESTAMP), Column("attrs", DYNAMIC),
                        Column("emb", vector(2)),
                        Column("level", STRING, nullable=False, default="info")])


@pytest.fixture(scope="module")
def pool() -> Iterator[CoercionPool]:
    with CoercionPool(2).start() as p:
        yield p


def assert_same(got: Coerced, want: Coerced) -> None:
    assert got.batch.schema.equals(want.batch.schema, check_metadata=True)
    assert got.batch.to_pylist() == want.batch.to_pylist()
    assert got.rows == want.rows
    assert got.errors == want.errors
    assert got.rejected_lines == want.rejected_lines
    assert got.unknown_fields == want.unknown_fields


def both(pool: CoercionPool, body: bytes, schema: Schema = SCHEMA, **kw: Any
         ) -> tuple[Coerced, Coerced]:
    kw.setdefault("unknown", "props")
    kw.setdefault("ingest_time_ns", NOW)
    return pool.coerce(body, schema, **kw), coerce_ndjson(body, schema, **kw)


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                   st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
                   st.lists(st.integers(-5, 5), max_size=3),
                   st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9), max_size=2))
KEYS = st.sampled_from(["service", "status", "duration", "ratio", "at", "attrs", "emb",
                        "level", "extra", "other"])
LINES = st.one_of(
    st.dictionaries(KEYS, VALUES, max_size=6).map(lambda d: json.dumps(d)),
    st.sampled_from(["", "not json", "[1,2]", "null", '{"status": 1',
                     '{"at": "2024-01-01T00:00:00Z"}', '{"emb": [1.5, 2]}',
                     '{"status": 3000000000}']))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINES, min_size=0, max_size=30),
       unknown=st.sampled_from(["props", "drop", "reject"]),
       max_errors=st.sampled_from([0, 3, 100]))
def test_pool_matches_in_process(pool: CoercionPool, lines: list[str], unknown: str,
                                 max_errors: int) -> None:
    body = "\n".join(lines).encode() + (b"\n" if lines else b"")
    got, want = both(pool, body, unknown=unknown, max_errors=max_errors)
    assert_same(got, want)


def test_large_body_with_bad_lines_in_the_middle(pool: CoercionPool) -> None:
    lines = [json.dumps({"service": f"s{i % 7}", "status": 200 + i % 3, "duration": i,
                         "at": "2024-05-01T10:00:00.5Z", "attrs": {"i": i}, "new": i})
             for i in range(20_000)]
    lines[7_000] = '{"status": "seven"}'
    lines[13_001] = "not json"
    body = ("\n".join(lines) + "\n").encode()
    got, want = both(pool, body)
    assert_same(got, want)
    assert got.rejected_lines == [7_001, 13_002] and got.unknown_fields == ["new"]
    got, want = both(pool, body, unknown="props", unknown_fields=["new"])
    assert_same(got, want)


def test_schema_versions_are_told_apart(pool: CoercionPool) -> None:
    body = b'{"service": "a", "x": 1}\n'
    wider = SCHEMA.evolve([Column("x", LONG)])
    for schema in (SCHEMA, wider, SCHEMA):
        got, want = both(pool, body, schema)
        assert_same(got, want)


def test_misuse_raises_in_the_caller_and_the_worker_keeps_serving(pool: CoercionPool) -> None:
    pids = pool.pids
    with pytest.raises(InternalError, match="unknown must be one of"):
        pool.coerce(b"{}\n", SCHEMA, unknown="maybe",  # type: ignore[arg-type]
                    ingest_time_ns=NOW)
    assert pool.pids == pids
    got, want = both(pool, b'{"status": 1}\n')
    assert_same(got, want)


def test_concurrent_calls_share_the_workers(pool: CoercionPool) -> None:
    bodies = [("\n".join(json.dumps({"duration": i * 1000 + j}) for j in range(500)) + "\n")
              .encode() for i in range(12)]
    results: dict[int, pa.RecordBatch] = {}

    def call(i: int) -> None:
        results[i] = pool.coerce(bodies[i], SCHEMA, unknown="drop", ingest_time_ns=NOW).batch

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, batch in results.items():
        assert batch.column("duration").to_pylist() == [i * 1000 + j for j in range(500)]
    assert len(results) == len(bodies)


def test_a_killed_worker_fails_only_its_call_and_is_replaced() -> None:
    with CoercionPool(1).start() as pool:
        (pid,) = pool.pids
        os.kill(pid, signal.SIGSTOP)            # holds the call until it is killed
        outcome: dict[str, Any] = {}

        def call(name: str) -> None:
            try:
                outcome[name] = pool.coerce(b'{"status": 1}\n', SCHEMA, unknown="drop",
                                            ingest_time_ns=NOW)
            except Exception as e:  # noqa: BLE001 - the test inspects it
                outcome[name] = e

        first = threading.Thread(target=call, args=("first",))
        first.start()
        eventually(lambda: pool.busy, "the call to reach the stopped worker")
        second = threading.Thread(target=call, args=("second",))
        second.start()
        eventually(lambda: pool.waiting, "the second call to wait for a worker")
        os.kill(pid, signal.SIGKILL)
        first.join()
        second.join()
        assert isinstance(outcome["first"], CoercionWorkerLostError)
        assert outcome["first"].retryable and str(pid) in str(outcome["first"])
        assert isinstance(outcome["second"], Coerced) and outcome["second"].rows == 1
        assert pool.stats.restarts == 1 and pool.stats.lost_calls == 1
        assert pool.pids != [pid] and len(pool.pids) == 1


def test_a_worker_dead_while_idle_is_replaced_before_use() -> None:
    with CoercionPool(1).start() as pool:
        (pid,) = pool.pids
        os.kill(pid, signal.SIGKILL)
        # Exited and reapable (a zombie), without reaping it: the pool's to notice. (A main
        # thread shows "Z" in /proc while the process's other threads still exit.)
        eventually(lambda: os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT),
                   "the worker to die")
        got = pool.coerce(b'{"status": 1}\n', SCHEMA, unknown="drop", ingest_time_ns=NOW)
        assert got.rows == 1 and pool.stats.restarts == 1 and pool.stats.lost_calls == 0


def test_close_stops_every_worker() -> None:
    pool = CoercionPool(2).start()
    pids = pool.pids
    assert len(pids) == 2 and all(os.path.exists(f"/proc/{p}") for p in pids)
    pool.close()
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)
    with pytest.raises(Exception, match="closed"):
        pool.coerce(b"{}\n", SCHEMA, unknown="drop", ingest_time_ns=NOW)

