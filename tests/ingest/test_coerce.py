"""NDJSON -> Arrow coercion: every rule, every error message, fast path == slow path.

`run()` coerces each body through `_coerce_slow` (the per-line reference) and through
`coerce_ndjson` in both its forms: the C scanner converting the typed columns in its own
pass (where the extension is built: the usual case), and Arrow's JSON reader with the msgspec
pass (what runs without the extension); it asserts all give the same batch, errors and
rejected lines. Tests of one form's own machinery pin it (`arrow_form`, `FORMS`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest

from shoal.ingest import _columns, _lines
from shoal.ingest import coerce as coerce_mod
from shoal.ingest.coerce import Coerced, _coerce_slow, coerce_ndjson
from shoal.types import (BOOL, BYTES, DYNAMIC, INT, LONG, REAL, STRING, TIMESTAMP, Column,
                         Schema, vector)
from shoal.types.conventions import DEFAULT_CONVENTIONS, IngestConventions

T0 = 1_700_000_000_000_000_000  # the ingest time used everywhere


def schema_of(*cols: Column) -> Schema:
    return Schema.create(cols)


def rows_of(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """Rows with timestamps as epoch-ns ints (to_pylist cannot hold nanoseconds)."""
    arrays = [a.cast(pa.int64()) if pa.types.is_timestamp(a.type) else a for a in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names).to_pylist()


def assert_same(fast: Coerced, slow: Coerced) -> None:
    assert fast.batch.schema.equals(slow.batch.schema, check_metadata=True)
    assert rows_of(fast.batch) == rows_of(slow.batch)
    assert fast.batch.equals(slow.batch)
    assert fast.errors == slow.errors
    assert (fast.rows, fast.rejected_count, fast.rejected_lines) == \
        (slow.rows, slow.rejected_count, slow.rejected_lines)


@contextlib.contextmanager
def form(name: str) -> Iterator[None]:
    """The fast path's form: "scanner" (the C scanner types the columns) or "arrow" (Arrow's
    reader and the msgspec pass: what runs where the extension is not built)."""
    if name == "scanner":
        assert _lines.scanner_built(), "the C scanner is not built (scripts/setup.sh)"
        yield
    else:
        with mock.patch.object(_lines, "_scan", None):
            yield


FORMS = ["scanner", "arrow"]


@pytest.fixture
def arrow_form() -> Iterator[None]:
    with form("arrow"):
        yield


def run(body: bytes | str, schema: Schema, *, unknown: str = "drop",
        max_errors: int = 100, conventions: IngestConventions = DEFAULT_CONVENTIONS
        ) -> Coerced:
    if isinstance(body, str):
        body = body.encode()
    slow = _coerce_slow(body, schema, unknown=unknown,  # type: ignore[arg-type]
                        ingest_time_ns=T0, max_errors=max_errors, conventions=conventions)
    forms = FORMS if _lines.scanner_built() else ["arrow"]
    for name in reversed(forms):    # the scanner's answer is returned
        with form(name):
            fast = coerce_ndjson(body, schema, unknown=unknown,  # type: ignore[arg-type]
                                 ingest_time_ns=T0, max_errors=max_errors,
                                 conventions=conventions)
        assert_same(fast, slow)
        assert fast.unknown_fields == slow.unknown_fields
        assert fast.warnings == slow.warnings
        assert fast.batch.schema.equals(schema.arrow(), check_metadata=True)
        assert fast.rows == fast.batch.num_rows
    return fast


def messages(c: Coerced) -> list[str]:
    return [e.message for e in c.errors]


def one(value: str, col: Column, *, unknown: str = "drop") -> Coerced:
    return run('{"%s":%s}\n' % (col.name, value), schema_of(col), unknown=unknown)


def value_of(value: str, col: Column) -> Any:
    c = one(value, col)
    assert c.errors == [], messages(c)
    return rows_of(c.batch)[0][col.name]


def error_of(value: str, col: Column) -> str:
    c = one(value, col)
    assert c.rows == 0 and c.rejected_lines == [1]
    assert len(c.errors) == 1 and c.errors[0].field == col.name and c.errors[0].line == 1
    return c.errors[0].message


# -- the coercion table ---------------------------------------------------------------------------

@pytest.mark.parametrize("col", [Column("x", t) for t in
                                 (BOOL, INT, LONG, REAL, STRING, TIMESTAMP, vector(2), DYNAMIC,
                                  BYTES)], ids=str)
def test_null_is_null_for_every_type(col: Column) -> None:
    assert value_of("null", col) is None


def test_bool() -> None:
    assert value_of("true", Column("ok", BOOL)) is True
    assert value_of("false", Column("ok", BOOL)) is False
    assert error_of('"yes"', Column("ok", BOOL)) == \
        'line 1: field "ok": bool expects true or false, got string "yes"'
    assert error_of("1", Column("ok", BOOL)) == \
        'line 1: field "ok": bool expects true or false, got 1'


def test_int_range_checked() -> None:
    col = Column("n", INT)
    assert value_of("2147483647", col) == 2147483647
    assert value_of("-2147483648", col) == -2147483648
    assert value_of("-0", col) == 0
    c = run('{"n":1}\n{"n":3000000000}\n', schema_of(col))
    assert messages(c) == ['line 2: field "n": int expects an integer in '
                           '[-2147483648, 2147483647], got 3000000000']
    assert error_of("-2147483649", col).endswith("got -2147483649")


def test_long_range_checked() -> None:
    col = Column("n", LONG)
    assert value_of("9223372036854775807", col) == 2**63 - 1
    assert value_of("-9223372036854775808", col) == -(2**63)
    assert error_of("9223372036854775808", col) == (
        'line 1: field "n": long expects an integer in '
        "[-9223372036854775808, 9223372036854775807], got 9223372036854775808")


@pytest.mark.parametrize("text", ["1.5", "1.0", "1e2", "1E+2", "-0.0"])
def test_fraction_or_exponent_is_not_an_integer(text: str) -> None:
    """Decision: `1.0` is not an integer (as Arrow's reader): int/long reject it."""
    assert error_of(text, Column("n", INT)) == \
        f'line 1: field "n": int expects an integer in [-2147483648, 2147483647], got {text}'
    assert error_of(text, Column("n", LONG)).endswith(f"got {text}")


def test_real() -> None:
    col = Column("r", REAL)
    assert value_of("1.5", col) == 1.5
    assert value_of("2", col) == 2.0
    assert value_of("1e-3", col) == 0.001
    assert value_of("12345678901234567890", col) == 12345678901234567890.0
    assert error_of("1e400", col) == 'line 1: field "r": real expects a finite number, got 1e400'
    assert error_of('"1.5"', col) == \
        'line 1: field "r": real expects a finite number, got string "1.5"'


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(literal: str) -> None:
    c = run('{"r":%s}\n' % literal, schema_of(Column("r", REAL)))
    assert c.rows == 0 and c.rejected_lines == [1]
    assert messages(c)[0].startswith("line 1: invalid JSON: ")


def test_string_direct_and_other_json_types_as_json_text() -> None:
    col = Column("s", STRING)
    assert value_of('"héllo \\"x\\" \\u00e9\\n"', col) == 'héllo "x" é\n'
    assert value_of("5", col) == "5"
    assert value_of("true", col) == "true"
    assert value_of("false", col) == "false"
    assert value_of("1.5", col) == "1.5"
    assert value_of("1.50", col) == "1.50"  # the JSON text as sent
    assert value_of('{"a": [1, 2], "b" : "x y"}', col) == '{"a":[1,2],"b":"x y"}'
    assert value_of("[ 1 , {} ]", col) == "[1,{}]"


def test_timestamp_rfc3339() -> None:
    col = Column("t", TIMESTAMP)
    assert value_of('"2024-01-01T00:00:00Z"', col) == 1_704_067_200_000_000_000
    assert value_of('"2024-01-01T00:00:00.123456789Z"', col) == 1_704_067_200_123_456_789
    assert value_of('"2024-01-01T00:00:00.5+02:00"', col) == 1_704_060_000_500_000_000
    assert value_of('"2024-01-01t01:30:00-01:30"', col) == 1_704_078_000_000_000_000
    assert value_of('"2024-01-01T00:00:00z"', col) == 1_704_067_200_000_000_000
    assert value_of('"1970-01-01T00:00:00.000000001Z"', col) == 1


def test_timestamp_text_without_zone_is_utc() -> None:
    """A space may stand for the `T`, and a missing zone means UTC (what databases and
    Python's `str(datetime)` write)."""
    col = Column("t", TIMESTAMP)
    at = 1_795_860_000_000_000_000  # 2026-11-28T10:00:00Z
    assert value_of('"2026-11-28 10:00:00"', col) == at
    assert value_of('"2026-11-28 10:00:00.25"', col) == at + 250_000_000
    assert value_of('"2026-11-28T10:00:00"', col) == at
    assert value_of('"2026-11-28 10:00:00Z"', col) == at
    assert value_of('"2026-11-28 12:00:00+02:00"', col) == at
    assert value_of('"2026-11-28 10:00:00.123456789"', col) == at + 123_456_789


@pytest.mark.parametrize("text", ["2024-01-01", "2024-01-01T10:00Z", "2024-01-01 10:00",
                                  "2024-01-01  10:00:00", "2024-01-01_10:00:00",
                                  "2024-01-01 10:00:00.", "2024-01-01 10:00:00 Z",
                                  "2024-01-01T00:00:00+0200",
                                  "2024-02-30T00:00:00Z", "2024-01-01T24:00:00Z",
                                  "2024-01-01T00:00:60Z", "2024-01-01T00:00:00.1234567891Z",
                                  "yesterday", ""])
def test_timestamp_not_rfc3339(text: str) -> None:
    assert error_of(json.dumps(text), Column("t", TIMESTAMP)) == (
        'line 1: field "t": timestamp expects an RFC 3339 string or integer epoch '
        f"nanoseconds, got string {json.dumps(text)}")


def test_timestamp_epoch_nanoseconds() -> None:
    col = Column("t", TIMESTAMP)
    assert value_of("1700000000000000000", col) == 1_700_000_000_000_000_000
    assert value_of("-1", col) == -1
    assert error_of("1.7e18", col).endswith("got 1.7e18")
    assert error_of("9223372036854775808", col).endswith("got 9223372036854775808 (out of range)")
    assert error_of('"1500-01-01T00:00:00Z"', col).endswith('(out of range)')
    assert error_of("true", col).endswith("got true")


def test_timestamp_edges_of_the_nanosecond_range() -> None:
    col = Column("t", TIMESTAMP)
    assert value_of('"2262-04-11T23:47:16.854775807Z"', col) == 2**63 - 1
    assert value_of('"1677-09-21T00:12:43.145224192Z"', col) == -(2**63)
    assert error_of('"2262-04-11T23:47:16.854775808Z"', col).endswith("(out of range)")


def test_vector() -> None:
    col = Column("embedding", vector(3))
    assert value_of("[1, 2.5, -3e-1]", col) == pytest.approx([1.0, 2.5, -0.3])
    assert value_of("[0.1, 0.2, 0.3]", col) == [float(pa.scalar(v, pa.float32()).as_py())
                                                for v in (0.1, 0.2, 0.3)]
    c = run('{"embedding":[1,2,3]}\n' * 6 + '{"embedding":[1,2,3,4]}\n',
            schema_of(col))
    assert messages(c) == ['line 7: field "embedding": vector(3) expects 3 numbers, got 4']
    assert c.rows == 6
    assert error_of("[1,2]", col) == \
        'line 1: field "embedding": vector(3) expects 3 numbers, got 2'
    assert error_of('[1,"a",3]', col) == \
        'line 1: field "embedding": vector(3) expects 3 numbers, got string "a" at index 1'
    assert error_of("[1,null,3]", col) == \
        'line 1: field "embedding": vector(3) expects 3 numbers, got null at index 1'
    assert error_of("[1,true,3]", col).endswith("got true at index 1")
    assert error_of("[1,1e39,3]", col) == ('line 1: field "embedding": vector(3) expects 3 '
                                            "numbers, got 1e39 at index 1 (out of float32 range)")
    assert error_of('"1,2,3"', col) == \
        'line 1: field "embedding": vector(3) expects an array of 3 numbers, got string "1,2,3"'
    assert error_of("{}", col).endswith("got object")


def test_dynamic_is_canonical_json_bytes() -> None:
    """Canonical form: the JSON text as sent, insignificant whitespace removed."""
    col = Column("d", DYNAMIC)
    assert value_of('{"b": 1, "a" : [1.50, "x y", "\\u00e9"], "c":{ }}', col) == \
        b'{"b":1,"a":[1.50,"x y","\\u00e9"],"c":{}}'
    assert value_of('"é"', col) == '"é"'.encode()
    assert value_of("12", col) == b"12"
    assert value_of("true", col) == b"true"


def test_bytes_from_base64() -> None:
    col = Column("b", BYTES)
    assert value_of('"aGVsbG8="', col) == b"hello"
    assert value_of('""', col) == b""
    assert error_of('"!!"', col) == \
        'line 1: field "b": bytes expects a base64 string, got string "!!" (not valid base64)'
    assert error_of('"aGVsbG8"', col).endswith("(not valid base64)")  # padding is required
    assert error_of("5", col) == 'line 1: field "b": bytes expects a base64 string, got 5'


def test_long_found_values_are_truncated() -> None:
    msg = error_of(json.dumps("y" * 100), Column("ok", BOOL))
    assert msg == ('line 1: field "ok": bool expects true or false, got string "'
                   + "y" * 40 + '..."')


# -- lines ---------------------------------------------------------------------------------

def test_blank_lines_are_skipped_but_counted() -> None:
    c = run('{"n":1}\n\n   \n\t\r\n{"n":"x"}\n{"n":2}', schema_of(Column("n", INT)))
    assert messages(c) == ['line 5: field "n": int expects an integer in '
                           '[-2147483648, 2147483647], got string "x"']
    assert [r["n"] for r in rows_of(c.batch)] == [1, 2]


def test_crlf_and_padded_lines() -> None:
    c = run('{"n":1}\r\n  {"n":2}  \r\n\t{"n":3}\n', schema_of(Column("n", INT)))
    assert [r["n"] for r in rows_of(c.batch)] == [1, 2, 3] and c.errors == []


@pytest.mark.parametrize("line,message", [
    ("[1, 2]", "line 2: expected a JSON object, got array"),
    ('"text"', "line 2: expected a JSON object, got string"),
    ("12", "line 2: expected a JSON object, got number"),
    ("true", "line 2: expected a JSON object, got boolean"),
    ("null", "line 2: expected a JSON object, got null"),
])
def test_line_that_is_not_an_object(line: str, message: str) -> None:
    c = run('{"n":1}\n' + line + '\n{"n":3}\n', schema_of(Column("n", INT)))
    assert messages(c) == [message] and c.rejected_lines == [2] and c.rows == 2


@pytest.mark.parametrize("line", ['{"n":1', '{"n":1,}', '{"n":01}', '{"n":1}{"n":2}',
                                  '{"n":1} x', "{'n':1}", '{"n":tru}', '{"n":"a\tb"}',
                                  '{"n":"\\ud800"}', '{"n":1} // c', "\ufeff{\"n\":1}"])
def test_invalid_json_line(line: str) -> None:
    c = run('{"n":1}\n' + line + '\n{"n":3}\n', schema_of(Column("n", INT)))
    assert len(c.errors) == 1 and c.errors[0].field is None
    assert c.errors[0].message.startswith("line 2: invalid JSON: ")
    assert c.rejected_lines == [2] and c.rows == 2


@pytest.mark.parametrize("lead", ["null", " null ", "\n\tnull", "null\r"])
def test_body_starting_with_null(lead: str, small_chunks: None) -> None:
    """pyarrow 26 segfaults reading a body whose first value is `null`: never given one."""
    for n in (2, 6000):
        c = run(lead + "\n" + "".join('{"n":%d}\n' % i for i in range(n)),
                schema_of(Column("n", INT)))
        assert c.rows == n and messages(c) == [
            f"line {lead.count(chr(10)) + 1}: expected a JSON object, got null"]


def test_value_split_over_two_lines_is_two_bad_lines() -> None:
    c = run('{"n":1}\n{"n":\n2}\n{"n":3}\n', schema_of(Column("n", INT)))
    assert c.rejected_lines == [2, 3] and c.rows == 2
    assert messages(c)[1] == "line 3: expected a JSON object, got number"


def test_invalid_utf8_line() -> None:
    c = run(b'{"n":1}\n{"n":2,"x":"\xff"}\n{"n":3}\n', schema_of(Column("n", INT)))
    assert messages(c) == ["line 2: invalid JSON: invalid UTF-8 (byte 12)"]


def test_duplicate_keys_last_wins() -> None:
    c = run('{"n":1,"n":2,"d":{"a":1},"d":[3]}\n',
            schema_of(Column("n", INT), Column("d", DYNAMIC)))
    assert rows_of(c.batch) == [{"_timestamp": T0, "props": None, "n": 2, "d": b"[3]"}]


def test_escaped_keys_match_columns() -> None:
    c = run('{"\\u006e":7}\n', schema_of(Column("n", INT)))
    assert rows_of(c.batch)[0]["n"] == 7


def test_empty_and_blank_bodies() -> None:
    for body in ("", "\n", "  \n\n\t\n"):
        c = run(body, schema_of(Column("n", INT)))
        assert c.rows == 0 and c.errors == [] and c.batch.num_rows == 0


# -- absent columns, defaults, NOT NULL, _timestamp -----------------------------------------

def test_absent_column_is_null_or_default() -> None:
    s = schema_of(Column("a", INT), Column("b", STRING, default="dflt"),
                  Column("c", LONG, default=7), Column("d", DYNAMIC, default={"k": [1]}))
    c = run('{"a":1}\n{"b":null,"c":null,"d":null}\n{"b":"x","c":3,"d":"y"}\n', s)
    assert [(r["a"], r["b"], r["c"], r["d"]) for r in rows_of(c.batch)] == [
        (1, "dflt", 7, b'{"k":[1]}'),
        (None, None, None, None),        # an explicit null is null, not the default
        (None, "x", 3, b'"y"'),
    ]


def test_not_null() -> None:
    s = schema_of(Column("id", LONG, nullable=False), Column("lvl", STRING, nullable=False,
                                                             default="INFO"))
    c = run('{"id":1}\n{"lvl":"x"}\n{"id":null}\n{"id":2,"lvl":null}\n{"id":3,"lvl":"W"}\n', s)
    assert messages(c) == [
        'line 2: field "id": NOT NULL column is missing (no default)',
        'line 3: field "id": NOT NULL column got null',
        'line 4: field "lvl": NOT NULL column got null',
    ]
    assert c.rejected_lines == [2, 3, 4]
    assert [(r["id"], r["lvl"]) for r in rows_of(c.batch)] == [(1, "INFO"), (3, "W")]


def test_timestamp_column_filled_with_ingest_time() -> None:
    c = run('{"_timestamp":"2024-01-01T00:00:00Z"}\n{}\n{"_timestamp":null}\n'
            '{"_timestamp":5}\n', schema_of())
    assert [r["_timestamp"] for r in rows_of(c.batch)] == [1_704_067_200_000_000_000, T0, T0, 5]


def test_header_columns_cannot_be_written() -> None:
    s = schema_of(Column("n", INT), Column("h", BYTES, header="trace"))
    c = run('{"n":1}\n{"h":"aGk=","n":2}\n{"n":3,"h":null}\n', s)
    assert messages(c) == [
        'line 2: field "h": is a Kafka header column; only a Kafka pipeline writes it',
        'line 3: field "h": is a Kafka header column; only a Kafka pipeline writes it']
    assert rows_of(c.batch) == [{"_timestamp": T0, "props": None, "n": 1, "h": None}]


def test_every_problem_of_a_line_is_listed_in_key_order() -> None:
    s = schema_of(Column("a", INT), Column("b", BOOL), Column("z", STRING, nullable=False))
    c = run('{"b":"no","a":1.5,"q":1}\n', s, unknown="reject")
    assert messages(c) == [
        'line 1: field "b": bool expects true or false, got string "no"',
        'line 1: field "a": int expects an integer in [-2147483648, 2147483647], got 1.5',
        'line 1: field "q": not in the table schema (mode reject)',
        'line 1: field "z": NOT NULL column is missing (no default)',
    ]
    assert c.rejected_count == 1 and c.rejected_lines == [1]


# -- partial results and the error cap ------------------------------------------------------

def test_partial_result_keeps_good_lines() -> None:
    body = "".join('{"n":%s}\n' % (i if i % 10 else '"bad"') for i in range(1, 101))
    c = run(body, schema_of(Column("n", INT)), max_errors=3)
    assert c.rejected_lines == list(range(10, 101, 10))
    assert c.rejected_count == 10 and [e.line for e in c.errors] == [10, 20, 30]
    assert [r["n"] for r in rows_of(c.batch)] == [i for i in range(1, 101) if i % 10]


def test_max_errors_zero_still_counts() -> None:
    c = run('{"n":"a"}\n{"n":"b"}\n', schema_of(Column("n", INT)), max_errors=0)
    assert c.errors == [] and c.rejected_count == 2 and c.rejected_lines == [1, 2]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        coerce_ndjson(b"", schema_of(), unknown="keep", ingest_time_ns=0)  # type: ignore
    with pytest.raises(ValueError):
        coerce_ndjson(b"", schema_of(), unknown="drop", ingest_time_ns=0, max_errors=-1)


# -- unknown fields ----------------------------------------------------------------------

def test_unknown_drop() -> None:
    c = run('{"n":1,"colour":"red","Bad-Key":{"x":1}}\n', schema_of(Column("n", INT)))
    assert rows_of(c.batch) == [{"_timestamp": T0, "props": None, "n": 1}]


def test_unknown_reject() -> None:
    c = run('{"n":1}\n{"n":2}\n{"n":3,"colour":"red"}\n{"N":4}\n',
            schema_of(Column("n", INT)), unknown="reject")
    assert messages(c) == ['line 3: field "colour": not in the table schema (mode reject)',
                           'line 4: field "N": not in the table schema (mode reject)']
    assert [r["n"] for r in rows_of(c.batch)] == [1, 2]


def test_unknown_props() -> None:
    s = schema_of(Column("n", INT))
    c = run('{"n":1,"colour":"red","Bad-Key": {"x": [1, 2]}}\n{"n":2}\n'
            '{"size":3,"colour":null}\n', s, unknown="props")
    assert [r["props"] for r in rows_of(c.batch)] == [
        b'{"colour":"red","Bad-Key":{"x":[1,2]}}', None, b'{"colour":null,"size":3}']


def test_props_keys_ordered_by_first_appearance_in_the_body() -> None:
    c = run('{"b":1,"a":2}\n{"a":3,"b":4}\n', schema_of(), unknown="props")
    assert [r["props"] for r in rows_of(c.batch)] == [b'{"b":1,"a":2}', b'{"b":4,"a":3}']


def test_props_merge_with_the_records_own_props() -> None:
    s = schema_of(Column("n", INT))
    c = run('{"props":{"a":1,"x":0},"x":2,"y":[1, 2]}\n'  # object: merged, top-level x wins
            '{"props":5,"x":2}\n'                         # not an object: kept under "props"
            '{"props":null,"x":3}\n'                       # null: just the unknown fields
            '{"props":{"k" : "v"}}\n'                      # no unknown fields: as sent
            '{"props":[1, 2]}\n', s, unknown="props")
    assert [r["props"] for r in rows_of(c.batch)] == [
        b'{"a":1,"x":2,"y":[1,2]}', b'{"props":5,"x":2}', b'{"x":3}', b'{"k":"v"}', b"[1,2]"]


def test_props_in_drop_mode_is_stored_as_sent() -> None:
    c = run('{"props":{"a" : 1},"zz":1}\n', schema_of(), unknown="drop")
    assert rows_of(c.batch)[0]["props"] == b'{"a":1}'


def test_keys_msgspec_cannot_name_still_work() -> None:
    """A key with a quote or backslash cannot be a msgspec field: the per-line path."""
    body = '{"a\\"b":1,"n":1}\n{"n":2,"c\\\\d":[1]}\n{"n":3}\n'
    s = schema_of(Column("n", INT))
    c = run(body, s, unknown="props")
    assert [r["props"] for r in rows_of(c.batch)] == [b'{"a\\"b":1}', b'{"c\\\\d":[1]}', None]
    c = run(body, s, unknown="reject")
    assert c.rejected_lines == [1, 2]
    assert messages(c)[0] == 'line 1: field "a\\"b": not in the table schema (mode reject)'


def test_non_identifier_keys_never_match_columns() -> None:
    c = run('{"N":1,"n ":2," n":3}\n', schema_of(Column("n", INT)), unknown="props")
    assert rows_of(c.batch)[0]["n"] is None
    assert rows_of(c.batch)[0]["props"] == b'{"N":1,"n ":2," n":3}'


def test_unknown_fields_hint_matches_detection() -> None:
    from shoal.ingest.evolve import scan_unknown_fields
    s = schema_of(Column("n", INT))
    body = b'{"n":1,"b":1,"a":2}\n{"a":3,"c":{"x":1}}\n{"n":"bad","b":5}\n'
    hint = scan_unknown_fields(body, s)
    for mode in ("props", "reject"):
        with_hint = coerce_ndjson(body, s, unknown=mode, ingest_time_ns=T0,  # type: ignore
                                  unknown_fields=hint + ["not_there"])
        assert_same(with_hint, _coerce_slow(body, s, unknown=mode,  # type: ignore
                                            ingest_time_ns=T0))


# -- big bodies: worker thread, probe, demotion, chunked fallback ---------------------------

@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many msgspec chunks and Arrow fallback pieces, on bodies of a few hundred KB."""
    monkeypatch.setattr(_lines, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(coerce_mod, "_FALLBACK_CHUNK_BYTES", 16384)


def log_schema() -> Schema:
    return schema_of(Column("n", INT), Column("s", STRING), Column("r", REAL),
                     Column("d", DYNAMIC), Column("v", vector(2)))


def log_line(i: int) -> str:
    return ('{"_timestamp":"2024-01-01T00:00:%02dZ","n":%d,"s":"v%d","r":1.5,"d":{"k":[1,2]},'
            '"v":[1,2]}' % (i % 60, i, i))


def log_body(n: int, bad: dict[int, str]) -> bytes:
    return "".join((bad.get(i) or log_line(i)) + "\n" for i in range(n)).encode()


@pytest.mark.parametrize("unknown", ["drop", "props", "reject"])
def test_big_body_with_scattered_problems(unknown: str, small_chunks: None) -> None:
    bad = {5: '{"n":3000000000}', 900: "[1]", 1700: '{"n":', 2500: '{"s":5,"zz":1}',
           3100: '{"r":NaN}', 4000: '{"v":[1]}', 4444: '{"d":1e400,"n":1}',
           5000: '{"_timestamp":"2024-13-01T00:00:00Z"}', 6001: '{"n":1}{"n":2}'}
    c = run(log_body(7000, bad), log_schema(), unknown=unknown)
    expected_bad = {5, 900, 1700, 3100, 4000, 5000, 6001} | ({2500} if unknown == "reject"
                                                              else set())
    assert set(c.rejected_lines) == {i + 1 for i in expected_bad}
    assert c.rows == 7000 - len(expected_bad)


def test_string_column_fed_numbers_takes_the_raw_path(small_chunks: None) -> None:
    """What evolution creates: a string column; later lines send numbers, objects, bools."""
    n = 6000
    body = "".join('{"status":%s,"s":"x"}\n' % ("200", '"ok"', "true", '{"a": 1}', "1.50",
                                                   "null")[i % 6] for i in range(n)).encode()
    c = run(body, schema_of(Column("status", STRING), Column("s", STRING)))
    assert [r["status"] for r in rows_of(c.batch)[:6]] == \
        ["200", "ok", "true", '{"a":1}', "1.50", None]


def test_epoch_timestamps_take_the_raw_path(small_chunks: None) -> None:
    body = "".join('{"_timestamp":%s}\n' % (i if i % 3 else '"1970-01-01T00:00:00Z"')
                   for i in range(20000)).encode()
    c = run(body, schema_of())
    assert [r["_timestamp"] for r in rows_of(c.batch)[:4]] == [0, 1, 2, 0]


def test_number_too_big_for_arrow_in_a_dropped_field(small_chunks: None) -> None:
    c = run(log_body(6000, {3000: '{"n":1,"huge":1e999}'}), log_schema())
    assert c.errors == [] and c.rows == 6000


def test_long_line(small_chunks: None) -> None:
    big = '{"n":1,"s":"%s"}' % ("x" * 3_000_000)
    c = run(log_body(2000, {10: big}), log_schema())
    assert c.errors == [] and rows_of(c.batch)[10]["s"] == "x" * 3_000_000


def test_many_blank_and_padded_lines(small_chunks: None) -> None:
    lines = []
    for i in range(8000):
        lines.append(["", "  ", " " + log_line(i) + " ", log_line(i) + "\r"][i % 4])
    c = run("\n".join(lines).encode(), log_schema())
    assert c.errors == [] and c.rows == 4000


def test_many_unknown_keys(small_chunks: None) -> None:
    body = "".join('{"n":%d,"k%d":%d}\n' % (i, i % 300, i) for i in range(3000)).encode()
    c = run(body, schema_of(Column("n", INT)), unknown="props")
    assert rows_of(c.batch)[299]["props"] == b'{"k299":299}'


# -- property: the vectorised path equals the per-line reference ---------------------------

import msgspec  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from shoal.ingest._columns import rfc3339_array  # noqa: E402
from shoal.ingest._values import rfc3339_ns  # noqa: E402

TYPES = [BOOL, INT, LONG, REAL, STRING, TIMESTAMP, vector(1), vector(3), DYNAMIC, BYTES]
DEFAULTS = {"bool": True, "int": -5, "long": 2**40, "real": 0.25, "string": "dflt",
            "timestamp": 1_000, "dynamic": {"k": [1, "é"]}}
UNKNOWN_KEYS = ["x", "y", "Bad-Key", "1x", "", "é", "_timestamp", "props", "a\"q"]
SPECIAL_NUMBERS = ["1.0", "1e2", "-0", "1E+2", "0.5e-3", "123456789012345678901234567890",
                   "1e400", "-1e-400", "2147483648", "-9223372036854775809", "0.1", "1e39"]
BROKEN_LINES = ["[1]", '"s"', "5", "null", '{"a":', '{"a":1,}', "{'a':1}", '{"a":NaN}',
                '{"a":1}{"b":2}', '{"a":"\\ud800"}', "\ufeff{}", "}", "{", '{"a" 1}']

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6)


@st.composite
def json_text(draw: st.DrawFn, values: st.SearchStrategy[Any] = json_values) -> str:
    """A JSON value's text, in one of several spellings."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(SPECIAL_NUMBERS))
    value = draw(values)
    if draw(st.booleans()):
        return json.dumps(value, ensure_ascii=draw(st.booleans()))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=draw(st.booleans()))


