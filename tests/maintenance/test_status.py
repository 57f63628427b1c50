"""Status of maintenance: `shoal maintain --once` / `--status` through a real process, and
`GET /v1/maintenance` (admin scope) plus the Prometheus metrics of an in-server service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from shoal.maintenance.service import MaintenanceService, build_worker
from shoal.maintenance.worker import WorkerSettings
from shoal.server import create_app
from shoal.http.auth import token_table
from tests.maintenance.helpers import append_rows, make_table, open_db, row
from tests.support.server import serve_app
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
HOUR_NS = 3600 * 10**9


def _shoal(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    return subprocess.run([sys.executable, "-m", "shoal", "--data-dir",
                           str(data_dir), *args], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "250"},
                          timeout=120)


@pytest.mark.services
def test_cli_maintain_once_and_status(tmp_path):
    db = open_db(tmp_path)
    make_table(db, retention="1h")
    now = time.time_ns()
    append_rows(db, "ev", [row(1, ts=now - 2 * HOUR_NS)])
    append_rows(db, "ev", [row(2, ts=now)])
    db.close()
    data = tmp_path / "data"
    out = _shoal(data, "maintain", "--once", "--kind", "retention", "--kind", "gc",
                 "--kind", "ledger_sweep")
    assert out.returncode == 0, out.stderr
    ran = [json.loads(line) for line in out.stdout.splitlines()]
    assert sorted(r["kind"] for r in ran) == ["gc", "ledger_sweep", "retention"]
    ret = next(r for r in ran if r["kind"] == "retention")
    assert ret["ok"] and ret["table"] == "ev" and ret["result"]["rows_removed"] == 1
    status = _shoal(data, "maintain", "--status", "--format", "json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["counts"]["done"] == 3 and doc["counts"]["pending"] == 0
    assert doc["last"]["retention"]["result"]["extents_removed"] == 1
    table = _shoal(data, "maintain", "--status")
    assert table.returncode == 0 and "1 extents / 1 rows expired" in table.stdout
    bad = _shoal(data, "maintain", "--once", "--kind", "vacuum")
    assert bad.returncode == 2 and "'vacuum' is not one of" in bad.stderr
    db = open_db(tmp_path)
    assert db.catalog.table_counts("ev") == (1, 1)
    db.close()


def test_http_status_endpoint_and_metrics(tmp_path):
    db = open_db(tmp_path)
    make_table(db, retention="1h")
    append_rows(db, "ev", [row(1, ts=time.time_ns() - 2 * HOUR_NS)])
    tokens = token_table([("adm", frozenset({"admin"})), ("q", frozenset({"query"}))])
    app = create_app(db, config=db.config, tokens=tokens, maintenance=True)
    # the in-server service: scheduler + worker, polling fast, no start delay
    service = MaintenanceService(
        db, worker=build_worker(db, name="srv", settings=WorkerSettings(
            poll_s=0.1, kinds=("retention", "gc", "ledger_sweep"))), start_delay_s=0)
    app.state.maintenance = service
    with serve_app(app) as url:
        admin = {"Authorization": "Bearer adm"}
        doc = eventually(lambda: httpx.get(f"{url}/v1/maintenance", headers=admin).json(),
                         "three maintenance units done",
                         until=lambda d: d["counts"]["done"] >= 3)
        assert doc["service"] == {"running": True, "worker": "srv"}
        assert doc["last"]["retention"]["result"]["rows_removed"] == 1
        assert {u["kind"] for u in doc["units"]} >= {"retention", "gc", "ledger_sweep"}
        assert httpx.get(f"{url}/v1/maintenance",
                         headers={"Authorization": "Bearer q"}).status_code == 403
        assert httpx.get(f"{url}/v1/maintenance").status_code == 401
        metrics = httpx.get(f"{url}/metrics", headers=admin).text
        assert 'shoal_maintenance_units_total{kind="retention",outcome="ok"} 1.0' in metrics
        assert "shoal_maintenance_rows_expired_total 1.0" in metrics
        assert 'shoal_maintenance_queue{state="done"}' in metrics
    assert db.catalog.table_counts("ev") == (0, 0)
    db.close()
