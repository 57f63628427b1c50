"""A rare word in free text reads only the blocks that hold it.

`has(message, 'deadlock')` (SQL) and `message has "deadlock"` (KQL) are pushed down as
`StringHas`; the extents' token sets cannot prune (every extent's messages carry a request id,
so the sets overflow), but each block's token filter (`shoal.format.blockfilters`) rules out
the blocks without the word. A scan reads the blocks holding the word and those whose filter
admits it by a false positive (1%: the tests count them from the filters themselves, and
there are at most a few). Answers are checked against the same query with pruning off;
predicates that cannot use the filters (NOT, OR with another column) still answer right.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import shoal
from shoal.format.blockfilters import filter_ref
from shoal.types import STRING, Column
from tests.query.conftest import T0, ns

BLOCK_ROWS = 2000
WORDS = ["request", "served", "cache", "hit", "miss", "user", "login", "upstream", "retry"]
# rows holding the word, with case and punctuation `has` must see through; "deadlocked" and
# "deadlock2" are other tokens
RARE = ["DEADLOCK detected on shard", "lock wait: deadlock,", "Deadlock", "tx=deadlock;retry"]
DECOYS = ["deadlocked writer", "deadlock2 found", "dead lock"]


def _messages(rng: np.random.Generator, rows: int, first: int) -> list[str]:
    words = rng.choice(WORDS, size=(rows, 4))
    return [" ".join(w) + f" req={first + i:08x}" for i, w in enumerate(words)]


def _write(db: shoal.Shoal, table: str, blocks: int, rare_block: int | None, seed: int,
           first: int) -> pa.Table:
    """One extent of `blocks` blocks of BLOCK_ROWS rows; the rare word in a few rows of
    `rare_block`, the decoys spread over the others."""
    info = db.catalog.load_table(table)
    rows = blocks * BLOCK_ROWS
    rng = np.random.default_rng(seed)
    message = _messages(rng, rows, first)
    for k, i in enumerate(range(0, rows, rows // 9)):
        message[i] = DECOYS[k % len(DECOYS)]
    if rare_block is not None:
        for k, text in enumerate(RARE):
            message[rare_block * BLOCK_ROWS + 37 * k + 5] = text
    t = pa.table({
        "_timestamp": pa.array(ns(T0) + (first + np.arange(rows)) * 1_000_000,
                               pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(rows, pa.binary()),
        "service": [f"svc-{i % 7}" for i in range(rows)],
        "message": message,
    }).cast(info.schema.arrow())
    entry = db.coordinator.write_extent(info, t.to_batches(), block_rows=BLOCK_ROWS)
    db.coordinator.append(table, [entry])
    return t


def _false_hits(db, table: str, word: str, holding: dict[int, set[int]]) -> int:
    """Blocks of `table`'s extents whose token filter admits `word` though they do not hold
    it (`holding`: extent index, in the order written, -> blocks that do)."""
    hits = 0
    extents = sorted(db.catalog.manifests(table), key=lambda e: e.min_ts or 0)
    for k, extent in enumerate(extents):
        reader = db.formats[extent.format].open_extent(db.store, extent.object_path)
        for i, f in enumerate(reader.read_block_filters("message") or []):
            hits += (i not in holding.get(k, set()) and f is not None
                     and f[1].might_contain(word))
    return hits


def _rows(result) -> Counter:
    return Counter(tuple(r.values()) for r in result.table.to_pylist())


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("tokens")),
                           query_engine="local")
    columns = [Column("service", STRING), Column("message", STRING)]
    client.create_table("one", columns)
    _write(client, "one", 64, 41, seed=1, first=0)
    client.create_table("many", columns)
    for k in range(4):
        _write(client, "many", 8, (3 * k + 1) % 8, seed=10 + k, first=k * 8 * BLOCK_ROWS)
    yield client
    client.close()


def _scan(db, query: str, *, kql: bool = False, prune: bool = True):
    run = db.kql if kql else db.sql
    return run(query, prune=prune, engine="local")


def test_the_extent_carries_a_token_filter_per_block(db):
    [extent] = db.catalog.manifests("one")
    assert extent.block_count == 64
    stats = db.formats[extent.format].open_extent(db.store, extent.object_path).metadata()
    assert all(filter_ref(s, "message")[0] == "tok" for s in stats.block_stats)
    # seven services, every one in every block: their tokens could never rule a block out
    assert not any(filter_ref(s, "service") for s in stats.block_stats)


@pytest.mark.parametrize("query, kql", [
    ("SELECT _timestamp, message FROM one WHERE has(message, 'deadlock')", False),
    ("SELECT _timestamp, message FROM one WHERE has(message, 'DeadLock')", False),
    ('one | where message has "deadlock" | project _timestamp, message', True),
])
def test_a_rare_word_reads_only_its_block(db, query, kql):
    [extent] = db.catalog.manifests("one")
    got = _scan(db, query, kql=kql)
    full = _scan(db, query, kql=kql, prune=False)
    assert _rows(got) == _rows(full)
    assert sorted(r["message"] for r in got.table.to_pylist()) == sorted(RARE)
    stats = got.stats.to_json()
    false_hits = _false_hits(db, "one", "deadlock", {0: {41}})
    assert false_hits <= 3
    assert (stats["extents_read"], stats["blocks_considered"], stats["blocks_read"]) == \
        (1, 64, 1 + false_hits), stats
    whole = full.stats.to_json()
    assert whole["blocks_read"] == 64
    # cold or warm: the extent's tail, the token filters of 64 blocks and the blocks read
    # (v3 bodies are small enough that the first two are a good part of it when cold)
    assert 0 < stats["bytes_read"] < whole["bytes_read"] / 2, (stats, whole)


def test_a_rare_word_in_one_block_of_each_extent(db):
    sql = "SELECT service, message FROM many WHERE has(message, 'deadlock')"
    got = _scan(db, sql)
    assert _rows(got) == _rows(_scan(db, sql, prune=False))
    assert got.table.num_rows == 4 * len(RARE)
    stats = got.stats.to_json()
    holding = {k: {(3 * k + 1) % 8} for k in range(4)}
    false_hits = _false_hits(db, "many", "deadlock", holding)
    assert false_hits <= 3
    assert (stats["extents_read"], stats["blocks_considered"], stats["blocks_read"]) == \
        (4, 32, 4 + false_hits), stats
    kql = _scan(db, 'many | where message has "deadlock" | count', kql=True)
    assert kql.table.column(0).to_pylist() == [4 * len(RARE)]
    assert kql.stats.to_json()["blocks_read"] == 4 + false_hits


@pytest.mark.parametrize("where, blocks_read", [
    ("NOT has(message, 'deadlock')", 64),
    ("has(message, 'deadlock') OR service = 'svc-3'", 64),
    ("has(message, 'deadlock') AND service = 'svc-3'", "deadlock"),
    ("has(message, 'deadlock') OR has(message, 'deadlocked')", None),
    ("has(message, 'served')", 64),                  # in every block: every block kept
    ("has(message, 'nowhere')", None),               # absent: at most a false positive
])
def test_other_shapes_stay_right(db, where, blocks_read):
    # pruning only ever skips rows, so equal counts are equal answers
    sql = f"SELECT count(*) AS n FROM one WHERE {where}"
    got = _scan(db, sql)
    assert got.table.to_pylist() == _scan(db, sql, prune=False).table.to_pylist()
    read = got.stats.to_json()["blocks_read"]
    if isinstance(blocks_read, str):
        assert read == 1 + _false_hits(db, "one", blocks_read, {0: {41}})
    elif blocks_read is not None:
        assert read == blocks_read
    else:
        assert read <= 64 // 2


def test_kql_not_has_keeps_every_block(db):
    q = 'one | where message !has "deadlock" | count'
    got = _scan(db, q, kql=True)
    assert got.table.column(0).to_pylist() == [64 * BLOCK_ROWS - len(RARE)]
    assert got.stats.to_json()["blocks_read"] == 64


def test_extents_without_token_filters_are_read(db):
    """An extent written before token filters (none in its filter section) keeps its blocks;
    the new extent beside it still reads one."""
    db.create_table("mixed", [Column("service", STRING), Column("message", STRING)])
    fmt = db.formats["tlm"]
    fmt.block_filters = False
    try:
        _write(db, "mixed", 8, 2, seed=5, first=0)
    finally:
        fmt.block_filters = True
    _write(db, "mixed", 8, 6, seed=6, first=8 * BLOCK_ROWS)
    sql = "SELECT message FROM mixed WHERE has(message, 'deadlock')"
    got = _scan(db, sql)
    assert _rows(got) == _rows(_scan(db, sql, prune=False))
    assert got.table.num_rows == 2 * len(RARE)
    stats = got.stats.to_json()
    false_hits = _false_hits(db, "mixed", "deadlock", {1: {6}})
    assert (stats["blocks_considered"], stats["blocks_read"]) == (16, 8 + 1 + false_hits), stats
