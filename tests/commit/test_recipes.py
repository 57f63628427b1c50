"""The commit layer's recipes: what each commits, and which written extents it deletes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal.catalog import open_catalog
from shoal.commit import (CommitCoordinator, CommitSpec, Replacement, StagedFile, StagedRange,
                          StagedOverlapError, SwapRowCountError, append_files, append_ranges,
                          extent_prefix, swap_extents)
from shoal.format.tlm import TlmFormat
from shoal.storage import open_store
from shoal.types import INT, Column, Schema

SCHEMA = Schema.create([Column("n", INT)])


@pytest.fixture
def coord(catalog_url, local_store_url):
    catalog = open_catalog(catalog_url)
    catalog.create_table("t", SCHEMA)
    yield CommitCoordinator(catalog, open_store(local_store_url), TlmFormat())
    catalog.close()


def extent(coord, *ns: int):
    rows = [{"_timestamp": n, "props": None, "n": n} for n in ns]
    return coord.write_extent(coord.catalog.load_table("t"),
                              [pa.RecordBatch.from_pylist(rows, schema=SCHEMA.arrow())])


def objects(coord) -> set[str]:
    return {o.path for o in coord.store.list("")}


def rows(coord) -> list[int]:
    info = coord.catalog.load_table("t")
    out = []
    for e in coord.catalog.manifests("t", info.current_snapshot_id):
        reader = coord.format.open_extent(coord.store, e.object_path)
        for b in range(reader.metadata().block_count):
            out += reader.read_block(b).column("n").to_pylist()
    return sorted(out)


def test_staged_extents_are_deleted_unless_handed_over(coord):
    stager = coord.extents
    prefix = extent_prefix("t", coord.catalog.load_table("t").id)
    with stager.staged() as staged:
        staged.open(prefix, SCHEMA).finish()
        kept = staged.hand_over()
        staged.open(prefix, SCHEMA).finish()           # written after the hand-over
    assert objects(coord) == {kept[0].object_path}
    with pytest.raises(RuntimeError), stager.staged() as staged:
        staged.open(prefix, SCHEMA).finish()
        raise RuntimeError("the file failed")
    assert objects(coord) == {kept[0].object_path}


def test_files_land_once_by_key_and_replays_are_discarded(coord):
    first = StagedFile("file:a", {"rows": 1}, [extent(coord, 1)], rows=1)
    out = append_files(coord, "t", [first])
    assert out.landed == [0] and out.snapshot_id is not None

    # A group where one file's key landed meanwhile: committed file by file, the replay
    # dropped; a copy the caller knows is applied is dropped without a commit.
    again = StagedFile("file:a", {"rows": 1}, [extent(coord, 1)], rows=1)
    fresh = StagedFile("file:b", {"rows": 2}, [extent(coord, 2), extent(coord, 3)], rows=2)
    copy = StagedFile("file:b", {"rows": 2}, [extent(coord, 2)], rows=1)
    out = append_files(coord, "t", [again, fresh], known=[copy])
    assert (out.landed, out.replayed) == ([1], [0])
    assert rows(coord) == [1, 2, 3]
    assert objects(coord) == {e.object_path for f in (first, fresh) for e in f.extents}


def test_ranges_drop_applied_ones_and_refuse_an_overlap(coord):
    p0, p1 = ("kafka:g:t", "0"), ("kafka:g:t", "1")
    seed = append_ranges(coord, "t", [StagedRange(extent(coord, 0), {p0: 0}, {p0: 4})],
                         base={})
    assert seed.last == {p0: 4}
    applied = StagedRange(extent(coord, 0), {p0: 0}, {p0: 4})    # a replayed batch
    new = StagedRange(extent(coord, 5), {p1: 0}, {p1: 9})
    out = append_ranges(coord, "t", [applied, new], base={p0: 4})
    assert out.kept == [1] and out.last == {p1: 9}
    assert coord.catalog.source_offsets("kafka:g:t") == {"0": 4, "1": 9}
    assert applied.entry.object_path not in objects(coord)

    straddling = StagedRange(extent(coord, 6), {p0: 3}, {p0: 7})
    other = StagedRange(extent(coord, 7), {p1: 10}, {p1: 12})
    before = objects(coord)
    with pytest.raises(StagedOverlapError, match=r"start at offset 3 .* up to 4"):
        append_ranges(coord, "t", [other, straddling], base={p0: 4, p1: 9})
    assert objects(coord) == before - {straddling.entry.object_path, other.entry.object_path}
    assert rows(coord) == [0, 5]


def test_swap_keeps_replacements_whose_inputs_are_live(coord):
    olds = [extent(coord, n) for n in range(4)]
    coord.append("t", olds)
    merged = [extent(coord, 0, 1), extent(coord, 2, 3)]
    # Another writer removed one input of the second group meanwhile.
    coord.run("t", lambda _info: CommitSpec(operation="retention",
                                            remove=[olds[3].extent_id]))
    out = swap_extents(coord, "t", [Replacement(olds[:2], merged[0]),
                                    Replacement(olds[2:], merged[1])])
    assert out.snapshot is not None and out.kept == [0]
    assert merged[1].object_path not in objects(coord)
    assert rows(coord) == [0, 1, 2]


def test_swap_refuses_a_replacement_that_changes_the_rows(coord):
    olds = [extent(coord, n) for n in range(2)]
    coord.append("t", olds)
    before = objects(coord)
    with pytest.raises(SwapRowCountError, match="wrote 1 rows, expected 2"):
        swap_extents(coord, "t", [Replacement(olds, extent(coord, 0))])
    assert objects(coord) == before
    assert rows(coord) == [0, 1]


def test_swap_of_a_delete_drops_the_rows_it_says_and_lands_whole_or_not_at_all(coord):
    olds = [extent(coord, 0, 1, 2), extent(coord, 3, 4), extent(coord, 5)]
    coord.append("t", olds)
    # a delete: the first keeps 0 and 2, the second loses every row (no new extent)
    rewritten = extent(coord, 0, 2)
    out = swap_extents(coord, "t", [Replacement([olds[0]], rewritten, deleted=1),
                                    Replacement([olds[1]], None, deleted=2)],
                       operation="delete", all_or_none=True, summary={"deleted_rows": 3})
    assert out.snapshot is not None and out.kept == [0, 1]
    assert out.snapshot.operation == "delete" and out.snapshot.summary["deleted_rows"] == 3
    assert rows(coord) == [0, 2, 5]
    # all or none: one input is gone (another writer removed it), so nothing lands and the
    # new extent is discarded
    coord.run("t", lambda _info: CommitSpec(operation="retention", remove=[olds[2].extent_id]))
    again = extent(coord, 0)
    out = swap_extents(coord, "t", [Replacement([olds[2]], None, deleted=1),
                                    Replacement([coord.catalog.manifests("t")[0]], again,
                                                deleted=1)],
                       operation="delete", all_or_none=True)
    assert out.snapshot is None and again.object_path not in objects(coord)
    assert rows(coord) == [0, 2]
    # a delete must say what it drops: other counts are refused before anything commits
    bad = extent(coord, 0)
    with pytest.raises(SwapRowCountError):
        swap_extents(coord, "t", [Replacement(coord.catalog.manifests("t")[:1], bad,
                                              deleted=0)])
    assert bad.object_path not in objects(coord)
