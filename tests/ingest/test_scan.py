"""The C line scanner (`shoal.ingest._scan`) against the msgspec pass it stands in for.

`_lines.raw_pass` uses the scanner when it is sure of every line and msgspec otherwise; both
must give the same bad lines, slow lines, discovered keys (in order) and raw values per kept
key. Bodies are generated (valid objects, tricky JSON, and valid lines broken at a random
byte) and run through both passes directly; the coercion tests then cover the scanner
through `coerce_ndjson` (it is the default path).
"""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.ingest import _lines
from tests.support.collisions import colliding
from shoal.ingest._lines import (MAX_UNKNOWN_FIELDS, OBJECT, FieldSet, LineIndex, RawRows,
                                 msgspec_pass)
from shoal.ingest.chunks import count_lines
from shoal.ingest.evolve import scan_unknown_fields
from shoal.types import LONG, STRING
from shoal.types.schema import Column, Schema

KNOWN = ["a", "b", "msg", "attrs"]
WANTED = ["attrs", "msg"]

# Lines the scanner must judge exactly as msgspec does (or leave to msgspec).
TRICKY = [
    '{"a":1}', '{}', ' { } ', '{"a":1}\r', '{"a" : 1 , "b":[1, 2 ,{"c":null}] }',
    '{"a":-0}', '{"a":01}', '{"a":1.}', '{"a":.5}', '{"a":1e400}', '{"a":-1.5E-7}',
    '{"a":1e}', '{"a":1e+}', '{"a":-}', '{"a":+1}', '{"a":123456789012345678901234567890}',
    '{"a":tru}', '{"a":true}', '{"a":nul}', '{"a":falsey}', '{"a":[1,]}', '{"a":[,1]}',
    '{"a":{"x":1,}}', '{"a":1,}', '{,"a":1}', '{"a" 1}', '{"a":1 "b":2}', '{"a":1}{}',
    '{"a":1}x', '{"a":"\\ud83d\\ude00"}', '{"a":"\\ud800"}', '{"a":"\\udc00"}',
    '{"a":"\\ud800\\u0041"}', '{"a":"\\u12G4"}', '{"a":"\\x"}', '{"a":"tab\there"}',
    '{"a":"ok \\" \\\\ \\/ \\b \\f \\n \\r \\t"}', '{"a":"é ü 😀"}', '{"a":"\u0001"}',
    '{"m\\u0073g":"escaped key"}', '{"z\\"q":1}', '{"a":1,"a":2}', '{"attrs":1,"attrs":{}}',
    '{"msg":"x","new":1,"other":[1]}', '{"new":2}', '{"":1}', '{"a":' + "[" * 200 + "]" * 200
    + '}', '{"a":' + "[" * 50 + "]" * 50 + '}', '{"a":1} ', '{"a":"unterminated}',
    '{"a":1\t}', '{"a"\t:\t1}', '{"attrs":{"k":"v","n":[1,2.5,true,null]}}',
]


def scanner_pass(body: bytes, *, discover: bool, keep: bool = True,
                 wanted: list[str] | None = None) -> tuple[RawRows | None, RawRows]:
    """(scanner result or None where it defers to msgspec, msgspec result) of one body."""
    index = LineIndex.build(body)
    lines = index.lines_of(OBJECT)
    wanted = WANTED if wanted is None else wanted

    def fields() -> FieldSet:
        return (FieldSet(KNOWN, forbid_unknown=True) if discover
                else FieldSet(wanted, forbid_unknown=False))

    fast = _lines._scan_pass(index, lines, fields(), known=KNOWN, wanted=wanted, keep=keep)
    ref = msgspec_pass(index, lines, fields(), known=KNOWN, wanted=wanted, keep=keep)
    return fast, ref


def assert_same_pass(fast: RawRows, ref: RawRows) -> None:
    if ref.keep:  # the pre-scan (keep=False) wants keys only: msgspec's bad/slow are partial
        assert fast.bad == ref.bad
        assert fast.slow == ref.slow
    assert fast.discovered == ref.discovered
    kept = sorted(k for k in [*WANTED, *ref.discovered] if ref.keeps(k))
    assert sorted(k for k in [*WANTED, *fast.discovered] if fast.keeps(k)) == kept
    for key in kept:
        assert fast.raw(key).to_pylist() == ref.raw(key).to_pylist(), key
        assert (fast.present(key) == ref.present(key)).all(), key


def test_the_scanner_is_built() -> None:
    """setup builds it; without it coercion silently takes the slower msgspec pass."""
    if os.environ.get("CI") == "true" or _lines._scan is not None:
        assert _lines._scan is not None


