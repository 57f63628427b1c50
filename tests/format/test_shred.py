"""Shredded dynamic paths at write time: the sub-columns hold exactly what the embedded
engine answers for `get_json_object` (its transpiled form over the JSON is the oracle),
paths are chosen as documented, and a later block where a path turns risky says so."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.format.predicates import evaluate
from shoal.format.base import DynamicPathEquals
from shoal.format.shred import (UNSHREDDED_KEY, NotIdenticalError, ShredOptions, engine_answer,
                                extract_paths, hidden_name, is_hidden, parse_hidden)
from shoal.format.tlm import TlmFormat
from shoal.types import DYNAMIC, Column, Schema

KEYS = ["a", "b", "c", "k_1"]
PATHS = ["a", "b", "a.b", "a.c", "b.a.c", "k_1", "c.k_1"]
RISKY = ("DOUBLE", "OBJECT", "ARRAY")
SCHEMA = Schema.create([Column("attrs", DYNAMIC)]).arrow()

scalars = (st.none() | st.booleans()
           | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
                     max_size=8)
           | st.sampled_from(['quote "q"', "back\\slash", "\u00e9t\u00e9", "\U0001f600", ""]))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=8)
documents = st.one_of(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4),
                      json_values)


def _texts(docs: list, ascii_flags: list[bool]) -> list[bytes | None]:
    return [None if d is None and i % 5 == 4 else
            json.dumps(d, ensure_ascii=ascii_flags[i % len(ascii_flags)]).encode()
            for i, d in enumerate(docs)]


_ORACLE = duckdb.connect()


def oracle(values: list[bytes | None], path: str) -> tuple[list[str | None], bool]:
    """What the transpiled `get_json_object(j, '$.path')` answers today, row by row, and
    whether it raises on some row."""
    con = _ORACLE
    con.register("t", pa.table({"j": pa.array(values, pa.binary()).cast(pa.string())}))
    rows = con.execute(f"SELECT j ->> '$.{path}', json_type(j, '$.{path}') FROM t").fetchall()
    return [r[0] for r in rows], any(r[1] in RISKY for r in rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, min_size=1, max_size=12), st.lists(st.booleans(), min_size=1))
def test_extracted_values_are_the_transpiled_answer(docs, ascii_flags):
    values = _texts(docs, ascii_flags)
    answers, risky = extract_paths(pa.array(values, pa.binary()), PATHS)
    for path, got, bad in zip(PATHS, answers, risky, strict=True):
        want, want_bad = oracle(values, path)
        assert bad == want_bad, path
        assert got.to_pylist() == want, path
        if bad:
            with pytest.raises(NotIdenticalError):
                engine_answer(pa.array(values, pa.binary()), [path])


def test_hand_picked_values():
    values = [b'{"a":{"b":"x\\"y"}}', b'{"a":{"b":12345678901234567890}}', b'{"a":{"b":true}}',
              b'{"a":{"b":null}}', b'{"a":1}', b'{"a":{"b":"\\u00e9"}}', None, b'[1]',
              b'{"a":{"b":"one","b":"two"}}', b'"s"']
    [got], [bad] = extract_paths(pa.array(values, pa.binary()), ["a.b"])
    want, want_bad = oracle(values, "a.b")
    assert got.to_pylist() == want and bad == want_bad is False
    assert got.to_pylist()[:6] == ['x"y', "12345678901234567890", "true", None, None, "\u00e9"]


def test_not_json_is_not_identical():
    with pytest.raises(NotIdenticalError):
        extract_paths(pa.array([b'{"a":'], pa.binary()), ["a"])


def test_hidden_names_cannot_be_column_names():
    name = hidden_name("attrs", "http.method")
    assert name == "attrs.$http.method" and is_hidden(name)
    assert parse_hidden(name) == ("attrs", "http.method") and parse_hidden("attrs") is None
    with pytest.raises(Exception, match="name"):
        Schema.create([Column(name, DYNAMIC)])


def _write(store, rows: list[bytes | None], *, block_rows: int, shred=ShredOptions()):
    w = TlmFormat(shred=shred).start_extent(store, "t", SCHEMA, block_rows=block_rows)
    w.append(pa.table({"_timestamp": pa.array(range(len(rows)), pa.int64()).cast(
        SCHEMA.field("_timestamp").type), "props": pa.nulls(len(rows), pa.binary()),
        "attrs": pa.array(rows, pa.binary())}, schema=SCHEMA))
    result = w.finish()
    return result, TlmFormat().open_extent(store, result.object_path)


def test_writer_chooses_common_scalar_paths(store):
    rows = [json.dumps({"m": "GET" if i % 2 else "POST", "rare": 1 if i % 10 == 0 else None,
                        "n": {"x": i}, "f": 1.5, "o": {"p": [1]}} if i % 10 else
                       {"m": "PUT", "f": 2, "o": 3}).encode() for i in range(100)]
    result, reader = _write(store, rows, block_rows=1000)
    meta = reader.metadata()
    hidden = sorted(n for n in meta.block_stats[0]["columns"] if is_hidden(n))
    # "rare" is present (as null) in 90% of rows: kept; floats, objects, arrays are not
    assert hidden == ["attrs.$m", "attrs.$n.x", "attrs.$rare"]
    # not the extent's columns: its schema, a whole block and its stats leave them out
    assert meta.schema.names == ["_timestamp", "props", "attrs"]
    assert reader.read_block(0).schema.names == ["_timestamp", "props", "attrs"]
    assert not any(is_hidden(c) for c in result.column_stats)
    assert result.present_paths["attrs"] == ["f", "m", "n", "n.x", "o", "o.p", "rare"]
    block = reader.read_block(0, ["attrs", *hidden])
    assert block.column("attrs.$m").to_pylist()[:3] == ["PUT", "GET", "POST"]
    assert meta.block_stats[0]["columns"]["attrs.$m"] == {"min": "GET", "max": "PUT",
                                                           "nulls": 0}


def test_a_later_block_with_a_risky_value_is_marked(store):
    rows = [json.dumps({"m": "GET", "v": i}).encode() for i in range(8)]
    rows[6] = json.dumps({"m": {"nested": 1}, "v": 0.5}).encode()
    _, reader = _write(store, rows, block_rows=4)
    meta = reader.metadata()
    assert meta.block_stats[0].get(UNSHREDDED_KEY) is None
    assert sorted(meta.block_stats[1][UNSHREDDED_KEY]) == ["attrs.$m", "attrs.$v"]
    # equality on a path: a block whose sub-column is not valid is never pruned by it
    pred = DynamicPathEquals("attrs", "m", "POST")
    assert not evaluate(pred, meta.block_stats[0])
    assert evaluate(pred, meta.block_stats[1])
    assert evaluate(DynamicPathEquals("attrs", "m", "GET"), meta.block_stats[0])


def test_shredding_can_be_turned_off(store):
    rows = [json.dumps({"m": "GET"}).encode()] * 4
    _, reader = _write(store, rows, block_rows=4, shred=None)
    assert not any(is_hidden(n) for n in reader.metadata().block_stats[0]["columns"])
    assert reader.read_block(0, ["attrs.$m"]).num_columns == 0
