"""The extent stats stay byte for byte what they were before the writer's stats were made
cheaper: every block-stats entry, column stat (distinct and token sets), membership
filter, per-block filter and present path of a set of seeded extents is digested, and the
digests are compared with `golden/stats_digests.json`, written by the code before that work.

The data sets cover what the fast paths branch on: free text that keeps its token set or
overflows it, identifiers (fixed and varying widths) whose distinct sets overflow in the
first or a later block, low-cardinality strings and ints, nulls, empty strings, long strings
over the min/max cap, tabs/newlines/non-ASCII in text, and `dynamic` JSON with few or many
key skeletons, whitespace, escapes and values that are not objects.

Regenerate the golden file only on purpose (a deliberate format change):
    .venv/bin/python tests/format/test_stats_golden.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import shoal.format.stats as stats_module
from shoal.format.stats import ExtentStats, ExtentStatsBuilder
from shoal.types import DYNAMIC, INT, LONG, STRING, TIMESTAMP, Column, Schema

GOLDEN = Path(__file__).parent / "golden" / "stats_digests.json"
WORDS = ("connection failed timeout user login request served cache miss hit database query "
         "slow retry upstream error accepted rejected token expired").split()
ODD = ["Ünïcode", "tab\there", "new\nline", "dash-ed", "snake_case", "UPPER", "x", "42",
       "caf\u00e9", "\u212aelvin", "a,b;c", "  spaced  ", ""]


def _schema() -> pa.Schema:
    return Schema.create([
        Column("ts", TIMESTAMP), Column("service", STRING), Column("level", STRING),
        Column("message", STRING), Column("trace_id", STRING), Column("code", STRING),
        Column("status", INT), Column("duration", LONG), Column("seq", LONG),
        Column("late_ids", STRING), Column("spaced_ids", STRING), Column("tail_text", STRING),
        Column("attrs", DYNAMIC)]).arrow()


def _attrs(rng: np.random.Generator, i: int, skeletons: int) -> bytes | None:
    k = int(rng.integers(0, skeletons))
    if k == 0:
        return None
    if k == 1:
        return b'"not an object"'
    if k == 2:
        return b'{ "spaced" : {"in":  [1, {"deep": 2}]}, "esc\\"q": "v\\\\"}'
    doc: dict[str, Any] = {"http": {"method": "GET", "route": f"/api/{i % 17}"},
                           "user": {"id": int(rng.integers(0, 10**6))}}
    if k > 3:
        doc[f"key{k}"] = {"n": k} if k % 2 else k
    return json.dumps(doc, separators=(",", ":")).encode()


def _data(seed: int, rows: int, *, text_vocab: int, id_width: int | None,
          skeletons: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    vocab = WORDS + [f"w{j}" for j in range(max(0, text_vocab - len(WORDS)))]

    def message(i: int) -> str | None:
        if i % 53 == 0:
            return None
        words = [vocab[int(j)] for j in rng.integers(0, len(vocab), 8)]
        if i % 7 == 0:
            words.append(ODD[i % len(ODD)])
        if i % 501 == 0:
            words.append("z" * 300)        # over the string min/max cap
        sep = "\t" if i % 11 == 0 else " "
        return sep.join(words)

    def trace(i: int) -> str | None:
        if i % 41 == 0:
            return None
        width = id_width or int(rng.integers(4, 40))
        return f"{int(rng.integers(0, 2**62)):x}".rjust(width, "0")[:width]

    ts0 = 1_700_000_000_000_000_000
    return pa.Table.from_pydict({
        "_timestamp": pa.array([ts0 + i * 1_000_000 for i in range(rows)],
                               pa.timestamp("ns", tz="UTC")),
        "props": pa.array([None] * rows, pa.binary()),
        "ts": pa.array([None if i % 9 == 0 else ts0 - i for i in range(rows)],
                       pa.timestamp("ns", tz="UTC")),
        "service": [f"svc-{int(j)}" for j in rng.integers(0, 12, rows)],
        "level": [None if i % 13 == 0 else ["info", "warn", "error", ""][i % 4]
                  for i in range(rows)],
        "message": [message(i) for i in range(rows)],
        "trace_id": [trace(i) for i in range(rows)],
        "code": [f"E{int(j)}" for j in rng.integers(0, 1500, rows)],
        "status": pa.array([[200, 201, 404, 500][int(j)] for j in rng.integers(0, 4, rows)],
                           pa.int32()),
        "duration": pa.array(rng.integers(0, 10**6, rows), pa.int64()),
        "seq": pa.array(np.arange(rows, dtype=np.int64) + seed * 10**6),
        # few values in the first half, then every value distinct: overflows in a later block
        "late_ids": [None if i % 17 == 0 else f"id{i % 300 if i < rows // 2 else i}"
                     for i in range(rows)],
        # whitespace only in values of the first half (few): the later overflow must find it
        "spaced_ids": [f"h {i % 5}" if i < rows // 2 else f"h{i}" for i in range(rows)],
        # identifiers, then free text with whitespace once the set has overflowed
        "tail_text": [f"t{i}" if i < rows // 3 else f"w{i % 97} x{i}" for i in range(rows)],
        "attrs": pa.array([_attrs(rng, i, skeletons) for i in range(rows)], pa.binary()),
    }, schema=_schema())


CASES: dict[str, dict[str, Any]] = {
    "small_vocab_fixed_ids": dict(seed=1, rows=9000, block_rows=2048, text_vocab=20,
                                  id_width=32, skeletons=4),
    "big_vocab_varied_ids": dict(seed=2, rows=12000, block_rows=4096, text_vocab=30000,
                                 id_width=None, skeletons=9),
    "one_block": dict(seed=3, rows=3000, block_rows=65536, text_vocab=200, id_width=16,
                      skeletons=6),
    "tiny_blocks": dict(seed=4, rows=1500, block_rows=100, text_vocab=50, id_width=8,
                        skeletons=3),
    "writer_sized_blocks": dict(seed=5, rows=40000, block_rows=16384, text_vocab=25,
                                id_width=32, skeletons=5),
    "overflow_in_a_later_block": dict(seed=7, rows=40000, block_rows=10000, text_vocab=40,
                                      id_width=20, skeletons=4),
    "big_one_block": dict(seed=6, rows=20000, block_rows=65536, text_vocab=5000,
                          id_width=None, skeletons=7),
}


def _build(case: dict[str, Any]) -> tuple[list[dict[str, Any]], ExtentStats]:
    table = _data(case["seed"], case["rows"], text_vocab=case["text_vocab"],
                  id_width=case["id_width"], skeletons=case["skeletons"])
    builder = ExtentStatsBuilder(table.schema)
    blocks = [builder.add_block(b)
              for b in table.to_batches(max_chunksize=case["block_rows"])]
    return blocks, builder.finish()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(case: dict[str, Any]) -> dict[str, Any]:
    blocks, stats = _build(case)
    return {
        "block_stats": _sha(json.dumps(blocks, sort_keys=True).encode()),
        "min_ts": stats.min_ts, "max_ts": stats.max_ts,
        "present_paths": stats.present_paths,
        "column_stats": {name: {"distinct": None if s["distinct"] is None
                                else _sha(json.dumps(s["distinct"]).encode()),
                                "tokens": None if s["tokens"] is None
                                else _sha(json.dumps(s["tokens"]).encode()),
                                "n_tokens": None if s["tokens"] is None else len(s["tokens"])}
                         for name, s in sorted(stats.column_stats.items())},
        "membership_filters": {k: _sha(v) for k, v in sorted(stats.membership_filters.items())},
        "block_filters": [{k: [kind, _sha(blob)] for k, (kind, blob) in sorted(entry.items())}
                          for entry in stats.block_filters],
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_stats_equal_those_of_the_code_before_issue_18(name: str) -> None:
    golden = json.loads(GOLDEN.read_text())
    assert digest(CASES[name]) == golden[name]


@pytest.mark.parametrize("parallel_from", [0, 10**9])
@pytest.mark.parametrize("name", ["tiny_blocks", "writer_sized_blocks",
                                  "overflow_in_a_later_block", "big_one_block"])
def test_stats_do_not_depend_on_the_column_threads(name: str, parallel_from: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Every block's columns folded in on the column threads, or none: the same bytes."""
    monkeypatch.setattr(stats_module, "PARALLEL_MIN_ROWS", parallel_from)
    golden = json.loads(GOLDEN.read_text())
    assert digest(CASES[name]) == golden[name]


def test_column_threads_end_every_call_and_raise_the_first_failure() -> None:
    ended: list[int] = []

    def call(k: int) -> Callable[[], int]:
        def run() -> int:
            ended.append(k)
            if k in (2, 4):
                raise ValueError(f"column {k}")
            return k * k
        return run

    assert stats_module._run_all([call(k) for k in (0, 1, 3)], [5, 9, 1]) == [0, 1, 9]
    ended.clear()
    with pytest.raises(ValueError, match="column 2"):
        stats_module._run_all([call(k) for k in range(6)], [1, 2, 3, 4, 5, 6])
    assert sorted(ended) == list(range(6))


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(json.dumps({n: digest(c) for n, c in sorted(CASES.items())}, indent=1,
                                 sort_keys=True) + "\n")
