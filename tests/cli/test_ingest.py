"""`shoal ingest`: chunking at line boundaries, pipelined chunks, whole-input line numbers."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import shoal
from shoal.ingest.chunks import iter_chunks

SHOAL = [sys.executable, "-m", "shoal"]


def run(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, input=stdin,
                          timeout=300, env=dict(os.environ))


@pytest.mark.parametrize("size", [1, 7, 64, 4096])
@pytest.mark.parametrize("tail", [b"", b"\n", b"\n\n", b'{"last":1}', b"  "])
def test_iter_chunks_cuts_at_newlines_and_counts_lines(size: int, tail: bytes) -> None:
    body = b"".join(b'{"i":%d,"pad":"%s"}\n' % (i, b"x" * (i % 23)) for i in range(300))
    body += b'{"long":"' + b"y" * 200 + b'"}\n' + tail
    chunks = list(iter_chunks(io.BytesIO(body), size))
    expected = body.rstrip(b" ")   # a whitespace-only last line is not a chunk
    assert b"".join(c for c, _ in chunks) == expected
    lines = 0
    for i, (chunk, before) in enumerate(chunks):
        assert before == lines
        if i < len(chunks) - 1:
            assert chunk.endswith(b"\n")
        lines += chunk.count(b"\n")


def _rows(n: int, start: int = 0) -> bytes:
    return b"".join(json.dumps({"service": f"svc-{i % 7}", "n": i, "msg": "m" * 900,
                                "attrs": {"k": i}}).encode() + b"\n"
                    for i in range(start, start + n))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    db = shoal.connect(data_dir=str(d))
    db.create_table("logs", [shoal.Column("service", shoal.STRING),
                             shoal.Column("n", shoal.LONG), shoal.Column("attrs", shoal.DYNAMIC)])
    db.close()
    return d


def _table(d: Path):
    db = shoal.connect(data_dir=str(d))
    try:
        table, _ = db.read("logs")
        return table, db.describe("logs")
    finally:
        db.close()


def test_chunks_land_in_order_with_evolution_and_gzip(tmp_path: Path, data: Path) -> None:
    body = _rows(2500)   # ~2.4 MB: three 1 MB chunks in flight
    src = tmp_path / "in.ndjson.gz"
    src.write_bytes(gzip.compress(body))
    out = run("--data-dir", str(data), "ingest", str(src), "--table", "logs", "--chunk-mb", "1",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = out.stdout.decode().strip().splitlines()[-1]
    assert summary.startswith("ingested 2500 rows into logs in 3 chunk(s)")
    assert "new columns: msg" in summary
    table, _ = _table(data)
    assert sorted(table.column("n").to_pylist()) == list(range(2500))


def test_bad_line_reports_its_line_in_the_whole_input(tmp_path: Path, data: Path) -> None:
    body = _rows(2000) + b'{"n": "not a number"}\n' + _rows(10, 2000)
    out = run("--data-dir", str(data), "ingest", "-", "--table", "logs", "--chunk-mb", "1",
              cwd=tmp_path, stdin=body)
    assert out.returncode == 1
    assert b'line 2001: field "n": long expects an integer' in out.stderr


def test_idempotency_key_applies_each_chunk_once(tmp_path: Path, data: Path) -> None:
    src = tmp_path / "in.ndjson"
    src.write_bytes(_rows(2500))
    args = ("--data-dir", str(data), "ingest", str(src), "--table", "logs", "--chunk-mb", "1",
            "--idempotency-key", "load-1")
    first = run(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = run(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "3 chunk(s) replayed" in again.stdout.decode()
    table, _ = _table(data)
    assert table.num_rows == 2500
