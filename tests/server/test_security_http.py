"""Every attack a hostile but ordinary user tried, through HTTP.

Each attack is sent to a live server without tokens (loopback mode) and with each scope;
each must be refused with a clear 4xx, no file may be read or written, no command may run,
no token may leak, the Spark session's settings must stay as they were, and the server
must keep answering correctly afterwards.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import shoal
from shoal.server import create_app
from tests.server.conftest import ADMIN, INGEST, QUERY, Live
from tests.support.fixtures import SPARK_MASTER
from tests.support.server import serve_app

TOKENS = f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query"
SECRET = "s3cr3t-file-content-7f1e"


@pytest.fixture(scope="module")
def host_files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("host")
    secret = root / "secret.txt"
    secret.write_text(SECRET + "\n")
    (root / "secret_dir").mkdir()
    (root / "secret_dir" / "a.ndjson").write_text('{"n": 1}\n')
    return {"root": root, "secret": secret, "marker": root / "pwned",
            "outdir": root / "written", "dir": root / "secret_dir"}


def _server(tmp_path_factory, name: str, **config):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp(name)), spark_master=SPARK_MASTER,
                       **config)
    app = create_app(db, config=db.config)
    return db, app


@pytest.fixture(scope="module")
def servers(tmp_path_factory, spark):
    """An open (loopback, no tokens) and an authenticated server, each with a table."""
    open_db, open_app = _server(tmp_path_factory, "sec_open")
    auth_db, auth_app = _server(tmp_path_factory, "sec_auth", tokens=TOKENS)
    with serve_app(open_app) as open_url, serve_app(auth_app) as auth_url:
        lives = {"open": Live(open_url, open_db), "auth": Live(auth_url, auth_db)}
        for live, token in ((lives["open"], None), (lives["auth"], ADMIN)):
            with live.client(token, timeout=120) as c:
                r = c.post("/v1/query", json={"sql": "CREATE TABLE logs (n long, msg string)"})
                assert r.status_code == 200, r.text
                r = c.post("/v1/ingest/logs", content=b'{"n": 1, "msg": "a"}\n'
                                                      b'{"n": 2, "msg": "b"}\n')
                assert r.status_code == 200, r.text
        yield lives
    open_db.close()
    auth_db.close()


def attacks(f: dict[str, Path]) -> list[tuple[str, str]]:
    """(name, statement): every way in found so far, each must be a 4xx."""
    secret, marker, out = f["secret"], f["marker"], f["outdir"]
    return [
        ("transform id", "SELECT TRANSFORM(1) USING 'id' AS (o string)"),
        ("transform sh", f"SELECT TRANSFORM(n) USING 'sh -c \"touch {marker}\"' AS (o string) "
                         "FROM logs"),
        ("transform in cte", f"WITH x AS (SELECT TRANSFORM(1) USING 'touch {marker}' AS (o "
                             "string)) SELECT * FROM x"),
        ("reflect getenv", "SELECT reflect('java.lang.System', 'getenv', 'SHOAL_TOKENS')"),
        ("reflect exit", "SELECT reflect('java.lang.System', 'exit', 0)"),
        ("reflect quoted", "SELECT `reflect`('java.lang.System', 'getenv')"),
        ("reflect mixed case", "SELECT ReFlEcT('java.lang.System', 'getenv')"),
        ("try_reflect", "SELECT try_reflect('java.lang.System', 'getenv', 'HOME')"),
        ("java_method", "SELECT java_method('java.lang.System', 'getProperty', 'user.home')"),
        ("reflect in lambda", "SELECT transform(array(1), x -> reflect('java.lang.System', "
                              "'getenv', 'HOME'))"),
        ("reflect in lateral view", "SELECT * FROM logs LATERAL VIEW explode(array(reflect("
                                    "'java.lang.System', 'getenv', 'HOME'))) t AS v"),
        ("text file", f"SELECT * FROM text.`{secret}`"),
        ("csv file", f"SELECT * FROM csv.`{secret}`"),
        ("json file", f"SELECT * FROM json.`{f['dir']}`"),
        ("binaryFile", f"SELECT * FROM binaryFile.`{secret}`"),
        ("parquet dir", f"SELECT * FROM parquet.`{f['root']}`"),
        ("file in subquery", f"SELECT * FROM (SELECT * FROM text.`{secret}`) s"),
        ("file in join", f"SELECT * FROM logs JOIN text.`{secret}` t ON true"),
        ("read_files", f"SELECT * FROM read_files('{secret}', format => 'text')"),
        ("identifier()", "SELECT * FROM IDENTIFIER('logs')"),
        ("other catalog", "SELECT * FROM spark_catalog.default.logs"),
        ("global temp", "SELECT * FROM global_temp.v"),
        ("input_file_name", "SELECT input_file_name() FROM logs"),
        ("xpath", "SELECT xpath('<a><b>1</b></a>', 'a/b')"),
        ("from_protobuf", f"SELECT from_protobuf(CAST(msg AS binary), 'M', '{secret}') "
                          "FROM logs"),
        ("current_user", "SELECT current_user()"),
        ("set conf", "SET spark.sql.ansi.enabled=false"),
        ("set time zone", "SET TIME ZONE 'America/New_York'"),
        ("reset", "RESET"),
        ("add jar", f"ADD JAR {secret}"),
        ("add file", f"ADD FILE {secret}"),
        ("list files", "LIST FILES"),
        ("cache", "CACHE TABLE logs"),
        ("cache lazy select", "CACHE LAZY TABLE c AS SELECT 1"),
        ("uncache", "UNCACHE TABLE logs"),
        ("clear cache", "CLEAR CACHE"),
        ("refresh", "REFRESH TABLE logs"),
        ("use", "USE default"),
        ("temp view", "CREATE TEMPORARY VIEW v AS SELECT * FROM logs"),
        ("view", "CREATE VIEW v AS SELECT 1"),
        ("temp function", "CREATE TEMPORARY FUNCTION f AS 'java.lang.String'"),
        ("sql function", "CREATE FUNCTION f() RETURNS INT RETURN 1"),
        ("insert", "INSERT INTO logs VALUES (3, 'c')"),
        ("insert directory", f"INSERT OVERWRITE DIRECTORY '{out}' SELECT * FROM logs"),
        ("load data", f"LOAD DATA LOCAL INPATH '{secret}' INTO TABLE logs"),
        ("drop view", "DROP VIEW v"),
        ("drop database", "DROP DATABASE default CASCADE"),
        ("drop function", "DROP FUNCTION f"),
        ("ctas", f"CREATE TABLE x USING parquet LOCATION '{out}' AS SELECT 1"),
        ("execute immediate", "EXECUTE IMMEDIATE 'SELECT reflect(\\'java.lang.System\\', "
                              "\\'getenv\\', \\'HOME\\')'"),
        ("declare variable", "DECLARE VARIABLE v INT DEFAULT 1"),
        ("scripting", "BEGIN SELECT 1; END"),
        ("show functions", "SHOW FUNCTIONS"),
        ("describe function", "DESCRIBE FUNCTION reflect"),
        ("explain extended", "EXPLAIN EXTENDED SELECT * FROM logs"),
        ("explain a set", "EXPLAIN SET x = 1"),
        ("hint", "SELECT /*+ REPARTITION(100000) */ * FROM logs"),
        ("two statements", "SELECT 1; SET spark.sql.ansi.enabled=false"),
        ("msck", "MSCK REPAIR TABLE logs"),
        ("analyze", "ANALYZE TABLE logs COMPUTE STATISTICS"),
    ]


def _check_refused(r, name: str) -> None:
    assert 400 <= r.status_code < 500, (name, r.status_code, r.text)
    doc = r.json()["error"]
    assert doc["code"] and doc["message"], (name, doc)
    for leak in (SECRET, ADMIN, INGEST, QUERY, "uid=", "root:x:0"):
        assert leak not in r.text, (name, r.text)


def _runtime_conf(spark) -> dict[str, str]:
    return dict(spark.conf.getAll)


def test_every_attack_is_refused_with_every_scope(servers, host_files, spark):
    before = _runtime_conf(spark)
    jars_before = spark.sparkContext._jsc.sc().listJars().toString()
    cases = attacks(host_files)
    callers = [("open", None), ("auth", QUERY), ("auth", ADMIN), ("auth", INGEST),
               ("auth", None)]
    for server, token in callers:
        with servers[server].client(token, timeout=120) as c:
            for name, sql in cases:
                r = c.post("/v1/query", json={"sql": sql})
                _check_refused(r, f"{name} [{server}, {token}]")
                if token == INGEST:
                    assert r.status_code == 403, name
                elif token is None and server == "auth":
                    assert r.status_code == 401, name
                else:       # refused by the guard (400) or as unknown (404), not by scope
                    assert r.status_code in (400, 404), (name, r.text)
    assert not host_files["marker"].exists(), "a command ran"
    assert not host_files["outdir"].exists(), "a file was written"
    assert _runtime_conf(spark) == before
    assert spark.sparkContext._jsc.sc().listJars().toString() == jars_before
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    for live in servers.values():
        token = ADMIN if live is servers["auth"] else None
        with live.client(token, timeout=120) as c:
            r = c.post("/v1/query", json={"sql": "SELECT sum(n) AS s FROM logs"})
            assert r.status_code == 200 and r.json()["rows"] == [[3]], r.text
            assert c.get("/readyz").status_code == 200


def test_refusals_name_what_was_refused(servers):
    with servers["open"].client(timeout=60) as c:
        r = c.post("/v1/query", json={"sql": "SELECT n,\n  reflect('a', 'b') FROM logs"})
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "forbidden_query"
        assert "reflect()" in err["message"] and "line 2" in err["message"]
        r = c.post("/v1/query", json={"sql": "SELECT * FROM text.`/etc/passwd`"})
        assert "text.`/etc/passwd`" in r.json()["error"]["message"]
        r = c.post("/v1/query", json={"sql": "SET spark.sql.ansi.enabled=false"})
        assert "SET statements" in r.json()["error"]["message"]


def test_secrets_are_not_substituted_into_statements(servers, monkeypatch):
    """Spark would replace ${env:VAR} in the text of a statement: not in shoal."""
    monkeypatch.setenv("SHOAL_SECRET_FOR_TEST", "leaked-value")
    with servers["open"].client(timeout=120) as c:
        r = c.post("/v1/query", json={"sql": "SELECT '${env:SHOAL_SECRET_FOR_TEST}' AS v, "
                                             "'${system:user.home}' AS h, "
                                             "'${spark.sql.session.timeZone}' AS z"})
    assert r.status_code == 200, r.text
    assert r.json()["rows"] == [["${env:SHOAL_SECRET_FOR_TEST}", "${system:user.home}",
                                 "${spark.sql.session.timeZone}"]]


@pytest.mark.parametrize("prefix", ["/* x */ ", "-- x\n", "  \n\t", "/* a */ -- b\n "])
def test_ddl_needs_admin_whatever_comes_first(servers, prefix):
    live = servers["auth"]
    name = "hidden_" + str(abs(hash(prefix)) % 10_000)
    for stmt in (f"{prefix}CREATE TABLE {name} (n int)",
                 f"{prefix}ALTER TABLE logs ADD COLUMN {name} int",
                 f"{prefix}ALTER TABLE logs SET TBLPROPERTIES ('sort_by' = 'n')",
                 f"{prefix}ALTER TABLE logs UNSET TBLPROPERTIES ('retention')"):
        with live.client(QUERY, timeout=60) as c:
            r = c.post("/v1/query", json={"sql": stmt})
            assert r.status_code == 403, (stmt, r.text)
    assert name not in [t.name for t in live.db.catalog.list_tables()]
    assert name not in live.db.catalog.load_table("logs").schema.names
    assert "sort_by" not in live.db.catalog.load_table("logs").properties
    with live.client(QUERY, timeout=60) as c:   # DESCRIBE and SHOW TABLES stay query-scope
        assert c.post("/v1/query", json={"sql": f"{prefix}DESCRIBE logs"}).status_code == 200
        assert c.post("/v1/query", json={"sql": f"{prefix}SHOW TABLES"}).status_code == 200


def test_an_admin_sets_a_sort_key_and_bad_keys_are_400(servers):
    live = servers["auth"]
    with live.client(ADMIN, timeout=60) as c:
        r = c.post("/v1/query", json={
            "sql": "ALTER TABLE logs SET TBLPROPERTIES ('sort_by' = 'n, nope')"})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "invalid_schema"
        assert 'sort key column "nope" is not a column' in r.json()["error"]["message"]
        r = c.post("/v1/query", json={
            "sql": "ALTER TABLE logs SET TBLPROPERTIES ('kafka_bootstrap' = 'evil:9092')"})
        assert r.status_code == 403, r.text      # checked as CREATE checks it
        assert r.json()["error"]["code"] == "location_not_allowed"
        assert "kafka_bootstrap" not in live.db.catalog.load_table("logs").properties
        r = c.post("/v1/query", json={
            "sql": "ALTER TABLE logs SET TBLPROPERTIES ('sort_by' = 'msg, n')"})
        assert r.status_code == 200, r.text
        assert c.get("/v1/tables/logs").json()["properties"]["sort_by"] == "msg, n"
        r = c.post("/v1/query", json={"sql": "ALTER TABLE logs UNSET TBLPROPERTIES ('sort_by')"})
        assert r.status_code == 200, r.text
    assert "sort_by" not in live.db.catalog.load_table("logs").properties


def test_bound_locations_must_be_allowed(servers, host_files):
    with servers["auth"].client(ADMIN, timeout=60) as c:
        for props in (f"filedrop_path = '{host_files['dir']}'",
                      f"filedrop_path = 'file://{host_files['dir']}'",
                      "filedrop_path = '/etc'",
                      f"filedrop_path = '{servers['auth'].db.config.data_path}/../..'",
                      "filedrop_path = 's3://bucket/prefix'",
                      "kafka_topic = 't', kafka_bootstrap = 'evil.example:9092'",
                      "kafka_topic = 't', kafka_bootstrap = '127.0.0.1:9092'"):
            r = c.post("/v1/query", json={"sql": f"CREATE TABLE bound_x (n long) "
                                                 f"WITH ({props})"})
            assert r.status_code == 403, (props, r.text)
            assert r.json()["error"]["code"] == "location_not_allowed"
        assert c.get("/v1/tables/bound_x").status_code == 404
        inside = servers["auth"].db.config.data_path / "incoming"
        r = c.post("/v1/query", json={"sql": "CREATE TABLE bound_ok (n long) WITH ("
                                             f"filedrop_path = '{inside}')"})
        assert r.status_code == 200, r.text


def test_a_web_page_cannot_drive_the_loopback_server(servers):
    live = servers["open"]
    host = live.url.split("//", 1)[1]
    evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
    with live.client(timeout=60) as c:
        r = c.post("/v1/query", content=b'{"sql": "SELECT 1"}', headers=evil)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_origin"
        r = c.post("/v1/ingest/logs", content=b'{"n": 100}\n', headers=evil)
        assert r.status_code == 403
        r = c.post("/v1/query", content=b'{"sql": "SELECT 1"}',
                   headers={"Origin": "null", "Content-Type": "application/json"})
        assert r.status_code == 403
        # DNS rebinding: the page's own name resolved to 127.0.0.1, sent as Host
        r = c.post("/v1/query", json={"sql": "SELECT 1"},
                   headers={"Host": "rebound.example:" + host.rsplit(":", 1)[1]})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_host"
        # a form or text/plain body is never read by a JSON endpoint, even same-origin
        r = c.post("/v1/query", content=b'{"sql": "SELECT 1"}',
                   headers={"Content-Type": "text/plain"})
        assert r.status_code == 415
        r = c.post("/v1/tables", content=b'{"name": "formed"}',
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert r.status_code == 415
        # no CORS grant for anyone by default
        r = c.options("/v1/query", headers={"Origin": "http://evil.example",
                                            "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in r.headers
        # the same origin and plain clients work
        r = c.post("/v1/query", json={"sql": "SELECT count(*) AS n FROM logs"},
                   headers={"Origin": f"http://{host}"})
        assert r.status_code == 200 and r.json()["rows"] == [[2]]
    assert live.db.describe("logs")["row_count"] == 2
    assert "formed" not in [t.name for t in live.db.catalog.list_tables()]


def test_configured_origins_get_cors_and_names_are_accepted(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path), cors_origins="http://console.example",
                       http_hosts="shoal.internal")
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url:
            live = Live(url, db)
            with live.client(timeout=30) as c:
                r = c.options("/v1/tables", headers={"Origin": "http://console.example",
                                                     "Access-Control-Request-Method": "POST"})
                assert r.status_code == 204
                assert r.headers["access-control-allow-origin"] == "http://console.example"
                r = c.get("/v1/tables", headers={"Origin": "http://console.example"})
                assert r.status_code == 200
                assert r.headers["access-control-allow-origin"] == "http://console.example"
                r = c.get("/v1/tables", headers={"Host": "shoal.internal:8720"})
                assert r.status_code == 200
                r = c.get("/v1/tables", headers={"Origin": "http://other.example"})
                assert r.status_code == 403
    finally:
        db.close()


def test_a_slow_body_times_out_with_408(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path), body_timeout_s=0.5)
    db.create_table("slow", [shoal.Column("n", shoal.LONG)])
    app = create_app(db, config=db.config)
    try:
        with serve_app(app) as url:
            host, port = url.split("//", 1)[1].split(":")
            with socket.create_connection((host, int(port)), timeout=60) as s:
                s.sendall(b"POST /v1/ingest/slow HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Length: 1000\r\n\r\n" + b'{"n": 1}\n')
                answer = b""
                while b"\r\n\r\n" not in answer:     # waits on the server's answer
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert db.describe("slow")["row_count"] == 0
    finally:
        db.close()