@st.composite
def rfc3339_text(draw: st.DrawFn) -> str:
    y = draw(st.sampled_from([0, 1, 1677, 1678, 1970, 1999, 2000, 2024, 2261, 2262, 2300, 9999]))
    mo, d = draw(st.integers(0, 13)), draw(st.integers(0, 32))
    h, mi, s = draw(st.integers(0, 24)), draw(st.integers(0, 60)), draw(st.integers(0, 60))
    frac = draw(st.sampled_from(["", ".5", ".123", ".000001", ".123456789", ".1234567890"]))
    zone = draw(st.sampled_from(["Z", "z", "+00:00", "-01:30", "+14:00", "+24:00", "+05:60",
                                 "+0200", ""]))
    sep = draw(st.sampled_from(["T", "t", " "]))
    return f"{y:04d}-{mo:02d}-{d:02d}{sep}{h:02d}:{mi:02d}:{s:02d}{frac}{zone}"


def valid_value(draw: st.DrawFn, col: Column) -> str:
    k = col.type.kind
    if k == "bool":
        return draw(st.sampled_from(["true", "false"]))
    if k in ("int", "long"):
        bits = 31 if k == "int" else 63
        return str(draw(st.integers(-(2**bits), 2**bits - 1)))
    if k == "real":
        return draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                              st.integers(-(2**70), 2**70).map(str),
                              st.sampled_from(["1e2", "-0", "0.5e-3", "1E+2"])))
    if k == "timestamp":
        if draw(st.booleans()):
            return str(draw(st.integers(-(2**63), 2**63 - 1)))
        ns = draw(st.integers(-(2**62), 2**62))
        from shoal.types.upgrade import _ns_to_rfc3339
        return json.dumps(_ns_to_rfc3339(ns))
    if k == "vector":
        n = col.type.dim or 0
        return json.dumps(draw(st.lists(st.floats(-1e30, 1e30), min_size=n, max_size=n)))
    if k == "bytes":
        import base64
        return json.dumps(base64.b64encode(draw(st.binary(max_size=6))).decode())
    return draw(json_text(json_values.filter(lambda v: v is not None)))  # string, dynamic


