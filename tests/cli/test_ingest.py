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
from shoal.ingest import chunks as chunks_mod
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


@pytest.mark.parametrize("size", [1, 7, 64, 4096, 1 << 20])
@pytest.mark.parametrize("tail", [b"", b"\n", b"\n\n", b'{"last":1}', b"  "])
def test_file_chunks_are_the_stream_chunks(size: int, tail: bytes, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`shoal ingest` reads a regular file with `os.pread`: the chunks (and so the chunk
    indexes of `--idempotency-key`) are exactly those of the stream reader, including lines
    longer than a window and windows without a newline (tail pieces of 16 bytes here)."""
    monkeypatch.setattr(chunks_mod, "_TAIL_BYTES", 16)
    body = b"".join(b'{"i":%d,"pad":"%s"}\n' % (i, b"x" * (i % 23)) for i in range(300))
    body += b'{"long":"' + b"y" * 5000 + b'"}\n' + b"\n" * 3 + tail
    path = tmp_path / "in.ndjson"
    path.write_bytes(body)
    with open(path, "rb") as f:
        assert chunks_mod.is_regular_file(f.fileno())
        got = list(chunks_mod.iter_file_chunks(f.fileno(), size))
    assert got == list(iter_chunks(io.BytesIO(body), size))


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


@pytest.mark.services
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


@pytest.mark.services
def test_bad_line_reports_its_line_in_the_whole_input(tmp_path: Path, data: Path) -> None:
    body = _rows(2000) + b'{"n": "not a number"}\n' + _rows(10, 2000)
    out = run("--data-dir", str(data), "ingest", "-", "--table", "logs", "--chunk-mb", "1",
              cwd=tmp_path, stdin=body)
    assert out.returncode == 1
    assert b'line 2001: field "n": long expects an integer' in out.stderr


@pytest.mark.services
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


@pytest.mark.services
def test_several_files_and_a_glob_in_one_run(tmp_path: Path, data: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "deep").mkdir(parents=True)
    (tmp_path / "a.ndjson").write_bytes(_rows(100))
    (tmp_path / "b.ndjson.gz").write_bytes(gzip.compress(_rows(100, 100)))
    (logs / "c1.ndjson").write_bytes(_rows(1500, 200))        # two 1 MB chunks
    (logs / "c2.ndjson").write_bytes(_rows(100, 1700))
    (logs / "deep" / "c3.ndjson").write_bytes(_rows(100, 1800))
    (logs / "notes.txt").write_bytes(b"not matched")
    out = run("--data-dir", str(data), "ingest", "a.ndjson", "b.ndjson.gz", "logs/*.ndjson",
              "a.ndjson", "logs/**/c3.ndjson", "--table", "logs", "--chunk-mb", "1",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = out.stdout.decode().strip().splitlines()[-1]
    # a.ndjson named twice is read once; ** spans directories
    assert summary.startswith("ingested 1900 rows into logs in 6 chunk(s) from 5 inputs:")
    table, _ = _table(data)
    assert sorted(table.column("n").to_pylist()) == list(range(1900))


@pytest.mark.services
def test_a_bad_line_is_named_by_its_file_and_its_line_in_that_file(tmp_path: Path,
                                                                   data: Path) -> None:
    (tmp_path / "a.ndjson").write_bytes(_rows(50))
    bad = _rows(1500) + b'{"n": "seven"}\n'      # line 1501, in the file's second chunk
    (tmp_path / "b.ndjson.gz").write_bytes(gzip.compress(bad))
    out = run("--data-dir", str(data), "ingest", "a.ndjson", "b.ndjson.gz", "--table", "logs",
              "--chunk-mb", "1", cwd=tmp_path)
    assert out.returncode == 1
    err = out.stderr.decode()
    assert 'error: b.ndjson.gz line 1501: field "n": long expects an integer' in err
    assert "Traceback" not in err


@pytest.mark.services
def test_a_glob_matching_nothing_and_a_missing_file_are_errors(tmp_path: Path,
                                                               data: Path) -> None:
    (tmp_path / "a.ndjson").write_bytes(_rows(5))
    out = run("--data-dir", str(data), "ingest", "a.ndjson", "logs/*.ndjson", "--table",
              "logs", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.decode().strip() == "error: logs/*.ndjson: no file matches"
    out = run("--data-dir", str(data), "ingest", "a.ndjson", "gone.ndjson", "--table", "logs",
              cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.decode().strip() == "error: gone.ndjson: No such file or directory"
    out = run("--data-dir", str(data), "ingest", "-", "-", "--table", "logs", cwd=tmp_path,
              stdin=b"")
    assert out.returncode == 1 and b"only once" in out.stderr
    (tmp_path / "b.ndjson").write_bytes(_rows(5))
    out = run("--data-dir", str(data), "ingest", "a.ndjson", "b.ndjson", "--table", "logs",
              "--idempotency-key", "k" * 250, cwd=tmp_path)
    assert out.returncode == 1 and b"would be longer than 256 characters" in out.stderr
    table, _ = _table(data)
    assert table.num_rows == 0               # nothing is sent before every input resolved


@pytest.mark.services
def test_rerun_with_the_key_applies_exactly_what_did_not_land(tmp_path: Path,
                                                              data: Path) -> None:
    """Three files of two 1 MB chunks each; the second chunk of b.ndjson has a bad line.
    The run stops there (chunks of a and b's first chunk landed, and c's first chunk, which
    was in flight); once b is fixed, the same command applies only what is missing."""
    good_b = _rows(1500, 1500)
    (tmp_path / "a.ndjson").write_bytes(_rows(1500))
    lines = good_b.splitlines(keepends=True)
    lines[1400] = b'{"n": "oops"}\n'
    (tmp_path / "b.ndjson").write_bytes(b"".join(lines))
    (tmp_path / "c.ndjson").write_bytes(_rows(1500, 3000))
    args = ("--data-dir", str(data), "ingest", "*.ndjson", "--table", "logs", "--chunk-mb",
            "1", "--idempotency-key", "load-7")
    first = run(*args, cwd=tmp_path)
    assert first.returncode == 1
    assert b"error: b.ndjson line 1401: " in first.stderr
    landed, _ = _table(data)
    assert 0 < landed.num_rows < 4500
    (tmp_path / "b.ndjson").write_bytes(good_b)
    again = run(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    summary = again.stdout.decode().strip().splitlines()[-1]
    assert "ingested 4500 rows into logs in 6 chunk(s) from 3 inputs" in summary
    replayed = int(summary.split(" chunk(s) replayed")[0].rsplit(", ", 1)[1])
    assert 3 <= replayed < 6
    table, _ = _table(data)
    assert sorted(table.column("n").to_pylist()) == list(range(4500))    # each row once
    third = run(*args, cwd=tmp_path)
    assert third.returncode == 0 and b"6 chunk(s) replayed" in third.stdout
    table, _ = _table(data)
    assert table.num_rows == 4500


@pytest.mark.services
def test_a_replayed_chunk_that_changed_is_said_not_skipped(tmp_path: Path, data: Path) -> None:
    """A file still being written, ingested with a key, then again with the same key once it
    grew: its first run's last chunk was cut at the end of the file, the second run's chunk
    with that key runs further. Those lines were applied by neither run: the command names
    them and fails, where it used to count the chunk as replayed and exit 0. An unchanged
    input (partial mode with a rejected line included) is a plain replay."""
    src = tmp_path / "in.ndjson"
    lines = _rows(1500).splitlines(keepends=True)
    lines[700] = b'{"n": "oops"}\n'
    src.write_bytes(b"".join(lines))             # two 1 MB chunks, the second one short
    args = ("--data-dir", str(data), "ingest", str(src), "--table", "logs", "--chunk-mb", "1",
            "--idempotency-key", "grow-1", "--partial")
    first = run(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    same = run(*args, cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    assert b"2 chunk(s) replayed" in same.stdout and b"changed" not in same.stderr
    with open(src, "ab") as f:
        f.write(_rows(1500, 1500))
    grown = run(*args, cwd=tmp_path)
    assert grown.returncode == 1
    err = grown.stderr.decode()
    table, _ = _table(data)
    stored = set(table.column("n").to_pylist())
    missing = sorted(set(range(3000)) - stored - {700})
    assert missing and missing == list(range(missing[0], missing[-1] + 1))
    assert (f"in.ndjson line {1 + _first_line_of_chunk(src, 1)}: the chunk starting here was "
            "applied by an earlier run with this idempotency key (grow-1#1)") in err
    assert f"its lines {missing[0] + 1} to {missing[-1] + 1} ({len(missing)} record(s)" in err
    assert "not every line is in the table" in err


def _first_line_of_chunk(path: Path, i: int) -> int:
    """Lines before chunk i of `path` at --chunk-mb 1 (as the command cuts it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(chunks_mod.iter_file_chunks(fd, 1 << 20))[i][1]
    finally:
        os.close(fd)
