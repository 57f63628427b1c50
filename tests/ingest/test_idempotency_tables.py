"""An idempotency key belongs to the table it was first applied to (SQLite and Postgres).

Replaying a key on another table used to answer `replayed: true` and write nothing: rows
lost without a word. Now it is `IdempotencyKeyConflictError` (409 at the HTTP edge) naming
both tables, also when the two requests race and the ledger row lands in the middle.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from shoal.catalog import open_catalog
from shoal.commit import CommitCoordinator
from shoal.errors import IdempotencyKeyConflictError
from shoal.format.tlm import TlmFormat
from shoal.ingest.buffer import StagingBuffer
from shoal.ingest.write_path import WritePath
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import INT, Column, Schema

SCHEMA = Schema.create([Column("n", INT)])


@pytest.fixture
def two_tables(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    store = open_store(local_store_url)
    for t in ("a", "b"):
        catalog.create_table(t, SCHEMA)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    path = WritePath(catalog, coord, buffer=StagingBuffer(catalog, coord, debounce_s=0.01))
    yield path, catalog, store
    path.close()
    catalog.close()


def count(catalog, store, table: str) -> int:
    data, _ = read_table(catalog, store, {"tlm": TlmFormat()}, table)
    return data.num_rows


def test_a_key_replayed_on_another_table_is_a_conflict(two_tables):
    path, catalog, store = two_tables
    first = path.ingest_ndjson("a", b'{"n": 1}\n', idempotency_key="k1")
    assert not first.replayed
    with pytest.raises(IdempotencyKeyConflictError) as e:
        path.ingest_ndjson("b", b'{"n": 2}\n', idempotency_key="k1")
    assert (e.value.table, e.value.first_table, e.value.key) == ("b", "a", "k1")
    assert '"a"' in str(e.value) and '"b"' in str(e.value)
    with pytest.raises(IdempotencyKeyConflictError):  # Arrow input (OTLP) checks the same
        path.ingest_arrow("b", SCHEMA.arrow().empty_table(), idempotency_key="k1")
    # The same table still replays.
    again = path.ingest_ndjson("a", b'{"n": 1}\n', idempotency_key="k1")
    assert again.replayed and again.snapshot_id == first.snapshot_id
    assert (count(catalog, store, "a"), count(catalog, store, "b")) == (1, 0)


def test_racing_requests_on_two_tables_one_wins_one_conflicts(two_tables):
    """Both requests check the ledger before either commits (a barrier holds them there):
    the loser's commit meets the winner's ledger row and must answer 409, not a replay."""
    path, catalog, store = two_tables
    checked = threading.Barrier(2, timeout=30)
    real_get = catalog.ledger_get
    calls = []

    def ledger_get(key):
        rec = real_get(key)
        calls.append(key)
        if len(calls) <= 2:  # the two requests' own checks; later lookups pass through
            checked.wait()
        return rec

    catalog.ledger_get = ledger_get  # the real catalog, held at one point
    try:
        with ThreadPoolExecutor(2) as pool:
            futures = {t: pool.submit(path.ingest_ndjson, t, b'{"n": 5}\n',
                                      idempotency_key="race") for t in ("a", "b")}
            outcomes = {}
            for t, f in futures.items():
                try:
                    outcomes[t] = f.result(timeout=60)
                except IdempotencyKeyConflictError as e:
                    outcomes[t] = e
    finally:
        del catalog.ledger_get
    winners = [t for t, o in outcomes.items() if not isinstance(o, Exception)]
    losers = [o for o in outcomes.values() if isinstance(o, IdempotencyKeyConflictError)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert not outcomes[winners[0]].replayed
    assert losers[0].first_table == winners[0] and losers[0].table != winners[0]
    assert count(catalog, store, winners[0]) == 1
    assert count(catalog, store, "b" if winners[0] == "a" else "a") == 0
