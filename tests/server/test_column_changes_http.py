"""Column changes over `POST /v1/query` on a real socket: ADD COLUMN of an existing name with
another type is a 409 that names both types and the statement that widens; RENAME, DROP
and ALTER COLUMN need the admin scope; protected columns are a 400 naming the column."""

from __future__ import annotations

import pytest

from tests.server.conftest import ADMIN, QUERY

pytestmark = pytest.mark.services


def _sql(client, sql: str):
    return client.post("/v1/query", json={"sql": sql})


def test_add_column_of_an_existing_name_is_a_conflict(open_server, table_name):
    with open_server.client(timeout=120) as c:
        assert _sql(c, f"CREATE TABLE {table_name} (status int)").status_code == 200
        r = _sql(c, f"ALTER TABLE {table_name} ADD COLUMN status string")
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["code"] == "column_exists"
        assert "already exists as int, not string" in error["message"]
        assert (f"ALTER TABLE {table_name} ALTER COLUMN status TYPE string"
                in error["message"])
        assert error["details"][0]["field"] == "status"
        doc = c.get(f"/v1/tables/{table_name}").json()
        assert doc["schema_version"] == 1
        assert [(col["name"], col["type"]) for col in doc["columns"]][-1] == ("status", "int")
        r = _sql(c, f"ALTER TABLE {table_name} ALTER COLUMN status TYPE string")
        assert r.status_code == 200 and r.json()["rows"][0][1] == "altered"
        assert c.get(f"/v1/tables/{table_name}").json()["columns"][-1]["type"] == "string"


def test_rename_and_drop_read_old_rows_over_http(open_server, table_name):
    with open_server.client(timeout=120) as c:
        assert _sql(c, f"CREATE TABLE {table_name} (a string, gone int)").status_code == 200
        body = b'{"_timestamp": "2026-03-01T00:00:00Z", "a": "first", "gone": 1}\n'
        assert c.post(f"/v1/ingest/{table_name}", content=body).status_code == 200
        assert _sql(c, f"ALTER TABLE {table_name} RENAME COLUMN a TO b").status_code == 200
        assert _sql(c, f"ALTER TABLE {table_name} DROP COLUMN gone").status_code == 200
        r = c.post("/v1/query", json={"sql": f"SELECT * FROM {table_name}"},
                   params={"engine": "local"})
        assert r.status_code == 200, r.text
        doc = r.json()
        assert [col["name"] for col in doc["columns"]] == ["_timestamp", "props", "b"]
        assert doc["rows"][0][2] == "first"
        r = _sql(c, f"ALTER TABLE {table_name} DROP COLUMN _timestamp")
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "protected_column"
        assert r.json()["error"]["details"][0]["field"] == "_timestamp"


@pytest.mark.parametrize("change", ["RENAME COLUMN n TO m", "DROP COLUMN n",
                                    "ALTER COLUMN n TYPE long"])
def test_column_changes_need_the_admin_scope(auth_server, change):
    name = "scoped_" + change.split()[0].lower()
    with auth_server.client(timeout=120, token=ADMIN) as c:
        assert _sql(c, f"CREATE TABLE IF NOT EXISTS {name} (n int)").status_code == 200
    with auth_server.client(timeout=120, token=QUERY) as c:
        assert _sql(c, f"ALTER TABLE {name} {change}").status_code == 403
        assert c.get(f"/v1/tables/{name}").json()["schema_version"] == 1
    with auth_server.client(timeout=120, token=ADMIN) as c:
        assert _sql(c, f"ALTER TABLE {name} {change}").status_code == 200