needs_scanner = pytest.mark.skipif(_lines._scan is None, reason="the C scanner is not built")


@needs_scanner
@pytest.mark.parametrize("discover", [True, False])
def test_tricky_lines_one_by_one(discover: bool) -> None:
    decided = 0
    for line in TRICKY:
        body = line.encode() + b"\n"
        fast, ref = scanner_pass(body, discover=discover)
        if fast is not None:
            decided += 1
            assert_same_pass(fast, ref)
    # It defers only on what it is unsure of (escaped keys, deep nesting): not on most lines.
    assert decided >= len(TRICKY) - 4


@needs_scanner
def test_a_body_of_every_tricky_line() -> None:
    body = "\n".join(line for line in TRICKY if "z\\\"q" not in line
                     and "[" * 200 not in line).encode() + b"\n\n"
    for discover in (True, False):
        fast, ref = scanner_pass(body, discover=discover)
        assert fast is not None
        assert_same_pass(fast, ref)
        assert fast.bad  # the broken ones are found bad, not slow
        if discover:
            assert fast.discovered == ["new", "other", ""]


@needs_scanner
def test_unknown_keys_past_the_cap_make_their_lines_slow() -> None:
    lines = [json.dumps({"a": i, f"k{i}": i, f"j{i}": [i]}) for i in range(MAX_UNKNOWN_FIELDS)]
    lines.append(json.dumps({"k1": 5, "msg": "old keys only"}))
    body = ("\n".join(lines) + "\n").encode()
    fast, ref = scanner_pass(body, discover=True)
    assert fast is not None
    assert_same_pass(fast, ref)
    assert len(fast.discovered) == 2 * MAX_UNKNOWN_FIELDS
    assert fast.slow and len(fast.slow) < len(lines)


@needs_scanner
def test_the_evolve_pre_scan_finds_the_same_keys() -> None:
    body = b'{"a":1,"x":2}\n{"bad":\n{"y":1,"x":3,"a":2}\n' + b'{"z%d":1}\n' * 3 % (1, 2, 3)
    fast, ref = scanner_pass(body, discover=True, keep=False)
    assert fast is not None and fast.discovered == ref.discovered == ["x", "y", "z1", "z2", "z3"]
    schema = Schema.create([Column("a", LONG), Column("b", STRING)])
    assert scan_unknown_fields(body, schema) == ["x", "y", "z1", "z2", "z3"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=3),
    max_leaves=8)
keys = st.sampled_from(KNOWN + ["new", "other", "é", "", "x y"]) | st.text(max_size=3)


@st.composite
def ndjson_line(draw: Any) -> bytes:
    obj = draw(st.dictionaries(keys, json_values, max_size=5))
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
    raw = text.encode()
    if draw(st.integers(0, 5)) == 0 and raw:  # break it: one byte replaced, added or cut
        at = draw(st.integers(0, len(raw) - 1))
        byte = draw(st.sampled_from(b'{}[]",:\\ 0a-e.\x01\rnt'))
        how = draw(st.integers(0, 2))
        raw = (raw[:at] + bytes([byte]) + raw[at + 1:] if how == 0
               else raw[:at] + bytes([byte]) + raw[at:] if how == 1 else raw[:at])
    return raw


@needs_scanner
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ndjson_line() | st.sampled_from([t.encode() for t in TRICKY]) | st.just(b""),
                min_size=1, max_size=12),
       st.booleans(), st.booleans())
def test_scanner_equals_msgspec(lines: list[bytes], discover: bool, keep: bool) -> None:
    body = b"\n".join(lines) + b"\n"
    fast, ref = scanner_pass(body, discover=discover, keep=keep)
    if fast is None:  # deferred: the pass raw_pass returns is msgspec's own
        return
    assert_same_pass(fast, ref)


