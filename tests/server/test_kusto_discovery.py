"""The commands Kusto tools run to discover a database, through the real Kusto client
(`azure-kusto-data`, no authentication) against a live `shoal serve`: `.show databases`,
`.show version`, `.show database X schema as json`, `.show table T`, `.show tables details`,
`.show functions`; and KQL's getschema and range through the same client."""

from __future__ import annotations

import json

import pytest
from azure.kusto.data import KustoClient, KustoConnectionStringBuilder
from azure.kusto.data.exceptions import KustoServiceError

import shoal
from shoal.types import DYNAMIC, LONG, STRING, Column
from tests.query.conftest import ndjson
from tests.support.server import start_server

pytestmark = pytest.mark.services

EVENTS = [{"_timestamp": "2026-03-01T10:00:00Z", "host": "a", "code": 200, "tags": ["x", "y"]},
          {"_timestamp": "2026-03-01T10:01:00Z", "host": "b", "code": 500, "tags": ["z"]}]


@pytest.fixture(scope="module")
def kusto(tmp_path_factory):
    data = tmp_path_factory.mktemp("kusto-discovery") / "data"
    db = shoal.connect(data_dir=str(data))
    db.create_table("events", [Column("host", STRING), Column("code", LONG),
                               Column("tags", DYNAMIC)])
    db.ingest_ndjson("events", ndjson(EVENTS))
    db.create_table("hosts", [Column("host", STRING), Column("owner", STRING)])
    db.close()
    server = start_server(data, extra_args=["--lazy-spark"],
                          env={"SHOAL_QUERY_ENGINE": "local"})
    client = KustoClient(KustoConnectionStringBuilder.with_no_authentication(server.url))
    try:
        yield client
    finally:
        client.close()
        server.stop()


def mgmt(client: KustoClient, csl: str) -> list[dict]:
    table = client.execute_mgmt("shoal", csl).primary_results[0]
    names = [c.column_name for c in table.columns]
    return [{n: row[n] for n in names} for row in table]


def test_show_databases_names_the_one_database(kusto):
    rows = mgmt(kusto, ".show databases")
    assert [r["DatabaseName"] for r in rows] == ["shoal"]
    assert rows[0]["IsCurrent"] is True


def test_show_version_gives_shoal_s_version(kusto):
    from importlib.metadata import version

    rows = mgmt(kusto, ".show version")
    assert rows[0]["BuildVersion"] == version("shoal")
    assert rows[0]["ProductVersion"] == f"shoal {version('shoal')}"


def test_database_schema_as_json_is_the_document_kusto_tools_parse(kusto):
    rows = mgmt(kusto, ".show database shoal schema as json")
    doc = json.loads(rows[0]["DatabaseSchema"])
    database = doc["Databases"]["shoal"]
    assert database["Name"] == "shoal"
    assert database["Functions"] == {}
    assert sorted(database["Tables"]) == ["events", "hosts"]
    events = database["Tables"]["events"]
    assert events["Name"] == "events"
    assert [(c["Name"], c["CslType"], c["Type"]) for c in events["OrderedColumns"]] == [
        ("_timestamp", "datetime", "System.DateTime"), ("props", "dynamic", "System.Object"),
        ("host", "string", "System.String"), ("code", "long", "System.Int64"),
        ("tags", "dynamic", "System.Object")]


def test_database_schema_of_another_database_is_not_found(kusto):
    with pytest.raises(KustoServiceError) as e:
        kusto.execute_mgmt("shoal", ".show database other schema as json")
    assert e.value.http_response.status_code == 404
    error = e.value.http_response.json()["error"]
    assert error["code"] == "database_not_found" and "'other'" in error["message"]


def test_show_table_lists_its_columns(kusto):
    rows = mgmt(kusto, ".show table hosts")
    assert [(r["AttributeName"], r["CslType"]) for r in rows] == [
        ("_timestamp", "datetime"), ("props", "dynamic"), ("host", "string"),
        ("owner", "string")]
    with pytest.raises(KustoServiceError) as e:
        kusto.execute_mgmt("shoal", ".show table nosuch")
    assert e.value.http_response.status_code == 404


def test_show_tables_details_has_a_row_per_table(kusto):
    rows = {r["TableName"]: r for r in mgmt(kusto, ".show tables details")}
    assert sorted(rows) == ["events", "hosts"]
    assert rows["events"]["TotalRowCount"] == 2
    assert rows["events"]["TotalExtents"] == 1
    assert rows["hosts"]["TotalRowCount"] == 0
    assert rows["hosts"]["TotalExtents"] == 0


def test_show_functions_is_empty(kusto):
    table = kusto.execute_mgmt("shoal", ".show functions").primary_results[0]
    assert [c.column_name for c in table.columns][:2] == ["Name", "Parameters"]
    assert list(table) == []


def test_getschema_and_range_through_the_client(kusto):
    rows = kusto.execute_query("shoal", "events | project host, code | getschema"
                               ).primary_results[0]
    assert [(r["ColumnName"], r["ColumnOrdinal"], r["ColumnType"]) for r in rows] == [
        ("host", 0, "string"), ("code", 1, "long")]
    rows = kusto.execute_query("shoal", "range n from 1 to 3 step 1 "
                               "| extend sq = n * n").primary_results[0]
    assert [(r["n"], r["sq"]) for r in rows] == [(1, 1), (2, 4), (3, 9)]
