"""The real `sentry_sdk` sends errors and transactions to a live shoal server (a uvicorn
socket), and they are queryable: tags, stack frames in `dynamic`, trace ids. Also the edge's
rules for what an SDK (or anything else) may send."""

from __future__ import annotations

import gzip
import json
import uuid
import zlib
from collections.abc import Iterator

import httpx
import pytest
import sentry_sdk

from tests.frontends.conftest import OtlpLive, otlp_live

EVENT_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def live(tmp_path) -> Iterator[OtlpLive]:
    with otlp_live(str(tmp_path / "data")) as server:
        yield server


def _dsn(url: str, key: str = "publickey", project: int = 42) -> str:
    host = url.removeprefix("http://")
    return f"http://{key}@{host}/{project}"


def _fail(n: int) -> None:
    raise ValueError(f"order {n} has no lines")


def _send_with_sdk(dsn: str) -> list[str]:
    client_ids: list[str] = []
    sentry_sdk.init(dsn=dsn, traces_sample_rate=1.0, release="web@1.2.3",
                    environment="test", default_integrations=False,
                    auto_enabling_integrations=False, send_client_reports=True)
    try:
        for n in range(20):
            with sentry_sdk.new_scope() as scope:
                scope.set_tag("customer", f"c{n % 4}")
                scope.set_user({"id": str(n)})
                try:
                    _fail(n)
                except ValueError as e:
                    client_ids.append(sentry_sdk.capture_exception(e))
        for n in range(5):
            with sentry_sdk.start_transaction(name=f"GET /orders/{n}", op="http.server"):
                with sentry_sdk.start_span(op="db", name="SELECT orders"):
                    pass
        sentry_sdk.flush(timeout=30)
    finally:
        sentry_sdk.get_client().close(timeout=30)
    return client_ids


def test_the_sdk_sends_errors_and_transactions_that_are_queryable(live):
    ids = _send_with_sdk(_dsn(live.url))
    rows = live.rows("sentry_events").to_pylist()
    errors = [r for r in rows if r["type"] == "error"]
    transactions = [r for r in rows if r["type"] == "transaction"]
    assert len(errors) == 20 and len(transactions) == 5
    assert sorted(r["event_id"] for r in errors) == sorted(ids)
    assert {r["project_id"] for r in rows} == {42}
    assert {r["release"] for r in rows} == {"web@1.2.3"}
    assert {r["exception_type"] for r in errors} == {"ValueError"}
    assert {r["exception_value"] for r in errors} == {f"order {n} has no lines"
                                                      for n in range(20)}
    assert all(len(r["trace_id"]) == 32 for r in rows)
    by_name = {r["transaction"]: r for r in transactions}
    assert set(by_name) == {f"GET /orders/{n}" for n in range(5)}
    assert all(r["op"] == "http.server" and r["duration_ms"] >= 0 for r in transactions)
    spans = json.loads(by_name["GET /orders/0"]["spans"])
    assert [s["op"] for s in spans] == ["db"]
    assert spans[0]["trace_id"] == by_name["GET /orders/0"]["trace_id"]

    # The SQL a user would write: tags and frames out of the dynamic columns.
    got = live.db.sql(
        "SELECT get_json_object(tags, '$.customer') AS customer, count(*) AS n "
        "FROM sentry_events WHERE type = 'error' GROUP BY 1 ORDER BY 1").table.to_pylist()
    assert got == [{"customer": f"c{i}", "n": 5} for i in range(4)]
    frames = json.loads(errors[0]["exception"])[0]["stacktrace"]["frames"]
    functions = [f["function"] for f in frames]
    assert functions[-1] == "_fail" and "_send_with_sdk" in functions
    traced = live.db.sql(
        f"SELECT transaction FROM sentry_events WHERE trace_id = "
        f"'{by_name['GET /orders/3']['trace_id']}' AND type = 'transaction'").table
    assert traced.column("transaction").to_pylist() == ["GET /orders/3"]


@pytest.mark.slow
def test_stack_frames_answer_json_path_sql(live):
    """Paths into arrays (`$[0]...`) are answered by Spark: the frames from SQL."""
    _send_with_sdk_errors_only(_dsn(live.url), exception=True)
    frames = live.db.sql(
        "SELECT get_json_object(exception, '$[0].stacktrace.frames[0].function') AS f, "
        "get_json_object(exception, '$[0].type') AS t FROM sentry_events").table.to_pylist()
    assert frames == [{"f": "_send_with_sdk_errors_only", "t": "ValueError"}]


def _envelope(event: dict, *, extra: bytes = b"") -> bytes:
    payload = json.dumps(event).encode()
    return (json.dumps({"event_id": event.get("event_id", EVENT_ID)}).encode() + b"\n"
            + json.dumps({"type": "event", "length": len(payload)}).encode() + b"\n"
            + payload + b"\n" + extra)


def test_a_resent_event_is_written_once(live):
    body = _envelope({"event_id": EVENT_ID, "message": "boom", "timestamp": 1.7e9})
    url = f"{live.url}/api/7/envelope/"
    for _ in range(3):
        r = httpx.post(url, content=body)
        assert r.status_code == 200 and r.json() == {"id": EVENT_ID}
    rows = live.rows("sentry_events").to_pylist()
    assert [(r["event_id"], r["message"]) for r in rows] == [(EVENT_ID, "boom")]