@st.composite
def schemas(draw: st.DrawFn) -> Schema:
    names = draw(st.lists(st.sampled_from("abcdefg"), max_size=5, unique=True))
    cols = []
    for name in names:
        t = draw(st.sampled_from(TYPES))
        default = DEFAULTS.get(t.kind) if draw(st.integers(0, 4)) == 0 else None
        nullable = draw(st.integers(0, 3)) > 0
        cols.append(Column(name, t, nullable=nullable, default=default))
    if draw(st.integers(0, 4)) == 0:
        cols.append(Column("h", BYTES, header="k"))
    return Schema.create(cols)


@st.composite
def bodies(draw: st.DrawFn, schema: Schema, *, valid: bool) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        if not valid and draw(st.integers(0, 6)) == 0:
            lines.append(draw(st.sampled_from(BROKEN_LINES + ["", "   "])))
            continue
        members = []
        for col in schema.columns:
            if col.header is not None and (valid or draw(st.integers(0, 3))):
                continue
            if (not col.nullable and col.default is None and valid) or draw(st.booleans()):
                if not valid and draw(st.integers(0, 3)) == 0:
                    members.append((col.name, draw(json_text())))
                elif col.name == "props" or (not col.nullable and valid):
                    members.append((col.name, valid_value(draw, col) if col.name != "props"
                                    else draw(json_text())))
                else:
                    members.append((col.name, draw(st.one_of(
                        st.just("null"), st.just(valid_value(draw, col))))))
        for key in draw(st.lists(st.sampled_from(UNKNOWN_KEYS), max_size=3, unique=True)):
            if key not in schema:
                members.append((key, draw(json_text())))
        members = draw(st.permutations(members))
        sep = draw(st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")]))
        text = "{" + sep[0].join(json.dumps(k) + sep[1] + v for k, v in members) + "}"
        text = draw(st.sampled_from(["", " ", "\t"])) + text + draw(st.sampled_from(
            ["", " ", "\r"]))
        lines.append(text)
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["", "  ", "\r"])))
    return ("\n".join(lines) + draw(st.sampled_from(["", "\n"]))).encode()


