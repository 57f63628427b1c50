"""Racing commits: 8 writers x 50 snapshots land exactly once, history stays linear.

Runs over SQLite and the real Postgres server, with writers as threads and as separate
processes (each its own catalog connection pool), through the real commit coordinator, the
real tlm format and a real local object store.
"""

from __future__ import annotations

import subprocess
import threading
from collections import Counter

import pyarrow as pa
import pytest

from shoal.catalog import open_catalog
from shoal.commit import CommitCoordinator
from shoal.errors import IncompatibleSchemaChangeError, SchemaConflictError
from shoal.format.tlm import TlmFormat
from shoal.query.scan_read import read_table
from shoal.storage import open_store
from shoal.types import INT, LONG, STRING, Column, Schema
from tests.support.writer import spawn

WRITERS, COMMITS = 8, 50
SCHEMA = Schema.create([Column("writer", INT), Column("seq", INT)])


def check_history(catalog, store, table: str, expected: Counter) -> None:
    snaps = catalog.snapshots(table)
    assert [s.snapshot_id for s in snaps] == list(range(1, len(snaps) + 1))
    assert all(s.parent_id == s.snapshot_id - 1 for s in snaps[1:])
    entries = catalog.manifests(table)
    assert len(entries) == sum(expected.values())
    assert len({e.extent_id for e in entries}) == len(entries)
    # Each snapshot added exactly one extent: no commit landed twice or half.
    assert sorted(e.added_snapshot_id for e in entries) == list(range(2, len(snaps) + 1))
    data, _ = read_table(catalog, store, {"tlm": TlmFormat()}, table)
    got = Counter(zip(data.column("writer").to_pylist(), data.column("seq").to_pylist()))
    assert got == expected
    # Conflicts reuse the extent already written: nothing is left behind in the store.
    assert {o.path for o in store.list("")} == {e.object_path for e in entries}


def test_threads_race(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    store = open_store(local_store_url)
    catalog.create_table("t", SCHEMA)
    coord = CommitCoordinator(catalog, store, TlmFormat())
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            for i in range(COMMITS):
                batch = pa.RecordBatch.from_pylist(
                    [{"_timestamp": 1, "props": None, "writer": w, "seq": i}],
                    schema=SCHEMA.arrow())
                coord.append_batches("t", [batch])
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    expected = Counter((w, i) for w in range(WRITERS) for i in range(COMMITS))
    check_history(catalog, store, "t", expected)
    catalog.close()


def spawn_writer(catalog_url: str, store_url: str, *args: str):
    return spawn(catalog_url, store_url, *args, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_processes_race(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    store = open_store(local_store_url)
    catalog.create_table("t", SCHEMA)
    procs = [spawn_writer(catalog_url, local_store_url, "--writer", str(w),
                          "--count", str(COMMITS)) for w in range(WRITERS)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert out.strip().endswith("DONE")
    expected = Counter((w, i) for w in range(WRITERS) for i in range(COMMITS))
    check_history(catalog, store, "t", expected)
    catalog.close()


# ---- concurrent schema evolution ----------------------------------------------------------
def race_evolutions(catalog_url, store_url, a: tuple[str, object], b: tuple[str, object]):
    """Two threads evolve from the same base schema at the same moment."""
    catalog = open_catalog(catalog_url)
    catalog.create_table("t", SCHEMA)
    coord = CommitCoordinator(catalog, open_store(store_url), TlmFormat())
    base = catalog.load_table("t").schema
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def evolve(label: str, change: tuple[str, object]) -> None:
        barrier.wait()
        try:
            results[label] = coord.evolve_schema("t", [Column(change[0], change[1])],
                                                 base=base).schema
        except (SchemaConflictError, IncompatibleSchemaChangeError) as e:
            results[label] = e

    threads = [threading.Thread(target=evolve, args=("a", a)),
               threading.Thread(target=evolve, args=("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return catalog, results


def test_disjoint_evolutions_merge(catalog_url, local_store_url):
    catalog, results = race_evolutions(catalog_url, local_store_url, ("x", STRING),
                                       ("y", STRING))
    final = catalog.load_table("t").schema
    assert set(final.names) >= {"x", "y"} and final.version == 3
    assert [s.version for s in catalog.schema_history("t")] == [1, 2, 3]


def test_identical_evolutions_merge(catalog_url, local_store_url):
    catalog, results = race_evolutions(catalog_url, local_store_url, ("x", STRING),
                                       ("x", STRING))
    final = catalog.load_table("t").schema
    assert final.column("x").type == STRING and final.version == 2
    assert all(isinstance(r, Schema) for r in results.values())


def test_conflicting_evolutions_fail_one_clearly(catalog_url, local_store_url):
    catalog, results = race_evolutions(catalog_url, local_store_url, ("x", STRING),
                                       ("x", LONG))
    errors = [r for r in results.values() if isinstance(r, SchemaConflictError)]
    assert len(errors) == 1, results
    final = catalog.load_table("t").schema
    winner = final.column("x").type
    loser = LONG if winner == STRING else STRING
    assert str(errors[0]) == (f'table "t": column "x" was concurrently added as {winner}; '
                              f"this change wanted {loser}")
    assert final.version == 2


@pytest.mark.slow
def test_process_evolutions(catalog_url, local_store_url, tmp_path):
    catalog = open_catalog(catalog_url)
    catalog.create_table("t", SCHEMA)
    go = tmp_path / "go"

    def race(a: str, b: str) -> list[str]:
        procs = [spawn_writer(catalog_url, local_store_url, "--go-file", str(go),
                              "--evolve", spec) for spec in (a, b)]
        for p in procs:
            assert p.stdout.readline().strip() == "READY"
        go.touch()
        outs = [p.communicate(timeout=120)[0].strip() for p in procs]
        go.unlink()
        return outs

    assert all(o.startswith("EVOLVED") for o in race("x:string", "y:string"))
    schema = catalog.load_table("t").schema
    assert {"x", "y"} <= set(schema.names) and schema.version == 3
    outs = race("z:string", "z:long")
    assert sum(o.startswith("EVOLVED") for o in outs) == 1
    err = [o for o in outs if o.startswith("ERROR")][0]
    assert err.startswith("ERROR SchemaConflictError") and 'column "z"' in err
    assert catalog.load_table("t").schema.version == 4
