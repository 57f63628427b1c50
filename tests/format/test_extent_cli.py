"""`shoal extent inspect`: JSON for a good extent, one line and exit 1 for a bad one."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from typer.testing import CliRunner

from shoal.cli.main import app
from shoal.format.tlm import TlmFormat
from shoal.storage import LocalObjectStore
from shoal.types import LONG, Column, Schema

runner = CliRunner()


def _extent(root: Path) -> str:
    schema = Schema.create([Column("a", LONG)]).arrow()
    w = TlmFormat().start_extent(LocalObjectStore(str(root)), "tables/1", schema, block_rows=2)
    w.append(pa.Table.from_pydict({"_timestamp": [30, None, 10], "props": [None] * 3,
                                   "a": [1, 2, 3]}, schema=schema))
    return w.finish().object_path


def test_inspect_local_file(tmp_path: Path) -> None:
    key = _extent(tmp_path)
    result = runner.invoke(app, ["extent", "inspect", str(tmp_path / key)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["version"], doc["row_count"], doc["block_count"]) == (3, 3, 2)
    assert doc["byte_size"] == (tmp_path / key).stat().st_size
    assert doc["schema"][2] == {"name": "a", "arrow_type": "int64", "type": "long"}
    assert doc["schema"][1]["type"] == "dynamic"
    assert [b["rows"] for b in doc["block_stats"]] == [2, 1]
    assert (doc["min_timestamp"], doc["max_timestamp"]) == (10, 30)


def test_inspect_with_storage_url(tmp_path: Path) -> None:
    key = _extent(tmp_path)
    result = runner.invoke(app, ["extent", "inspect", key, "--storage-url", tmp_path.as_uri()])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["row_count"] == 3


def test_inspect_bad_files(tmp_path: Path) -> None:
    (tmp_path / "bad.tlm").write_bytes(b"garbage, not an extent")
    for args in (["inspect", str(tmp_path / "bad.tlm")],
                 ["inspect", str(tmp_path / "missing.tlm")],
                 ["inspect", "missing.tlm", "--storage-url", tmp_path.as_uri()]):
        result = runner.invoke(app, ["extent", *args])
        assert result.exit_code == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
