"""A statement the embedded engine answers starts no JVM: `shoal sql`, `shoal kql` and
`shoal.connect().sql(...)` never import pyspark (nor py4j) when the answer is local, while a
statement sent to Spark still works from the same kind of process. Modules are read from the
command's own `sys.modules` at exit (tests/support/first_chunk.py records them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import shoal
from tests.cli.test_ingest_startup import PROBE

JVM_TOPS = ("pyspark", "py4j")


def _jvm_modules(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in JVM_TOPS)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    db = shoal.connect(data_dir=str(d))
    db.create_table("logs", [shoal.Column("service", shoal.STRING),
                             shoal.Column("n", shoal.LONG)])
    db.ingest_ndjson("logs", b'{"_timestamp": "2026-03-01T00:00:00Z", "service": "a", "n": 1}\n'
                             b'{"_timestamp": "2026-03-01T00:00:01Z", "service": "b", "n": 2}\n')
    db.close()
    return d


def _probe(tmp_path: Path, data: Path, *args: str) -> tuple[subprocess.CompletedProcess[str],
                                                             dict]:
    report = tmp_path / "report.json"
    out = subprocess.run([sys.executable, str(PROBE), str(report), "--data-dir", str(data),
                          *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return out, json.loads(report.read_text())


@pytest.mark.parametrize("command", [
    ("sql", "SELECT service, sum(n) AS n FROM logs GROUP BY service ORDER BY service"),
    ("kql", "logs | summarize n = sum(n) by service | order by service asc"),
])
def test_a_local_statement_imports_no_spark(tmp_path: Path, data: Path, command) -> None:
    out, report = _probe(tmp_path, data, *command, "--format", "json", "--stats")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == [["a", 1], ["b", 2]]
    assert '"engine": "local"' in out.stderr
    assert _jvm_modules(report["exit_modules"]) == []


def test_connect_sql_imports_no_spark(data: Path) -> None:
    code = ("import sys, shoal\n"
            f"db = shoal.connect(data_dir={str(data)!r})\n"
            "r = db.sql('SELECT count(*) AS c FROM logs')\n"
            "k = db.kql('logs | count')\n"
            "print(r.stats.engine, r.table.to_pylist(), k.stats.engine,\n"
            "      sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "local [{'c': 2}] local []"
