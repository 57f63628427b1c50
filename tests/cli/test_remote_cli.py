"""`shoal --url ...`: the CLI as a client of a live server (uvicorn on a real socket, tokens
on), beside the same commands run on a data directory; the data directory is never made
behind the user's back; the root's options work after the command too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import shoal
from shoal.server import create_app
from tests.cli.test_ingest_startup import PROBE
from tests.support.server import serve_app

pytestmark = pytest.mark.services

ADMIN, INGEST, QUERY = "admin-tok-1", "ingest-tok-2", "query-tok-3"
SHOAL = [sys.executable, "-m", "shoal"]
APP_NDJSON = (b'{"service":"api","level":"error","message":"deadlock detected"}\n'
              b'{"service":"web","level":"info","message":"ok"}\n'
              b'{"service":"web","level":"error","message":"timeout"}\n')
# The README's CLI quick start, after `create-table` and `ingest`.
QUERIES = [
    ("sql", "SELECT level, count(*) AS n FROM logs GROUP BY level ORDER BY level", "--stats"),
    ("kql", "logs | summarize n = count() by level | order by level asc", "--stats"),
    ("sql", "SELECT service, message FROM logs WHERE message LIKE '%dead%'", "-f", "json"),
    ("kql", "logs | where level == 'error' | project service, message | order by service asc",
     "-f", "csv"),
    ("sql", "DESCRIBE logs", "-f", "json"),
]


def run(*args: str, cwd: Path, env: dict[str, str] | None = None,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    out = subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, timeout=300,
                         env={**clean, **(env or {})}, input=stdin)
    return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.decode(),
                                       out.stderr.decode())


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("remote-srv")),
                       tokens=f"{ADMIN}=admin;{INGEST}=ingest;{QUERY}=query")
    try:
        with serve_app(create_app(db, config=db.config)) as url:
            yield url
    finally:
        db.close()


@pytest.fixture(scope="module")
def both(server, tmp_path_factory) -> tuple[Path, Path]:
    """The README's CLI quick start, once on a data directory and once through the server:
    (the working directory, the data directory); each step must print the same."""
    work = tmp_path_factory.mktemp("remote-cli")
    (work / "app.ndjson").write_bytes(APP_NDJSON)
    data = work / "data"
    local = ("--data-dir", str(data))
    steps = [("create-table", "logs", "-c", "service:string", "-c", "level:string",
              "-c", "message:string")]
    remote_tokens = [ADMIN]
    for step, token in zip(steps, remote_tokens):
        a = run(*local, *step, cwd=work)
        b = run("--url", server, "--token", token, *step, cwd=work)
        assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
        assert _table_doc(a.stdout) == _table_doc(b.stdout)
    a = run(*local, "ingest", "app.ndjson", "--table", "logs", "--idempotency-key", "k",
            cwd=work)
    b = run("--url", server, "--token", INGEST, "ingest", "app.ndjson", "--table", "logs",
            "--idempotency-key", "k", cwd=work)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert _summary(a.stdout) == _summary(b.stdout) == \
        "ingested 3 rows into logs in 1 chunk(s): snapshot 2"
    return work, data


def _table_doc(text: str) -> dict:
    doc = json.loads(text)
    doc.pop("created_at", None)
    doc.pop("updated_at", None)
    return doc


def _summary(text: str) -> str:
    return re.sub(r", [\d.]+ MB/s.*", "", text.strip())


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q[0]} {' '.join(q[2:])}")
def test_the_quick_start_answers_the_same_through_the_server(server, both, query):
    work, data = both
    a = run("--data-dir", str(data), *query, cwd=work)
    b = run("--url", server, "--token", QUERY, *query, cwd=work)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    if "json" in query:
        da, db_ = json.loads(a.stdout), json.loads(b.stdout)
        assert da["columns"] == db_["columns"] and da["rows"] == db_["rows"]
        assert da.get("sql") == db_.get("sql")
        assert {k: v for k, v in da["stats"].items() if k not in ("scans", "engine_reason")} \
            == {k: v for k, v in db_["stats"].items()
                if k not in ("scans", "engine_reason", "truncated")}
    else:
        assert a.stdout == b.stdout
    if "--stats" in query:      # the same stats line (the engine's reason aside)
        strip = re.compile(r', "engine_reason": "[^"]*"')
        assert strip.sub("", a.stderr) == strip.sub("", b.stderr)
        assert a.stderr.startswith("stats: ")


def test_tables_and_describe_through_the_server(server, both):
    work, data = both
    a = run("--data-dir", str(data), "describe", "logs", cwd=work)
    b = run("--url", server, "--token", QUERY, "describe", "logs", cwd=work)
    assert _table_doc(a.stdout) == _table_doc(b.stdout)
    a = run("--data-dir", str(data), "tables", "--format", "json", cwd=work)
    b = run("--url", server, "--token", QUERY, "tables", "--format", "json", cwd=work)
    assert [_table_doc(json.dumps(t)) for t in json.loads(a.stdout)["tables"]] == \
        [_table_doc(json.dumps(t)) for t in json.loads(b.stdout)["tables"]]


def test_a_replayed_ingest_through_the_server_says_so(server, both):
    work, _ = both
    again = run("--url", server, "--token", INGEST, "ingest", "app.ndjson", "--table", "logs",
                "--idempotency-key", "k", cwd=work)
    assert again.returncode == 0, again.stderr
    assert "1 chunk(s) replayed" in again.stdout
    count = run("--url", server, "--token", QUERY, "sql", "SELECT count(*) AS n FROM logs",
                "-f", "csv", cwd=work)
    assert count.stdout == "n\n3\n"


def test_stdin_ingest_through_the_server(server, both):
    work, _ = both
    assert run("--url", server, "--token", ADMIN, "create-table", "piped", "-c", "n:long",
               cwd=work).returncode == 0
    out = run("--url", server, "--token", INGEST, "ingest", "-", "--table", "piped",
              cwd=work, stdin=b'{"n": 1}\n{"n": 2}\n{"n": "x"}\n')
    assert out.returncode == 1
    assert out.stderr.startswith('error: line 3: field "n": long expects an integer')
    out = run("--url", server, "--token", INGEST, "ingest", "-", "--table", "piped",
              "--partial", cwd=work, stdin=b'{"n": 1}\n{"n": 2}\n{"n": "x"}\n')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ingested 2 rows into piped in 1 chunk(s)")
    assert "1 line(s) rejected" in out.stdout
    assert out.stderr.startswith('rejected line 3: field "n"')


def test_promql_answers_the_same_through_the_server(server, both):
    work, data = both
    q = ("promql", "vector(1) + 2", "--time", "1700000000", "--format", "json")
    a = run("--data-dir", str(data), *q, cwd=work)
    b = run("--url", server, "--token", QUERY, *q, cwd=work)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert json.loads(a.stdout) == json.loads(b.stdout)


@pytest.mark.parametrize(("token", "args", "scope"), [
    (QUERY, ("create-table", "t2", "-c", "a:int"), "admin"),
    (QUERY, ("sql", "CREATE TABLE t3 (a int)"), "admin"),
    (QUERY, ("ingest", "app.ndjson", "--table", "logs"), "ingest"),
    (INGEST, ("sql", "SELECT 1 AS one"), "query"),
])
def test_a_token_without_the_scope_is_refused_in_one_line(server, both, token, args, scope):
    work, _ = both
    out = run("--url", server, "--token", token, *args, cwd=work)
    assert out.returncode == 1
    assert out.stderr == f'error: this token lacks the "{scope}" scope\n'
    assert out.stdout == ""


def test_server_errors_read_as_local_ones(server, both, tmp_path):
    work, data = both
    for args in (("describe", "nope"), ("sql", "SELECT * FROM nope")):
        a = run("--data-dir", str(data), *args, cwd=work)
        b = run("--url", server, "--token", QUERY, *args, cwd=work)
        assert a.returncode == b.returncode == 1
        assert a.stderr == b.stderr == 'error: table "nope" does not exist\n'
    out = run("--url", server, "sql", "SELECT 1", cwd=work)        # no token
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    out = run("--url", "http://127.0.0.1:9", "tables", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith("error: cannot reach the shoal server at http://127.0.0.1:9")
    assert out.stderr.count("\n") == 1


def test_a_bad_line_is_printed_once(server, both, tmp_path):
    work, data = both
    (tmp_path / "bad.ndjson").write_text('{"n": 1}\n{"n": "seven"}\n')
    assert run("--data-dir", str(data), "create-table", "nums", "-c", "n:int",
               cwd=tmp_path).returncode == 0
    assert run("--url", server, "--token", ADMIN, "create-table", "nums", "-c", "n:int",
               cwd=tmp_path).returncode == 0
    for where in (("--data-dir", str(data)), ("--url", server, "--token", INGEST)):
        out = run(*where, "ingest", "bad.ndjson", "--table", "nums", cwd=tmp_path)
        assert out.returncode == 1
        lines = out.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: bad.ndjson line 2: "), lines


def test_options_and_env_after_the_command(server, both):
    work, data = both
    a = run("sql", "--data-dir", str(data), "SELECT count(*) AS n FROM logs", "-f", "csv",
            cwd=work)
    b = run("sql", "SELECT count(*) AS n FROM logs", f"--data-dir={data}", "-f", "csv",
            cwd=work)
    c = run("sql", "SELECT count(*) AS n FROM logs", "--url", server, "-f", "csv",
            f"--token={QUERY}", cwd=work)
    d = run("sql", "SELECT count(*) AS n FROM logs", "-f", "csv", cwd=work,
            env={"SHOAL_URL": server, "SHOAL_TOKEN": QUERY})
    e = run("describe", "--data-dir", str(data), "logs", cwd=work)
    for out in (a, b, c, d):
        assert (out.returncode, out.stdout) == (0, "n\n3\n"), out.stderr
    assert e.returncode == 0 and json.loads(e.stdout)["name"] == "logs"
    # `--data-dir` on the command line means that directory, whatever SHOAL_URL says.
    g = run("sql", "SELECT count(*) AS n FROM logs", "-f", "csv", "--data-dir", str(data),
            cwd=work, env={"SHOAL_URL": "http://127.0.0.1:9"})
    assert g.stdout == "n\n3\n", g.stderr
    # A later value wins, wherever it is written.
    f = run("--data-dir", "/nonexistent", "sql", "--data-dir", str(data),
            "SELECT count(*) AS n FROM logs", "-f", "csv", cwd=work)
    assert f.stdout == "n\n3\n", f.stderr


def test_a_missing_data_dir_is_an_error_and_is_not_created(tmp_path):
    for args in (("sql", "SELECT 1 AS one"), ("kql", "logs | take 1"), ("tables",),
                 ("describe", "logs"), ("promql", "up")):
        out = run(*args, cwd=tmp_path)
        assert out.returncode == 1, out
        assert out.stderr == (f"error: data directory {tmp_path / 'shoal-data'} does not "
                              "exist: create it with `shoal init` (or `shoal create-table`), "
                              "pass --data-dir, or talk to a server with --url\n")
        assert not (tmp_path / "shoal-data").exists()
    (tmp_path / "a.ndjson").write_bytes(APP_NDJSON)
    out = run("ingest", "a.ndjson", "--table", "logs", cwd=tmp_path)
    assert out.returncode == 1 and "does not exist" in out.stderr
    assert not (tmp_path / "shoal-data").exists()


def test_init_and_create_table_make_the_data_dir(tmp_path):
    out = run("init", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"data directory {tmp_path / 'shoal-data'} created")
    assert run("init", cwd=tmp_path).stdout.startswith(
        f"data directory {tmp_path / 'shoal-data'} exists")
    assert run("tables", "--format", "json", cwd=tmp_path).stdout.strip() == \
        json.dumps({"tables": []}, indent=2)
    out = run("--data-dir", "fresh", "create-table", "logs", "-c", "a:int", cwd=tmp_path)
    assert out.returncode == 0 and (tmp_path / "fresh").is_dir(), out.stderr


def test_the_remote_path_imports_no_engine(server, both, tmp_path):
    """Neither pyspark nor duckdb (nor pyarrow: the CLI prints JSON answers) in a `--url`
    command's process."""
    work, _ = both
    report = tmp_path / "report.json"
    out = subprocess.run([sys.executable, str(PROBE), str(report), "--url", server,
                          "--token", QUERY, "sql", "SELECT count(*) AS n FROM logs"],
                         capture_output=True, text=True, timeout=300, cwd=work,
                         env={k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")})
    assert out.returncode == 0, out.stderr
    tops = {m.split(".")[0] for m in json.loads(report.read_text())["exit_modules"]}
    assert not tops & {"pyspark", "py4j", "duckdb", "pyarrow", "sqlalchemy"}