def small_everything() -> Any:
    """Tiny chunks, a worker thread and the probe even for bodies of a few hundred bytes."""
    return mock.patch.multiple(coerce_mod, _THREAD_MIN_BYTES=0, _PROBE_BYTES=48, _PROBE_SHARE=2,
                               _FALLBACK_CHUNK_BYTES=200)


PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(st.data())
def test_property_valid_lines_fast_equals_slow(data: st.DataObject) -> None:
    schema = data.draw(schemas())
    body = data.draw(bodies(schema, valid=True))
    with small_everything(), mock.patch.object(_lines, "CHUNK_BYTES", 96):
        for unknown in ("drop", "props"):
            c = run(body, schema, unknown=unknown)
            assert c.errors == [], messages(c)


@PROPERTY
@given(st.data())
def test_property_any_lines_fast_equals_slow(data: st.DataObject) -> None:
    schema = data.draw(schemas())
    body = data.draw(bodies(schema, valid=False))
    with small_everything(), mock.patch.object(_lines, "CHUNK_BYTES", 96):
        for unknown in ("drop", "props", "reject"):
            run(body, schema, unknown=unknown)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(rfc3339_text(), st.text(max_size=30), st.none()), min_size=1,
                max_size=8), st.booleans())
def test_property_rfc3339_vectorised_equals_scalar(texts: list[str | None], c_pass: bool) -> None:
    """Both vectorised forms (the scanner's C pass, numpy's) against the scalar rule."""
    with mock.patch.object(_columns, "_scan", _columns._scan if c_pass else None):
        for arr in (pa.array(texts, pa.string()), pa.array([texts[0]] * 4, pa.string())):
            check_rfc3339(arr)


