"""The catalog's SQL is written once: the modules that run statements over `sqlite3` (the
embedded catalog's hot path, the schema peek) and the operations both paths share hold no
SQL text of their own, only `shoal.catalog.statements`' (and transaction control)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import shoal.catalog

CATALOG = Path(shoal.catalog.__file__).parent
SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b")
WITHOUT_SQL = ("lite.py", "peek.py", "sqlite.py", "operations.py")


def sql_literals(path: Path) -> list[str]:
    """String constants of the module that read as SQL statements (docstrings left out)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and SQL.search(node.value)]


def test_sql_run_by_more_than_one_path_is_written_once_in_statements() -> None:
    found = {name: sql_literals(CATALOG / name) for name in WITHOUT_SQL}
    assert found == dict.fromkeys(WITHOUT_SQL, []), "SQL belongs in shoal.catalog.statements"
    assert sql_literals(CATALOG / "statements.py")      # the scan does see SQL
