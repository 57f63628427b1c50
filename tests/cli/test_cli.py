"""The `shoal` command as a user runs it: a real subprocess, real exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

import shoal
from shoal.format.tlm import TlmFormat

SHOAL = [sys.executable, "-m", "shoal.cli.main"]


def run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


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
    out = run("--data-dir", str(tmp_path / "d"), "describe", "nope", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip() == 'error: table "nope" does not exist'
    bad = tmp_path / "bad.toml"
    bad.write_text("colour = 'blue'\n")
    out = run("--config", str(bad), "tables", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.strip().startswith("error: config file")
    assert len(out.stderr.strip().splitlines()) == 1


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
    assert doc["version"] == 2 and doc["row_count"] == 1 and doc["block_count"] == 1
    out = run("extent", "inspect", str(tmp_path / "missing.tlm"), cwd=tmp_path)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
    assert TlmFormat  # the format the CLI reads is the package's own


def test_demo_runs_and_cleans_up(tmp_path):
    out = run("demo", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert "needle: trace_id" in out.stdout and "replayed key demo-minute-3" in out.stdout
    assert list(tmp_path.glob("shoal-demo-*")) == []
