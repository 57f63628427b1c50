"""Schema evolution mid-batch: the pre-scan, the plan, and the whole evolve flow."""

from __future__ import annotations

import json

import msgspec
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.ingest import _lines
from shoal.ingest.coerce import coerce_ndjson
from shoal.ingest.evolve import EVOLUTION_CAP, EvolutionPlan, plan_evolution, scan_unknown_fields
from shoal.types import INT, STRING, Column, Schema


def schema_of(*cols: Column) -> Schema:
    return Schema.create(cols)


# -- scan_unknown_fields ------------------------------------------------------------------

def test_scan_order_of_first_appearance_top_level_only() -> None:
    s = schema_of(Column("n", INT))
    body = (b'{"n":1,"b":2,"a":{"nested":1}}\n'
            b'\n'
            b'{"c":[{"deep":1}],"a":2,"_timestamp":"x","props":{}}\n'
            b'{"b":1,"Bad-Key":3,"n":4}\n')
    assert scan_unknown_fields(body, s) == ["b", "a", "c", "Bad-Key"]


def test_scan_skips_lines_that_are_not_one_object() -> None:
    s = schema_of()
    body = (b'[{"arr":1}]\n{"ok":1}\n{"trunc":\n{"x":1}{"two":1}\nnull\n'
            b'{"bad_utf8":"\xff"}\n{"nan":NaN}\n{"last":1}')
    assert scan_unknown_fields(body, s) == ["ok", "last"]


def test_scan_nothing_unknown() -> None:
    s = schema_of(Column("n", INT))
    assert scan_unknown_fields(b'{"n":1}\n{"_timestamp":5,"props":{"z":1}}\n', s) == []
    assert scan_unknown_fields(b"", s) == []
    assert scan_unknown_fields(b"\n  \n", s) == []


def test_scan_keys_msgspec_cannot_name_and_escaped_keys() -> None:
    body = b'{"a\\"b":1,"c\\\\d":2,"\\u0065":3,"\\u006e":4}\n'
    assert scan_unknown_fields(body, schema_of(Column("n", INT))) == ['a"b', "c\\d", "e"]


def test_scan_many_chunks_and_many_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lines, "CHUNK_BYTES", 512)
    body = "".join('{"n":%d,"k%d":1,"common":2}\n' % (i, i % 500) for i in range(5000))
    got = scan_unknown_fields(body.encode(), schema_of(Column("n", INT)))
    assert got == ["k0", "common"] + [f"k{i}" for i in range(1, 500)]
    coerced = coerce_ndjson(body.encode(), schema_of(Column("n", INT)), unknown="props",
                            ingest_time_ns=0)
    assert coerced.unknown_fields == got


def reference_scan(body: bytes, schema: Schema) -> list[str]:
    seen: dict[str, None] = {}
    for line in body.split(b"\n"):
        if not line.strip(b" \t\r"):
            continue
        try:
            line.decode("utf-8")
            keys = msgspec.json.decode(line, type=dict[str, msgspec.Raw])
        except (UnicodeDecodeError, msgspec.DecodeError, msgspec.ValidationError):
            continue
        for k in keys:
            if k not in schema:
                seen.setdefault(k)
    return list(seen)


keys = st.sampled_from(["n", "a", "b", "c", "Bad-Key", "", "é", 'q"', "_timestamp", "props"])
lines = st.one_of(
    st.dictionaries(keys, st.one_of(st.integers(), st.dictionaries(keys, st.integers())),
                    max_size=4).map(lambda d: json.dumps(d)),
    st.sampled_from(["", "[1]", '{"x":', "null", '{"y":1}{"z":2}', "  {\"w\":1}  "]))


@settings(max_examples=150, deadline=None)
@given(st.lists(lines, max_size=10), st.sampled_from([64, 4096]))
def test_property_scan_equals_per_line_reference(body_lines: list[str], chunk: int) -> None:
    body = "\n".join(body_lines).encode()
    s = schema_of(Column("n", INT))
    old = _lines.CHUNK_BYTES
    _lines.CHUNK_BYTES = chunk
    try:
        expected = reference_scan(body, s)
        assert scan_unknown_fields(body, s) == expected
        for mode in ("props", "reject"):  # the write path reads them off coercion's pass
            assert coerce_ndjson(body, s, unknown=mode,  # type: ignore[arg-type]
                                 ingest_time_ns=0).unknown_fields == expected
        assert coerce_ndjson(body, s, unknown="drop", ingest_time_ns=0).unknown_fields == []
    finally:
        _lines.CHUNK_BYTES = old