def test_compressed_bodies_and_the_store_endpoint(live):
    ids = [uuid.uuid4().hex for _ in range(3)]
    body = _envelope({"event_id": ids[0], "message": "gz"})
    assert httpx.post(f"{live.url}/api/7/envelope/", content=gzip.compress(body),
                      headers={"Content-Encoding": "gzip"}).status_code == 200
    assert httpx.post(f"{live.url}/api/7/envelope/",
                      content=zlib.compress(_envelope({"event_id": ids[1], "message": "z"})),
                      headers={"Content-Encoding": "deflate"}).status_code == 200
    r = httpx.post(f"{live.url}/api/7/store/",
                   content=json.dumps({"event_id": ids[2], "message": "stored",
                                       "tags": [["a", "1"]]}))
    assert r.status_code == 200 and r.json() == {"id": ids[2]}
    rows = {r["event_id"]: r for r in live.rows("sentry_events").to_pylist()}
    assert set(rows) == set(ids)
    assert json.loads(rows[ids[2]]["tags"]) == {"a": "1"}


def test_items_other_than_events_are_acknowledged_and_skipped(live):
    extra = (b'{"type":"session"}\n{"sid":"x","status":"ok"}\n'
             b'{"type":"client_report","length":2}\n{}\n')
    only = b'{}\n' + extra
    r = httpx.post(f"{live.url}/api/7/envelope/", content=only)
    assert r.status_code == 200 and r.json() == {}
    assert not live.exists("sentry_events")
    r = httpx.post(f"{live.url}/api/7/envelope/", content=_envelope({"message": "m"},
                                                                     extra=extra))
    assert r.status_code == 200
    assert live.rows("sentry_events").num_rows == 1


@pytest.mark.parametrize("path,body,headers,status,needle", [
    ("/api/abc/envelope/", b"{}\n", {}, 400, "project id"),
    ("/api/7/envelope/", b"not json\n", {}, 400, "envelope header (line 1)"),
    ("/api/7/envelope/", b'{}\n{"type":"event","length":99}\n{}\n', {}, 400,
     "envelope item 1: length 99 runs past the end"),
    ("/api/7/envelope/", b'{}\n{"type":"event"}\n[1]\n', {}, 400,
     "an event must be a JSON object"),
    ("/api/7/envelope/", b'{}\n{"type":"event"}\n{"event_id":"nope"}\n', {}, 400,
     'field "event_id"'),
    ("/api/7/envelope/", b'{}\n{"type":"event"}\n{"timestamp":"yesterday"}\n', {}, 400,
     'field "timestamp"'),
    ("/api/7/envelope/", b"{}\n", {"Content-Encoding": "br"}, 415, "br"),
    ("/api/7/envelope/", b"\x00\x01", {"Content-Encoding": "gzip"}, 400, "gzip"),
    ("/api/7/store/", b"@@@", {}, 400, "neither JSON nor base64"),
])
def test_bad_input_is_a_clear_4xx(live, path, body, headers, status, needle):
    r = httpx.post(live.url + path, content=body, headers=headers)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]["message"]
    assert not live.exists("sentry_events")


def test_a_too_large_body_is_refused(tmp_path):
    from shoal.server import create_app
    import shoal
    from tests.support.server import serve_app

    db = shoal.connect(data_dir=str(tmp_path / "d"))
    try:
        app = create_app(db, config=db.config, max_body_bytes=4096, sweep_ledger=False)
        with serve_app(app) as url:
            bomb = gzip.compress(_envelope({"message": "x" * 100_000}))
            r = httpx.post(f"{url}/api/7/envelope/", content=bomb,
                           headers={"Content-Encoding": "gzip"})
            assert r.status_code == 413
    finally:
        db.close()


def test_with_tokens_the_dsn_key_must_be_an_ingest_token(make_otlp_server):
    body = _envelope({"message": "m"})
    with make_otlp_server(tokens="ingestkey=ingest;reader=query") as live:
        url = f"{live.url}/api/7/envelope/"

        def auth(key: str) -> dict[str, str]:
            return {"X-Sentry-Auth": f"Sentry sentry_key={key}, sentry_version=7"}

        assert httpx.post(url, content=body).status_code == 401
        assert httpx.post(url, content=body, headers=auth("wrong")).status_code == 401
        assert httpx.post(url, content=body, headers=auth("reader")).status_code == 403
        assert httpx.post(url, content=body, headers=auth("ingestkey")).status_code == 200
        assert httpx.post(f"{url}?sentry_key=ingestkey",
                          content=_envelope({"message": "m", "event_id": uuid.uuid4().hex})
                          ).status_code == 200
        ids = _send_with_sdk_errors_only(_dsn(live.url, key="ingestkey"))
        got = {r["event_id"] for r in live.rows("sentry_events").to_pylist()}
        assert set(ids) <= got


def _send_with_sdk_errors_only(dsn: str, *, exception: bool = False) -> list[str]:
    sentry_sdk.init(dsn=dsn, default_integrations=False, auto_enabling_integrations=False)
    try:
        if exception:
            try:
                raise ValueError("one")
            except ValueError as e:
                ids = [sentry_sdk.capture_exception(e)]
        else:
            ids = [sentry_sdk.capture_message(f"hello {n}") for n in range(2)]
        sentry_sdk.flush(timeout=30)
    finally:
        sentry_sdk.get_client().close(timeout=30)
    return ids