def test_timestamp_text_without_zone_c_equals_numpy() -> None:
    """The new text forms (a space for the `T`, no zone) through the scanner's C pass and
    numpy's stand-in, in uniform bodies (the byte-matrix shape check) and mixed ones."""
    texts = ["2026-11-28 10:00:00", "2026-11-28 10:00:00.5", "2026-11-28T10:00:00",
             "2026-11-28 10:00:00.123456789", "2026-11-28 10:00:00-01:30", "1677-09-21 00:12:44",
             "2262-04-11 23:47:16.854775807", "2262-04-11 23:47:16.854775808",
             "2026-11-28 24:00:00", "2026-11-28 10:00", "2026-11-28 10:00:00 "]
    for c_pass in (True, False):
        with mock.patch.object(_columns, "_scan", _columns._scan if c_pass else None):
            check_rfc3339(pa.array(texts, pa.string()))
            for text in texts:
                check_rfc3339(pa.array([text] * 3, pa.string()))
    ns, ok = rfc3339_array(pa.array(["2026-11-28 10:00:00"] * 2))
    assert ok.all() and ns.tolist() == [1_795_860_000_000_000_000] * 2


def check_rfc3339(arr: pa.Array) -> None:
    ns, ok = rfc3339_array(arr)
    for value, got_ns, got_ok in zip(arr.to_pylist(), ns.tolist(), ok.tolist(), strict=True):
        try:
            want: int | None = None if value is None else rfc3339_ns(value)
        except ValueError:
            want = None
        assert (got_ns if got_ok else None) == want, value


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                          st.integers(-(2**80), 2**80).map(str),
                          st.sampled_from(SPECIAL_NUMBERS)), min_size=1, max_size=6))
