"""Block stats, column stats (distinct/token caps), membership filters and present paths."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.format.membership import BloomFilter
from shoal.format import jsonpaths
from shoal.format.jsonpaths import exact_json_paths, json_paths, json_skeletons, paths_of
from shoal.format.stats import (DISTINCT_SET_CAP, TOKEN_SET_CAP, ExtentStatsBuilder,
                                block_stats, has_whitespace)
from shoal.format.tlm import TlmFormat
from shoal.types import (BOOL, DYNAMIC, INT, LONG, REAL, STRING, TIMESTAMP, Column, Schema,
                         vector)


def _schema(*cols: Column) -> pa.Schema:
    return Schema.create(cols).arrow()


def _batch(schema: pa.Schema, **columns: Any) -> pa.RecordBatch:
    n = len(next(iter(columns.values())))
    data = {f.name: columns.get(f.name, [None] * n) for f in schema}
    return pa.RecordBatch.from_pydict(data, schema=schema)


def _write(store, schema: pa.Schema, batches: list[pa.RecordBatch], block_rows: int = 65536):
    w = TlmFormat().start_extent(store, "t", schema, block_rows=block_rows)
    for b in batches:
        w.append(b)
    return w.finish()


# ---- block stats ---------------------------------------------------------------------------

def test_block_stats_shape() -> None:
    schema = _schema(Column("s", STRING), Column("i", INT), Column("l", LONG),
                     Column("t", TIMESTAMP), Column("r", REAL), Column("b", BOOL),
                     Column("v", vector(2)))
    batch = _batch(schema, _timestamp=[30, 10, None], s=["b", None, "a"], i=[5, -7, None],
                   l=[2**40, None, -1], t=[None, None, None], r=[1.5, 2.0, None],
                   b=[True, None, False], v=[[1.0, 2.0], None, [3.0, 4.0]])
    stat = block_stats(batch)
    assert stat == {"rows": 3, "columns": {
        "_timestamp": {"min": 10, "max": 30, "nulls": 1},
        "s": {"min": "a", "max": "b", "nulls": 1},
        "i": {"min": -7, "max": 5, "nulls": 1},
        "l": {"min": -1, "max": 2**40, "nulls": 1},
        "t": {"min": None, "max": None, "nulls": 3},
    }}   # real, bool, vector and dynamic (props) carry no stats


def test_string_minmax_cap_counts_utf8_bytes() -> None:
    schema = _schema(Column("s", STRING))
    exactly = "x" * 256
    two_byte = "\u00fc" * 129        # 129 characters, 258 UTF-8 bytes
    assert block_stats(_batch(schema, s=[exactly, "a"]))["columns"]["s"] == {
        "min": "a", "max": exactly, "nulls": 0}
    assert block_stats(_batch(schema, s=[exactly + "y", "a", None]))["columns"]["s"] == {
        "min": None, "max": None, "nulls": 1}
    assert block_stats(_batch(schema, s=[two_byte]))["columns"]["s"]["min"] is None


def test_long_string_disables_minmax_only_in_its_block(store) -> None:
    schema = _schema(Column("s", STRING))
    result = _write(store, schema, [_batch(schema, s=["a", "b", "z" * 300, "c"])], block_rows=2)
    stats = TlmFormat().open_extent(store, result.object_path).metadata().block_stats
    assert [s["columns"]["s"]["min"] for s in stats] == ["a", None]


# ---- extent stats --------------------------------------------------------------------------

def test_time_bounds_and_no_column_stats_for_timestamp(store) -> None:
    schema = _schema(Column("s", STRING))
    r = _write(store, schema, [_batch(schema, _timestamp=[5, None, -3, 9], s=["a"] * 4)],
               block_rows=2)
    assert (r.min_ts, r.max_ts) == (-3, 9)
    assert "_timestamp" not in r.column_stats
    r = _write(store, schema, [_batch(schema, _timestamp=[None], s=["a"])])
    assert (r.min_ts, r.max_ts) == (None, None)


def test_column_stats_shape(store) -> None:
    schema = _schema(Column("service", STRING), Column("status", INT), Column("r", REAL))
    r = _write(store, schema, [_batch(schema, service=["auth-svc", "Payments-svc", None],
                                      status=[404, 200, 404], r=[1.0, 2.0, 3.0])])
    assert r.column_stats == {
        "service": {"distinct": ["Payments-svc", "auth-svc"], "tokens": ["auth", "payments",
                                                                        "svc"]},
        "status": {"distinct": [200, 404], "tokens": None},
    }
    assert r.membership_filters == {}
    assert r.present_paths == {"props": []}


@pytest.mark.parametrize("n, kept", [(DISTINCT_SET_CAP, True), (DISTINCT_SET_CAP + 1, False)])
def test_distinct_cap(store, n: int, kept: bool) -> None:
    schema = _schema(Column("s", STRING), Column("i", LONG))
    values = list(range(n))
    # Spread over blocks so the cap is reached by accumulation, not within one block.
    r = _write(store, schema, [_batch(schema, s=[f"v{v}" for v in values] * 2, i=values * 2)],
               block_rows=300)
    for col, expect in (("s", sorted(f"v{v}" for v in values)), ("i", values)):
        assert r.column_stats[col]["distinct"] == (expect if kept else None)
        assert (col in r.membership_filters) is (not kept)
    if not kept:
        bf = BloomFilter.from_bytes(r.membership_filters["i"])
        assert all(bf.might_contain(v) for v in values)
        bf = BloomFilter.from_bytes(r.membership_filters["s"])
        assert all(bf.might_contain(f"v{v}") for v in values)
        assert bf.m < 16 * n             # sized to distinct values, not to rows


def test_distinct_cap_overflowing_in_one_block(store) -> None:
    schema = _schema(Column("s", STRING))
    values = [f"trace-{i}" for i in range(5000)]
    r = _write(store, schema, [_batch(schema, s=values[:10]), _batch(schema, s=values)],
               block_rows=10)
    assert r.column_stats["s"]["distinct"] is None
    bf = BloomFilter.from_bytes(r.membership_filters["s"])
    assert all(bf.might_contain(v) for v in values)
    assert sum(bf.might_contain(f"other-{i}") for i in range(5000)) / 5000 <= 0.02


def test_membership_filters_only_for_identifier_like_strings(store) -> None:
    schema = _schema(Column("trace", STRING), Column("msg", STRING), Column("n", LONG),
                     Column("late", STRING))
    n = 3000
    r = _write(store, schema, [_batch(
        schema, trace=[f"{i:032x}" for i in range(n)],
        msg=[f"user {i} logged in" for i in range(n)], n=list(range(n)),
        # identifier-like for two blocks, then one value with a tab
        late=[f"k{i}" if i != n - 5 else "k\tx" for i in range(n)])], block_rows=1000)
    assert all(r.column_stats[c]["distinct"] is None for c in ("trace", "msg", "n", "late"))
    assert set(r.membership_filters) == {"trace", "n"}          # free text gets none
    bf = BloomFilter.from_bytes(r.membership_filters["trace"])
    assert all(bf.might_contain(f"{i:032x}") for i in range(n))
    # an explicit set of names overrides the rule, in both directions
    w = TlmFormat(membership_filters={"msg", "late"}).start_extent(store, "t", schema)
    w.append(_batch(schema, trace=[f"{i:032x}" for i in range(n)],
                    msg=[f"user {i} logged in" for i in range(n)], n=list(range(n)),
                    late=[f"k {i}" for i in range(n)]))
    forced = w.finish()
    assert set(forced.membership_filters) == {"msg", "late"}
    bf = BloomFilter.from_bytes(forced.membership_filters["msg"])
    assert all(bf.might_contain(f"user {i} logged in") for i in range(n))


def test_has_whitespace() -> None:
    for ws in (" ", "\t", "\n", "\v", "\f", "\r"):
        assert has_whitespace(pa.array(["abc", f"a{ws}b"]))
    assert not has_whitespace(pa.array(["abc", None, "\u00a0x", "a\x00b", "\x1fz"]))
    assert not has_whitespace(pa.array([None, None], pa.string()))
    assert not has_whitespace(pa.array(["a b", "c"]).slice(1))


def test_membership_filters_can_be_disabled(store) -> None:
    schema = _schema(Column("s", STRING))
    w = TlmFormat(membership_filters=False).start_extent(store, "t", schema)
    w.append(_batch(schema, s=[str(i) for i in range(2000)]))
    r = w.finish()
    assert r.column_stats["s"]["distinct"] is None and r.membership_filters == {}


@pytest.mark.parametrize("n, kept", [(TOKEN_SET_CAP, True), (TOKEN_SET_CAP + 1, False)])
def test_token_cap(store, n: int, kept: bool) -> None:
    schema = _schema(Column("msg", STRING))
    words = [f"w{i}" for i in range(n)]
    # 25 tokens per value, so one value holds many tokens and the cap spans blocks.
    msgs = [" ".join(words[i:i + 25]) + " X" for i in range(0, n, 25)]
    r = _write(store, schema, [_batch(schema, msg=msgs)], block_rows=50)
    assert r.column_stats["msg"]["tokens"] == (sorted(words) if kept else None)


@pytest.mark.parametrize("suffix", ["{b}.{i}", "n{b}x{i}"])
def test_free_text_blocks_skip_unique_with_the_same_stats(suffix: str) -> None:
    """Free text (distinct set overflowed, no filter) is tokenized without `unique` once its
    blocks are mostly distinct: the tokens and block stats stay exactly the reference ones,
    whether the token set stays under its cap or overflows in a later block (a new token
    per value: 3,000 per block)."""
    from shoal.format.tokens import tokenize
    rng = np.random.default_rng(3)
    schema = _schema(Column("msg", STRING))
    builder = ExtentStatsBuilder(schema)
    seen: set[str] = set()
    for b in range(6):
        if b == 3:   # a block of few repeated values between mostly distinct ones
            msgs = [None, "Same  OLD\tline", "x" * 300] * 400
        else:
            msgs = [None if i % 97 == 0 else
                    " ".join(f"W{j}" for j in rng.integers(0, 50, 8)) + " "
                    + suffix.format(b=b, i=i) for i in range(3000)]
        batch = _batch(schema, msg=msgs)
        assert builder.add_block(batch) == block_stats(batch)
        seen |= {t for m in msgs if m is not None for t in tokenize(m)}
    got = builder.finish()
    assert got.column_stats["msg"]["distinct"] is None and got.membership_filters == {}
    if suffix.startswith("n"):
        assert len(seen) > TOKEN_SET_CAP and got.column_stats["msg"]["tokens"] is None
    else:
        assert got.column_stats["msg"]["tokens"] == sorted(seen)


def test_tokens_rule_in_column_stats(store) -> None:
    schema = _schema(Column("msg", STRING))
    r = _write(store, schema, [_batch(schema, msg=["Connection-FAILED: timeout42 \u00fc x"])])
    assert r.column_stats["msg"]["tokens"] == ["connection", "failed", "timeout42"]


# ---- present paths -------------------------------------------------------------------------

def test_present_paths(store) -> None:
    schema = _schema(Column("attrs", DYNAMIC))
    docs = [{"http": {"method": "GET", "status": 200}}, {"a": [{"inner": 1}], "b": None},
            {"http": {"route": {"tmpl": "/x"}}}, 5, "s", [1, {"arr": 2}], None, {}]
    raw = [None if d is None else json.dumps(d).encode() for d in docs]
    r = _write(store, schema, [_batch(schema, attrs=raw, props=[b'{"p": {"q": 1}}'] * 8)],
               block_rows=3)
    assert r.present_paths == {
        "attrs": ["a", "b", "http", "http.method", "http.route", "http.route.tmpl",
                  "http.status"],
        "props": ["p", "p.q"],
    }


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53),
                      st.floats(allow_nan=False, allow_infinity=False),
                      st.text(max_size=5))
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "c", "a.b", "", "\u00e9"]), inner, max_size=3)),
    max_leaves=8)
OBJECTS = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), JSON, max_size=4)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(OBJECTS, JSON), max_size=40), st.booleans())
def test_vectorised_paths_agree_with_reference(docs: list[Any], pretty: bool) -> None:
    # Padding with distinct simple objects pushes the set over the small-set threshold, so
    # Arrow's JSON reader (and, on type conflicts, its fallback) is exercised.
    padded = docs + [{"pad": i} for i in range(600)]
    dump = (lambda d: json.dumps(d, indent=1)) if pretty else (lambda d: json.dumps(d))
    values = pa.array([dump(d).encode() for d in padded], pa.binary())
    expected = set().union(*(paths_of(d) for d in padded))
    assert json_paths(values) == expected
    assert json_paths(values.slice(0, len(docs))) == set().union(*(paths_of(d) for d in docs))


def test_paths_with_type_conflicts_fall_back_exactly() -> None:
    docs = [{"code": i} if i % 2 else {"code": {"nested": i}} for i in range(2000)]
    values = pa.array([json.dumps(d).encode() for d in docs] + [b' \n{"lead": {"ws": 1}}'],
                      pa.binary())
    assert json_paths(values) == {"code", "code.nested", "lead", "lead.ws"}


def test_builder_without_indexable_columns() -> None:
    schema = _schema(Column("b", BOOL))
    builder = ExtentStatsBuilder(schema)
    batch = _batch(schema, b=[True, False])
    builder.add_block(batch, block_stats(batch))
    stats = builder.finish()
    assert stats.column_stats == {} and stats.membership_filters == {}
    assert stats.present_paths == {"props": []}


def test_high_cardinality_ints_get_a_filter(store) -> None:
    schema = _schema(Column("d", LONG))
    values = np.random.default_rng(0).integers(0, 10**12, 20_000)
    r = _write(store, schema, [_batch(schema, d=values)], block_rows=4096)
    bf = BloomFilter.from_bytes(r.membership_filters["d"])
    assert all(bf.might_contain(int(v)) for v in values)


def test_unparsable_json_makes_paths_unknown(store) -> None:
    schema = _schema(Column("attrs", DYNAMIC))
    deep = b"[" * 100_000 + b"]" * 100_000                 # too deep for json.loads
    for bad in (b"{not json", deep):
        r = _write(store, schema, [_batch(schema, attrs=[b'{"a": 1}', bad])])
        assert "attrs" not in r.present_paths and r.present_paths["props"] == []
    big = [b'{"k%d": 1}' % i for i in range(1000)] + [b"{oops"]
    assert json_paths(pa.array(big, pa.binary())) is None


@settings(max_examples=30, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "_timestamp": st.one_of(st.none(), st.integers(-2**62, 2**62)),
    "s": st.one_of(st.none(), st.sampled_from(["a", "b", "zz", "\u00fc", "x" * 300]),
                   st.text(max_size=5)),
    "i": st.one_of(st.none(), st.integers(-2**31, 2**31 - 1))}), min_size=1, max_size=60))
def test_builder_block_stats_equal_block_stats(rows: list[dict[str, Any]]) -> None:
    # The writer takes block stats from the builder (min/max from distinct values where it
    # has them); they must be exactly `block_stats()`.
    schema = _schema(Column("s", STRING), Column("i", INT))
    batch = pa.RecordBatch.from_pylist([dict(r, props=None) for r in rows], schema=schema)
    builder = ExtentStatsBuilder(schema)
    for _ in range(2):
        assert builder.add_block(batch) == block_stats(batch)


# ---- key skeletons -------------------------------------------------------------------------

def _skeletons(values: list[bytes]) -> list[bytes] | None:
    out = json_skeletons(pa.array(values, pa.binary()))
    return None if out is None else out.to_pylist()


def test_key_skeletons() -> None:
    assert _skeletons([
        b'{"http": {"method": "GET"}, "user_id": 17}',
        b'{"http":{"method":"POST"},"user_id":99999}',
        b'{ "a" :\n  [ {"b": "}{[]:,"} , 1 ] }',
        b'"just a string"', b'[1, {"x": 2}]', b'17', b'{}',
        b'{"a\\"b": {"c\\\\": {"d": "e\\""}}}',          # escaped quote / backslash in keys
    ]) == [b'{"http"{"method"}"user_id"}', b'{"http"{"method"}"user_id"}',
           b'{"a"[{"b"}]}', b'', b'[{"x"}]', b'', b'{}',
           b'{"a\\"b"{"c\\\\"{"d"}}}']
    assert _skeletons([b'{"a": 1}', b'{"a": 1']) is not None      # balanced quotes: not checked
    assert _skeletons([b'{"a": 1}', b'{"a: 1}']) is None           # odd quotes
    assert _skeletons([b'{"a": 1}', b'']) is None                  # empty
    assert _skeletons([b'"k"', b':1']) is None                     # starts with a colon
    assert _skeletons([]) == []


def test_whitespace_before_colons_of_any_length() -> None:
    for gap in (b"", b" ", b"\n\t ", b" " * 70, b" " * 200):
        doc = b'{"outer"' + gap + b': {"inner"' + gap + b':' + gap + b'1}, "v": "x"' + gap + b'}'
        assert json.loads(doc)
        assert _skeletons([doc, b'{"z": 1}']) == [b'{"outer"{"inner"}"v"}', b'{"z"}']
        assert json_paths(pa.array([doc], pa.binary())) == {"outer", "outer.inner", "v"}


def test_skeleton_grouping_parses_one_value_per_skeleton(monkeypatch) -> None:
    parsed: list[int] = []
    real = jsonpaths.exact_json_paths

    def spy(values: pa.Array) -> set[str] | None:
        parsed.append(len(values))
        return real(values)

    monkeypatch.setattr(jsonpaths, "exact_json_paths", spy)
    values = pa.array([json.dumps({"u": i, "http": {"m": "GET" if i % 2 else "PUT"}}).encode()
                       for i in range(5000)] + [b'{"other": {"k": [1]}}'], pa.binary())
    assert json_paths(values) == {"u", "http", "http.m", "other", "other.k"}
    assert parsed == [2]


KEY_CHARS = st.sampled_from(['a', 'b', '"', '\\', '{', '}', '[', ']', ':', ',', ' ', '\n',
                             '\u00e9', '.', '\t'])
ODD_KEYS = st.text(alphabet=KEY_CHARS, max_size=4)
ODD_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(KEY_CHARS, max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(ODD_KEYS, inner, max_size=3)), max_leaves=10)
DUMPS = st.sampled_from([
    lambda d: json.dumps(d), lambda d: json.dumps(d, separators=(",", ":")),
    lambda d: json.dumps(d, indent=2), lambda d: json.dumps(d, separators=(" , ", " :  ")),
    lambda d: json.dumps(d, ensure_ascii=False), lambda d: "\n " + json.dumps(d) + " \t"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.dictionaries(ODD_KEYS, ODD_JSON, max_size=4), ODD_JSON),
                min_size=1, max_size=30), DUMPS, st.integers(1, 300))
def test_skeleton_paths_agree_with_parsing_every_value(docs: list[Any], dump: Any,
                                                       chunk: int) -> None:
    # Keys full of quotes, backslashes, brackets, colons and whitespace; every separator
    # style; lexing steps small enough to cut between values.
    raw = pa.array([dump(d).encode() for d in docs], pa.binary())
    expected = set().union(*(paths_of(d) for d in docs))
    old = jsonpaths._LEX_CHUNK
    jsonpaths._LEX_CHUNK = chunk
    try:
        assert json_paths(raw) == expected
        skeletons = json_skeletons(raw).to_pylist()
    finally:
        jsonpaths._LEX_CHUNK = old
    assert exact_json_paths(raw) == expected
    # equal skeletons, equal paths
    by_skeleton: dict[bytes, set[str]] = {}
    for sk, d in zip(skeletons, docs):
        assert by_skeleton.setdefault(sk, paths_of(d)) == paths_of(d)
