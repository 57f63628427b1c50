"""Ingest conventions through real HTTP: zoneless timestamp text, `timestamp_unit` and its
warning, `props` off, each set by SQL DDL (admin scope) and seen in what a user queries."""

from __future__ import annotations

import pytest

from shoal.query.scan_read import read_table
from tests.server.conftest import ADMIN, INGEST, QUERY

AT = 1_795_929_000  # 2026-11-29T05:10:00Z in epoch seconds


def sql(c, statement: str):
    return c.post("/v1/query", json={"sql": statement})


def ok_sql(c, statement: str) -> dict:
    r = sql(c, statement)
    assert r.status_code == 200, r.text
    return r.json()


def timestamps(live, table: str, column: str = "_timestamp") -> list[int]:
    data, _ = read_table(live.db.catalog, live.db.store, live.db.formats, table)
    return data.sort_by("msg").column(column).cast("int64").to_pylist()


def test_timestamp_text_with_a_space_and_no_zone_is_utc(open_server, http, table_name):
    ok_sql(http, f"CREATE TABLE {table_name} (msg string, at timestamp)")
    r = http.post(f"/v1/ingest/{table_name}",
                  content=b'{"msg": "a", "_timestamp": "2026-11-29 05:10:00"}\n'
                          b'{"msg": "b", "_timestamp": "2026-11-29 05:10:00.25",'
                          b' "at": "2026-11-29T05:10:00"}\n')
    assert r.status_code == 200, r.text
    assert r.json()["warnings"] == []
    assert timestamps(open_server, table_name) == [AT * 10**9, AT * 10**9 + 250_000_000]
    rows = ok_sql(http, f"SELECT msg FROM {table_name} "
                        "WHERE _timestamp = TIMESTAMP '2026-11-29 05:10:00'")["rows"]
    assert rows == [["a"]]


def test_epoch_seconds_warn_under_ns_and_land_right_under_s(open_server, http, table_name):
    ok_sql(http, f"CREATE TABLE {table_name} (msg string)")
    body = b'{"msg": "a", "_timestamp": 1795929000}\n'
    r = http.post(f"/v1/ingest/{table_name}", content=body,
                  headers={"X-Idempotency-Key": f"{table_name}-1"})
    assert r.status_code == 200, r.text
    [warning] = r.json()["warnings"]
    assert warning["column"] == "_timestamp" and warning["line"] == 1
    assert "1795929000 read as nanoseconds is 1970-01-01T00:00:01.795929000Z" in \
        warning["message"]
    assert "timestamp_unit='s'" in warning["message"]
    assert timestamps(open_server, table_name) == [AT]      # stored as sent, and said so
    replay = http.post(f"/v1/ingest/{table_name}", content=body,
                       headers={"X-Idempotency-Key": f"{table_name}-1"})
    assert replay.json()["replayed"] is True and replay.json()["warnings"] == [warning]

    ok_sql(http, f"ALTER TABLE {table_name} SET TBLPROPERTIES ('timestamp_unit' = 's')")
    assert http.get(f"/v1/tables/{table_name}").json()["properties"]["timestamp_unit"] == "s"
    r = http.post(f"/v1/ingest/{table_name}",
                  content=b'{"msg": "b", "_timestamp": 1795929000}\n'
                          b'{"msg": "c", "_timestamp": 1795929000.5}\n'
                          b'{"msg": "d", "_timestamp": "2026-11-29 05:10:00"}\n')
    assert r.status_code == 200, r.text
    assert r.json()["warnings"] == []
    assert timestamps(open_server, table_name) == [AT, AT * 10**9, AT * 10**9 + 500_000_000,
                                                   AT * 10**9]
    r = http.post(f"/v1/ingest/{table_name}", content=b'{"_timestamp": 99999999999}\n')
    assert r.status_code == 400
    assert r.json()["error"]["details"][0]["message"] == (
        'line 1: field "_timestamp": timestamp expects an RFC 3339 string or epoch seconds '
        "(timestamp_unit='s'), got 99999999999 (out of range)")


def test_timestamp_unit_is_checked_at_create_and_alter(http, table_name):
    r = sql(http, f"CREATE TABLE {table_name} (n int) WITH (timestamp_unit = 'sec')")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_property"
    assert "timestamp_unit='sec'" in r.json()["error"]["message"]
    assert http.get(f"/v1/tables/{table_name}").status_code == 404
    ok_sql(http, f"CREATE TABLE {table_name} (n int) WITH (timestamp_unit = 'ms')")
    r = sql(http, f"ALTER TABLE {table_name} SET TBLPROPERTIES ('timestamp_unit' = 'h')")
    assert r.status_code == 400 and "'ns', 'us', 'ms', 's'" in r.json()["error"]["message"]
    ok_sql(http, f"ALTER TABLE {table_name} UNSET TBLPROPERTIES ('timestamp_unit')")
    assert "timestamp_unit" not in http.get(f"/v1/tables/{table_name}").json()["properties"]


def test_props_off_refuses_what_would_land_in_props(open_server, http, table_name):
    ok_sql(http, f"CREATE TABLE {table_name} (msg string) WITH (props = 'off')")
    r = http.post(f"/v1/ingest/{table_name}", content=b'{"msg": "a", "Bad-Key": 1}\n')
    assert r.status_code == 400
    [detail] = r.json()["error"]["details"]
    assert detail == {"line": 1, "field": "Bad-Key", "message":
                      "line 1: field \"Bad-Key\": is not a valid column name, and the table "
                      "keeps no props (props='off')"}
    r = http.post(f"/v1/ingest/{table_name}?partial=true",
                  content=b'{"msg": "b", "props": {"k": 1}}\n{"msg": "c", "fresh": 2}\n')
    assert r.status_code == 200, r.text
    doc = r.json()
    assert (doc["rows"], doc["new_columns"], doc["rejected_count"]) == (1, ["fresh"], 1)
    assert "keeps no props" in doc["rejected"][0]["message"]
    rows = ok_sql(http, f"SELECT msg, fresh, props FROM {table_name}")["rows"]
    assert rows == [["c", "2", None]]
    # turned back on, the overflow column keeps such fields again
    ok_sql(http, f"ALTER TABLE {table_name} SET TBLPROPERTIES ('props' = 'on')")
    r = http.post(f"/v1/ingest/{table_name}", content=b'{"msg": "d", "Bad-Key": 1}\n')
    assert r.status_code == 200, r.text
    data, _ = read_table(open_server.db.catalog, open_server.db.store, open_server.db.formats,
                         table_name)
    assert b'{"Bad-Key":1}' in data.column("props").to_pylist()


@pytest.mark.parametrize("stmt", ["ALTER TABLE {t} SET TBLPROPERTIES ('timestamp_unit' = 's')",
                                  "ALTER TABLE {t} SET TBLPROPERTIES ('props' = 'off')",
                                  "CREATE TABLE {t}_x (n int) WITH (timestamp_unit = 's')"])
def test_conventions_need_the_admin_scope(auth_server, table_name, stmt):
    with auth_server.client(ADMIN, timeout=60) as c:
        ok_sql(c, f"CREATE TABLE {table_name} (n int)")
    for token in (QUERY, INGEST):
        with auth_server.client(token, timeout=60) as c:
            assert sql(c, stmt.format(t=table_name)).status_code == 403
    assert auth_server.db.catalog.load_table(table_name).properties == {}
    with auth_server.client(ADMIN, timeout=60) as c:
        ok_sql(c, stmt.format(t=table_name))
