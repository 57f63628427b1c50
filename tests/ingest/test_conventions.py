"""Table conventions in coercion: `timestamp_unit`, the early-epoch warning, `props` off.

Every body goes through `test_coerce.run`: the per-line reference and both forms of the
fast path (the C scanner's, Arrow's reader with the msgspec pass) must agree, warnings too.
"""

from __future__ import annotations

import uuid
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import InvalidPropertyError, PayloadError
from shoal.ingest import _lines
from shoal.ingest._columns import from_raw
from shoal.ingest._values import ValueProblem, convert
from shoal.types import DYNAMIC, STRING, TIMESTAMP, Column, Schema
from shoal.types.conventions import (IngestConventions, parse_props, parse_timestamp_unit)
from tests.ingest.test_coerce import (PROPERTY, T0, bodies, messages, rows_of, run, schemas,
                                      small_everything)

SCHEMA = Schema.create([Column("msg", STRING), Column("at", TIMESTAMP)])
SECONDS = IngestConventions("s")
AT = 1_795_929_000  # 2026-11-29T05:10:00Z in epoch seconds
AT_NS = AT * 10**9


def values(body: str, conventions: IngestConventions, column: str = "_timestamp",
           **kw: Any) -> list[Any]:
    c = run(body, SCHEMA, conventions=conventions, **kw)
    assert c.errors == [], messages(c)
    return [r[column] for r in rows_of(c.batch)]


@pytest.mark.parametrize(("unit", "sent", "ns"), [
    ("s", "1795929000", AT_NS),
    ("ms", "1795929000123", AT_NS + 123_000_000),
    ("us", "1795929000123456", AT_NS + 123_456_000),
    ("ns", "1795929000123456789", AT_NS + 123_456_789),
    ("s", "-1", -10**9),
    ("s", "0", 0),
    ("s", "1795929000.5", AT_NS + 500_000_000),
    ("s", "1795929000.123456789", AT_NS + 123_456_789),
    ("s", "1795929000.0000000005", AT_NS),          # half a nanosecond: to even
    ("s", "1795929000.0000000015", AT_NS + 2),
    ("ms", "1.7959290001235e12", AT_NS + 123_500_000),
    ("s", "9223372036", 9_223_372_036 * 10**9),      # the last whole second int64 holds
])
def test_epoch_numbers_are_read_in_the_table_unit(unit: str, sent: str, ns: int) -> None:
    conv = IngestConventions(unit)  # type: ignore[arg-type]
    body = '{"_timestamp": %s, "at": %s}\n{"at": "2026-11-29 05:10:00"}\n' % (sent, sent)
    assert values(body, conv) == [ns, T0]
    assert values(body, conv, "at") == [ns, AT_NS]


@pytest.mark.parametrize(("unit", "sent", "expected"), [
    ("s", "9223372037", "epoch seconds (timestamp_unit='s'), got 9223372037 (out of range)"),
    ("ms", "-9223372036855", "epoch milliseconds (timestamp_unit='ms'), got -9223372036855 "
                             "(out of range)"),
    ("s", "1e400", "epoch seconds (timestamp_unit='s'), got 1e400 (out of range)"),
    ("ns", "1.5", "integer epoch nanoseconds, got 1.5"),
    ("s", "true", "epoch seconds (timestamp_unit='s'), got true"),
])
def test_epoch_numbers_a_unit_cannot_hold_are_errors(unit: str, sent: str,
                                                      expected: str) -> None:
    c = run('{"at": %s}\n' % sent, SCHEMA, conventions=IngestConventions(unit))  # type: ignore[arg-type]
    assert messages(c) == [f'line 1: field "at": timestamp expects an RFC 3339 string or '
                           f"{expected}"]


def test_text_timestamps_ignore_the_unit() -> None:
    body = ('{"_timestamp": "2026-11-29T05:10:00Z"}\n{"_timestamp": "2026-11-29 05:10:00"}\n'
            '{"_timestamp": "2026-11-29 07:10:00+02:00"}\n')
    assert values(body, SECONDS) == [AT_NS] * 3
    assert values(body, IngestConventions()) == [AT_NS] * 3


