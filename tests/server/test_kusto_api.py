"""A real Kusto client against a live `shoal serve`: `azure-kusto-data`
with no authentication (as against the Kusto emulator) runs `.show tables`, `.show table T
schema`, and KQL queries, and gets typed values (datetime, long, real, string, dynamic); a
KQL syntax error comes back as a Kusto service error naming the position. The server runs
with `--lazy-spark` and the embedded engine, so no Spark starts."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from azure.kusto.data import KustoClient, KustoConnectionStringBuilder
from azure.kusto.data.exceptions import KustoApiError, KustoServiceError

from tests.query.test_kql_corpus import make_db
from tests.support.server import start_server

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def kusto(tmp_path_factory):
    data = tmp_path_factory.mktemp("kusto") / "data"
    make_db(str(data)).close()
    server = start_server(data, extra_args=["--lazy-spark"],
                          env={"SHOAL_QUERY_ENGINE": "local"})
    client = KustoClient(KustoConnectionStringBuilder.with_no_authentication(server.url))
    try:
        yield client
    finally:
        client.close()
        server.stop()


def test_show_tables_and_schema(kusto):
    tables = kusto.execute_mgmt("shoal", ".show tables").primary_results[0]
    assert sorted(row["TableName"] for row in tables) == ["audit", "logs", "teams"]
    schema = kusto.execute_mgmt("shoal", ".show table logs schema as json").primary_results[0]
    columns = {c["Name"]: c["CslType"] for c in json.loads(schema[0]["Schema"])["OrderedColumns"]}
    assert columns == {"_timestamp": "datetime", "props": "dynamic", "service": "string",
                       "level": "string", "message": "string", "attrs": "dynamic",
                       "latency_ms": "long", "user": "string"}


def test_kql_query_gives_typed_values(kusto):
    answer = kusto.execute_query("shoal", "logs | where message has 'deadlock' "
                                 "| summarize n = count(), mean = avg(latency_ms), "
                                 "last = max(_timestamp) by service | sort by service asc")
    table = answer.primary_results[0]
    assert [(c.column_name, c.column_type) for c in table.columns] == [
        ("service", "string"), ("n", "long"), ("mean", "real"), ("last", "datetime")]
    rows = list(table)
    assert sum(r["n"] for r in rows) == 6
    assert all(isinstance(r["last"], datetime) and r["last"].tzinfo is not None for r in rows)
    assert all(isinstance(r["mean"], float) for r in rows)
    assert [r["service"] for r in rows] == sorted(r["service"] for r in rows)


def test_dynamic_values_and_render(kusto):
    answer = kusto.execute_query("shoal", "logs | where isnotnull(attrs) | take 3 "
                                 "| project attrs, method = attrs.http.method "
                                 "| render table")
    table = answer.primary_results[0]
    assert [c.column_type for c in table.columns] == ["dynamic", "dynamic"]
    for row in table:
        assert isinstance(row["attrs"], dict)
        assert row["method"] == row["attrs"]["http"]["method"]
    properties = next(t for t in answer.tables if t.table_name == "@ExtendedProperties")
    assert json.loads(properties[0]["Value"])["Visualization"] == "table"


def test_arg_max_and_top_nested_through_the_client(kusto):
    latest = kusto.execute_query("shoal", "logs | summarize arg_max(_timestamp, message) "
                                 "by service | sort by service asc").primary_results[0]
    assert [(c.column_name, c.column_type) for c in latest.columns] == [
        ("service", "string"), ("_timestamp", "datetime"), ("message", "string")]
    assert [r["service"] for r in latest] == ["api", "db", "web", "worker"]
    tops = kusto.execute_query("shoal", "logs | top-nested 2 of service by n = count(), "
                               "top-nested 1 of level by count()").primary_results[0]
    assert [(c.column_name, c.column_type) for c in tops.columns] == [
        ("service", "string"), ("n", "long"), ("level", "string"),
        ("aggregated_level", "long")]
    assert len(list(tops)) == 2


def test_a_syntax_error_is_a_kusto_error_naming_the_position(kusto):
    with pytest.raises((KustoApiError, KustoServiceError)) as e:
        kusto.execute_query("shoal", "logs | where level == ")
    assert "on line [1,23]" in str(e.value)


def test_with_tokens_the_client_needs_a_bearer_token_with_the_query_scope(tmp_path):
    data = tmp_path / "data"
    make_db(str(data)).close()
    server = start_server(data, extra_args=["--lazy-spark"], tokens={"q-secret": "query",
                                                                     "i-secret": "ingest"},
                          env={"SHOAL_QUERY_ENGINE": "local"})
    try:
        def client(token: str | None) -> KustoClient:
            if token is None:
                return KustoClient(KustoConnectionStringBuilder.with_no_authentication(
                    server.url))
            return KustoClient(KustoConnectionStringBuilder.with_token_provider(
                server.url, lambda: token))

        with client("q-secret") as ok:
            rows = list(ok.execute_query("shoal", "teams | count").primary_results[0])
            assert rows[0]["Count"] == 4
        for token, status in ((None, 401), ("i-secret", 403), ("wrong", 401)):
            with client(token) as refused, pytest.raises(KustoServiceError) as e:
                refused.execute_mgmt("shoal", ".show tables")
            assert e.value.http_response.status_code == status
    finally:
        server.stop()