# -- plan_evolution -----------------------------------------------------------------------

def test_plan_caps_at_32_by_first_appearance() -> None:
    names = [f"f{i:02d}" for i in range(40)]
    plan = plan_evolution(names, schema_of())
    assert EVOLUTION_CAP == 32
    assert [c.name for c in plan.new_columns] == names[:32]
    assert all(c == Column(c.name, STRING) for c in plan.new_columns)  # nullable, no default
    assert plan.to_props == names[32:]


def test_plan_unsafe_and_reserved_names_go_to_props() -> None:
    unknown = ["ok", "Bad-Key", "1x", "_timestamp", "props", "Upper", "", "é", "a b", "_fine"]
    plan = plan_evolution(unknown, schema_of())
    assert [c.name for c in plan.new_columns] == ["ok", "_fine"]
    assert plan.to_props == ["Bad-Key", "1x", "_timestamp", "props", "Upper", "", "é", "a b"]


def test_plan_unsafe_names_do_not_use_the_cap() -> None:
    unknown = ["Bad"] * 1 + [f"c{i}" for i in range(33)]
    plan = plan_evolution(unknown, schema_of(), cap=32)
    assert len(plan.new_columns) == 32 and plan.to_props == ["Bad", "c32"]


def test_plan_skips_existing_columns_and_duplicates() -> None:
    plan = plan_evolution(["n", "a", "a", "b"], schema_of(Column("n", INT)), cap=1)
    assert plan == EvolutionPlan([Column("a", STRING)], ["b"])


def test_plan_cap_zero_and_bad_cap() -> None:
    assert plan_evolution(["a"], schema_of(), cap=0) == EvolutionPlan([], ["a"])
    with pytest.raises(ValueError):
        plan_evolution(["a"], schema_of(), cap=-1)


def test_plan_applies_to_the_schema() -> None:
    s = schema_of(Column("n", INT))
    plan = plan_evolution([f"f{i}" for i in range(40)], s)
    evolved = s.evolve(plan.new_columns)
    assert evolved.version == 2 and len(evolved.user_columns) == 33


# -- the whole evolve flow ----------------------------------------------------------------

def test_evolve_flow_new_columns_then_props() -> None:
    """40 new safe fields and 2 unsafe ones: 32 columns, the rest lands in props."""
    s = schema_of(Column("n", INT))
    fields = {f"f{i:02d}": i for i in range(40)}
    rec = {"n": 1, "Bad-Key": True, **fields, "1x": {"a": 1}}
    body = (json.dumps(rec) + "\n" + json.dumps({"n": 2, "f00": "text"}) + "\n").encode()
    unknown = scan_unknown_fields(body, s)
    plan = plan_evolution(unknown, s)
    assert plan.to_props == ["Bad-Key"] + [f"f{i}" for i in range(32, 40)] + ["1x"]
    evolved = s.evolve(plan.new_columns)
    for hint in (None, unknown):
        c = coerce_ndjson(body, evolved, unknown="props", ingest_time_ns=0, unknown_fields=hint)
        assert c.errors == []
        first, second = c.batch.slice(0, 1).to_pylist()[0], c.batch.slice(1, 1).to_pylist()[0]
        assert first["f00"] == "0" and first["f31"] == "31"   # numbers as their JSON text
        assert second["f00"] == "text" and second["f01"] is None
        assert json.loads(first["props"]) == {"Bad-Key": True, **{f"f{i}": i for i in
                                              range(32, 40)}, "1x": {"a": 1}}
        assert list(json.loads(first["props"])) == plan.to_props  # first-appearance order
        assert second["props"] is None
        assert c.batch.schema.equals(evolved.arrow(), check_metadata=True)
        assert c.batch.column(evolved.names.index("f05")).type == pa.string()