def test_epoch_seconds_under_ns_warn_and_are_stored_as_sent() -> None:
    body = ('{"_timestamp": 1795929000, "msg": "a"}\n'
            '{"_timestamp": "1970-01-01T00:00:01Z", "msg": "text is not warned"}\n'
            '{"_timestamp": 1795929060, "msg": "b"}\n')
    c = run(body, SCHEMA, unknown="props")
    assert [r["_timestamp"] for r in rows_of(c.batch)] == [AT, 10**9, AT + 60]
    assert [w.column for w in c.warnings] == ["_timestamp"]
    message = c.warnings[0].message
    assert message.startswith("2 epoch numbers read as nanoseconds (timestamp_unit='ns') "
                              "fall before 1971: line 1: 1795929000 read as nanoseconds is "
                              "1970-01-01T00:00:01.795929000Z.")
    assert "set timestamp_unit='s'" in message
    assert "('timestamp_unit'='s')" in message


@pytest.mark.parametrize(("sent", "unit"), [("1795929000123", "ms"),
                                            ("1795929000123456", "us")])
def test_the_warning_suggests_the_unit_the_numbers_look_like(sent: str, unit: str) -> None:
    c = run('{"at": %s}\n' % sent, SCHEMA)
    assert [w.column for w in c.warnings] == ["at"]
    assert c.warnings[0].message.startswith("1 epoch number read as nanoseconds")
    assert f"('timestamp_unit'='{unit}')" in c.warnings[0].message


def test_no_warning_for_nanoseconds_text_or_another_unit() -> None:
    body = '{"_timestamp": 1795929000000000000, "at": "1969-12-31T23:59:59Z"}\n'
    assert run(body, SCHEMA).warnings == []
    assert run('{"_timestamp": 1795929000}\n', SCHEMA, conventions=SECONDS).warnings == []
    assert run("{}\n", SCHEMA).warnings == []  # the ingest time fills _timestamp


def test_a_rejected_line_does_not_shift_the_warned_line() -> None:
    body = '{"at": "no"}\n\n{"msg": "ok"}\n{"at": 12}\n'
    c = run(body, SCHEMA)
    assert c.rejected_lines == [1]
    assert "line 4: 12 read as nanoseconds" in c.warnings[0].message


def test_props_off_refuses_fields_that_would_land_in_props() -> None:
    off = IngestConventions(props=False)
    body = ('{"msg": "a", "Bad-Key": 1}\n{"msg": "b", "extra": {"k": 1}}\n'
            '{"msg": "c", "props": {"k": 1}}\n{"msg": "d", "props": null}\n{"msg": "e"}\n')
    c = run(body, SCHEMA, unknown="props", conventions=off)
    assert messages(c) == [
        "line 1: field \"Bad-Key\": is not a valid column name, and the table keeps no "
        "props (props='off')",
        "line 2: field \"extra\": was not added as a column by this request, and the table "
        "keeps no props (props='off')",
        "line 3: field \"props\": the table keeps no props (props='off'); send the value "
        "as a field of its own"]
    assert [r["msg"] for r in rows_of(c.batch)] == ["d", "e"]
    assert [r["props"] for r in rows_of(c.batch)] == [None, None]
    # drop mode drops unknown fields whatever props says; reject mode keeps its message
    assert run(body, SCHEMA, unknown="drop", conventions=off).rejected_lines == [3]
    c = run(body, SCHEMA, unknown="reject", conventions=off)
    assert messages(c)[0] == ('line 1: field "Bad-Key": not in the table schema '
                              "(mode reject)")


def test_props_on_keeps_them() -> None:
    c = run('{"msg": "a", "Bad-Key": 1}\n', SCHEMA, unknown="props")
    assert rows_of(c.batch)[0]["props"] == b'{"Bad-Key":1}'


