"""Schema model: types, reserved columns, widen-only evolution, concurrent merges, upgrades."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from shoal.errors import (IncompatibleSchemaChangeError, InvalidSchemaError,
                          SchemaConflictError)
from shoal.types import (BOOL, BYTES, DYNAMIC, HEADERS, INT, LONG, REAL, STRING, TIMESTAMP,
                         Column, Schema, parse_type, type_of_field, upgrade_batch, vector,
                         widening_allowed)

ALL_TYPES = [BOOL, INT, LONG, REAL, STRING, TIMESTAMP, vector(3), DYNAMIC, BYTES]


@pytest.mark.parametrize("spelled,expected", [
    ("bool", BOOL), ("BOOLEAN", BOOL), ("int", INT), ("long", LONG), ("bigint", LONG),
    ("real", REAL), ("double", REAL), ("string", STRING), ("timestamp", TIMESTAMP),
    ("vector(3)", vector(3)), ("VECTOR( 128 )", vector(128)), ("dynamic", DYNAMIC),
    ("bytes", BYTES), ("ARRAY<STRUCT<key STRING, value BYTES>>", HEADERS),
    ("array<struct<key:string,value:bytes>>", HEADERS),
])
def test_parse_type(spelled, expected):
    assert parse_type(spelled) == expected
    assert parse_type(str(expected)) == expected


@pytest.mark.parametrize("bad", ["varchar2", "vector(0)", "vector(-1)", "vector", "int64x",
                                 "ARRAY<STRUCT<key STRING, value STRING>>"])
def test_parse_type_errors(bad):
    with pytest.raises(InvalidSchemaError):
        parse_type(bad)


def test_arrow_types():
    assert INT.arrow() == pa.int32() and LONG.arrow() == pa.int64()
    assert TIMESTAMP.arrow() == pa.timestamp("ns", tz="UTC")
    assert vector(4).arrow() == pa.list_(pa.float32(), 4)
    assert DYNAMIC.arrow() == pa.binary() == BYTES.arrow()
    s = Schema.create([Column("d", DYNAMIC), Column("b", BYTES), Column("v", vector(2))])
    arrow = s.arrow()
    # dynamic and bytes share an Arrow type; the field metadata tells them apart.
    assert [type_of_field(f) for f in arrow] == [TIMESTAMP, DYNAMIC, DYNAMIC, BYTES, vector(2)]


def test_reserved_and_identifier_rules():
    s = Schema.create([Column("service", STRING)])
    assert s.names == ["_timestamp", "props", "service"]
    for bad in ["_timestamp", "props"]:
        with pytest.raises(InvalidSchemaError, match="reserved"):
            Schema.create([Column(bad, STRING)])
        with pytest.raises(InvalidSchemaError, match="reserved"):
            s.evolve([Column(bad, STRING)])
    for bad in ["Service", "1abc", "a-b", "a b", "é"]:
        with pytest.raises(InvalidSchemaError, match="identifier-safe"):
            Schema.create([Column(bad, STRING)])
    with pytest.raises(InvalidSchemaError, match='duplicate column "a"'):
        Schema.create([Column("a", STRING), Column("a", INT)])


def test_defaults_validated():
    s = Schema.create([Column("n", INT, nullable=False, default=7)])
    assert s.column("n").default == 7
    with pytest.raises(InvalidSchemaError, match='default "x" is not a valid int'):
        Schema.create([Column("n", INT, default="x")])
    with pytest.raises(InvalidSchemaError, match="not a valid int"):
        Schema.create([Column("n", INT, default=3_000_000_000)])


WIDENINGS = {
    (INT, LONG), (INT, REAL), (LONG, REAL),
    *((t, STRING) for t in [BOOL, INT, LONG, REAL, TIMESTAMP]),
    *((t, DYNAMIC) for t in ALL_TYPES if t != DYNAMIC),
}


@pytest.mark.parametrize("old", ALL_TYPES, ids=str)
@pytest.mark.parametrize("new", ALL_TYPES, ids=str)
def test_widen_only_matrix(old, new):
    s = Schema.create([Column("c", old)])
    if old == new:
        assert s.evolve([Column("c", new)]) is s  # no-op keeps the version
    elif (old, new) in WIDENINGS:
        assert widening_allowed(old, new)
        s2 = s.evolve([Column("c", new)])
        assert s2.version == 2 and s2.column("c").type == new
    else:
        assert not widening_allowed(old, new)
        with pytest.raises(IncompatibleSchemaChangeError) as e:
            s.evolve([Column("c", new)])
        assert f'column "c" is {old}; cannot change it to {new}' in str(e.value)


def test_other_incompatible_changes_fail_and_change_nothing():
    s = Schema.create([Column("a", INT), Column("n", STRING, nullable=False, default="x")])
    with pytest.raises(IncompatibleSchemaChangeError, match="cannot become NOT NULL"):
        s.evolve([Column("a", INT, nullable=False)])
    with pytest.raises(IncompatibleSchemaChangeError, match="must be nullable or have a default"):
        s.evolve([Column("b", INT, nullable=False)])
    with pytest.raises(IncompatibleSchemaChangeError, match="default cannot change"):
        s.evolve([Column("n", STRING, nullable=False, default="y")])
    with pytest.raises(IncompatibleSchemaChangeError, match="header binding is fixed"):
        s.evolve([Column("a", INT, header="k")])
    with pytest.raises(IncompatibleSchemaChangeError):
        s.evolve([Column("b", STRING), Column("a", BOOL)])  # one bad change: nothing applies
    assert s.version == 1 and "b" not in s


def test_evolve_adds_in_order_and_versions_grow():
    s1 = Schema.create([Column("a", INT)])
    s2 = s1.evolve([Column("b", STRING), Column("c", LONG, default=5)])
    s3 = s2.evolve([Column("a", LONG)])
    assert (s1.version, s2.version, s3.version) == (1, 2, 3)
    assert s3.names == ["_timestamp", "props", "a", "b", "c"]
    assert Schema.from_json(json.loads(json.dumps(s3.to_json()))) == s3


def test_concurrent_merges():
    base = Schema.create([Column("a", INT)])
    mine = base.evolve([Column("x", STRING)])
    theirs_disjoint = base.evolve([Column("y", STRING)])
    merged = theirs_disjoint.merge_concurrent(base, mine, table="t")
    assert merged.names[-2:] == ["y", "x"] and merged.version == 3
    theirs_same = base.evolve([Column("x", STRING)])
    assert theirs_same.merge_concurrent(base, mine, table="t") is theirs_same
    theirs_conflict = base.evolve([Column("x", LONG)])
    with pytest.raises(SchemaConflictError) as e:
        theirs_conflict.merge_concurrent(base, mine, table="t")
    assert str(e.value) == ('table "t": column "x" was concurrently added as long; '
                            "this change wanted string")


def test_header_rules():
    ok = Schema.create([Column("h", HEADERS, header="*")])
    assert ok.column("h").header == "*"
    Schema.create([Column("a", BYTES, header="k1"), Column("b", BYTES, header="k2")])
    cases = [
        ([Column("h1", HEADERS, header="*"), Column("h2", HEADERS, header="*")],
         "at most one HEADERS column"),
        ([Column("h", STRING, header="*")], "must have type ARRAY<STRUCT<key STRING, value "
                                            "BYTES>>, got string"),
        ([Column("a", STRING, header="k")], "HEADER('k') column \"a\" must have type BYTES"),
        ([Column("a", BYTES, header="k"), Column("b", BYTES, header="k")],
         "HEADER('k') is bound twice"),
        ([Column("h", HEADERS, header="*"), Column("a", BYTES, header="k")],
         "cannot be combined with HEADER('k')"),
        ([Column("h", HEADERS)], "must be declared HEADERS"),
    ]
    for cols, msg in cases:
        with pytest.raises(InvalidSchemaError) as e:
            Schema.create(cols)
        assert msg in str(e.value)


def col(batch: pa.RecordBatch, name: str) -> list:
    return batch.column(batch.schema.get_field_index(name)).to_pylist()


def test_upgrade_batch_fills_and_casts():
    v1 = Schema.create([Column("a", INT), Column("ok", BOOL), Column("t", TIMESTAMP),
                        Column("n", LONG)])
    v2 = v1.evolve([Column("a", LONG), Column("ok", STRING), Column("t", STRING),
                    Column("n", DYNAMIC), Column("added", STRING),
                    Column("with_default", INT, default=42)])
    v3 = v2.evolve([Column("a", REAL)])
    rows = [{"_timestamp": 0, "props": None, "a": 1, "ok": True, "t": 1_500_000_000,
             "n": 7},
            {"_timestamp": 1, "props": b'{"k":1}', "a": None, "ok": None, "t": None,
             "n": None}]
    batch = pa.RecordBatch.from_pylist(rows, schema=v1.arrow())
    out = upgrade_batch(batch, v3)
    assert out.schema == v3.arrow()
    assert col(out, "a") == [1.0, None]
    assert col(out, "ok") == ["true", None]
    assert col(out, "t") == ["1970-01-01T00:00:01.500000000Z", None]
    assert col(out, "n") == [b"7", None]
    assert col(out, "added") == [None, None]
    assert col(out, "with_default") == [42, 42]
    assert col(out, "props") == [None, b'{"k":1}']
    # An up-to-date batch passes through unchanged.
    assert upgrade_batch(out, v3).equals(out)


# -- column identity across renames and drops ------------------------------------------------
def test_rename_and_drop_keep_ids_and_never_reuse_one():
    from shoal.types.schema import stored_names

    v1 = Schema.create([Column("a", STRING), Column("c", STRING)])
    assert v1.to_json() == {"version": 1, "columns": [c.to_json() for c in v1.columns]}
    v2 = v1.rename_column("a", "b")
    v3 = v2.drop_column("c")
    v4 = v3.evolve([Column("c", STRING)])        # the name again: a new column
    assert (v2.version, v3.version, v4.version) == (2, 3, 4)
    assert v4.ids == (1, 2, 3, 5) and v4.next_id == 6 and v4.reshaped == 3
    assert Schema.from_json(v4.to_json()) == v4
    assert stored_names(v4, v1) == {"b": "a", "c": None}
    assert stored_names(v4, v3) == {} and stored_names(v4, v4) == {}
    assert stored_names(v2, v1) == {"b": "a"}


def test_explicit_changes_of_protected_columns_fail():
    from shoal.errors import ProtectedColumnError

    schema = Schema.create([Column("h", BYTES, header="k")])
    for change in (lambda: schema.rename_column("_timestamp", "ts"),
                   lambda: schema.drop_column("props"),
                   lambda: schema.drop_column("h"),
                   lambda: schema.alter_column_type("h", DYNAMIC)):
        with pytest.raises(ProtectedColumnError):
            change()
