"""The catalog's table lifecycle (rename, drop, undrop, purge) over SQLite and Postgres: a
dropped table leaves its name at once and keeps its rows and files' references until it is
purged; undrop brings the same table (id, snapshots, data) back."""

from __future__ import annotations

import pytest

from shoal.catalog.base import ManifestEntry
from shoal.errors import TableAlreadyExistsError, TableNameReusedError, TableNotFoundError
from shoal.types import LONG, Column, Schema


def _schema() -> Schema:
    return Schema.create([Column("n", LONG)])


def _append(catalog, table: str, path: str) -> None:
    info = catalog.load_table(table)
    entry = ManifestEntry(extent_id=path.rsplit("/", 1)[-1], object_path=path, byte_size=10,
                          row_count=3, block_count=1, min_ts=1, max_ts=2, schema_version=1)
    catalog.commit(table, expected_snapshot_id=info.current_snapshot_id, operation="append",
                   commit_id=path, add=[entry])


def test_rename_keeps_the_table_and_refuses_a_taken_name(clocked_catalog):
    cat = clocked_catalog
    first = cat.create_table("a", _schema(), properties={"retention": "7d"})
    cat.create_table("b", _schema())
    _append(cat, "a", "tables/a/e1")
    with pytest.raises(TableAlreadyExistsError):
        cat.rename_table("a", "b")
    renamed = cat.rename_table("a", "c")
    assert (renamed.id, renamed.properties) == (first.id, {"retention": "7d"})
    assert [t.name for t in cat.list_tables()] == ["b", "c"]
    assert cat.table_counts("c") == (3, 1)
    with pytest.raises(TableNotFoundError):
        cat.load_table("a")
    with pytest.raises(TableNotFoundError):
        cat.rename_table("a", "d")


def test_drop_frees_the_name_and_undrop_brings_the_same_table_back(clocked_catalog, clock):
    cat = clocked_catalog
    old = cat.create_table("logs", _schema())
    _append(cat, "logs", "tables/logs/e1")
    clock.advance(5)
    dropped = cat.drop_table("logs")
    assert (dropped.id, dropped.name, dropped.dropped_at) == (old.id, "logs", clock())
    assert cat.list_tables() == []
    for lookup in (lambda: cat.load_table("logs"), lambda: cat.load_table(dropped.stored_name),
                   lambda: cat.drop_table("logs")):
        with pytest.raises(TableNotFoundError):
            lookup()
    assert "tables/logs/e1" in cat.referenced_paths()      # orphan GC keeps its files
    assert [d.id for d in cat.dropped_tables("logs")] == [old.id]
    assert cat.dropped_tables("log") == []

    back = cat.undrop_table(old.id)
    assert back.id == old.id and back.name == "logs"
    assert [s.operation for s in cat.snapshots("logs")] == ["create", "append", "drop",
                                                            "undrop"]
    assert cat.table_counts("logs") == (3, 1)
    assert cat.dropped_tables() == []


def test_a_reused_name_blocks_undrop_and_purge_removes_every_row(clocked_catalog, clock):
    cat = clocked_catalog
    old = cat.create_table("t", _schema())
    _append(cat, "t", "tables/t/old")
    cat.drop_table("t")
    clock.advance(1)
    new = cat.create_table("t", _schema())
    assert new.id != old.id and new.current_snapshot_id == 1
    _append(cat, "t", "tables/t/new")
    with pytest.raises(TableNameReusedError):
        cat.undrop_table(old.id)
    cat.drop_table("t")
    assert [d.id for d in cat.dropped_tables("t")] == [new.id, old.id]   # newest first

    assert cat.purge_table(old.id) == ["tables/t/old"]
    assert [d.id for d in cat.dropped_tables()] == [new.id]
    assert "tables/t/old" not in cat.referenced_paths()
    assert "tables/t/new" in cat.referenced_paths()
    assert cat.purge_table(old.id) == []                # already gone: nothing to do
    assert cat.undrop_table(new.id).id == new.id
    with pytest.raises(ValueError, match="not dropped"):
        cat.purge_table(new.id)
