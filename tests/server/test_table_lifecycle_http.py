"""DROP / UNDROP / RENAME / SET|UNSET|SHOW TBLPROPERTIES over `POST /v1/query`, and the
Kusto management commands on a table (`.drop table`, `.rename table`, `.alter table T policy
retention`, `.show table T details`) over `POST /v1/rest/mgmt`, both raw and through the
real `azure-kusto-data` client: their effect, their idempotent forms, their errors, and the
admin scope the changing ones need (a query-scope token gets 403 and changes nothing).
A real uvicorn server on a real socket, the embedded engine (no Spark)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from azure.kusto.data import KustoClient, KustoConnectionStringBuilder
from azure.kusto.data.exceptions import KustoServiceError

from tests.server.conftest import ADMIN, INGEST, QUERY, Live, _live


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Live]:
    yield from _live(tmp_path_factory, "lifecycle", query_engine="local",
                     tokens=f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query")


def sql(c: httpx.Client, statement: str) -> httpx.Response:
    return c.post("/v1/query", json={"sql": statement})


def ok_rows(c: httpx.Client, statement: str) -> list[list]:
    r = sql(c, statement)
    assert r.status_code == 200, (statement, r.text)
    return r.json()["rows"]


def error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


def mgmt(c: httpx.Client, csl: str) -> httpx.Response:
    return c.post("/v1/rest/mgmt", json={"db": "shoal", "csl": csl})


def v1_rows(r: httpx.Response) -> list[dict]:
    assert r.status_code == 200, r.text
    table = r.json()["Tables"][0]
    names = [c["ColumnName"] for c in table["Columns"]]
    return [dict(zip(names, row, strict=True)) for row in table["Rows"]]


def test_drop_undrop_rename_over_http(server, table_name):
    t = table_name
    with server.client(ADMIN) as admin, server.client(INGEST) as ingest:
        ok_rows(admin, f"CREATE TABLE {t} (msg string)")
        assert ingest.post(f"/v1/ingest/{t}", content=b'{"msg": "a"}\n').status_code == 200
        assert ok_rows(admin, f"DROP TABLE {t}") == [[t, "dropped"]]
        assert error(ingest.post(f"/v1/ingest/{t}", content=b'{"msg": "b"}\n'),
                     404)["code"] == "table_not_found"
        assert admin.get(f"/v1/tables/{t}").status_code == 404
        assert t not in [x["name"] for x in admin.get("/v1/tables").json()["tables"]]
        assert error(sql(admin, f"DROP TABLE {t}"), 404)["code"] == "table_not_found"
        assert ok_rows(admin, f"DROP TABLE IF EXISTS {t}") == [[t, "absent"]]

        ok_rows(admin, f"UNDROP TABLE {t}")
        assert ok_rows(admin, f"SELECT msg FROM {t}") == [["a"]]
        err = error(sql(admin, f"UNDROP TABLE {t}"), 404)
        assert err["code"] == "dropped_table_not_found" and t in err["message"]

        ok_rows(admin, f"CREATE TABLE {t}_b (n long)")
        assert error(sql(admin, f"ALTER TABLE {t} RENAME TO {t}_b"), 409)["code"] == \
            "table_exists"
        ok_rows(admin, f"ALTER TABLE {t} RENAME TO {t}_c")
        assert ingest.post(f"/v1/ingest/{t}_c", content=b'{"msg": "c"}\n').status_code == 200
        assert sorted(ok_rows(admin, f"SELECT msg FROM {t}_c")) == [["a"], ["c"]]

        ok_rows(admin, f"DROP TABLE {t}_b")
        ok_rows(admin, f"ALTER TABLE {t}_c RENAME TO {t}_b")
        err = error(sql(admin, f"UNDROP TABLE {t}_b"), 409)
        assert err["code"] == "table_name_reused"


def test_properties_over_http(server, table_name):
    t = table_name
    with server.client(ADMIN) as admin, server.client(QUERY) as query:
        ok_rows(admin, f"CREATE TABLE {t} (n long)")
        ok_rows(admin, f"ALTER TABLE {t} SET TBLPROPERTIES ('mode' = 'drop', "
                       "snapshot_retention = '2d', 'owner' = 'ops')")
        r = sql(query, f"SHOW TBLPROPERTIES {t}")     # reading needs only the query scope
        assert r.status_code == 200, r.text
        assert [c["name"] for c in r.json()["columns"]] == ["key", "value"]
        assert r.json()["rows"] == [["mode", "drop"], ["owner", "ops"],
                                    ["snapshot_retention", "2d"]]
        err = error(sql(admin, f"ALTER TABLE {t} SET TBLPROPERTIES ('mode' = 'lax')"), 400)
        assert "unknown schema mode 'lax'" in err["message"]
        err = error(sql(admin, f"ALTER TABLE {t} SET TBLPROPERTIES ("
                               "filedrop_path = '/etc')"), 403)
        assert err["code"] == "location_not_allowed"
        ok_rows(admin, f"ALTER TABLE {t} UNSET TBLPROPERTIES ('mode', 'owner')")
        assert ok_rows(query, f"SHOW TBLPROPERTIES {t}") == [["mode", "evolve"],
                                                             ["snapshot_retention", "2d"]]


def test_a_query_token_cannot_change_tables(server, table_name):
    t = table_name
    with server.client(ADMIN) as admin:
        ok_rows(admin, f"CREATE TABLE {t} (n long)")
        ok_rows(admin, f"CREATE TABLE {t}_gone (n long)")
        ok_rows(admin, f"DROP TABLE {t}_gone")
    with server.client(QUERY) as query:
        for statement in (f"DROP TABLE {t}", f"DROP TABLE IF EXISTS {t}",
                          f"UNDROP TABLE {t}_gone", f"ALTER TABLE {t} RENAME TO {t}_x",
                          f"ALTER TABLE {t} SET TBLPROPERTIES ('mode' = 'reject')",
                          f"ALTER TABLE {t} UNSET TBLPROPERTIES ('retention')",
                          f"/* hidden */ DROP TABLE {t}"):
            assert error(sql(query, statement), 403)["code"] == "forbidden", statement
        for csl in (f".drop table {t}", f".drop table {t} ifexists",
                    f".rename table {t} to {t}_x",
                    f".alter table {t} policy retention "
                    "'{\"SoftDeletePeriod\": \"1.00:00:00\"}'"):
            assert error(mgmt(query, csl), 403)["code"] == "forbidden", csl
        assert v1_rows(mgmt(query, f".show table {t} details"))[0]["TableName"] == t
    info = server.db.catalog.load_table(t)
    assert (info.mode, info.properties) == ("evolve", {})
    assert [d.name for d in server.db.catalog.dropped_tables(f"{t}_gone")] == [f"{t}_gone"]


def test_kusto_management_over_http(server, table_name):
    t = table_name
    with server.client(ADMIN) as admin, server.client(INGEST) as ingest:
        ok_rows(admin, f"CREATE TABLE {t} (n long)")
        for body in (b'{"n": 1}\n{"n": 2}\n', b'{"n": 3}\n'):
            assert ingest.post(f"/v1/ingest/{t}", content=body).status_code == 200
        details = v1_rows(mgmt(admin, f".show table {t} details"))
        assert len(details) == 1
        d = details[0]
        assert (d["TableName"], d["DatabaseName"], d["TotalExtents"], d["TotalRowCount"]) == \
            (t, "shoal", 2, 3)
        assert d["TotalExtentSize"] > 0 and d["HotExtents"] == 2
        assert d["RetentionPolicy"] is None and d["TotalOriginalSize"] is None
        assert d["MinExtentsCreationTime"] <= d["MaxExtentsCreationTime"]

        policy = v1_rows(mgmt(admin, f".alter table {t} policy retention ```"
                                     '{"SoftDeletePeriod": "30.00:00:00", '
                                     '"Recoverability": "Enabled"}```'))
        assert policy[0]["PolicyName"] == "RetentionPolicy"
        assert json.loads(policy[0]["Policy"])["SoftDeletePeriod"] == "30.00:00:00"
        assert server.db.catalog.load_table(t).properties["retention"] == "30d"
        d = v1_rows(mgmt(admin, f".show table {t} details"))[0]
        assert json.loads(d["RetentionPolicy"]) == {"SoftDeletePeriod": "30.00:00:00",
                                                    "Recoverability": "Enabled"}
        for bad, field in (("'{\"SoftDeletePeriod\": \"soon\"}'", "soon"),
                           ("'{\"Recoverability\": \"Enabled\"}'", "SoftDeletePeriod"),
                           ("'not json'", "not JSON")):
            err = error(mgmt(admin, f".alter table {t} policy retention {bad}"), 400)
            assert field in err["message"]

        renamed = v1_rows(mgmt(admin, f".rename table {t} to {t}_r"))
        assert renamed == [{"TableName": f"{t}_r", "DatabaseName": "shoal", "Folder": "",
                            "DocString": ""}]
        assert error(mgmt(admin, f".rename table {t} to {t}_r"), 404)["code"] == \
            "table_not_found"
        remaining = v1_rows(mgmt(admin, f".drop table {t}_r"))
        assert f"{t}_r" not in [r["TableName"] for r in remaining]
        assert error(mgmt(admin, f".drop table {t}_r"), 404)["code"] == "table_not_found"
        assert v1_rows(mgmt(admin, f".drop table {t}_r ifexists")) == remaining
        assert error(mgmt(admin, f".show table {t}_r details"), 404)["code"] == \
            "table_not_found"


def test_kusto_management_through_the_kusto_client(server, table_name):
    t = table_name
    with server.client(ADMIN) as admin:
        ok_rows(admin, f"CREATE TABLE {t} (n long)")

    def client(token: str) -> KustoClient:
        return KustoClient(KustoConnectionStringBuilder.with_token_provider(
            server.url, lambda: token))

    with client(QUERY) as reader, pytest.raises(KustoServiceError) as e:
        reader.execute_mgmt("shoal", f".drop table {t}")
    assert e.value.http_response.status_code == 403
    with client(ADMIN) as kusto:
        kusto.execute_mgmt("shoal", f".alter table {t} policy retention "
                                    "'{\"SoftDeletePeriod\": \"7.00:00:00\"}'")
        row = list(kusto.execute_mgmt("shoal", f".show table {t} details")
                   .primary_results[0])[0]
        assert row["TableName"] == t and row["TotalRowCount"] == 0
        assert json.loads(row["RetentionPolicy"])["SoftDeletePeriod"] == "7.00:00:00"
        kusto.execute_mgmt("shoal", f".rename table {t} to {t}_k")
        names = [r["TableName"] for r in kusto.execute_mgmt("shoal", ".show tables")
                 .primary_results[0]]
        assert f"{t}_k" in names and t not in names
        kusto.execute_mgmt("shoal", f".drop table {t}_k")
        kusto.execute_mgmt("shoal", f".drop table {t}_k ifexists")
        with pytest.raises(KustoServiceError):
            kusto.execute_mgmt("shoal", f".drop table {t}_k")
    assert [d.name for d in server.db.catalog.dropped_tables(f"{t}_k")] == [f"{t}_k"]
