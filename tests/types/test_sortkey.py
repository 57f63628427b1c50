"""A table's sort key (docs/storage.md): which keys a schema accepts, how rows are ordered."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import InvalidSchemaError
from shoal.types import BYTES, DYNAMIC, INT, LONG, STRING, Column, Schema, vector
from shoal.types.sortkey import format_sort_key, parse_sort_key, sort_key_of, sort_rows

SCHEMA = Schema.create([Column("service", STRING), Column("code", INT),
                        Column("attrs", DYNAMIC), Column("emb", vector(3)),
                        Column("raw", BYTES)])


def test_a_key_names_columns_folded_to_lower_case():
    assert parse_sort_key(" Service ,_timestamp", SCHEMA) == ("service", "_timestamp")
    assert parse_sort_key("code", SCHEMA) == ("code",)
    assert format_sort_key(("service", "_timestamp")) == "service, _timestamp"


@pytest.mark.parametrize(("value", "message", "column"), [
    ("service, servce", 'sort key column "servce" is not a column of the table', "servce"),
    ("attrs", 'sort key column "attrs" is of type dynamic, which cannot be sorted', "attrs"),
    ("props", 'sort key column "props" is of type dynamic', "props"),
    ("emb", 'sort key column "emb" is of type vector\\(3\\)', "emb"),
    ("raw, service", 'sort key column "raw" is of type bytes', "raw"),
    ("service, SERVICE", 'sort key names column "service" twice', "service"),
    ("", "table property sort_by is empty", "sort_by"),
    ("  ", "table property sort_by is empty", "sort_by"),
    ("service,,code", "an empty name between commas", "sort_by"),
    (3, "expected a string of column names", "sort_by"),
])
def test_bad_keys_are_refused_naming_the_column(value, message, column):
    with pytest.raises(InvalidSchemaError, match=message) as info:
        parse_sort_key(value, SCHEMA, table="logs")
    assert info.value.column == column
    assert info.value.code == "invalid_schema"


def test_a_stored_key_is_read_leniently_at_write_time():
    assert sort_key_of({}, SCHEMA) == ()
    assert sort_key_of({"sort_by": "service, _timestamp"}, SCHEMA) == ("service", "_timestamp")
    # a column that is gone or no longer sortable ends the usable key
    assert sort_key_of({"sort_by": "service, attrs, code"}, SCHEMA) == ("service",)
    assert sort_key_of({"sort_by": "nope"}, SCHEMA) == ()
    assert sort_key_of({"sort_by": 7}, SCHEMA) == ()


rows_strategy = st.lists(
    st.tuples(st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
              st.one_of(st.none(), st.integers(-3, 3))),
    max_size=40)


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_rows_sort_ascending_nulls_last_and_stable(rows):
    table = pa.table({"k1": pa.array([r[0] for r in rows], pa.string()),
                      "k2": pa.array([r[1] for r in rows], pa.int64()),
                      "arrival": pa.array(range(len(rows)), pa.int64())})

    def last_if_null(v):
        return (v is None, v if v is not None else 0)

    expected = sorted(range(len(rows)),       # Python's sort is stable
                      key=lambda i: (last_if_null(rows[i][0]), last_if_null(rows[i][1])))
    out = sort_rows(table, ["k1", "k2"])
    assert out["arrival"].to_pylist() == expected
    assert sort_rows(table, []) is table


typed_rows = st.lists(
    st.tuples(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
              st.one_of(st.none(), st.booleans()),
              st.one_of(st.none(), st.integers(0, 5)),     # timestamps, many ties
              st.one_of(st.none(), st.text("ab", max_size=2))),
    max_size=40)


@settings(max_examples=80, deadline=None)
@given(typed_rows, st.integers(1, 4), st.booleans())
def test_every_sortable_type_orders_as_arrow_sorts_it(rows, width, chunked):
    """Arrow's own stable sort, nulls last (NaN after numbers, before nulls), is the
    reference; the key columns come in every order and width."""
    table = pa.table({
        "r": pa.array([r[0] for r in rows], pa.float64()),
        "b": pa.array([r[1] for r in rows], pa.bool_()),
        "t": pa.array([r[2] for r in rows], pa.timestamp("ns", tz="UTC")),
        "s": pa.array([r[3] for r in rows], pa.string()),
        "arrival": pa.array(range(len(rows)), pa.int64())})
    if chunked and len(rows) > 2:
        table = pa.concat_tables([table.slice(0, len(rows) // 2), table.slice(len(rows) // 2)])
    key = ["t", "s", "r", "b"][:width] if width % 2 else ["s", "b", "t", "r"][:width]
    expected = pa.compute.sort_indices(table, sort_keys=[(c, "ascending", "at_end")
                                                         for c in key])
    assert sort_rows(table, key)["arrival"].to_pylist() == expected.to_pylist()


def test_an_already_ordered_last_key_keeps_arrival_order_among_ties():
    table = pa.table({"svc": ["b", "a", "b", "a", "a"],
                      "ts": pa.array([1, 1, 2, 3, 3], pa.timestamp("ns")),
                      "arrival": [0, 1, 2, 3, 4]})
    assert sort_rows(table, ["svc", "ts"])["arrival"].to_pylist() == [1, 3, 4, 0, 2]
    assert sort_rows(table, ["ts"]) is table      # nothing to do


def test_sort_rows_takes_a_long_key_over_many_chunks():
    parts = [pa.table({"k": pa.array([3, 1, 2], LONG.arrow())}) for _ in range(3)]
    table = pa.concat_tables(parts)
    assert sort_rows(table, ["k"])["k"].to_pylist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]