def test_property_numbers_read_by_arrow_equal_python(texts: list[str]) -> None:
    schema = schema_of(Column("r", REAL), Column("n", LONG), Column("v", vector(1)),
                       Column("s", STRING), Column("t", TIMESTAMP))
    body = "".join('{"r":%s,"n":%s,"v":[%s],"s":%s,"t":%s}\n' % ((t,) * 5) for t in texts)
    run(body, schema)
    for col in schema.user_columns:  # each column alone (a failing one must not hide others)
        run("".join('{"%s":%s}\n' % (col.name, t) for t in texts), schema)


def test_raw_values_are_borrowed_not_leaked() -> None:
    """The msgspec pass returns Raw values; the batch holds copies (bytes), not views."""
    body = b'{"d":{"a":1}}\n' * 3
    c = coerce_ndjson(body, schema_of(Column("d", DYNAMIC)), unknown="drop", ingest_time_ns=0)
    del body
    assert rows_of(c.batch)[0]["d"] == b'{"a":1}'
    assert not isinstance(rows_of(c.batch)[0]["d"], msgspec.Raw)
    assert np.all(np.array([r["d"] for r in rows_of(c.batch)]) == b'{"a":1}')


# -- the fallback at real sizes: bad lines in the middle of a large chunk ------------------
#
# No constant patched here: a body of several MB is read by Arrow's reader in its worker
# thread, probed, demoted and re-read exactly as a 32 MB CLI chunk is. The per-line path is
# counted (a wrapper around it, behaviour unchanged): it must see the bad lines and nothing
# else, so the thousands of good lines around them stay on the vectorised path.

