"""The `shoal` command as a user runs it: a real subprocess, real exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.format.tlm import TlmFormat
from tests.test_readme_commands import ROOT, _checkout_root

_IN_GIT_CHECKOUT = _checkout_root() == ROOT

SHOAL = [sys.executable, "-m", "shoal"]


def run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.services
def test_tables_and_describe(tmp_path):
    data = tmp_path / "data"
    db = shoal.connect(data_dir=str(data))
    db.create_table("logs", [shoal.Column("service", shoal.STRING)],
                    properties={"retention": "7d"})
    info = db.catalog.load_table("logs")
    db.append("logs", pa.Table.from_pylist(
        [{"_timestamp": 1, "props": None, "service": "api"}] * 3, schema=info.schema.arrow()))
    db.close()
    out = run("--data-dir", str(data), "describe", "logs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["name"] == "logs" and doc["retention"] == "7d" and doc["row_count"] == 3
    assert doc["extent_count"] == 1 and doc["snapshot_id"] == 2 and doc["schema_version"] == 1
    assert doc["columns"][2] == {"name": "service", "type": "string", "nullable": True,
                                 "header": None}
    # The data dir can come from the environment too.
    out = run("tables", "--format", "json", cwd=tmp_path, env={"SHOAL_DATA_DIR": str(data)})
    assert [t["name"] for t in json.loads(out.stdout)["tables"]] == ["logs"]


def test_errors_are_one_line_with_nonzero_exit(tmp_path):
    (tmp_path / "d").mkdir()
    out = run("--data-dir", str(tmp_path / "d"), "describe", "nope", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip() == 'error: table "nope" does not exist'
    bad = tmp_path / "bad.toml"
    bad.write_text("colour = 'blue'\n")
    out = run("--config", str(bad), "tables", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.strip().startswith("error: config file")
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.services
def test_extent_inspect(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path / "data"))
    db.create_table("logs", [shoal.Column("service", shoal.STRING)])
    info = db.catalog.load_table("logs")
    outcome = db.append("logs", pa.Table.from_pylist(
        [{"_timestamp": 5, "props": None, "service": "api"}], schema=info.schema.arrow()))
    path = Path(db.store.root) / outcome.added[0].object_path
    db.close()
    out = run("extent", "inspect", str(path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["version"] == 3 and doc["row_count"] == 1 and doc["block_count"] == 1
    out = run("extent", "inspect", str(tmp_path / "missing.tlm"), cwd=tmp_path)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
    assert TlmFormat  # the format the CLI reads is the package's own


@pytest.mark.slow
@pytest.mark.skipif(_IN_GIT_CHECKOUT, reason="tests/test_readme_commands.py runs the demo "
                    "(from a fresh clone) and asserts all of this and more")
def test_demo_runs_and_cleans_up(tmp_path):
    """The demo end to end (a real server, HTTP ingest, Spark): its key lines, and nothing
    left behind — neither its temporary directory nor its server. Outside a git checkout
    (an sdist), where the fresh-clone test of the README's commands cannot run."""
    out = run("demo", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stdout + out.stderr
    for line in ("new_columns ['region']", "replayed: true", "72,000 rows in 72 extents",
                 "read 1 of 72 extents", "stopped (SIGTERM)", "demo finished"):
        assert line in out.stdout, (line, out.stdout)
    assert list(tmp_path.glob("shoal-demo-*")) == []


@pytest.mark.spark
def test_sql_ddl_ingest_and_select_in_every_format(tmp_path):
    data = ["--data-dir", str(tmp_path / "data")]
    out = run(*data, "sql", "CREATE TABLE ev (service string, n long) WITH (mode='drop')",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    bad = run(*data, "sql", "CREATE TABLE ev2 (h bytes HEADERS)", cwd=tmp_path)
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and \
        len(bad.stderr.strip().splitlines()) == 1
    src = tmp_path / "ev.ndjson"
    src.write_text("".join(json.dumps({"_timestamp": f"2026-03-01T00:00:0{i}Z",
                                       "service": "api" if i % 2 else "web", "n": i}) + "\n"
                           for i in range(6)))
    assert run(*data, "ingest", str(src), "--table", "ev", cwd=tmp_path).returncode == 0
    # one process, three answers: the JVM starts once per process, so ask for JSON first
    # and check the CSV and table forms through the same path in-process below
    out = run(*data, "sql", "SELECT service, sum(n) AS total FROM ev WHERE service = 'api' "
              "GROUP BY service", "--format", "json", "--stats", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["rows"] == [["api", 9]]
    assert doc["columns"] == [{"name": "service", "type": "string"},
                              {"name": "total", "type": "bigint"}]
    assert '"extents_read": 1' in out.stderr and "bytes_read" in out.stderr
    missing = run(*data, "sql", "SELECT * FROM nope", cwd=tmp_path)
    assert missing.returncode == 1 and 'table "nope" does not exist' in missing.stderr
    marker = tmp_path / "pwned"
    for attack in (f"SELECT TRANSFORM(1) USING 'touch {marker}' AS (o string)",
                   "SELECT reflect('java.lang.System', 'getenv', 'HOME')",
                   f"SELECT * FROM text.`{tmp_path / 'shoal.toml'}`", "SET x = 1"):
        refused = run(*data, "sql", attack, cwd=tmp_path)
        assert refused.returncode == 1, attack
        assert refused.stderr.startswith("error: not allowed in a query"), refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert not marker.exists()


def test_sql_csv_and_table_output(tmp_path):
    from shoal.query.results import csv_text

    table = pa.table({"a": [1, None], "b": ["x,y", "z"], "c": [[1, 2], None]})
    assert csv_text(table) == 'a,b,c\n1,"x,y","[1, 2]"\n,z,\n'


@pytest.mark.services
def test_sql_drops_undrops_renames_and_shows_properties(tmp_path):
    data = ["--data-dir", str(tmp_path / "data")]

    def sql(statement: str) -> subprocess.CompletedProcess[str]:
        return run(*data, "sql", statement, "--format", "json", cwd=tmp_path)

    assert sql("CREATE TABLE logs (msg string)").returncode == 0
    out = sql("ALTER TABLE logs SET TBLPROPERTIES ('mode' = 'reject', retention = '7d')")
    assert out.returncode == 0, out.stderr
    out = sql("SHOW TBLPROPERTIES logs")
    assert json.loads(out.stdout)["rows"] == [["mode", "reject"], ["retention", "7d"]]
    out = sql("DROP TABLE logs")
    assert json.loads(out.stdout)["rows"] == [["logs", "dropped"]]
    gone = sql("DROP TABLE logs")
    assert gone.returncode == 1 and gone.stderr.strip() == 'error: table "logs" does not exist'
    assert json.loads(sql("DROP TABLE IF EXISTS logs").stdout)["rows"] == [["logs", "absent"]]
    assert sql("UNDROP TABLE logs").returncode == 0
    out = sql("ALTER TABLE logs RENAME TO app_logs")
    assert out.returncode == 0, out.stderr
    tables = run(*data, "tables", "--format", "json", cwd=tmp_path)
    assert [t["name"] for t in json.loads(tables.stdout)["tables"]] == ["app_logs"]
    again = sql("UNDROP TABLE logs")
    assert again.returncode == 1 and "cannot undrop table \"logs\"" in again.stderr
