"""Must show 2: compaction racing live ingest and a second compaction worker, on SQLite and
Postgres: no row lost or duplicated, no unit run twice. Also the work-unit additions of the
catalog (lease renewal, deduped enqueue, listing) on both."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from shoal.catalog import open_catalog
from shoal.maintenance.service import build_worker
from shoal.maintenance.worker import WorkerSettings
from tests.maintenance.helpers import append_rows, make_table, open_db, row
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow


def test_compaction_races_ingest_and_second_worker(spark, tmp_path, catalog_url):
    db = open_db(tmp_path, catalog_url)
    make_table(db, target_extent_size="64KB")
    for i in range(60):
        append_rows(db, "ev", [row(i, 0)])
    acked: list[int] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def ingest() -> None:
        i = 60
        try:
            while not stop.is_set():
                append_rows(db, "ev", [row(i, 0)])
                acked.append(i)
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    # four compaction units of one table, for two workers at once: they conflict, rebase
    # (groups whose inputs are still live) or give up cleanly
    units = [db.catalog.enqueue_work("compact", table="ev", payload={"table": "ev"})
             for _ in range(4)]
    ran: dict[str, list] = {"w1": [], "w2": []}
    settings = WorkerSettings(lease_s=60, kinds=("compact",))
    workers = {name: build_worker(db, name=name, settings=settings) for name in ran}
    # Each worker's first claim waits until the other has claimed too, so both hold a unit
    # at once however the threads are scheduled.
    both_claimed = threading.Barrier(len(workers), timeout=120)
    for worker in workers.values():
        worker.catalog = _FirstClaimWaits(worker.catalog, both_claimed)

    def work(name: str) -> None:
        try:
            ran[name] = workers[name].run_until_idle()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    feeder = threading.Thread(target=ingest)
    feeder.start()
    eventually(lambda: len(acked), "live ingest to be running", until=lambda n: n >= 5)
    threads = [threading.Thread(target=work, args=(n,)) for n in ran]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    stop.set()
    feeder.join(timeout=30)
    assert not errors, errors

    # no unit run twice: each unit finished once, by one worker, at its first attempt
    by_unit = Counter(o.unit.id for outs in ran.values() for o in outs)
    assert sorted(by_unit) == sorted(u.id for u in units)
    assert set(by_unit.values()) == {1}
    assert all(o.ok and o.recorded for outs in ran.values() for o in outs), ran
    assert all(ran.values()), "both workers claimed units"
    done = db.catalog.list_work(kinds=["compact"])
    assert {u.state for u in done} == {"done"} and {u.attempts for u in done} == {1}
    assert sum(o.result["extents_removed"] for outs in ran.values() for o in outs) > 0

    # no row lost or duplicated: exactly the 60 + acked appends, once each
    expected = list(range(60)) + acked
    got = db.query("SELECT n FROM ev").column("n").to_pylist()
    assert sorted(got) == sorted(i * 10 for i in expected)
    assert db.catalog.table_counts("ev")[0] == len(expected)
    # one extent per append, less what compaction replaced by what it wrote
    outcomes = [o.result for outs in ran.values() for o in outs]
    assert db.catalog.table_counts("ev")[1] == len(expected) - sum(
        r["extents_removed"] for r in outcomes) + sum(r["extents_added"] for r in outcomes)
    db.close()


class _FirstClaimWaits:
    """A worker's catalog whose first successful `claim_work` waits at `barrier`."""

    def __init__(self, catalog, barrier: threading.Barrier) -> None:
        self._catalog, self._barrier, self._waited = catalog, barrier, False

    def claim_work(self, *args, **kwargs):
        unit = self._catalog.claim_work(*args, **kwargs)
        if unit is not None and not self._waited:
            self._waited = True
            self._barrier.wait()
        return unit

    def __getattr__(self, name: str):
        return getattr(self._catalog, name)


def test_work_unit_leases_dedupe_and_listing(tmp_path, catalog_url, clock):
    db = open_db(tmp_path, catalog_url)
    make_table(db)
    # The same catalog database, reading the time from the test's clock: leases lapse when
    # the test moves the clock, not while it sleeps.
    catalog = open_catalog(db.catalog.url, clock=clock)
    a = db.catalog.enqueue_work("compact", table="ev", payload={"table": "ev"}, dedupe=True)
    b = db.catalog.enqueue_work("compact", table="ev", payload={"table": "ev"}, dedupe=True)
    g1 = db.catalog.enqueue_work("gc", dedupe=True)
    g2 = db.catalog.enqueue_work("gc", dedupe=True)
    assert a.id == b.id and g1.id == g2.id
    got = catalog.claim_work("w1", kinds=["compact"], lease_s=50)
    assert got is not None and got.id == a.id
    # a renewed lease is not reclaimed; a lapsed one is
    for _ in range(3):
        clock.advance(30)
        assert catalog.renew_work(a.id, "w1", lease_s=50)
        assert catalog.claim_work("w2", kinds=["compact"]) is None
    clock.advance(51)
    again = catalog.claim_work("w2", kinds=["compact"], lease_s=30)
    assert again is not None and again.id == a.id and again.attempts == 2
    assert not catalog.renew_work(a.id, "w1")
    assert catalog.finish_work(a.id, "w2", ok=True, result={"x": 1})
    # a finished unit no longer dedupes: the next enqueue is a fresh unit
    c = db.catalog.enqueue_work("compact", table="ev", payload={"table": "ev"}, dedupe=True)
    assert c.id != a.id
    listed = db.catalog.list_work(kinds=["compact"])
    assert [u.id for u in listed] == [c.id, a.id]
    assert listed[1].state == "done" and listed[1].result == {"x": 1}
    assert listed[1].created_at is not None and listed[1].updated_at >= listed[1].created_at
    assert [u.id for u in db.catalog.list_work(states=["pending"])] == [c.id, g1.id]
    catalog.close()
    db.close()


def test_dedupe_under_concurrent_enqueuers(tmp_path, catalog_url):
    db = open_db(tmp_path, catalog_url)
    make_table(db)
    ids: list[int] = []
    barrier = threading.Barrier(6)

    def enqueue() -> None:
        barrier.wait()
        ids.append(db.catalog.enqueue_work("retention", table="ev", dedupe=True).id)

    threads = [threading.Thread(target=enqueue) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1
    assert len(db.catalog.list_work(kinds=["retention"])) == 1
    db.close()


