"""`shoal kql "<query>"` and `shoal sql --kql` as a user runs them: the answer,
the stats with pruning, the SQL it ran as and the render hint; a syntax error is one line
naming where (exit 1). On the embedded engine (no Spark)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run
from tests.query.kql_corpus import log_rows


@pytest.mark.services
def test_kql_command_and_sql_kql_flag(tmp_path):
    data = ["--data-dir", str(tmp_path / "data")]
    env = {"SHOAL_QUERY_ENGINE": "local"}
    assert run(*data, "sql", "CREATE TABLE logs (service string, level string, "
               "message string, attrs dynamic, latency_ms long, user string)",
               cwd=tmp_path).returncode == 0
    for k, batch in enumerate(log_rows()):
        src = tmp_path / f"logs{k}.ndjson"
        src.write_text("".join(json.dumps(r) + "\n" for r in batch))
        assert run(*data, "ingest", str(src), "--table", "logs", cwd=tmp_path).returncode == 0
    query = ("logs | where message has 'deadlock' | summarize n = count() by level "
             "| render piechart")
    out = run(*data, "kql", query, "--format", "json", "--stats", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["rows"] == [["error", 6]]
    assert doc["render"] == {"visualization": "piechart"}
    stats = json.loads(out.stderr.split("stats: ", 1)[1].splitlines()[0])
    assert stats["extents_pruned"] == 3 and stats["engine"] == "local"
    assert "sql: SELECT level, count(*) AS n FROM logs WHERE has(message, 'deadlock')" \
        in out.stderr

    flag = run(*data, "sql", "--kql", "logs | count", cwd=tmp_path, env=env)
    assert flag.returncode == 0, flag.stderr
    assert "Count" in flag.stdout and "1200" in flag.stdout and "(1 rows)" in flag.stdout

    bad = run(*data, "kql", "logs | where", cwd=tmp_path, env=env)
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: KQL syntax error: query could not be parsed at end "
                                 "of input on line [1,13]"), bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
