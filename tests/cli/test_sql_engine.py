"""`shoal sql --engine` as a user runs it: each engine forced from the
command line, the stats line names it and why, refusals are one-line errors, a bad name is a
usage error (exit 2)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run


@pytest.mark.spark
def test_sql_engine_flag_forces_each_engine(tmp_path):
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(*data, "sql", "CREATE TABLE ev (service string, n long)",
               cwd=tmp_path).returncode == 0
    src = tmp_path / "ev.ndjson"
    src.write_text("".join(json.dumps({"_timestamp": f"2026-03-01T00:00:0{i}Z",
                                       "service": "api" if i % 2 else "web", "n": i}) + "\n"
                           for i in range(6)))
    assert run(*data, "ingest", str(src), "--table", "ev", cwd=tmp_path).returncode == 0
    sql = "SELECT service, sum(n) AS total FROM ev WHERE service = 'api' GROUP BY service"
    for engine in ("local", "spark"):
        out = run(*data, "sql", sql, "--engine", engine, "--format", "json", "--stats",
                  cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["rows"] == [["api", 9]]
        stats = json.loads(out.stderr.split("stats: ", 1)[1])
        assert stats["engine"] == engine and f"engine={engine} requested" in \
            stats["engine_reason"]
    # the environment sets the default; the flag wins over it
    out = run(*data, "sql", sql, "--stats", cwd=tmp_path, env={"SHOAL_QUERY_ENGINE": "local"})
    assert out.returncode == 0 and '"engine": "local"' in out.stderr
    refused = run(*data, "sql", "SELECT initcap(service) AS s FROM ev", "--engine", "local",
                  cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: the local engine cannot answer this statement: "
                                     "function initcap()"), refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    bad = run(*data, "sql", sql, "--engine", "fast", cwd=tmp_path)
    assert bad.returncode == 2 and "'fast' is not one of" in bad.stderr


@pytest.mark.spark
def test_a_spark_failure_is_printed_once(tmp_path):
    """Spark's own log of a failed task (its stack trace) goes to `<data dir>/spark.log`;
    stderr holds shoal's one error line, not the same error twice."""
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(*data, "sql", "CREATE TABLE dz (n long)", cwd=tmp_path).returncode == 0
    (tmp_path / "dz.ndjson").write_text('{"n": 3}\n')
    assert run(*data, "ingest", "dz.ndjson", "--table", "dz", cwd=tmp_path).returncode == 0
    out = run(*data, "sql", "SELECT 1 / (n - n) AS x FROM dz", "--engine", "spark",
              cwd=tmp_path)
    assert out.returncode == 1
    errors = [ln for ln in out.stderr.splitlines() if "DIVIDE_BY_ZERO" in ln]
    assert len(errors) == 1 and errors[0].startswith("error: [DIVIDE_BY_ZERO]"), out.stderr
    assert " ERROR " not in out.stderr and "\tat org.apache" not in out.stderr
    assert "DIVIDE_BY_ZERO" in (tmp_path / "data" / "spark.log").read_text()
