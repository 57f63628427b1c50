"""The shared write path in-process: group commit, idempotency, evolution, replay TTL.

Real catalog (SQLite and Postgres), real local store, real tlm extents; concurrency comes
from real threads. The same behaviours are checked through HTTP in tests/server.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from contextlib import closing
from concurrent.futures import ThreadPoolExecutor

import pytest

from shoal.catalog import open_catalog
from shoal.commit import CommitCoordinator, LedgerSweeper
from shoal.errors import PayloadError, TableNotFoundError
from shoal.format.tlm import TlmFormat
from shoal.ingest.buffer import StagingBuffer
from shoal.ingest.write_path import WritePath
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import INT, STRING, Column, Schema
from tests.support.waiting import eventually

SCHEMA = Schema.create([Column("client", INT), Column("req", INT), Column("msg", STRING)])


@pytest.fixture
def wp(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    store = open_store(local_store_url)
    catalog.create_table("t", SCHEMA)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    path = WritePath(catalog, coord, buffer=StagingBuffer(catalog, coord, debounce_s=0.05))
    yield path, catalog, store
    path.close()
    catalog.close()


def body(client: int, req: int, n: int = 3, **extra) -> bytes:
    return b"".join(json.dumps({"client": client, "req": req, "msg": f"m{i}", **extra})
                    .encode() + b"\n" for i in range(n))


def rows(catalog, store, table="t"):
    data, _ = read_table(catalog, store, {"tlm": TlmFormat()}, table)
    return data


def test_group_commit_many_clients_few_extents(wp):
    """64 clients, 20 requests each: a group closes when it holds one request of every
    client (`max_rows`), so each round of requests is one extent and one snapshot, however
    the threads are scheduled. The debounce is only a hang guard here, a plain timer: ended
    early when no request is arriving (the default), a group would close whenever the
    clients just acked had not started their next request yet."""
    wp_default, catalog, store = wp
    clients, per_client = 64, 20
    path = WritePath(catalog, wp_default.buffer.coordinator, buffer=StagingBuffer(
        catalog, wp_default.buffer.coordinator, max_rows=clients * 3, debounce_s=120,
        early_flush=False))

    def client(c: int) -> list[int]:
        return [path.ingest_ndjson("t", body(c, r)).snapshot_id for r in range(per_client)]

    try:
        with ThreadPoolExecutor(max_workers=clients) as pool:
            snaps = [s for res in pool.map(client, range(clients)) for s in res]
    finally:
        path.close()
    requests = clients * per_client
    extents = len(catalog.manifests("t"))
    assert extents == per_client, f"{extents} extents for {per_client} rounds of requests"
    assert len(set(snaps)) == extents  # one snapshot per flush, each carrying one extent
    assert Counter(snaps) == Counter({s: clients for s in set(snaps)})
    data = rows(catalog, store)
    got = Counter(zip(data.column("client").to_pylist(), data.column("req").to_pylist()))
    assert got == Counter({(c, r): 3 for c in range(clients) for r in range(per_client)})
    assert path.buffer.stats.requests == requests


@pytest.mark.timeout(120)   # a hang guard: the bug this catches waits out an hour's debounce
def test_a_request_that_is_an_extent_by_itself_does_not_wait_for_company(wp):
    """A request holding a quarter of the buffer's `max_rows` (`shoal ingest`'s 32 MB chunks
    against the default 200k) is written at once: the debounce only gathers small ones (the
    test above: 3-row requests still wait for a full group of 192 rows)."""
    wp_default, catalog, store = wp
    path = WritePath(catalog, wp_default.buffer.coordinator, buffer=StagingBuffer(
        catalog, wp_default.buffer.coordinator, max_rows=12, debounce_s=3600))
    try:
        ack = path.ingest_ndjson("t", body(1, 1, n=3))
    finally:
        path.close()
    assert ack.rows == 3 and len(ack.extent_ids) == 1
    assert catalog.load_table("t").current_snapshot_id == ack.snapshot_id


def _hour_debounce(wp, **options) -> WritePath:
    _, catalog, _ = wp
    coord = wp[0].buffer.coordinator
    return WritePath(catalog, coord, buffer=StagingBuffer(catalog, coord, debounce_s=3600,
                                                          **options))


@pytest.mark.timeout(120)   # a hang guard: the bug this catches waits out an hour's debounce
def test_a_lone_request_does_not_wait_out_the_debounce(wp):
    """No other request is on its way: the debounce could only add latency (a closed-loop
    client paid all of it on every request), so the group of one is written at once."""
    _, catalog, _ = wp
    path = _hour_debounce(wp)
    try:
        acks = [path.ingest_ndjson("t", body(1, r)) for r in range(3)]
    finally:
        path.close()
    assert [a.rows for a in acks] == [3, 3, 3]
    assert len({a.snapshot_id for a in acks}) == 3
    assert catalog.load_table("t").current_snapshot_id == acks[-1].snapshot_id


@pytest.mark.timeout(120)
def test_a_group_waits_for_a_request_still_arriving(wp):
    """A request announced before its body is read (`arrive`, what the REST route does)
    holds a waiting group open: both land in one extent and one snapshot."""
    _, catalog, store = wp
    path = _hour_debounce(wp)
    try:
        coming = path.arrive("t")              # e.g. its body still on the wire
        first: list = []
        t = threading.Thread(target=lambda: first.append(path.ingest_ndjson("t", body(1, 1))))
        t.start()
        eventually(lambda: path.buffer.pending_bytes, "the first request to be pending")
        assert path.buffer.arriving("t") == 1
        second = path.ingest_ndjson("t", body(2, 1), arrival=coming)
        t.join()
    finally:
        path.close()
    (first_ack,) = first
    assert first_ack.snapshot_id == second.snapshot_id
    assert first_ack.extent_ids == second.extent_ids and len(second.extent_ids) == 1
    assert len(catalog.manifests("t")) == 1
    assert rows(catalog, store).num_rows == 6
    assert path.buffer.arriving("t") == 0


@pytest.mark.timeout(120)
def test_a_request_that_fails_or_replays_stops_arriving(wp):
    """Every way out of a request ends its announcement, else the next group would wait the
    whole debounce for a request that is never coming."""
    _, catalog, _ = wp
    path = _hour_debounce(wp)
    try:
        first = path.ingest_ndjson("t", body(1, 1), idempotency_key="k-arrive")
        with pytest.raises(PayloadError):
            path.ingest_ndjson("t", b'{"client": "not a number"}\n', arrival=path.arrive("t"))
        assert path.ingest_ndjson("t", body(1, 1), idempotency_key="k-arrive",
                                  arrival=path.arrive("t")).replayed
        with pytest.raises(TableNotFoundError):
            path.ingest_ndjson("nope", body(1, 1), arrival=path.arrive("nope"))
        never_used = path.arrive("t")        # e.g. a body that was too large (413)
        never_used.close()
        never_used.close()                   # closing twice counts once
        assert path.buffer.arriving("t") == 0 and path.buffer.arriving("nope") == 0
        last = path.ingest_ndjson("t", body(1, 2))      # written at once: nobody is coming
    finally:
        path.close()
    assert last.snapshot_id > first.snapshot_id
    assert catalog.load_table("t").current_snapshot_id == last.snapshot_id


def _held_first_extent(wp, *, fail_first: bool):
    """A write path with two extent writers whose first extent is held until the second
    has been written (the writers must overlap for it ever to finish), and then fails if
    `fail_first`. The hook only orders the two writes; everything else is real."""
    _, catalog, store = wp
    coord = CommitCoordinator(catalog, store, TlmFormat())
    second_written, first_started = threading.Event(), threading.Event()
    real = coord.write_extent
    calls: list[int] = []

    def write_extent(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            first_started.set()
            # a hang guard, not a clock: only the other writer can set it
            assert second_written.wait(timeout=60), "the second extent was never written"
            if fail_first:
                raise OSError("disk full (injected: the first extent's write fails)")
            return real(*args, **kwargs)
        entry = real(*args, **kwargs)
        second_written.set()
        return entry

    coord.write_extent = write_extent       # type: ignore[method-assign]
    path = WritePath(catalog, coord, buffer=StagingBuffer(catalog, coord, debounce_s=3600,
                                                          writers=2))
    return path, first_started


@pytest.mark.timeout(300)   # a hang guard: one writer alone would wait for itself
@pytest.mark.parametrize("fail_first", [False, True])
def test_writers_overlap_extents_and_commit_in_the_order_taken(wp, fail_first):
    """Two groups: the second's extent is written while the first's is still being written,
    yet the second commits only after the first has (or has failed: it does not hold the
    second back). `shoal ingest` relies on this to land its chunks in order."""
    _, catalog, store = wp
    path, first_started = _held_first_extent(wp, fail_first=fail_first)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            first = pool.submit(path.ingest_ndjson, "t", body(1, 1))
            assert first_started.wait(timeout=120)
            second = path.ingest_ndjson("t", body(2, 1))
            if fail_first:
                with pytest.raises(OSError, match="disk full"):
                    first.result()
            else:
                assert first.result().snapshot_id == second.snapshot_id - 1
    finally:
        path.close()
    assert catalog.load_table("t").current_snapshot_id == second.snapshot_id
    data = rows(catalog, store)
    assert sorted(data.column("client").to_pylist()) == ([2] * 3 if fail_first
                                                        else [1] * 3 + [2] * 3)


def test_idempotent_replay(wp):
    path, catalog, store = wp
    first = path.ingest_ndjson("t", body(1, 1), idempotency_key="k1")
    again = path.ingest_ndjson("t", body(1, 1), idempotency_key="k1")
    assert not first.replayed and again.replayed
    assert again.snapshot_id == first.snapshot_id and again.rows == first.rows == 3
    assert rows(catalog, store).num_rows == 3
    assert catalog.load_table("t").current_snapshot_id == first.snapshot_id


def test_concurrent_requests_sharing_keys_apply_once(wp):
    path, catalog, store = wp
    barrier = threading.Barrier(16)

    def send(i: int):
        barrier.wait()
        return path.ingest_ndjson("t", body(i % 4, 0), idempotency_key=f"shared-{i % 4}")

    with ThreadPoolExecutor(max_workers=16) as pool:
        acks = list(pool.map(send, range(16)))
    assert sum(not a.replayed for a in acks) == 4
    by_key = {}
    for i, a in enumerate(acks):
        by_key.setdefault(i % 4, set()).add(a.snapshot_id)
    assert all(len(s) == 1 for s in by_key.values())  # replays return the first snapshot
    data = rows(catalog, store)
    assert Counter(data.column("client").to_pylist()) == {0: 3, 1: 3, 2: 3, 3: 3}


def test_key_fresh_again_after_ttl_sweep(wp, catalog_url, clock):
    path, catalog, store = wp
    path.ingest_ndjson("t", body(1, 1), idempotency_key="old")
    # The sweep's cutoff comes from the catalog's clock: one moved past the key's age.
    clock.advance(time.time() - clock() + 301)
    with closing(open_catalog(catalog_url, clock=clock)) as later:
        sweeper = LedgerSweeper(later, max_age_s=300)
        assert sweeper.sweep_once() == 1
    again = path.ingest_ndjson("t", body(1, 1), idempotency_key="old")
    assert not again.replayed
    assert rows(catalog, store).num_rows == 6


def test_atomic_request_writes_nothing_on_bad_line(wp):
    path, catalog, store = wp
    bad = body(1, 1) + b'{"client": "x"}\n'
    with pytest.raises(PayloadError) as e:
        path.ingest_ndjson("t", bad, idempotency_key="bad")
    assert e.value.errors[0].line == 4 and e.value.errors[0].field == "client"
    assert rows(catalog, store).num_rows == 0 and catalog.ledger_get("bad") is None
    ack = path.ingest_ndjson("t", bad, partial=True)
    assert ack.rows == 3 and [r.line for r in ack.rejected] == [4]


def test_evolution_through_write_path(wp):
    path, catalog, store = wp
    path.ingest_ndjson("t", body(1, 1))
    fields = {f"f{i:02d}": i for i in range(40)}
    ack = path.ingest_ndjson("t", json.dumps({"client": 2, "req": 1, "Bad-Key": 1,
                                              **fields}).encode() + b"\n")
    assert ack.new_columns == [f"f{i:02d}" for i in range(32)]
    schema = catalog.load_table("t").schema
    assert all(schema.column(f"f{i:02d}").type == STRING for i in range(32))
    assert "f35" not in schema and "Bad-Key" not in schema
    data = rows(catalog, store)
    by_client = {r["client"]: r for r in data.select(["client", "f00", "props"]).to_pylist()}
    assert by_client[1]["f00"] is None  # written before the column existed
    assert by_client[2]["f00"] == "0"
    props = json.loads(by_client[2]["props"])
    assert props["f35"] == 35 and props["Bad-Key"] == 1 and "f00" not in props


def test_concurrent_evolution_of_one_column_merges(wp):
    path, catalog, store = wp
    barrier = threading.Barrier(2)

    def send(i: int):
        barrier.wait()
        return path.ingest_ndjson("t", json.dumps({"client": i, "req": 0, "region": "eu"})
                                  .encode() + b"\n")

    with ThreadPoolExecutor(max_workers=2) as pool:
        acks = list(pool.map(send, range(2)))
    schema = catalog.load_table("t").schema
    assert schema.column("region").type == STRING
    assert [s.version for s in catalog.schema_history("t")] == [1, 2]
    assert sorted(rows(catalog, store).column("region").to_pylist()) == ["eu", "eu"]
    assert any(a.new_columns == ["region"] for a in acks)


def test_drop_and_reject_modes(wp):
    path, catalog, store = wp
    line = json.dumps({"client": 1, "req": 1, "colour": "blue"}).encode() + b"\n"
    ack = path.ingest_ndjson("t", line, mode="drop")
    assert ack.rows == 1 and ack.new_columns == [] and "colour" not in catalog.load_table(
        "t").schema
    with pytest.raises(PayloadError, match='field "colour"'):
        path.ingest_ndjson("t", line, mode="reject")
    assert rows(catalog, store).num_rows == 1


def test_an_empty_body_commits_nothing_unless_it_carries_a_key(wp):
    path, catalog, _store = wp
    first = path.ingest_ndjson("t", body(1, 1))
    snapshots = len(catalog.snapshots("t"))
    for empty in (b"", b"\n\n"):
        ack = path.ingest_ndjson("t", empty)
        assert (ack.rows, ack.snapshot_id) == (0, first.snapshot_id)
    assert len(catalog.snapshots("t")) == snapshots         # no empty snapshot
    keyed = path.ingest_ndjson("t", b"", idempotency_key="empty-1")
    assert keyed.rows == 0 and keyed.snapshot_id > first.snapshot_id   # the key is recorded
    assert path.ingest_ndjson("t", b"", idempotency_key="empty-1").replayed
