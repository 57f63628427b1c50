"""`shoal.catalog.peek`: a table's schema and mode read from a SQLite catalog without
SQLAlchemy, exactly as the catalog loads them, and nothing (never an error) when it cannot."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.catalog import open_catalog
from shoal.catalog.peek import peek_table
from shoal.types import INT, LONG, STRING, Column, Schema


def test_the_current_schema_and_mode_as_the_catalog_loads_them(sqlite_catalog_url: str
                                                               ) -> None:
    cat = open_catalog(sqlite_catalog_url)
    try:
        cat.create_table("logs", Schema.create([Column("service", STRING)]), mode="drop")
        cat.create_table("other", Schema.create([Column("n", INT)]))
        assert peek_table(sqlite_catalog_url, "logs") == (cat.load_table("logs").schema, "drop")
        # a later version is the one peeked
        info = cat.load_table("logs")
        cat.commit("logs", expected_snapshot_id=info.current_snapshot_id, operation="evolve",
                   commit_id="c1", schema=info.schema.evolve([Column("n", LONG)]))
        peeked = peek_table(sqlite_catalog_url, "logs")
        assert peeked is not None and peeked[0] == cat.load_table("logs").schema
        assert peeked[0].version == 2 and "n" in peeked[0]
        assert peek_table(sqlite_catalog_url, "missing") is None
    finally:
        cat.close()


def test_other_catalogs_and_unreadable_files_give_no_hint(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    assert peek_table("postgresql://root@127.0.0.1:5432/test", "logs") is None
    assert peek_table("sqlite://", "logs") is None                       # in memory
    assert peek_table(f"sqlite:///{tmp_path / 'none.db'}", "logs") is None
    assert not (tmp_path / "none.db").exists()                          # not created
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE tables (id INTEGER)").connection.close()
    with caplog.at_level(logging.DEBUG, logger="shoal.catalog.peek"):
        assert peek_table(f"sqlite:///{garbage}", "logs") is None
        assert peek_table(f"sqlite:///{other}", "logs") is None
    assert caplog.text.count("no schema hint for table 'logs'") == 2


def test_peeking_imports_no_sqlalchemy(sqlite_catalog_url: str) -> None:
    """Nor the catalog's protocol, the extent formats or the object stores: `shoal ingest`
    peeks first and coerces its first chunks while the command imports those."""
    cat = open_catalog(sqlite_catalog_url)
    try:
        cat.create_table("logs", Schema.create([Column("s", STRING)]))
    finally:
        cat.close()
    code = ("import sys\nfrom shoal.catalog.peek import peek_table\n"
            f"assert peek_table({sqlite_catalog_url!r}, 'logs') is not None\n"
            "print(sorted(m for m in sys.modules if m.startswith(('sqlalchemy', "
            "'shoal.catalog.base', 'shoal.format', 'shoal.storage', 'pyarrow.fs'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
