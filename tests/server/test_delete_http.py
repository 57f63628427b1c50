"""DELETE and TRUNCATE over HTTP (`POST /v1/query`): the answer, the admin scope, and a
delete racing REST ingest on a real server (real sockets, real threads)."""

from __future__ import annotations

import json
import threading

import pytest

import shoal
from shoal.server import create_app
from tests.server.conftest import ADMIN, INGEST, QUERY, Live, create
from tests.support.server import serve_app


def _ingest(client, table: str, rows: list[dict]) -> dict:
    r = client.post(f"/v1/ingest/{table}", content="\n".join(json.dumps(x) for x in rows))
    assert r.status_code == 200, r.text
    return r.json()


def _sql(client, sql: str):
    return client.post("/v1/query", json={"sql": sql})


def _column(client, sql: str) -> list:
    r = _sql(client, sql)
    assert r.status_code == 200, r.text
    return [row[0] for row in r.json()["rows"]]


def _answer(response) -> dict:
    assert response.status_code == 200, response.text
    doc = response.json()
    [row] = doc["rows"]
    return dict(zip([c["name"] for c in doc["columns"]], row, strict=True))


def test_delete_and_truncate_over_http(http, table_name):
    create(http, table_name, [{"name": "kind", "type": "string"}, {"name": "n", "type": "long"}])
    _ingest(http, table_name, [{"kind": "a" if i % 3 else "b", "n": i} for i in range(30)])
    _ingest(http, table_name, [{"kind": "c", "n": 100 + i} for i in range(5)])
    doc = _answer(_sql(http, f"DELETE FROM {table_name} WHERE kind = 'b'"))
    assert doc["rows_deleted"] == 10 and doc["operation"] == "delete"
    assert (doc["extents_rewritten"], doc["extents_pruned"]) == (1, 1)
    assert sorted(_column(http, f"SELECT n FROM {table_name}")) == (
        [i for i in range(30) if i % 3] + list(range(100, 105)))
    r = _sql(http, f"DELETE FROM {table_name} WHERE kind = = 'b'")
    assert r.status_code == 400 and "line 1, col" in r.json()["error"]["message"]
    assert _sql(http, "DELETE FROM no_such_table").status_code == 404
    doc = _answer(_sql(http, f"TRUNCATE TABLE {table_name}"))
    assert (doc["operation"], doc["rows_deleted"]) == ("truncate", 25)
    assert _column(http, f"SELECT count(*) FROM {table_name}") == [0]
    assert http.get(f"/v1/tables/{table_name}").json()["row_count"] == 0


def test_delete_and_truncate_need_the_admin_scope(auth_server, table_name):
    with auth_server.client(ADMIN) as c:
        create(c, table_name, [{"name": "n", "type": "long"}])
        _ingest(c, table_name, [{"n": i} for i in range(4)])
    for token in (QUERY, INGEST):
        with auth_server.client(token) as c:
            for sql in (f"DELETE FROM {table_name} WHERE n = 1", f"TRUNCATE TABLE {table_name}",
                        f"/* hidden */ delete from {table_name}"):
                r = _sql(c, sql)
                assert r.status_code == 403, (token, sql, r.text)
    with auth_server.client(QUERY) as c:
        assert _column(c, f"SELECT count(*) FROM {table_name}") == [4]
    with auth_server.client(ADMIN) as c:
        assert _answer(_sql(c, f"DELETE FROM {table_name} WHERE n = 1"))["rows_deleted"] == 1
        assert _column(c, f"SELECT count(*) FROM {table_name}") == [3]


@pytest.mark.slow
def test_delete_under_concurrent_rest_ingest_loses_no_acknowledged_row(tmp_path, catalog_url):
    """Writers keep posting rows while DELETEs remove the pre-loaded rows of kind 'gone' in
    slices: every acknowledged row of kind 'keep' is there at the end, no 'gone' row is."""
    db = shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url)
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url:
            live = Live(url, db)
            with live.client() as c:
                create(c, "ev", [{"name": "kind", "type": "string"},
                                 {"name": "n", "type": "long"}])
                for b in range(8):          # pre-loaded: 8 extents, half of each to delete
                    _ingest(c, "ev", [{"kind": "gone" if i % 2 else "keep", "n": b * 1000 + i}
                                      for i in range(40)])
            acked: list[int] = []
            lock = threading.Lock()
            stop = threading.Event()
            errors: list[BaseException] = []

            def writer(w: int) -> None:
                try:
                    with live.client() as wc:
                        k = 0
                        while not stop.is_set() or k < 5:
                            ns = [100_000 + w * 10_000 + k * 10 + j for j in range(10)]
                            _ingest(wc, "ev", [{"kind": "keep", "n": n} for n in ns])
                            with lock:
                                acked.extend(ns)
                            k += 1
                except BaseException as e:  # reported by the test below
                    errors.append(e)

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
            for t in threads:
                t.start()
            deleted = 0
            try:
                with live.client() as c:
                    for s in range(4):
                        doc = _answer(_sql(c, f"DELETE FROM ev WHERE kind = 'gone' "
                                              f"AND n % 8 IN ({2 * s + 1}, {2 * s + 2})"))
                        deleted += doc["rows_deleted"]
            finally:
                stop.set()
                for t in threads:
                    t.join()
            assert not errors, errors
            assert deleted == 8 * 20
            with live.client() as c:
                rows = _sql(c, "SELECT kind, n FROM ev").json()["rows"]
            kinds = {k for k, _ in rows}
            ns = sorted(n for _, n in rows)
            preloaded_keep = [b * 1000 + i for b in range(8) for i in range(40) if i % 2 == 0]
            assert kinds == {"keep"}
            assert ns == sorted(preloaded_keep + acked)
            assert len(acked) >= 150
            # the deletes did commit over appends that landed after their read (the rebase)
            snaps = db.catalog.snapshots("ev")
            rebased = [x for x in snaps if x.operation == "delete"
                       and x.summary["read_snapshot_id"] != x.parent_id]
            assert rebased
    finally:
        db.close()
