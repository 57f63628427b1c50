"""`shoal pipeline scrape --once` (the real `shoal` process, a real HTTP target): one line per
target, the samples committed, and exit 1 naming the target that failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import shoal
from tests.support.exposition import exposition_server
from tests.support.server import free_port

SHOAL = [sys.executable, "-m", "shoal"]


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})


@pytest.mark.services
def test_scrape_once_commits_and_names_the_failed_target(tmp_path):
    data = tmp_path / "data"
    env = {"SHOAL_DATA_DIR": str(data), "SHOAL_ALLOWED_HOSTS": "127.0.0.1"}
    refused = f"127.0.0.1:{free_port()}"
    with exposition_server() as target:
        target.set("# TYPE hits_total counter\nhits_total 5\n")
        out = run("sql", f"CREATE TABLE good WITH (scrape_targets = '{target.address}')",
                  cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        out = run("pipeline", "scrape", "--once", cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        assert f"good {target.address}: up, 1 samples" in out.stdout
        out = run("sql", f"CREATE TABLE bad WITH (scrape_targets = '{refused}')",
                  cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        out = run("pipeline", "scrape", "--once", cwd=tmp_path, env=env)
    assert out.returncode == 1
    assert f"good {target.address}: up" in out.stdout
    assert f"bad {refused}: down (ConnectError" in out.stdout
    assert out.stderr.strip().splitlines()[-1].startswith(f"error: scrape of bad {refused} failed")
    out = run("pipeline", "scrape", "--once", "--table", "nosuch", cwd=tmp_path, env=env)
    assert out.returncode == 1 and out.stderr.strip() == 'error: table "nosuch" does not exist'
    db = shoal.connect(data_dir=str(data))
    try:
        hits = db.sql("SELECT value FROM good WHERE metric = 'hits_total'").table.to_pylist()
        ups = db.sql("SELECT value FROM bad WHERE metric = 'up'").table.to_pylist()
    finally:
        db.close()
    assert hits == [{"value": 5.0}] * 2 and ups == [{"value": 0.0}]
