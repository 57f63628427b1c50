"""Foreign tables through the HTTP API (a real server on a socket, the shared Postgres as
the source): what a client sees — masked passwords in every answer, the pushed SELECT in
the stats, a refused write, a refused host, and an answer shape the OpenAPI document
describes."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from tests.server.conftest import ADMIN, INGEST, QUERY, Live, _live

SECRET = "Http-Secret-pw-42"
pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def fed_server(tmp_path_factory) -> Iterator[Live]:
    yield from _live(tmp_path_factory, "federation", allowed_hosts="127.0.0.1",
                     tokens=f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query")


def test_foreign_table_over_http(fed_server, pg_source):
    s = pg_source.schema
    pg_source.run(f"CREATE TABLE {s}.orders (id integer PRIMARY KEY, status text)",
                  f"INSERT INTO {s}.orders SELECT g, CASE WHEN g % 2 = 0 THEN 'paid' "
                  "ELSE 'new' END FROM generate_series(1, 100) g")
    u = urlparse(pg_source.url)
    url = f"postgresql://{u.username}:{SECRET}@{u.hostname}:{u.port or 5432}{u.path}"
    create = (f"CREATE FOREIGN TABLE {s}_orders WITH (source='{url}', "
              f"source_table='{s}.orders')")
    with fed_server.client(QUERY) as query, fed_server.client(ADMIN) as admin, \
            fed_server.client(INGEST) as ingest:
        r = query.post("/v1/query", json={"sql": create})
        assert r.status_code == 403                      # DDL needs the admin scope
        r = admin.post("/v1/query", json={"sql": create})
        assert r.status_code == 200, r.text
        assert SECRET not in r.text and ":***@" in r.text

        r = admin.get(f"/v1/tables/{s}_orders")
        assert r.status_code == 200 and SECRET not in r.text
        assert r.json()["properties"]["source"] == url.replace(SECRET, "***")
        r = admin.post("/v1/query", json={"sql": f"SHOW TBLPROPERTIES {s}_orders"})
        assert SECRET not in r.text

        r = query.post("/v1/query?scans=true", json={
            "sql": f"SELECT status, count(*) AS n FROM {s}_orders WHERE id <= 10 "
                   "GROUP BY status ORDER BY status"})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == [["new", 5], ["paid", 5]]
        (scan,) = r.json()["stats"]["scans"]
        assert scan["source_rows"] == 10 and 'WHERE "id"::int4 <= 10' in scan["pushed"]
        assert SECRET not in r.text

        r = ingest.post(f"/v1/ingest/{s}_orders", content=b'{"id": 1000, "status": "x"}\n')
        assert r.status_code == 400 and r.json()["error"]["code"] == "read_only_table"

        r = admin.post("/v1/query", json={"sql": (
            "CREATE FOREIGN TABLE elsewhere WITH (source='postgresql://u:" + SECRET
            + "@192.0.2.1:5432/d', source_table='t')")})
        assert r.status_code == 403 and SECRET not in r.text
        assert r.json()["error"]["code"] == "location_not_allowed"

        r = admin.post("/v1/query", json={"sql": f"DROP TABLE {s}_orders"})
        assert r.status_code == 200
    assert pg_source.rows(f"SELECT count(*) FROM {s}.orders") == [(100,)]
