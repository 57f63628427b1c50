"""Every row of the coercion table (docs/ingest.md), and each error case, through real HTTP.

Values are posted as NDJSON to a live server and read back from the committed extents, so
what is checked is what a user would query. Errors are checked for their exact message.
"""

from __future__ import annotations

import json

import pytest

from shoal.query.scan_read import read_table
from tests.server.conftest import create

COLUMNS = [
    {"name": "b", "type": "bool"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "r", "type": "real"}, {"name": "s", "type": "string"},
    {"name": "ts", "type": "timestamp"}, {"name": "v", "type": "vector(3)"},
    {"name": "d", "type": "dynamic"},
]

# (field, JSON text of the value, expected stored Python value)
ACCEPTED = [
    ("b", "null", None), ("i", "null", None), ("v", "null", None), ("d", "null", None),
    ("b", "true", True), ("b", "false", False),
    ("i", "2147483647", 2147483647), ("i", "-2147483648", -2147483648),
    ("l", "9007199254740993", 9007199254740993),
    ("r", "1.5", 1.5), ("r", "-2", -2.0), ("r", "1e300", 1e300),
    ("s", '"hello"', "hello"), ("s", '"ünïcode ✓"', "ünïcode ✓"),
    # a scalar into a string column is its JSON text; an object/array compact JSON
    ("s", "5", "5"), ("s", "true", "true"), ("s", "1.5", "1.5"),
    ("s", '{"a": [1, 2]}', '{"a":[1,2]}'), ("s", "[1, 2]", "[1,2]"),
    ("ts", '"2024-03-01T12:00:00Z"', 1709294400 * 10**9),
    ("ts", '"2024-03-01T12:00:00.123456789Z"', 1709294400 * 10**9 + 123456789),
    ("ts", '"2024-03-01T14:00:00+02:00"', 1709294400 * 10**9),
    ("ts", "1709294400000000001", 1709294400 * 10**9 + 1),  # epoch nanoseconds
    ("v", "[1, 2.5, -3]", [1.0, 2.5, -3.0]),
    ("d", '{"http": {"method": "GET"}, "n": 1}', b'{"http":{"method":"GET"},"n":1}'),
    ("d", "[1, \"a\"]", b'[1,"a"]'), ("d", "7", b"7"), ("d", '"x"', b'"x"'),
]


def stored(live, table: str, field: str) -> list:
    data, _ = read_table(live.db.catalog, live.db.store, live.db.formats, table)
    col = data.column(field)
    if field == "ts":
        col = col.cast("int64")
    return col.to_pylist()


@pytest.mark.parametrize("field,text,expected", ACCEPTED,
                         ids=[f"{f}={t}" for f, t, _ in ACCEPTED])
def test_accepted_values(open_server, http, table_name, field, text, expected):
    create(http, table_name, COLUMNS)
    r = http.post(f"/v1/ingest/{table_name}", content=f'{{"{field}": {text}}}\n'.encode())
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == 1
    assert stored(open_server, table_name, field) == [expected]


def test_absent_column_is_null_and_timestamp_defaults_to_ingest_time(open_server, http,
                                                                      table_name):
    create(http, table_name, COLUMNS)
    r = http.post(f"/v1/ingest/{table_name}", content=b'{"s": "only"}\n')
    assert r.status_code == 200
    data, _ = read_table(open_server.db.catalog, open_server.db.store, open_server.db.formats,
                         table_name)
    row = data.drop_columns(["_timestamp"]).to_pylist()[0]
    assert row == {"props": None, "b": None, "i": None, "l": None, "r": None, "s": "only",
                   "ts": None, "v": None, "d": None}
    ts = data.column("_timestamp").cast("int64")[0].as_py()
    import time
    assert abs(ts - time.time_ns()) < 120 * 10**9


# (line text, exact error message)
REJECTED = [
    ('{"i": 3000000000}',
     'line 1: field "i": int expects an integer in [-2147483648, 2147483647], got 3000000000'),
    ('{"i": 1.5}', 'line 1: field "i": int expects an integer in [-2147483648, 2147483647], '
                   'got 1.5'),
    ('{"b": "yes"}', 'line 1: field "b": bool expects true or false, got string "yes"'),
    ('{"r": NaN}', None), ('{"r": Infinity}', None),
    ('{"ts": "yesterday"}', 'line 1: field "ts": timestamp expects an RFC 3339 string or '
                            'integer epoch nanoseconds, got string "yesterday"'),
    ('{"v": [1, 2, 3, 4]}', 'line 1: field "v": vector(3) expects 3 numbers, got 4'),
    ('{"v": [1, 2]}', 'line 1: field "v": vector(3) expects 3 numbers, got 2'),
    ('[1, 2]', "line 1: expected a JSON object, got array"),
    ('{"b": tru', None),
]


@pytest.mark.parametrize("line,message", REJECTED, ids=[x[0] for x in REJECTED])
def test_rejected_values(open_server, http, table_name, line, message):
    create(http, table_name, COLUMNS)
    r = http.post(f"/v1/ingest/{table_name}", content=b'{"s": "ok"}\n' + line.encode() + b"\n")
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "bad_payload"
    detail = err["details"][0]
    assert detail["line"] == 2
    if message is not None:
        assert detail["message"] == message.replace("line 1:", "line 2:")
    else:
        assert detail["message"].startswith("line 2: ")
    # Atomic: the good first line was not written either.
    assert stored(open_server, table_name, "s") == []


def test_vector_error_example_from_the_spec(open_server, http, table_name):
    create(http, table_name, [{"name": "embedding", "type": "vector(3)"}])
    lines = b"".join(b'{"embedding": [1, 2, 3]}\n' for _ in range(6))
    r = http.post(f"/v1/ingest/{table_name}", content=lines + b'{"embedding": [1,2,3,4]}\n')
    assert r.json()["error"]["details"][0]["message"] == \
        'line 7: field "embedding": vector(3) expects 3 numbers, got 4'


def test_every_error_listed(open_server, http, table_name):
    create(http, table_name, COLUMNS)
    body = "\n".join(json.dumps({"i": "x"}) if n % 2 else json.dumps({"i": n})
                     for n in range(10)).encode() + b"\n"
    r = http.post(f"/v1/ingest/{table_name}", content=body)
    assert [d["line"] for d in r.json()["error"]["details"]] == [2, 4, 6, 8, 10]
    assert all(d["field"] == "i" for d in r.json()["error"]["details"])