@needs_scanner
def test_raw_pass_falls_back_to_msgspec_when_unsure(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key that unescapes to a quote cannot be a msgspec field name: msgspec decides."""
    body = b'{"msg":"a"}\n{"m\\u0073g":"b","new":1,"z\\"q":2}\n'
    index = LineIndex.build(body)
    rows = _lines.raw_pass(index, index.lines_of(OBJECT), FieldSet(KNOWN, forbid_unknown=True),
                           known=KNOWN, wanted=WANTED)
    assert rows.raw("msg").to_pylist() == [b'"a"', None]
    assert rows.slow == {1}
    assert isinstance(rows.kept["msg"][0], msgspec.Raw)  # msgspec did this pass


@needs_scanner
@pytest.mark.parametrize("discover", [True, False])
def test_escaped_keys_are_matched_by_their_text(discover: bool) -> None:
    """Keys written with escapes (Python's json.dumps escapes every non-ASCII key by
    default) are matched, discovered and kept by the scanner as msgspec does it, without
    handing it the body."""
    lines = [json.dumps({"msg": f"m{i}", "größe": i, "attrs": {"ü": i}, "a": i})
             for i in range(50)]
    lines += ['{"m\\u0073g":"escaped","\\u0061ttrs":[1],"msg":"last wins"}',
              '{"\\ud83d\\ude00":1,"tab\\u00e9":2}']
    body = ("\n".join(lines) + "\n").encode()
    assert b"\\u00f6" in body
    fast, ref = scanner_pass(body, discover=discover)
    assert fast is not None
    assert_same_pass(fast, ref)
    if discover:
        assert fast.discovered == ["größe", "😀", "tabé"]
    assert fast.raw("msg").to_pylist()[-2:] == [b'"last wins"', None]


def test_the_msgspec_pass_alone_still_coerces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the scanner is not built, the msgspec pass gives the same coercion."""
    from shoal.ingest.coerce import coerce_ndjson
    from shoal.types import DYNAMIC

    schema = Schema.create([Column("msg", STRING), Column("attrs", DYNAMIC)])
    body = b'{"msg":"a","attrs":{"k":[1, 2]},"x":1}\n{"msg":1}\n{"attrs":tru}\n'
    with_scanner = coerce_ndjson(body, schema, unknown="props", ingest_time_ns=0)
    monkeypatch.setattr(_lines, "_scan", None)
    without = coerce_ndjson(body, schema, unknown="props", ingest_time_ns=0)
    assert with_scanner.batch.equals(without.batch)
    assert [str(e) for e in with_scanner.errors] == [str(e) for e in without.errors]
    assert with_scanner.unknown_fields == without.unknown_fields == ["x"]
    assert np.array_equal(with_scanner.rejected_lines, without.rejected_lines)


# Structure, blanks, and UTF-8 good and bad (lone lead byte, surrogate, past U+10FFFF, overlong).
line_bytes = st.lists(st.sampled_from([
    b"{", b"}", b" ", b"\t", b"\r", b"\n", b"a", b'"', b"\xc3\xa9", b"\xff", b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80", b"\xe0\x80", b"\xf0\x9f\x98\x80", b"\xc3"]), max_size=30)


@needs_scanner
@settings(max_examples=400, deadline=None)
@given(line_bytes)
def test_the_line_index_equals_numpys(pieces: list[bytes]) -> None:
    body = b"".join(pieces)
    fast, ref = LineIndex.build(body), LineIndex.build_numpy(body)
    assert fast.starts.tolist() == ref.starts.tolist()
    assert fast.ends.tolist() == ref.ends.tolist()
    assert fast.kind.tolist() == ref.kind.tolist()
    assert fast.structural_bad == ref.structural_bad
    assert count_lines(body) == body.count(b"\n")


@needs_scanner
def test_the_line_index_of_a_large_body() -> None:
    body = b"".join(b'{"a":%d}\n' % i if i % 97 else b"  \r\n" if i % 2 else b"[1]\n"
                    for i in range(100_000)) + b'{"last":"\xc3\xa9"}'
    fast, ref = LineIndex.build(body), LineIndex.build_numpy(body)
    assert (fast.starts == ref.starts).all() and (fast.ends == ref.ends).all()
    assert (fast.kind == ref.kind).all() and fast.n_lines == 100_001


@needs_scanner
def test_keys_chosen_to_collide_go_to_msgspec() -> None:
    """A body of unknown keys that collide in the scanner's hash table: past a bounded number
    of probes the scanner gives the body to msgspec (no quadratic time), same answer."""
    keys = colliding(200, 10)
    body = (json.dumps({k: 1 for k in keys}) + "\n" + '{"msg":"x"}\n').encode()
    index = LineIndex.build(body)
    lines = index.lines_of(OBJECT)
    assert _lines._scan_pass(index, lines, FieldSet(KNOWN, forbid_unknown=True), known=KNOWN,
                             wanted=WANTED, keep=True) is None
    rows = _lines.raw_pass(index, lines, FieldSet(KNOWN, forbid_unknown=True), known=KNOWN,
                           wanted=WANTED)
    assert rows.discovered == keys
    assert rows.raw("msg").to_pylist() == [None, b'"x"']


# -- typed columns: the scanner converts them in its pass ---------------------------------

TYPED_CASES = {
    "string": ['"plain"', '""', '"é 😀"', '"ok \\" \\\\ \\/ \\b \\f \\n \\r \\t"',
               '"\\u0041\\u00e9\\u20ac\\ud83d\\ude00"', '"\\u0000 nul"', '"\\ud800\\udc00"',
               '"a\\u000Ab"', "12", "-0", "1.50", "1e400", "1" * 100, "1" * 101, "true", "false",
               "null", "[1, 2]", '{"a": 1}', "[]"],
    "int": ["0", "-0", "7", "-2147483648", "2147483647", "2147483648", "-2147483649", "1.0",
            "1e2", "1" * 21, '"7"', "true", "null", "[1]", "12345678901234567890",
            "-9223372036854775809"],
    "long": ["0", "-9223372036854775808", "9223372036854775807", "9223372036854775808",
             "-9223372036854775809", "99999999999999999999", "-99999999999999999999",
             "1" * 20, "1" * 21, "0.5", "1E3", '"1"', "false", "null"],
    "real": ["0", "-0", "0.1", "1e308", "1.7976931348623157e308", "1.7976931348623159e308",
             "1e400", "-1e400", "4.9e-324", "2.4e-324", "1e-400", "2.2250738585072011e-308",
             "123456789012345678901234567890", "0." + "1" * 60, "0." + "1" * 70, "1E+2",
             "-1.5E-7", '"1.5"', "true", "null", "[1.5]", "9007199254740993"],
    "bool": ["true", "false", "null", "0", "1", '"true"', "[]"],
    "timestamp": ['"2024-01-01T00:00:00Z"', '"2024-02-29T23:59:59.123456789+05:30"',
                  '"1970-01-01t00:00:00z"', '"2023-02-29T00:00:00Z"', '"2024-01-01T00:00:60Z"',
                  '"2024-01-01 00:00:00Z"', '"2024-01-01T00:00:00"',
                  '"2262-04-11T23:47:16.854775807Z"', '"2262-04-11T23:47:16.854775808Z"',
                  '"2024-01-01T00:00:00\\u005a"', '"2026-11-28 10:00:00"',
                  '"2026-11-28 10:00:00.5"', '"2026-11-28 10:00:00.123456789+02:00"',
                  '"2026-11-28 10:00:00z"', '"2026-11-28T10:00:00.25"', '"2026-11-28 10:00"',
                  '"2026-11-28  10:00:00"', '"2026-11-28 10:00:00."', '"2026-11-28 10:00:00 "',
                  '"2026-02-29 10:00:00"', '"2262-04-11 23:47:16.854775807"',
                  '"2262-04-11 23:47:16.854775808"', "0", "-1", "9223372036854775807",
                  "9223372036854775808", "-9223372036854775808", "1" * 21, "1.5", "1e3",
                  "true", "null", "{}"],
    "vector(3)": ["[1, 2, 3]", "[1.5,-0,1e-50]", "[ 0.1 , 0.2 , 0.3 ]", "[3.4028235e38,0,0]",
                  "[3.4028235677973366e38,0,0]", "[3.4028235677973362e38,0,0]", "[1e39,0,0]",
                  "[-1e39,0,0]", "[1e-46,0,0]", "[16777217,0,0]", "[1,2]", "[1,2,3,4]", "[]",
                  '["1",2,3]', "[null,2,3]", "[[1],2,3]", "[1,2,true]", "null", "7", '"[1,2,3]"',
                  "[" + "1" * 70 + ",0,0]"],
}
# Values the scanner leaves to the per-line path although they are accepted there.
LEFT_ALONE = {("string", "[1, 2]"), ("string", '{"a": 1}'), ("string", "[]"),
              ("real", "0." + "1" * 70), ("timestamp", '"2024-01-01T00:00:00\\u005a"'),
              ("vector(3)", "[" + "1" * 70 + ",0,0]")}


def typed_pass(kind: str, values: list[str], unit_ns: int = 1) -> RawRows | None:
    """The scanner's pass over one line per value of column `c` typed `kind`."""
    from shoal.types.columns import parse_type

    body = "".join('{"c":%s}\n' % v for v in values).encode()
    index = LineIndex.build(body)
    return _lines._scan_pass(index, index.lines_of(OBJECT),
                             FieldSet(["c"], forbid_unknown=False), known=["c"], wanted=["c"],
                             keep=True, types={"c": parse_type(kind)}, unit_ns=unit_ns)


def check_typed(kind: str, values: list[str], unit_ns: int = 1,
                left_alone: set[str] | None = None) -> None:
    """Each value as the scanner converts it against `_values.convert`: equal, or flagged
    when convert refuses it, or (`LEFT_ALONE`, `left_alone`) flagged for the per-line path
    to convert."""
    from shoal.ingest._values import ValueProblem, convert
    from shoal.types.columns import parse_type

    ctype = parse_type(kind)
    rows = typed_pass(kind, values, unit_ns)
    assert rows is not None and not rows.bad
    array, flags, present = rows.typed["c"]
    assert array.type == ctype.arrow() and len(array) == len(values)
    assert present.all()
    got = (array.cast("int64") if kind == "timestamp" else array).to_pylist()
    for i, text in enumerate(values):
        raw = text.encode()
        if text == "null":
            assert got[i] is None and not flags[i], text
            continue
        try:
            want = convert(ctype, raw, unit_ns)
        except ValueProblem:
            assert flags[i] and got[i] is None, (kind, text, got[i])  # the per-line path words it
            continue
        if flags[i]:
            assert (kind, text) in LEFT_ALONE or text in (left_alone or set()), (kind, text)
            assert got[i] is None
            continue
        if kind == "real":
            assert repr(got[i]) == repr(want), text         # -0.0 too, bit for bit
        else:
            assert got[i] == want, (kind, text)


@needs_scanner
@pytest.mark.parametrize("kind", sorted(TYPED_CASES))
def test_typed_values_equal_the_reference(kind: str) -> None:
    check_typed(kind, TYPED_CASES[kind])


EPOCHS = ["0", "-0", "1795929000", "-1795929000", "1795929000.5", "1795929000.123456789",
          "1795929000.0000000005", "1795929000.0000000015", "-0.0000000005", "-1.5",
          "9223372036", "9223372037", "-9223372037", "9223372036.854775807",
          "9223372036.854775808", "123456789012345678", "1234567890123456789", "1.5e3", "1E3",
          "0.000000000999999", '"2026-11-29 05:10:00"', '"2026-11-29T05:10:00.5Z"', "true",
          "null", "[1]"]


@needs_scanner
@pytest.mark.parametrize("unit_ns", [1_000, 1_000_000, 1_000_000_000])
def test_scaled_epoch_numbers_equal_the_reference(unit_ns: int) -> None:
    """A table's coarser timestamp_unit: the scanner scales plain numbers exactly as
    `_values.epoch_ns` (the fraction rounded half to even) and leaves exponents to it."""
    check_typed("timestamp", EPOCHS + TYPED_CASES["timestamp"], unit_ns,
                left_alone={"1.5e3", "1E3", "1e3"})


@needs_scanner
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-10**19, 10**19), st.text("0123456789", max_size=24))
                .map(lambda t: f"{t[0]}.{t[1]}" if t[1] else str(t[0])), min_size=1,
                max_size=10),
       st.sampled_from([1_000, 1_000_000, 1_000_000_000]))
