"""`shoal promql '<expr>'` as a user runs it, and `db.promql(...)` in Python: instant and
range answers over the Prometheus table, and a parse error as one line (exit 1)."""

from __future__ import annotations

import json

import pytest

from shoal.client import connect
from shoal.types.prometheus import PROM_SAMPLES_SCHEMA, SampleRows
from tests.cli.test_cli import run

T0 = 1_700_000_000


def _load(data_dir: str) -> None:
    db = connect(data_dir=data_dir)
    try:
        db.create_table("prom_samples", [c for c in PROM_SAMPLES_SCHEMA.columns
                                         if c.name not in ("_timestamp", "props")], mode="drop")
        rows = SampleRows()
        for i in range(41):                      # 10 minutes at 15 s, +2 a sample
            for job in ("a", "b"):
                rows.add((T0 + 15 * i) * 1000, {"__name__": "jobs_total", "job": job},
                         float(2 * i))
        db.ingest_arrow("prom_samples", rows.batch())
        # in Python: the same evaluator as the HTTP API
        instant = db.promql("sum(jobs_total)", time=T0 + 600).data()
        assert instant == {"resultType": "vector", "result": [
            {"metric": {}, "value": [T0 + 600, "160"]}]}
        ranged = db.promql("jobs_total{job='a'}", start=T0, end=T0 + 60, step=30).data()
        assert [p[1] for p in ranged["result"][0]["values"]] == ["0", "4", "8"]
    finally:
        db.close()


@pytest.mark.services
def test_promql_command(tmp_path):
    data_dir = str(tmp_path / "data")
    _load(data_dir)
    data = ["--data-dir", data_dir]
    out = run(*data, "promql", "rate(jobs_total[5m])", "--time", str(T0 + 600),
              "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert sorted((r["metric"]["job"], r["value"][1]) for r in doc["result"]) == [
        ("a", "0.13333333333333333"), ("b", "0.13333333333333333")]

    table = run(*data, "promql", "max(jobs_total)", "--start", "2023-11-14T22:13:20Z",
                "--end", str(T0 + 120), "--step", "1m", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "1700000060" in table.stdout and "1700000120" in table.stdout

    bad = run(*data, "promql", "sum(rate(jobs_total[5m])", cwd=tmp_path)
    assert bad.returncode == 1
    assert "parse error" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
