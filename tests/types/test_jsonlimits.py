"""The JSON limits every entry point shares (`shoal.types.jsonlimits`): exact at the edges.

Depth counts arrays and objects inside one value (a body, or one field of a line); text in
strings never counts; a number literal may have 100 characters, not 101.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from shoal.errors import BadJsonError, JsonLimitError
from shoal.types.jsonlimits import (MAX_DEPTH, MAX_NUMBER_CHARS, deep_key, exceeding, loads,
                                    problem_in)


def nested(depth: int, inner: str = "1") -> bytes:
    return ("[" * depth + inner + "]" * depth).encode()


def objects(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


def mixed(depth: int) -> bytes:
    """Arrays and objects in turn: `[{"a":[{"a":...}]}]`."""
    opens = "".join('[' if i % 2 == 0 else '{"a":' for i in range(depth))
    closes = "".join("]" if i % 2 == 0 else "}" for i in reversed(range(depth)))
    return (opens + "1" + closes).encode()


@pytest.mark.parametrize("make", [nested, objects, mixed])
def test_depth_limit_is_exact(make):
    assert problem_in(make(MAX_DEPTH)) is None
    p = problem_in(make(MAX_DEPTH + 1))
    assert p is not None and p.kind == "depth"
    assert p.message() == "JSON nested deeper than 64 levels"
    assert problem_in(make(5000)).kind == "depth"


def test_number_limit_is_exact():
    for literal in ("9" * MAX_NUMBER_CHARS, "-" + "1" * 50 + "." + "2" * 40 + "e+" + "3" * 6):
        assert len(literal) <= MAX_NUMBER_CHARS
        assert problem_in(f'{{"a": {literal}}}'.encode()) is None
    p = problem_in(('{"a": [1, ' + "9" * (MAX_NUMBER_CHARS + 1) + "]}").encode())
    assert p is not None and p.kind == "number" and p.found == MAX_NUMBER_CHARS + 1
    assert "101 characters" in p.message()


def test_strings_never_count():
    deep_text = json.dumps({"a": "[" * 500 + "9" * 500, "b": 'x\\"[[[[' * 100}).encode()
    assert problem_in(deep_text) is None
    escaped = json.dumps({"a": '\\"' + "{" * 200}).encode()  # escaped quotes inside
    assert problem_in(escaped) is None
    # ... but structure after a string with escapes still does
    assert problem_in(b'{"k": "a\\"b", "x": ' + nested(MAX_DEPTH + 1) + b"}").kind == "depth"


def test_many_siblings_are_not_depth():
    wide = json.dumps({"items": [{"a": [i]} for i in range(500)]}).encode()
    assert problem_in(wide) is None


def test_exceeding_flags_exactly_the_values_over_a_limit():
    values = [b'{"a":1}', nested(MAX_DEPTH + 1), json.dumps([{"a": i} for i in range(200)]),
              None, b'{"n":' + b"1" * 150 + b"}", b'"' + b"1" * 150 + b'"', nested(MAX_DEPTH),
              b"1" * 60 + b"," + b"2" * 60]
    arr = pa.array([v.encode() if isinstance(v, str) else v for v in values], pa.binary())
    assert exceeding(arr).tolist() == [False, True, False, False, True, False, False, False]
    # a slice (non-zero offset) of the same array
    assert exceeding(arr.slice(1, 4)).tolist() == [True, False, False, True]
    assert exceeding(pa.array([], pa.binary())).tolist() == []


def test_deep_key_names_the_field():
    line = b'{"ok": [1, 2], "deep": {"x": ' + nested(3000) + b'}, "z": 1}'
    assert deep_key(line) == "deep"
    assert deep_key(b'{"a": ' + nested(MAX_DEPTH) + b"}") is None
    assert deep_key(nested(3000)) is None  # not an object: no key to name


def test_loads_decodes_under_the_limits():
    assert loads(b'{"sql": "SELECT 1", "n": [1, 2]}') == {"sql": "SELECT 1", "n": [1, 2]}
    with pytest.raises(JsonLimitError) as e:
        loads(b'{"sql": "x", "deep": ' + nested(1000) + b"}", what="the body")
    assert e.value.field == "deep" and "nested deeper than 64 levels" in str(e.value)
    with pytest.raises(JsonLimitError) as e:
        loads(b'{"sql": "x", "n": ' + b"9" * 5000 + b"}")
    assert e.value.field == "n" and "5,000 characters" in str(e.value)
    # The body's own object is one of its 64 levels.
    assert loads(b'{"a": ' + nested(MAX_DEPTH - 1) + b"}")
    with pytest.raises(JsonLimitError):
        loads(b'{"a": ' + nested(MAX_DEPTH) + b"}")
    for bad in (b'{"a": tru}', b"", b'{"a": "\xff"}', b"\xff"):
        with pytest.raises(BadJsonError) as e:
            loads(bad)
        assert type(e.value) is BadJsonError and "not valid JSON" in str(e.value)