def test_property_scaled_epochs_equal_the_reference(values: list[str], unit_ns: int) -> None:
    check_typed("timestamp", values, unit_ns)


@needs_scanner
@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False).map(repr)
                | st.floats(allow_nan=False, allow_infinity=False, width=32).map(str)
                | st.integers(-2**80, 2**80).map(str)
                | st.tuples(st.integers(-10**6, 10**6), st.integers(0, 10**20),
                            st.integers(-340, 340)).map(lambda t: f"{t[0]}.{t[1]}e{t[2]}"),
                min_size=1, max_size=20))
def test_property_reals_are_correctly_rounded(values: list[str]) -> None:
    """strtod in the C locale against Python's float(): the same double, bit for bit."""
    check_typed("real", values)
    check_typed("long", [v for v in values if "." not in v and "e" not in v] or ["0"])


@needs_scanner
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=10), st.booleans())
def test_property_strings_unescape_as_msgspec_does(texts: list[str], ascii_only: bool) -> None:
    check_typed("string", [json.dumps(t, ensure_ascii=ascii_only) for t in texts])



@needs_scanner
@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False).map(repr)
                         | st.integers(-2**130, 2**130).map(str), min_size=2, max_size=4),
                min_size=1, max_size=10))
def test_property_vectors_round_as_numpy(vectors: list[list[str]]) -> None:
    """Components past float32's range flagged, the rest rounded to float32 exactly as
    numpy rounds Python's float(); a wrong count flagged (the column is vector(3))."""
    check_typed("vector(3)", ["[" + ", ".join(v) + "]" for v in vectors])