def test_property_values_are_checked() -> None:
    assert parse_timestamp_unit(" S ") == "s"
    assert parse_props("OFF") == "off" and parse_props(True) == "on"
    with pytest.raises(InvalidPropertyError, match="timestamp_unit='sec'.*'ns', 'us', 'ms', 's'"):
        parse_timestamp_unit("sec")
    with pytest.raises(InvalidPropertyError, match="expected 'on' or 'off'"):
        parse_props("maybe")
    assert IngestConventions.of({"timestamp_unit": "ms", "props": "off"}) == \
        IngestConventions("ms", props=False)
    assert IngestConventions.of({"timestamp_unit": "bogus"}) == IngestConventions()
    assert Column("d", DYNAMIC)  # dynamic columns are untouched by the conventions


# -- end to end through the Python client, on both catalogs ---------------------------------

@pytest.fixture
def db(tmp_path, catalog_url):
    import shoal

    client = shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url)
    yield client
    client.close()


def test_the_python_client_follows_the_table_conventions(db):
    name = "conv_" + uuid.uuid4().hex[:8]
    db.sql(f"CREATE TABLE {name} (msg string) WITH (timestamp_unit = 'ms', props = 'off')")
    assert db.describe(name)["properties"] == {"timestamp_unit": "ms", "props": "off"}
    ack = db.ingest_ndjson(name, b'{"msg": "a", "_timestamp": 1795929000123}\n')
    assert ack.warnings == []
    with pytest.raises(PayloadError, match="keeps no props"):
        db.ingest_ndjson(name, b'{"msg": "b", "Bad-Key": 1}\n')
    db.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('timestamp_unit' = 'ns', 'props' = 'on')")
    ack = db.ingest_ndjson(name, b'{"msg": "b", "Bad-Key": 1, "_timestamp": 1795929000}\n')
    assert [w.column for w in ack.warnings] == ["_timestamp"]
    assert ack.to_json()["warnings"][0]["line"] == 1
    out, _ = db.read(name)
    rows = sorted(out.to_pylist(), key=lambda r: r["msg"])
    assert [r["props"] for r in rows] == [None, b'{"Bad-Key":1}']
    assert out.sort_by("msg").column("_timestamp").cast("int64").to_pylist() == [
        AT_NS + 123_000_000, AT]
    with pytest.raises(InvalidPropertyError, match="props='sometimes'"):
        db.set_properties(name, {"props": "sometimes"})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.decimals(min_value=-10**13, max_value=10**13, allow_nan=False, allow_infinity=False,
                places=12).map(str),
    st.floats(-1e13, 1e13, allow_nan=False).map(repr),
    st.tuples(st.integers(-10**12, 10**12), st.text("0123456789", min_size=1, max_size=25))
    .map(lambda t: f"{t[0]}.{t[1]}"),
    st.sampled_from(["0.0000000005", "-0.0000000005", "0.0000000015", "1.5e3", "-0.5",
                     "9223372036.854775807", "9223372036.854775808", "999999999999.9"])),
    min_size=1, max_size=12), st.sampled_from(["us", "ms", "s"]))
def test_property_decimal_epochs_equal_the_reference(texts: list[str], unit: str) -> None:
    """The vectorised reading of `1795929000.123456`-style numbers against `epoch_ns`."""
    conv = IngestConventions(unit)  # type: ignore[arg-type]
    raw = pa.array([t.encode() for t in texts], pa.binary())
    got = from_raw(TIMESTAMP, raw, conv.unit_ns)
    values = got.array.cast(pa.int64()).to_pylist()
    for text, value, flagged in zip(texts, values, got.flags.tolist(), strict=True):
        try:
            want = convert(TIMESTAMP, text.encode(), conv.unit_ns)
        except ValueProblem:
            assert flagged and value is None, text
            continue
        assert not flagged and value == want, (text, unit, value, want)


@PROPERTY
@given(st.data())
def test_property_fast_equals_slow_under_any_conventions(data: st.DataObject) -> None:
    """The differential property of `test_coerce`, under every unit and with props off."""
    schema = data.draw(schemas())
    body = data.draw(bodies(schema, valid=data.draw(st.booleans())))
    conv = IngestConventions(data.draw(st.sampled_from(["ns", "us", "ms", "s"])),
                             props=data.draw(st.booleans()))
    with small_everything(), mock.patch.object(_lines, "CHUNK_BYTES", 96):
        for unknown in ("drop", "props", "reject"):
            run(body, schema, unknown=unknown, conventions=conv)
