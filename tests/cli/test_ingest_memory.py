"""`shoal ingest` holds its documented memory bound (`shoal.cli.ingest.memory_bound_mb`,
docs/cli.md "Memory"): a file many chunks long, ingested with small chunks, peaks under the
bound for that chunk size, so reading the whole input (or piling up chunks) would fail here.
The peak is the command process's own maximum resident set (`os.wait4`), not a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import shoal
from shoal.cli.ingest import memory_bound_mb


# Runs the command, waits for it and prints its own peak (kB), return code and output.
_LAUNCHER = """
import json, os, subprocess, sys
proc = subprocess.Popen(json.loads(sys.argv[1]), stdout=subprocess.PIPE)
out = proc.stdout.read()
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps({"returncode": os.waitstatus_to_exitcode(status), "stdout": out.decode(),
                  "maxrss_kb": usage.ru_maxrss}))
"""


@pytest.mark.slow
def test_peak_memory_stays_under_the_documented_bound(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = shoal.connect(data_dir=str(data))
    db.create_table("logs", [shoal.Column("service", shoal.STRING),
                             shoal.Column("n", shoal.LONG), shoal.Column("msg", shoal.STRING),
                             shoal.Column("attrs", shoal.DYNAMIC)])
    db.close()
    src = tmp_path / "in.ndjson"
    with open(src, "wb") as f:                  # ~106 MB: 104 chunks of 1 MB
        for i in range(110_000):
            f.write(json.dumps({"service": f"svc-{i % 7}", "n": i, "msg": "m" * 900,
                                "attrs": {"k": i, "route": f"/api/{i % 13}"}}).encode() + b"\n")
    size_mb = src.stat().st_size / 2**20
    chunk_mb = 1
    cmd = [sys.executable, "-m", "shoal", "--data-dir", str(data), "ingest", str(src),
           "--table", "logs", "--chunk-mb", str(chunk_mb)]
    with open(tmp_path / "err", "wb") as err:
        # Through a small launcher: Linux carries the forking process's high-water RSS into
        # the child's ru_maxrss across exec, so a child forked straight from this (by now
        # large) test process would report the test process's peak, not its own.
        proc = subprocess.run([sys.executable, "-c", _LAUNCHER, json.dumps(cmd)],
                              stdout=subprocess.PIPE, stderr=err, cwd=tmp_path, check=False)
    report = json.loads(proc.stdout.decode().splitlines()[-1])
    assert report["returncode"] == 0, (tmp_path / "err").read_text()
    assert report["stdout"].startswith("ingested 110000 rows into logs in 104 chunk(s)")
    peak_mb = report["maxrss_kb"] / 1024        # kB on Linux
    bound = memory_bound_mb(chunk_mb)
    assert peak_mb < bound, f"peak {peak_mb:.0f} MB over the bound {bound} MB"
    # Holding the input whole would not fit (measured: 436 MB with one 68 MB chunk, ~4 MB
    # per MB of input over the ~160 MB of a one-line ingest).
    assert 160 + 4 * size_mb > bound
