"""The shape of the `shoal` app: one command tree built in `shoal.cli.main`, `python -m shoal`
as the same command, enum options whose bad values are usage errors (exit 2), command modules
that import cheaply and without side effects, and no layer below importing the CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from shoal.cli.common import ListFormat, SchemaModeOption
from shoal.cli.main import app
from shoal.cli.maintain import UnitKind
from shoal.cli.serve import LogLevel
from shoal.cli.sql import EngineOption, SqlFormat

SRC = Path(__file__).resolve().parents[2] / "src" / "shoal"
runner = CliRunner()


def _plain(text: str) -> str:
    """Usage errors are drawn in a rich box that may wrap: the words only."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_the_command_tree():
    root = get_command(app)
    assert sorted(root.commands) == sorted(
        ["init", "tables", "describe", "create-table", "ingest", "sql", "kql", "promql", "serve",
         "maintain", "demo", "extent", "pipeline", "spark"])
    assert sorted(root.commands["spark"].commands) == ["pack"]
    assert sorted(root.commands["extent"].commands) == ["inspect"]
    assert sorted(root.commands["pipeline"].commands) == [
        "filedrop", "kafka", "scrape", "sync"]


@pytest.mark.services
def test_python_dash_m_shoal_is_the_shoal_script():
    script = Path(sys.executable).with_name("shoal")
    if not script.exists():
        pytest.skip("the `shoal` script is not installed next to this interpreter")
    env = {**os.environ, "COLUMNS": "100"}
    for args in (["--help"], ["sql", "--help"], ["pipeline", "--help"]):
        module = subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                                text=True, timeout=120, env=env)
        installed = subprocess.run([str(script), *args], capture_output=True, text=True,
                                   timeout=120, env=env)
        assert module.returncode == installed.returncode == 0, module.stderr
        assert module.stdout == installed.stdout
        assert "Usage: shoal " in module.stdout


def test_enum_values_are_the_domains_own():
    import uvicorn.config

    from shoal.config import QUERY_ENGINES
    from shoal.maintenance.worker import KINDS
    from shoal.types.schema import SCHEMA_MODES

    assert tuple(SchemaModeOption) == tuple(SCHEMA_MODES)
    assert tuple(EngineOption) == tuple(QUERY_ENGINES)
    assert tuple(UnitKind) == tuple(KINDS)
    assert set(LogLevel) == set(uvicorn.config.LOG_LEVELS)
    assert [f.value for f in SqlFormat] == ["table", "json", "csv"]
    assert [f.value for f in ListFormat] == ["table", "json"]


@pytest.mark.parametrize(("args", "allowed"), [
    (["sql", "SELECT 1", "--format", "xml"], "'table', 'json', 'csv'"),
    (["sql", "SELECT 1", "--engine", "fast"], "'auto', 'local', 'spark'"),
    (["tables", "--format", "csv"], "'table', 'json'"),
    (["maintain", "--once", "--kind", "vacuum"], "'compact', 'retention', 'gc', 'ledger_sweep'"),
    (["ingest", "-", "--table", "t", "--mode", "sideways"], "'evolve', 'drop', 'reject'"),
    (["create-table", "t", "--mode", "strict"], "'evolve', 'drop', 'reject'"),
    (["pipeline", "kafka", "--table", "t", "--mode", "strict"], "'evolve', 'drop', 'reject'"),
    (["serve", "--log-level", "loud"], "'critical', 'error', 'warning', 'info', 'debug'"),
])
def test_a_bad_enum_value_is_a_usage_error(tmp_path, args, allowed):
    out = runner.invoke(app, ["--data-dir", str(tmp_path / "data"), *args])
    assert out.exit_code == 2, out.output
    err = _plain(out.stderr)
    assert err.startswith("Usage: ") and f"is not one of {allowed}" in err, err
    assert not (tmp_path / "data").exists()     # refused before any command ran


def test_a_bad_enum_value_exits_2_from_the_command_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shoal", "--data-dir", str(tmp_path / "d"),
                          "tables", "--format", "yaml"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 2 and out.stdout == ""
    assert "'yaml' is not one of 'table', 'json'" in _plain(out.stderr)


def test_log_level_is_case_insensitive():
    serve = get_command(app).commands["serve"]
    ctx = serve.make_context("serve", ["--log-level", "WARNING"])
    assert ctx.params["log_level"] == "warning"


def test_startup_imports_no_engine_and_command_modules_have_no_side_effects():
    """Building the app imports typer and shoal's light modules only; importing every
    command module registers nothing anywhere and installs no signal handler."""
    code = """
import signal, sys
before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
import shoal.cli.common, shoal.cli.demo, shoal.cli.extent, shoal.cli.ingest
import shoal.cli.maintain, shoal.cli.pipeline_filedrop, shoal.cli.pipeline_kafka
import shoal.cli.pipeline_scrape, shoal.cli.spark
import shoal.cli.serve, shoal.cli.sql, shoal.cli.tables, shoal.cli.promql
assert "shoal.cli.main" not in sys.modules
assert {s: signal.getsignal(s) for s in before} == before
import shoal.cli.main
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "uvicorn", "rich",
               "sqlalchemy", "fastapi") or m.startswith(("shoal.client", "shoal.query",
               "shoal.maintenance", "shoal.server", "shoal.frontends", "shoal.cli.demo_run")))
print(heavy)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