def service_schema() -> Schema:
    return schema_of(Column("service", STRING), Column("status", INT),
                     Column("duration_ms", LONG), Column("ratio", REAL),
                     Column("ok", BOOL), Column("attrs", DYNAMIC), Column("emb", vector(2)))


def service_line(i: int) -> str:
    return ('{"_timestamp":"2024-03-01T10:%02d:%02d.%03dZ","service":"svc-%d","status":%d,'
            '"duration_ms":%d,"ratio":0.%d,"ok":%s,"attrs":{"http":{"route":"/r/%d"},"n":%d},'
            '"emb":[%d.5,-1]}' % (i // 60 % 60, i % 60, i % 1000, i % 40,
                                  (200, 404, 500)[i % 3], i * 7, i % 97,
                                  "true" if i % 2 else "false", i % 13, i, i % 9))


class CountingPerLine:
    """Wraps the per-line path (`coerce.line_result`) and records the lines it is given."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines: list[int] = []
        real = coerce_mod.line_result

        def counted(text: bytes, line: int, *args: Any) -> Any:
            self.lines.append(line)
            return real(text, line, *args)

        monkeypatch.setattr(coerce_mod, "line_result", counted)


BAD_IN_THE_MIDDLE = {
    20_000: ('{"service":"a","status":"teapot"}', "status",
             'line 20001: field "status": int expects an integer in [-2147483648, 2147483647], '
             'got string "teapot"'),
    20_001: ('{"service":"b","status":3000000000}', "status", None),
    31_337: ('{"service":"c","_timestamp":"2024-02-30T00:00:00Z"}', "_timestamp", None),
    40_000: ('{"service":"d","ratio":"fast"}', "ratio", None),
    47_000: ('{"service":"e","emb":[1,2,3]}', "emb", None),
    52_000: ('{"service":"f","status":', None, None),
    60_000: ('{"service":"g","ok":"yes"}', "ok", None),
}


@pytest.mark.slow  # a 14 MB body; the fast tier checks the fallback past the probe below
@pytest.mark.parametrize("fast_form", FORMS)
@pytest.mark.parametrize("unknown", ["drop", "props"])
def test_bad_lines_in_the_middle_of_a_large_chunk(unknown: str, fast_form: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    n = 80_000
    lines = [BAD_IN_THE_MIDDLE[i][0] if i in BAD_IN_THE_MIDDLE else service_line(i)
             for i in range(n)]
    body = ("\n".join(lines) + "\n").encode()
    assert len(body) > 4 * coerce_mod._PROBE_BYTES and len(body) > 12 << 20  # 14 MB
    per_line = CountingPerLine(monkeypatch)
    with form(fast_form):
        fast = coerce_ndjson(body, service_schema(), unknown=unknown,  # type: ignore[arg-type]
                             ingest_time_ns=T0)
    bad_lines = sorted(i + 1 for i in BAD_IN_THE_MIDDLE)
    # Only the bad lines went the per-line way; every good line stayed vectorised.
    assert sorted(per_line.lines) == bad_lines
    assert fast.rejected_lines == bad_lines and fast.rows == n - len(bad_lines)
    # Each error exactly as the per-line reference words it (line, field, expected, found):
    # the reference runs on the bad lines alone, at the same line numbers (blank lines count).
    alone = "\n".join(line if i in BAD_IN_THE_MIDDLE else "" for i, line in enumerate(lines))
    slow = _coerce_slow(alone.encode(), service_schema(),
                        unknown=unknown, ingest_time_ns=T0)  # type: ignore[arg-type]
    assert fast.errors == slow.errors and fast.rejected_lines == slow.rejected_lines
    assert [(e.line, e.field) for e in fast.errors] == \
        [(i + 1, field) for i, (_, field, _) in sorted(BAD_IN_THE_MIDDLE.items())]
    for i, (_, _, message) in BAD_IN_THE_MIDDLE.items():
        if message is not None:
            assert message in messages(fast), messages(fast)
    # The good lines around the bad ones are exact.
    rows = rows_of(fast.batch)
    assert rows[20_000]["status"] == (200, 404, 500)[20_002 % 3]
    assert rows[20_000]["attrs"] == b'{"http":{"route":"/r/%d"},"n":20002}' % (20_002 % 13)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_property_odd_lines_inside_a_large_body(data: st.DataObject) -> None:
    """Lines of every kind (broken, wrongly typed, unknown keys, padded, blank) dropped into
    a body of 4,000 good ones at a drawn place, real chunk sizes (the body is past the probe
    and the worker-thread thresholds): the good lines give the rows they give alone, the odd
    ones exactly what the per-line reference gives them, and only they go the per-line way
    (a valid odd line may, a good log line never)."""
    schema = service_schema()
    base = [service_line(i) for i in range(4000)]
    odd = data.draw(bodies(schema, valid=False)).decode().split("\n")
    at = data.draw(st.integers(0, len(base)))
    lines = base[:at] + odd + base[at:]
    body = ("\n".join(lines) + "\n").encode()
    assert len(body) > 4 * coerce_mod._PROBE_BYTES
    odd_numbers = set(range(at + 1, at + len(odd) + 1))
    for unknown in ("drop", "props", "reject"):
        with pytest.MonkeyPatch.context() as monkeypatch:
            per_line = CountingPerLine(monkeypatch)
            fast = coerce_ndjson(body, schema, unknown=unknown,  # type: ignore[arg-type]
                                 ingest_time_ns=T0)
        if not _lines.LineIndex.build(body).structural_bad:
            # Known gap: with a line that cannot be one object (a value broken over lines, a
            # lone brace) the fallback may send good lines the per-line way too (found by
            # this property when the fast path was added; results stay exact).
            assert set(per_line.lines) <= odd_numbers
        alone = "\n".join(line if at <= i < at + len(odd) else "" for i, line in enumerate(lines))
        slow = _coerce_slow(alone.encode(), schema, unknown=unknown,  # type: ignore[arg-type]
                            ingest_time_ns=T0)
        assert (fast.errors, fast.rejected_lines) == (slow.errors, slow.rejected_lines)
        good = coerce_ndjson(("\n".join(base) + "\n").encode(), schema, unknown=unknown,
                             ingest_time_ns=T0)  # type: ignore[arg-type]
        good_rows, odd_rows = rows_of(good.batch), rows_of(slow.batch)
        assert rows_of(fast.batch) == good_rows[:at] + odd_rows + good_rows[at:]
        assert fast.unknown_fields == slow.unknown_fields


def test_a_line_arrow_cannot_read_sends_only_itself_the_per_line_way(
        monkeypatch: pytest.MonkeyPatch, arrow_form: None) -> None:
    """`1e400` in a dropped field is valid JSON Arrow's reader refuses ("Number too big to
    be stored in double") naming no column: the failing piece is halved until that line
    alone is left, so 30,000 good lines do not follow it down the per-line path."""
    lines = [service_line(i) for i in range(30_000)]
    lines[12_345] = '{"service":"x","huge":1e400,"status":201}'
    body = ("\n".join(lines) + "\n").encode()
    per_line = CountingPerLine(monkeypatch)
    fast = coerce_ndjson(body, service_schema(), unknown="drop", ingest_time_ns=T0)
    assert per_line.lines == [12_346]
    assert fast.errors == [] and fast.rows == 30_000
    assert rows_of(fast.batch)[12_345]["status"] == 201


# -- typed columns only: Arrow's reader alone, no msgspec pass -----------------------------

TYPED = [BOOL, INT, LONG, REAL, STRING, TIMESTAMP, vector(2)]


def typed_schema() -> Schema:
    return schema_of(*(Column(f"c{i}", t) for i, t in enumerate(TYPED)))


def typed_line(i: int) -> str:
    return ('{"_timestamp":"2024-01-01T00:00:%02dZ","c0":%s,"c1":%d,"c2":%d,"c3":%d.25,'
            '"c4":"s%d","c5":"2024-02-01T00:00:00.%03dZ","c6":[%d,1]}'
            % (i % 60, "true" if i % 2 else "false", i, i * 1000, i, i, i % 1000, i))


@pytest.mark.parametrize("unknown", ["drop", "props", "reject"])
def test_typed_columns_alone_need_no_msgspec_pass(unknown: str, monkeypatch: pytest.MonkeyPatch,
                                                  arrow_form: None) -> None:
    """Without the C scanner, a table of typed columns only, a body of known keys: Arrow's
    reader proves there is nothing to discover (it refuses other keys) and converts
    everything; no msgspec pass."""
    body = "".join(typed_line(i) + "\n" for i in range(6000)).encode()
    slow = _coerce_slow(body, typed_schema(), unknown=unknown,  # type: ignore[arg-type]
                        ingest_time_ns=T0)

    def no_pass(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the msgspec pass ran")

    monkeypatch.setattr(coerce_mod, "raw_pass", no_pass)
    fast = coerce_ndjson(body, typed_schema(), unknown=unknown,  # type: ignore[arg-type]
                         ingest_time_ns=T0)
    assert_same(fast, slow)


@pytest.mark.parametrize("unknown", ["drop", "props", "reject"])
def test_the_scanner_parses_the_body_once(unknown: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the C scanner, Arrow's reader never reads a body: every column type is the
    scanner's, with or without bad lines in the body."""
    if not _lines.scanner_built():
        pytest.skip("the C scanner is not built")
    schema = schema_of(*(Column(f"c{i}", t) for i, t in enumerate(TYPED)), Column("d", DYNAMIC))
    lines = [typed_line(i)[:-1] + ',"d":{"k":%d}}' % i for i in range(3000)]
    lines[1234] = '{"c1":"teapot","c4":{"x":1},"c3":1e400,"c6":[1e39,0]}'
    body = ("\n".join(lines) + "\n").encode()
    slow = _coerce_slow(body, schema, unknown=unknown,  # type: ignore[arg-type]
                        ingest_time_ns=T0)

    def no_arrow(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Arrow's JSON reader ran")

    monkeypatch.setattr(coerce_mod.pj, "read_json", no_arrow)
    fast = coerce_ndjson(body, schema, unknown=unknown,  # type: ignore[arg-type]
                         ingest_time_ns=T0)
    assert_same(fast, slow)
    assert fast.rejected_lines == [1235]


@pytest.mark.parametrize("odd", [
    '{"c1":1,"zz":2}',                 # an unknown key: discovered, kept in props / refused
    '{"c1":1,"props":{"a":1}}',        # the record's own props
    '{"c3":NaN}',                      # Arrow takes NaN, JSON does not
    '{"c6":[1,-Infinity]}',            # ... and infinities, inside a list too
    '{"c3":1,"c3":2}',                 # duplicate keys: Arrow refuses, the last one wins
    '{"c1":1}{"c1":2}',                # two objects on a line
    '{"c1":"x"}',                      # a type Arrow refuses
    '{"c1":',                          # not JSON
    '{"c4":"\\u0070"}',                # escapes
    '{"pr\\u006fps":{"a":1}}',         # props spelled with an escape
])
@pytest.mark.parametrize("unknown", ["drop", "props", "reject"])
def test_typed_columns_alone_fall_back_when_arrow_cannot_tell(odd: str, unknown: str) -> None:
    lines = [typed_line(i) for i in range(4000)]  # past the probe's 4 x 128 KB
    lines[2000] = odd
    body = ("\n".join(lines) + "\n").encode()
    assert len(body) > 4 * coerce_mod._PROBE_BYTES
    run(body, typed_schema(), unknown=unknown)


@st.composite
def typed_schemas(draw: st.DrawFn) -> Schema:
    names = draw(st.lists(st.sampled_from("abcdefg"), max_size=5, unique=True))
    return Schema.create([Column(n, draw(st.sampled_from(TYPED))) for n in names])


@PROPERTY
@given(st.data())
def test_property_typed_columns_alone_fast_equals_slow(data: st.DataObject) -> None:
    schema = data.draw(typed_schemas())
    body = data.draw(bodies(schema, valid=data.draw(st.booleans())))
    with small_everything(), mock.patch.object(_lines, "CHUNK_BYTES", 96):
        for unknown in ("drop", "props", "reject"):
            run(body, schema, unknown=unknown)


def test_rfc3339_edges_of_both_vectorised_forms() -> None:
    """Years 0000 and 9999, leap days, offsets at the ends of the int64 nanosecond range."""
    texts = ["0000-01-01T00:00:00Z", "0000-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
             "2000-02-29T23:59:59.999999999+23:59", "1677-09-21T00:12:43.145224192Z",
             "1677-09-21T00:12:43.145224191Z", "2262-04-11T23:47:16.854775807Z",
             "2262-04-11T23:47:16.854775808Z", "1970-01-01t00:00:00z", "1970-01-01T00:00:00",
             "1970-01-01T00:00:00.Z", "1970-01-01T00:00:00.1234567891Z", "9999-12-31T23:59:59Z",
             "1970-01-01T00:00:00+01:00x", "1970-13-01T00:00:00Z", "１970-01-01T00:00:00Z"]
    for c_pass in (True, False):
        with mock.patch.object(_columns, "_scan", _columns._scan if c_pass else None):
            check_rfc3339(pa.array(texts, pa.string()))
            check_rfc3339(pa.array(texts, pa.string()).slice(3))
