"""Table and column names: at most 128 characters, and never a name the query lane makes up.

A 5,000-character table name used to be accepted and then break every ingest (the object
path is too long for the file system); `_timestamp_ns` as a real column made every query of
it ambiguous. Both are refused when the table or column is defined, by one rule in
`shoal.types.schema` that DDL, HTTP and the Python API all go through.
"""

from __future__ import annotations

import pytest

from shoal.errors import InvalidSchemaError
from shoal.ingest.evolve import plan_evolution
from shoal.commit.rejects import rejects_table_name
from shoal.query.scan_plan import TIMESTAMP_NS
from shoal.types import (INT, MAX_NAME_CHARS, STRING, Column, Schema, check_column_name,
                         check_table_name, is_identifier_safe, is_query_reserved)


def test_the_limit_is_128_characters():
    assert MAX_NAME_CHARS == 128
    check_table_name("t" * 128)
    check_column_name("c" * 128)
    with pytest.raises(InvalidSchemaError, match=r"is 129 characters long \(at most 128\)"):
        check_table_name("t" * 129)
    with pytest.raises(InvalidSchemaError, match=r"is 5,000 characters long") as e:
        check_column_name("c" * 5000)
    assert len(str(e.value)) < 200  # the message does not repeat the whole name


@pytest.mark.parametrize("name", ["logs\n", "a\nb", "\nlogs", "logs\r"])
def test_a_line_break_is_no_part_of_a_name(name):
    # `$` in a pattern also matches before a final line break: names are matched to the end
    assert not is_identifier_safe(name)
    with pytest.raises(InvalidSchemaError):
        check_table_name(name)
    with pytest.raises(InvalidSchemaError):
        check_column_name(name)


def test_every_valid_table_can_have_a_rejects_companion():
    check_table_name(rejects_table_name("t" * 128))
    with pytest.raises(InvalidSchemaError):
        check_table_name("t" * 129 + "__rejects")


@pytest.mark.parametrize("name", ["_timestamp_ns", "__shoal", "__shoal_scan_1", "__shoalx"])
def test_query_names_are_reserved(name):
    assert is_query_reserved(name) and not is_identifier_safe(name)
    with pytest.raises(InvalidSchemaError, match="is reserved: queries use it") as e:
        check_column_name(name)
    assert e.value.column == name
    with pytest.raises(InvalidSchemaError, match="is reserved"):
        check_table_name(name)
    with pytest.raises(InvalidSchemaError, match="is reserved"):
        Schema.create([Column(name, INT)])
    with pytest.raises(InvalidSchemaError, match="is reserved"):
        Schema.create([Column("a", INT)]).evolve([Column(name, STRING)])


def test_reserved_set_matches_the_query_lane():
    assert is_query_reserved(TIMESTAMP_NS)
    for fine in ("_timestamp_nsx", "timestamp_ns", "_shoal", "x__shoal", "shoal"):
        assert not is_query_reserved(fine)
        check_column_name(fine)


def test_evolution_sends_reserved_and_long_names_to_props():
    plan = plan_evolution(["_timestamp_ns", "__shoal_scan_7", "x" * 129, "ok"],
                          Schema.create([]))
    assert [c.name for c in plan.new_columns] == ["ok"]
    assert plan.to_props == ["_timestamp_ns", "__shoal_scan_7", "x" * 129]


def test_vector_dimension_is_bounded():
    from shoal.types import vector
    from shoal.types.schema import MAX_VECTOR_DIM

    Schema.create([Column("v", vector(MAX_VECTOR_DIM))])
    with pytest.raises(InvalidSchemaError, match="vector dimension 65,537 is over the limit"):
        Schema.create([Column("v", vector(MAX_VECTOR_DIM + 1))])
    with pytest.raises(InvalidSchemaError, match="over the limit") as e:
        Schema.create([]).evolve([Column("v", vector(10**12))])
    assert e.value.column == "v"
