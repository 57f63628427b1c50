"""Reject tables: creation, the row shape, and exactly-once commits by ledger key
(SQLite and Postgres)."""

from __future__ import annotations

import threading

import pytest

from shoal.catalog import open_catalog
from shoal.commit import CommitCoordinator
from shoal.format import default_formats
from shoal.format.tlm import TlmFormat
from shoal.commit.rejects import (RejectRecord, commit_rejects, ensure_rejects_table,
                                  rejects_batch, rejects_table_name)
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import LONG, STRING, Column, Schema


@pytest.fixture
def env(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    store = open_store(local_store_url)
    catalog.create_table("events", Schema.create([Column("n", LONG)]))
    yield catalog, store, CommitCoordinator(catalog, store, TlmFormat())
    catalog.close()


def rows(catalog, store, name):
    table, _ = read_table(catalog, store, default_formats(), name)
    return sorted(table.to_pylist(), key=lambda r: (r["file"] or "", r["line"] or 0,
                                                  r["offset"] or 0))


def kafka(offset: int, raw: bytes = b'{"n": "x"}') -> RejectRecord:
    return RejectRecord(key=f"kafka-reject:g:topic-a:3:{offset}", raw=raw,
                        error='line 1: field "n": long expects an integer, got string',
                        source="kafka", field="n", topic="topic-a", partition=3, offset=offset,
                        timestamp_ns=1_700_000_000_000_000_000 + offset)


def filedrop(line: int) -> RejectRecord:
    return RejectRecord(key=f"filedrop-reject:abc123:{line}", raw=b"{not json",
                        error=f"line {line}: not valid JSON", source="filedrop",
                        file="s3://bucket/drop/a.ndjson.gz", line=line)


def test_rejects_table_is_created_once_with_the_contract_columns(env):
    catalog, _, _ = env
    assert rejects_table_name("events") == "events__rejects"
    infos: list = []

    def create() -> None:
        cat = open_catalog(catalog.url)
        infos.append(ensure_rejects_table(cat, "events"))
        cat.close()

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(infos) == 4 and len({i.id for i in infos}) == 1
    info = catalog.load_table("events__rejects")
    assert info.mode == "reject"
    assert [(c.name, str(c.type)) for c in info.schema.columns] == [
        ("_timestamp", "timestamp"), ("props", "dynamic"), ("raw", "bytes"),
        ("error", "string"), ("field", "string"), ("source", "string"), ("topic", "string"),
        ("partition", "int"), ("offset", "long"), ("file", "string"), ("line", "long")]


def test_commit_rejects_writes_every_field_and_replays_are_noops(env):
    catalog, store, coord = env
    records = [kafka(7), kafka(8, b"\x00\xffbinary"), filedrop(3)]
    assert commit_rejects(coord, catalog, "events", records) == 3
    snap = catalog.load_table("events__rejects").current_snapshot_id
    got = rows(catalog, store, "events__rejects")
    assert [(r["file"], r["line"], r["topic"], r["partition"], r["offset"], r["source"],
             r["field"], r["raw"]) for r in got] == [
        (None, None, "topic-a", 3, 7, "kafka", "n", b'{"n": "x"}'),
        (None, None, "topic-a", 3, 8, "kafka", "n", b"\x00\xffbinary"),
        ("s3://bucket/drop/a.ndjson.gz", 3, None, None, None, "filedrop", None, b"{not json")]
    assert got[0]["error"] == 'line 1: field "n": long expects an integer, got string'
    assert got[0]["_timestamp"].value == 1_700_000_000_000_000_007  # pandas ns timestamp
    assert got[2]["_timestamp"] is not None  # default: when rejected
    # The data table is untouched; the reject keys are in the ledger.
    assert catalog.load_table("events").current_snapshot_id == 1
    assert catalog.ledger_get("kafka-reject:g:topic-a:3:7") is not None

    # Re-running the same unit of work commits nothing and writes no object.
    before = {o.path for o in store.list("")}
    assert commit_rejects(coord, catalog, "events", records) == 0
    assert catalog.load_table("events__rejects").current_snapshot_id == snap
    assert {o.path for o in store.list("")} == before

    # Overlap: only the new key lands; duplicates inside one call count once.
    assert commit_rejects(coord, catalog, "events", [kafka(8), kafka(9), kafka(9)]) == 1
    assert [r["offset"] for r in rows(catalog, store, "events__rejects")] == [7, 8, 9, None]
    assert commit_rejects(coord, catalog, "events", []) == 0


def test_racing_commits_of_the_same_keys_land_each_key_once(env):
    catalog, store, _ = env
    records = [kafka(i) for i in range(20)]
    counts: list[int] = []

    def run() -> None:
        cat = open_catalog(catalog.url)
        coord = CommitCoordinator(cat, store, TlmFormat())
        counts.append(commit_rejects(coord, cat, "events", records))
        cat.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts) == 20
    assert [r["offset"] for r in rows(catalog, store, "events__rejects")] == list(range(20))


def test_rejects_batch_follows_an_altered_schema(env):
    catalog, _, coord = env
    ensure_rejects_table(catalog, "events")
    info = coord.evolve_schema("events__rejects", [Column("note", STRING)])
    batch = rejects_batch([filedrop(1)], info.schema)
    assert batch.schema == info.schema.arrow()
    assert batch.column("note").to_pylist() == [None]
    assert batch.column("line").to_pylist() == [1]
