"""The README's three quick starts (curl, CLI, Python), run as written, in one fresh directory.

Each quick start is the fenced block after a `<!-- quickstart: NAME -->` comment in README.md.
A new user runs them from a checkout whose `.venv` holds shoal; here a fresh temporary
directory gets a `.venv/bin/shoal` and a `.venv/bin/python` that run this checkout's code,
and the blocks run in it one after the other in one bash, in the README's order: the curl
quick start's server (started in the background, waited for with its own loop) is still
running while the CLI and Python quick starts work on the same `./shoal-data`, as it would
be for a user who goes down the page. So the blocks must not clash (each makes its own
table) and the CLI's must make its own sample file. Last, the CLI is pointed at the running
server with the `--url` the README gives, and the server is stopped with `kill`.

The one change made to the text: the HTTP port 8720 becomes a free port (and `SHOAL_PORT`
says so to the server), and the extra listeners' default ports are free ports, so the test
neither depends on nor takes the machine's well-known ports. Nothing else is substituted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import free_port

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = re.compile(r"^<!-- quickstart: (\w+) -->\n```(\w+)\n(.*?)^```$", re.S | re.M)
END = "=== end of quick start"


def quickstarts() -> dict[str, tuple[str, str]]:
    """name -> (language, text) of every marked block of README.md, in page order."""
    text = (ROOT / "README.md").read_text()
    return {m.group(1): (m.group(2), m.group(3)) for m in QUICKSTART.finditer(text)}


def _tables_created(text: str) -> set[str]:
    found = re.findall(r"CREATE TABLE (\w+)|create-table (\w+)", text)
    return {a or b for a, b in found}


def test_the_readme_marks_its_three_quick_starts():
    blocks = quickstarts()
    assert list(blocks) == ["curl", "cli", "python"]
    assert [lang for lang, _ in blocks.values()] == ["bash", "bash", "python"]


def test_the_quick_starts_make_their_own_input_and_tables_of_their_own():
    blocks = quickstarts()
    cli = blocks["cli"][1]
    for name in re.findall(r"shoal ingest (\S+)", cli):
        assert f"> {name}" in cli.split("shoal ingest")[0], \
            f"the CLI quick start ingests {name} without making it first"
    created = {name: _tables_created(text) for name, (_, text) in blocks.items()}
    assert all(created.values()), created
    names = [t for tables in created.values() for t in tables]
    assert len(names) == len(set(names)), f"two quick starts create one table: {created}"


def _venv(tmp: Path) -> None:
    """`.venv/bin/shoal` and `.venv/bin/python` running this checkout's shoal."""
    bindir = tmp / ".venv" / "bin"
    bindir.mkdir(parents=True)
    for name, args in (("python", ""), ("shoal", " -m shoal")):
        exe = bindir / name
        exe.write_text(f'#!/bin/sh\nexec "{sys.executable}"{args} "$@"\n')
        exe.chmod(0o755)


def _script(port: int) -> str:
    blocks = quickstarts()
    parts = []
    for name, (lang, text) in blocks.items():
        if lang == "python":
            text = f".venv/bin/python - <<'PYTHON'\n{text}PYTHON\n"
        parts.append(f"{text}echo '{END} {name}'\n")
    # "With `shoal serve` running, the same commands take `--url ...`": the CLI on the curl
    # quick start's table, through its server
    url = re.search(r"`(--url http://127\.0\.0\.1:8720)`", (ROOT / "README.md").read_text())
    assert url, "the README shows the CLI's --url for the quick start's server"
    parts.append(f'.venv/bin/shoal sql "SELECT service FROM logs ORDER BY service" '
                 f"{url.group(1)} --format csv\necho '{END} remote'\n")
    # the curl quick start leaves its server running (`$!`); stop it as a user would
    parts.append('kill "$!"; wait "$!"; echo "server exit $?"\n')
    return "".join(parts).replace("8720", str(port))


def _sections(stdout: str) -> dict[str, str]:
    out, rest = {}, stdout
    for name in [*quickstarts(), "remote"]:
        head, sep, rest = rest.partition(f"{END} {name}\n")
        assert sep, f"the {name} quick start did not finish:\n{stdout[-4000:]}"
        out[name] = head
    out["after"] = rest
    return out


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_quick_starts_run_as_written_in_a_fresh_directory(tmp_path):
    work = tmp_path / "checkout"
    work.mkdir()
    _venv(work)
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SHOAL_") and k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env |= {"PYTHONPATH": str(ROOT / "src"), "SHOAL_PORT": str(port),
            "SHOAL_FLIGHT_DEFAULT_PORT": str(free_port()),
            "SHOAL_OTLP_GRPC_DEFAULT_PORT": str(free_port()), "NO_COLOR": "1",
            "COLUMNS": "100"}
    proc = subprocess.Popen(["bash", "-c", _script(port)], cwd=work, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:           # a hang: take the server down with the shell
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    log = (work / "shoal.log").read_text() if (work / "shoal.log").exists() else ""
    explain = f"--- stdout ---\n{stdout[-4000:]}\n--- stderr ---\n{stderr[-4000:]}\n" \
              f"--- shoal.log ---\n{log[-4000:]}"
    assert proc.returncode == 0, explain
    part = _sections(stdout)

    # curl: readiness (the extra listeners serve), then one JSON answer per line
    lines = [json.loads(line) for line in part["curl"].splitlines()]
    ready, created, ack, answer = lines
    assert ready["status"] == "ready" and "warnings" not in ready, explain
    assert {k: v["serving"] for k, v in ready["listeners"].items()} == {
        "flight_sql": True, "otlp_grpc": True}
    assert created["rows"][0][:2] == ["logs", "created"]
    assert (ack["table"], ack["rows"], ack["replayed"]) == ("logs", 2, False)
    assert answer["rows"] == [["api", "deadlock detected"]]
    assert answer["stats"]["extents_read"] == 1
    assert f"Uvicorn running on http://127.0.0.1:{port}" in log

    # CLI: its own file and table, next to the running server, on the same directory
    cli = part["cli"]
    assert (work / "applogs.ndjson").exists()
    assert "ingested 3 rows into applogs" in cli, explain
    assert re.search(r"error\s*│\s*1\b", cli) and re.search(r"info\s*│\s*2\b", cli), cli
    assert re.search(r"api\s*│\s*disk full on /var", cli), cli
    assert '"extents_read": 1' in stderr                      # --stats

    # Python: a pyarrow.Table and its stats
    py = part["python"]
    assert "pyarrow.Table" in py and 'service: [["api"]]' in py and "n: [[1]]" in py, py
    assert "'extents_read': 1" in py, py

    # the CLI through the running server, by the README's --url
    assert part["remote"].split() == ["service", "api", "web"], part["remote"]

    # SIGTERM, as a user's `kill` sends it: the server stops (143: it ended by the signal)
    assert part["after"].strip() in ("server exit 0", "server exit 143"), explain
    assert "not ready" not in stdout
    assert "Traceback" not in stderr + log, explain
