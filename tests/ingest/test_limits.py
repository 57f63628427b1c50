"""Bounded cost of coercion: JSON limits per line and field, and error lists capped with a total.

Every body goes through both the vectorised path and the per-line reference (`run()` of
test_coerce asserts they agree), so a limit holds whichever path a line takes.
"""

from __future__ import annotations

import json

import pytest

from shoal.errors import PayloadError
from shoal.ingest import _values
from shoal.ingest.coerce import coerce_ndjson
from shoal.types import DYNAMIC, INT, LONG, REAL, STRING, TIMESTAMP, Column, vector
from tests.ingest.test_coerce import T0, messages, rows_of, run, schema_of

DEEP = "[" * 1000 + "]" * 1000          # beyond what msgspec itself decodes
DEEPISH = "[" * 65 + "]" * 65           # decodable, but over the limit of 64
OK_DEPTH = "[" * 64 + "]" * 64
BIG = "9" * 5000                        # beyond Python's int() limit of 4,300 digits
LONGISH = "1" * 101                     # over the limit of 100 characters
OK_NUMBER = "1" * 100


@pytest.mark.parametrize("value,message", [
    (DEEP, "JSON nested deeper than 64 levels"),
    (DEEPISH, "JSON nested deeper than 64 levels"),
    ('{"a": %s}' % DEEPISH, "JSON nested deeper than 64 levels"),
    (BIG, "number literal of 5,000 characters (at most 100 are taken)"),
    (LONGISH, "number literal of 101 characters (at most 100 are taken)"),
    ("[1, %s]" % LONGISH, "number literal of 101 characters (at most 100 are taken)"),
])
@pytest.mark.parametrize("where", ["dynamic", "string", "props"])
def test_json_kept_as_json_obeys_the_limits(value, message, where):
    schema = schema_of(Column("d", DYNAMIC), Column("s", STRING), Column("n", INT))
    key = {"dynamic": "d", "string": "s", "props": "unknown_field"}[where]
    body = '{"n": 1}\n{"n": 2, "%s": %s}\n{"n": 3}\n' % (key, value)
    c = run(body, schema, unknown="props")
    assert messages(c) == [f'line 2: field "{key}": {message}']
    assert c.rejected_lines == [2] and [r["n"] for r in rows_of(c.batch)] == [1, 3]


@pytest.mark.parametrize("value", [OK_DEPTH, OK_NUMBER, '"%s"' % ("[" * 500 + BIG)])
@pytest.mark.parametrize("key", ["d", "s", "unknown_field"])
def test_values_at_the_limits_and_strings_are_taken(value, key):
    schema = schema_of(Column("d", DYNAMIC), Column("s", STRING))
    c = run('{"%s": %s}\n' % (key, value), schema, unknown="props")
    assert c.errors == [] and c.rows == 1


def test_dropped_fields_are_not_checked_but_undecodable_lines_are():
    schema = schema_of(Column("n", INT))
    c = run('{"n": 1, "x": %s}\n{"n": 2, "x": %s}\n' % (DEEPISH, BIG), schema, unknown="drop")
    assert c.errors == [] and c.rows == 2
    c = run('{"n": 1, "x": %s}\n' % DEEP, schema, unknown="drop")
    assert messages(c) == ['line 1: field "x": JSON nested deeper than 64 levels']


@pytest.mark.parametrize("col,message", [
    (Column("v", INT), "int expects an integer in [-2147483648, 2147483647], got 9999999999"),
    (Column("v", LONG), "long expects an integer in [-9223372036854775808, "
                        "9223372036854775807], got 9999999999"),
    (Column("v", TIMESTAMP), "timestamp expects an RFC 3339 string or integer epoch "
                             "nanoseconds, got 9999999999"),
    (Column("v", REAL), "real expects a finite number, got 9999999999"),
    (Column("v", vector(2)), "vector(2) expects 2 numbers, got 9999999999"),
])
def test_typed_columns_keep_their_precise_errors_for_huge_numbers(col, message):
    value = BIG if col.type.kind != "vector" else "[1, %s]" % BIG
    c = run('{"v": %s}\n' % value, schema_of(col))
    assert len(c.errors) == 1 and c.errors[0].field == "v"
    assert c.errors[0].message.startswith(f'line 1: field "v": {message}')
    assert "..." in c.errors[0].message  # the value is cut, not echoed whole


def test_out_of_range_ints_keep_the_existing_error():
    c = run('{"v": 99999999999999999999}\n', schema_of(Column("v", LONG)))
    assert messages(c) == ['line 1: field "v": long expects an integer in '
                           '[-9223372036854775808, 9223372036854775807], got '
                           '99999999999999999999']
    assert run('{"v": -9223372036854775808}\n', schema_of(Column("v", LONG))).rows == 1


# -- the error cap ----------------------------------------------------------------------------

def test_errors_are_capped_but_every_rejected_line_is_counted():
    kinds = ['{"n": "x"}', '{"n": 1', "not json", '{"n": %s}' % DEEP, '[1]', '{"n": 1, "m": 2}']
    lines = [kinds[i % len(kinds)] for i in range(6000)]
    lines[4321] = '{"n": 7}'
    body = ("\n".join(lines) + "\n").encode()
    schema = schema_of(Column("n", INT, nullable=False))
    c = run(body, schema, unknown="reject", max_errors=100)
    assert len(c.errors) == 100 and c.errors[0].line == 1
    assert c.rejected_count == 5999 and 4322 not in c.rejected_lines
    assert [r["n"] for r in rows_of(c.batch)] == [7]


def test_the_cap_builds_no_messages_past_it(monkeypatch):
    """Past the cap a line the fast path knows to be bad costs no error message at all."""
    built = []
    real = _values.field_error

    def counting(line, key, message):
        built.append(line)
        return real(line, key, message)

    monkeypatch.setattr(_values, "field_error", counting)
    body = b'{"n": "x"}\n' * 20_000
    c = coerce_ndjson(body, schema_of(Column("n", INT)), unknown="drop", ingest_time_ns=T0,
                      max_errors=100)
    assert c.rejected_count == 20_000 and len(c.errors) == 100
    assert len(built) == 100


def test_payload_error_says_how_many_lines_were_rejected():
    c = run('{"n": "x"}\n' * 1500, schema_of(Column("n", INT)), max_errors=100)
    e = PayloadError(c.errors, total_errors=c.rejected_count)
    assert e.truncated and e.total_errors == 1500
    assert str(e) == ('line 1: field "n": int expects an integer in [-2147483648, 2147483647],'
                      ' got string "x" (1,500 lines rejected; first 100 errors shown)')
    few = PayloadError(c.errors[:2], total_errors=2)
    assert not few.truncated and str(few).endswith("(and 1 more)")
    assert json.dumps([x.to_json() for x in few.errors])
