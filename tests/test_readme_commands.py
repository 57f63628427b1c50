"""The README's two commands, run from a fresh clone in a temporary directory, succeed.

The repository this test file belongs to is cloned with `git clone` into `tmp_path`, so the
clone holds exactly what is committed (nothing untracked, no `.venv`): that is the point, it
is what a user gets. In the clone:

1. `bash scripts/demo.sh` creates `.venv`, installs shoal with every pinned dependency (pip's
   cache makes that a minute or two; a cold cache downloads several hundred MB), then runs
   `shoal demo`: a real server, HTTP ingest, Spark queries. It must exit 0 and print its key
   lines, and leave neither its temporary directory nor its server behind.
2. `bash scripts/test.sh` is run restricted to a fast subset (`tests/types`). The whole suite
   would be absurd here: it contains this test, so it would clone and recurse, and it would
   double the suite's time. The subset still proves what the command promises in a fresh
   clone: the setup it repeats is idempotent, and pytest runs from the clone's own `.venv`
   over the clone's own tests, with the pass-through of extra arguments the README documents.

Skipped when `git` is missing or this file is not inside a git checkout (e.g. an sdist).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO_LINES = ("new_columns ['region']", "replayed: true", "72,000 rows in 72 extents",
              "read 1 of 72 extents", "read 72 of 72 extents", "stopped (SIGTERM)",
              "demo finished")


def _checkout_root() -> Path | None:
    if shutil.which("git") is None:
        return None
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return Path(out.stdout.strip()).resolve()


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s)


def _explain(out: subprocess.CompletedProcess[str]) -> str:
    return f"exit {out.returncode}\n--- stdout ---\n{out.stdout[-6000:]}\n" \
           f"--- stderr ---\n{out.stderr[-6000:]}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_readme_commands_in_a_fresh_clone(tmp_path):
    root = _checkout_root()
    if root is None or root != ROOT:
        pytest.skip("not running from a git checkout of shoal")
    clone = tmp_path / "shoal"
    subprocess.run(["git", "clone", "--quiet", str(root), str(clone)], check=True,
                   capture_output=True, timeout=120)
    assert not (clone / ".venv").exists()

    # The user's shell, not ours: no shoal settings, no active venv or import path.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SHOAL_") and k not in ("VIRTUAL_ENV", "PYTHONPATH",
                                                       "PYTHONHOME")}
    env["TMPDIR"] = str(tmp)

    demo = _run(["bash", "scripts/demo.sh"], clone, env, timeout_s=600)
    assert demo.returncode == 0, _explain(demo)
    for line in DEMO_LINES:
        assert line in demo.stdout, (line, _explain(demo))
    assert (clone / ".venv" / "bin" / "shoal").exists()
    assert list(tmp.glob("shoal-demo-*")) == [], "the demo left its directory behind"
    pid = re.search(r"\(pid (\d+);", demo.stdout)
    assert pid is not None, _explain(demo)
    with pytest.raises(ProcessLookupError):       # the demo's server is gone
        os.kill(int(pid.group(1)), 0)

    tests = _run(["bash", "scripts/test.sh", "tests/types"], clone, env, timeout_s=240)
    assert tests.returncode == 0, _explain(tests)
    assert re.search(r"\b\d+ passed\b", tests.stdout), _explain(tests)


def test_the_readme_waits_for_readiness_with_a_bound_and_a_message():
    """A server that never becomes ready (a port taken, a crash) must not leave the quick
    start spinning: its wait is a bounded loop, followed by a message."""
    lines = [line.strip() for line in (ROOT / "README.md").read_text().splitlines()
             if "/readyz" in line and line.strip().startswith(("until", "while", "for", "curl"))]
    assert lines, "the README's quick start waits for /readyz"
    assert not [line for line in lines if line.startswith(("until", "while"))], lines
    loops = [line for line in lines if line.startswith("for")]
    assert loops and all(re.search(r"\$\(seq \d+\)", line) and "break" in line
                         for line in loops), loops
    assert any("||" in line and "not ready" in line for line in lines), lines
