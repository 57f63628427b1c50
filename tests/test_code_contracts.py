"""The code's own contracts, checked in CI (issue 14): layers import downward only (the
import-linter contract in pyproject.toml), no two modules import each other, the lint rules
hold, and the type checker passes on src/."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_layers_import_downward_only():
    done = _run(str(BIN / "lint-imports"), "--no-cache")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_two_modules_import_each_other():
    graph = grimp.build_graph("shoal", cache_dir=None)
    pairs = sorted({tuple(sorted((a, b)))
                    for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
                    if a in graph.find_modules_directly_imported_by(b)})
    assert pairs == []


def test_lint_rules_hold():
    done = _run(str(BIN / "ruff"), "check", "src", "tests", "bench")
    assert done.returncode == 0, done.stdout[-4000:]


@pytest.mark.slow
def test_types_check_on_src():
    done = _run(str(BIN / "mypy"), "--no-incremental")
    assert done.returncode == 0, done.stdout[-4000:]


_BROAD = {"Exception", "BaseException"}
_LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"BaseException"}                       # a bare `except:`
    if isinstance(node, ast.Tuple):
        return {n for elt in node.elts for n in _names(elt)}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _handled(handler: ast.ExceptHandler) -> bool:
    """The handler re-raises, logs, or hands the exception on (uses its variable)."""
    for node in ast.walk(handler):
        if isinstance(node, ast.Raise):
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _LOG_METHODS):
            return True
        if (handler.name and isinstance(node, ast.Name) and node.id == handler.name
                and isinstance(node.ctx, ast.Load)):
            return True
    return False


def test_no_broad_exception_is_swallowed_without_a_trace():
    silent = []
    for path in sorted((ROOT / "src" / "shoal").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.ExceptHandler) and _names(node.type) & _BROAD
                    and not _handled(node)):
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "suppress"
                    and any(_names(a) & _BROAD for a in node.args)):
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno} (suppress)")
    assert silent == []
