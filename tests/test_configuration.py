"""Configuration is read in one place and documented from it: docs/configuration.md holds the
table `python -m shoal.config --markdown` prints (so a setting without a line of docs fails
here), no module but `shoal.config` reads a `SHOAL_*` variable, and settings that used to be
read elsewhere (the Spark driver's memory) are settings like the others."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from shoal.config import Config, load_config, markdown_table
from shoal.query.spark.cluster import session_settings

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"


def test_the_configuration_page_holds_exactly_the_generated_table():
    done = subprocess.run([sys.executable, "-m", "shoal.config", "--markdown"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == markdown_table()
    assert done.stdout in PAGE.read_text(), (
        "docs/configuration.md is out of date: run "
        "`python -m shoal.config --update docs/configuration.md`")


def test_every_setting_has_a_row_with_its_variable():
    page = PAGE.read_text()
    for name in Config.__dataclass_fields__:
        assert f"| `SHOAL_{name.upper()}` |" in page, name
    for name in ("SHOAL_HOST", "SHOAL_PORT", "SHOAL_SPARK_DRIVER_MEMORY", "SHOAL_CONFIG"):
        assert f"| `{name}` |" in page, name


def _shoal_variable(node: ast.AST) -> str | None:
    """The `SHOAL_*` name an expression reads from a mapping or the environment, if any:
    `x.get("SHOAL_...")`, `os.getenv("SHOAL_...")`, `x["SHOAL_..."]` (loaded)."""
    arg: ast.expr | None = None
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("get", "getenv", "pop"):
            arg = node.args[0]
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        arg = node.slice
    if (isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            and arg.value.startswith("SHOAL_")):
        return arg.value
    return None


def test_no_module_but_config_reads_a_shoal_variable():
    package = ROOT / "src" / "shoal"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = _shoal_variable(node)
            if name is not None:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} reads {name}")
    assert offenders == [], ("read settings through shoal.config (a Config field, or "
                             "setting_from_env):\n" + "\n".join(offenders))


def test_the_spark_driver_memory_is_a_setting(tmp_path):
    cfg = load_config(env={"SHOAL_SPARK_DRIVER_MEMORY": "3g", "SHOAL_DATA_DIR": str(tmp_path)})
    assert cfg.spark_driver_memory == "3g"
    assert session_settings(cfg, env={}, spark_defaults={})["spark.driver.memory"] == "3g"
    # the user's Spark settings and spark-defaults.conf still win over it
    assert "spark.driver.memory" not in session_settings(
        cfg, env={}, spark_defaults={"spark.driver.memory": "8g"})
    mine = load_config(env={"SHOAL_SPARK_DRIVER_MEMORY": "3g",
                            "SHOAL_SPARK_CONF": "spark.driver.memory=5g"})
    assert session_settings(mine, env={}, spark_defaults={})["spark.driver.memory"] == "5g"
