"""Ingest conventions through the `shoal` command on a local workspace: `timestamp_unit` and
`props` set by `shoal sql`, the early-epoch warning printed by `shoal ingest` at the line of
its input, zoneless timestamp text read as UTC."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import shoal

SHOAL = [sys.executable, "-m", "shoal"]
AT = 1_795_929_000  # 2026-11-29T05:10:00Z in epoch seconds


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


def ndjson(path: Path, *records: dict) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def stored(data: Path, table: str) -> list[int]:
    db = shoal.connect(data_dir=str(data))
    try:
        out, _ = db.read(table)
        return out.sort_by("msg").column("_timestamp").cast("int64").to_pylist()
    finally:
        db.close()


@pytest.mark.slow
def test_timestamp_unit_and_its_warning(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ws = ["--data-dir", str(data)]
    assert run(*ws, "sql", "CREATE TABLE ev (msg string)", cwd=tmp_path).returncode == 0
    first = ndjson(tmp_path / "first.ndjson", {"msg": "a", "_timestamp": "2026-11-29 05:10:00"},
                   {"msg": "b", "_timestamp": AT})
    out = run(*ws, "ingest", first, "--table", "ev", "--chunk-mb", "1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    [warning] = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert warning.startswith("warning: column _timestamp: 1 epoch number read as "
                              "nanoseconds (timestamp_unit='ns') falls before 1971: "
                              f"{first} line 2: {AT} read as nanoseconds is ")
    assert "ingested 2 rows into ev" in out.stdout

    bad = run(*ws, "sql", "ALTER TABLE ev SET TBLPROPERTIES ('timestamp_unit' = 'm')",
              cwd=tmp_path)
    assert bad.returncode == 1 and "timestamp_unit='m'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    out = run(*ws, "sql", "ALTER TABLE ev SET TBLPROPERTIES ('timestamp_unit' = 's')",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    second = ndjson(tmp_path / "second.ndjson", {"msg": "c", "_timestamp": AT})
    out = run(*ws, "ingest", second, "--table", "ev", cwd=tmp_path)
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
    assert stored(data, "ev") == [AT * 10**9, AT, AT * 10**9]


@pytest.mark.slow
def test_props_off_through_the_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ws = ["--data-dir", str(data)]
    out = run(*ws, "sql", "CREATE TABLE p (msg string) WITH (props = 'off')", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    src = ndjson(tmp_path / "p.ndjson", {"msg": "a"}, {"msg": "b", "Bad-Key": 1})
    out = run(*ws, "ingest", src, "--table", "p", cwd=tmp_path)
    assert out.returncode == 1
    assert (f'{src} line 2: field "Bad-Key": is not a valid column name, and the table keeps '
            "no props (props='off')") in out.stderr
    out = run(*ws, "ingest", src, "--table", "p", "--partial", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "1 line(s) rejected" in out.stdout
