"""DELETE, TRUNCATE and the erasure steps with the `shoal` command (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHOAL = [sys.executable, "-m", "shoal"]


def run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def _json(out: subprocess.CompletedProcess[str]) -> list[dict]:
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    names = [c["name"] for c in doc["columns"]]
    return [dict(zip(names, row, strict=True)) for row in doc["rows"]]


@pytest.mark.parametrize("catalog", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_delete_truncate_and_expire_from_the_cli(tmp_path, catalog, request):
    env = {}
    if catalog == "postgres":
        env["SHOAL_CATALOG_URL"] = request.getfixturevalue("pg_catalog_url")
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(*data, "sql", "CREATE TABLE ev (user_id string, n long)", cwd=tmp_path,
               env=env).returncode == 0
    src = tmp_path / "ev.ndjson"
    src.write_text("".join(json.dumps({"user_id": f"u{i % 4}", "n": i}) + "\n"
                           for i in range(40)))
    assert run(*data, "ingest", str(src), "--table", "ev", cwd=tmp_path,
               env=env).returncode == 0

    [row] = _json(run(*data, "sql", "DELETE FROM ev WHERE user_id = 'u2'", "--format", "json",
                      cwd=tmp_path, env=env))
    assert (row["operation"], row["rows_deleted"], row["extents_touched"]) == ("delete", 10, 1)
    old = row["snapshot_id"] - 1
    rows = _json(run(*data, "sql", f"SELECT count(*) AS c FROM ev VERSION AS OF {old} "
                     "WHERE user_id = 'u2'", "--format", "json", cwd=tmp_path, env=env))
    assert rows == [{"c": 10}]                   # still there for time travel...

    out = run(*data, "maintain", "--expire-now", "ev", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["table"] == "ev" and report["files_deleted"] == 1
    gone = run(*data, "sql", f"SELECT count(*) FROM ev VERSION AS OF {old}", cwd=tmp_path,
               env=env)
    assert gone.returncode == 1 and "snapshot" in gone.stderr   # ...until expired
    rows = _json(run(*data, "sql", "SELECT count(*) AS c FROM ev", "--format", "json",
                     cwd=tmp_path, env=env))
    assert rows == [{"c": 30}]

    [row] = _json(run(*data, "sql", "TRUNCATE TABLE ev", "--format", "json", cwd=tmp_path,
                      env=env))
    assert (row["operation"], row["rows_deleted"]) == ("truncate", 30)
    bad = run(*data, "sql", "DELETE FROM ev WHERE", cwd=tmp_path, env=env)
    assert bad.returncode == 1 and bad.stderr.startswith("error: ")
    assert "expected a predicate" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
