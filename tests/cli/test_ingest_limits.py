"""`shoal ingest` refuses JSON over the limits with the line and field, never a traceback;
partial mode counts every rejected line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import shoal

SHOAL = [sys.executable, "-m", "shoal"]


def run(*args: str, cwd: Path, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*SHOAL, *args], cwd=cwd, capture_output=True, input=stdin,
                          timeout=300, env=dict(os.environ))


@pytest.mark.services
def test_deep_and_long_numbers_are_line_errors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = shoal.connect(data_dir=str(data))
    db.create_table("t", [shoal.Column("n", shoal.LONG), shoal.Column("d", shoal.DYNAMIC)])
    db.close()
    base = ("--data-dir", str(data), "ingest", "-", "--table", "t")
    deep = b'{"n": 1}\n{"n": 2, "d": ' + b"[" * 1000 + b"]" * 1000 + b"}\n"
    out = run(*base, cwd=tmp_path, stdin=deep)
    assert out.returncode == 1 and b"Traceback" not in out.stderr
    assert b'line 2: field "d": JSON nested deeper than 64 levels' in out.stderr
    big = b'{"n": ' + b"9" * 5000 + b'}\n{"d": {"x": ' + b"9" * 5000 + b"}}\n"
    out = run(*base, cwd=tmp_path, stdin=big)
    assert out.returncode == 1 and b"Traceback" not in out.stderr
    assert b'line 1: field "n": long expects an integer in' in out.stderr
    assert b'line 2: field "d": number literal of 5,000 characters' in out.stderr
    many = b'{"n": "x"}\n' * 1500 + b'{"n": 1}\n'
    out = run(*base, "--partial", cwd=tmp_path, stdin=many)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip().endswith("1,500 line(s) rejected")
