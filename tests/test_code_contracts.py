"""The code's own contracts, checked in CI: layers import downward only (the
import-linter contract in pyproject.toml), no two modules import each other, the lint rules
hold, and the type checker passes on src/."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
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


# Only the commit layer discards or deletes extents (storage/ implements `delete` itself): a
# caller elsewhere states what it commits and the commit layer's recipes decide what goes.
_DISCARD_NAMES = {"discard_extents", "discard_on_failure"}     # the commit layer's primitives
_DELETE_METHODS = {"delete", "delete_extent", "delete_extents", "delete_objects", "unlink"}
_DELETE_OWNERS = ("commit", "storage")
_SQL_DELETES = ("catalog",)     # deletes rows of its own tables (SQL), never objects: no store


def _deletes(tree: ast.AST, *, sql: bool = False) -> list[tuple[int, str]]:
    found = []
    routes = {id(d) for node in ast.walk(tree)   # `@router.delete(...)` declares an endpoint
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              for d in node.decorator_list}
    for node in ast.walk(tree):
        if id(node) in routes:
            continue
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"imports {a.name}") for a in node.names
                      if a.name in _DISCARD_NAMES]
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _DISCARD_NAMES:
                found.append((node.lineno, f"calls {func.id}()"))
            elif isinstance(func, ast.Attribute) and (
                    func.attr in _DISCARD_NAMES
                    or (func.attr in _DELETE_METHODS and not (sql and func.attr == "delete"))):
                found.append((node.lineno, f"calls .{func.attr}()"))
            elif (isinstance(func, ast.Attribute) and func.attr == "remove"
                  and isinstance(func.value, ast.Name) and func.value.id == "os"):
                found.append((node.lineno, "calls os.remove()"))
    return found


def test_only_the_commit_layer_discards_or_deletes_extents():
    package = ROOT / "src" / "shoal"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        top = path.relative_to(package).parts[0]
        if top in _DELETE_OWNERS:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for line, what in sorted(_deletes(tree, sql=top in _SQL_DELETES)):
            offenders.append(f"{path.relative_to(ROOT)}:{line} {what}")
    assert offenders == [], ("discard or delete extents through a recipe of shoal.commit:\n"
                             + "\n".join(offenders))


def test_the_read_side_never_imports_the_commit_layer():
    # What the query lane shares with the write side (the `Workspace` protocol) lives below it.
    graph = grimp.build_graph("shoal", cache_dir=None)
    assert not graph.direct_import_exists(importer="shoal.query", imported="shoal.commit",
                                          as_packages=True)


# A citation of a numbered section of an outside specification, or of an issue number of a
# tracker: a reader of the code has neither, so comments and docstrings say the thing in the
# project's words or point to a page of docs/.
_CITATION = re.compile(r"§|\bSPEC\b|\bspec\.md\b|\b[Ii]ssues? #?\d+|(?<![\w/-])#\d+\b")
_CITING_TREES = ("src", "tests", "bench", "scripts")


def _generated(path: Path, text: str) -> bool:
    # Protobuf modules are written by protoc, vendored files by their own project.
    return (path.name.endswith("_pb2.py") or "vendor" in path.parts
            or "DO NOT EDIT" in text[:400])


def _comments_and_docstrings(text: str, name: str) -> list[tuple[int, str]]:
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string.lstrip("#")))
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                found.append((body[0].lineno, body[0].value.value))
    return found


def test_comments_cite_docs_not_outside_documents_or_issue_numbers():
    offenders = []
    for tree in _CITING_TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            text = path.read_text()
            if _generated(path, text):
                continue
            for line, words in _comments_and_docstrings(text, str(path)):
                for hit in _CITATION.finditer(words):
                    at = line + words.count("\n", 0, hit.start())
                    offenders.append(f"{path.relative_to(ROOT)}:{at} {hit.group(0)!r}")
    assert offenders == [], ("say it in the project's words or cite a page of docs/:\n"
                             + "\n".join(offenders))


def test_docs_cite_docs_not_outside_documents_or_issue_numbers():
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "BENCHMARKS.md",
             *sorted((ROOT / "docs").glob("*.md"))]
    offenders = [f"{page.relative_to(ROOT)}:{number} {hit.group(0)!r}"
                 for page in pages
                 for number, line in enumerate(page.read_text().splitlines(), 1)
                 for hit in _CITATION.finditer(line)]
    assert offenders == [], ("say it in the project's words or link a page of docs/:\n"
                             + "\n".join(offenders))
