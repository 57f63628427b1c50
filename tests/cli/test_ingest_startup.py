"""`shoal ingest` starts light and shows progress only on a terminal: what the command imports
before its first chunk reaches the write path and by the time it exits (no engine, server,
frontend, SQLAlchemy, or rich off a terminal), and the progress bar drawn on a real pseudo-terminal.
No clock: modules are read from `sys.modules` of the command's own process."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import shoal
from shoal.native import glibc

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "tests" / "support" / "first_chunk.py"

# Never needed to ingest a file: engines, servers, frontends, parsers of other languages.
HEAVY_TOPS = ("pyspark", "duckdb", "fastapi", "uvicorn", "starlette", "grpc", "sqlglot",
              "prometheus_client", "kafka", "confluent_kafka", "boto3", "botocore", "httpx",
              "requests", "re2", "lark")
HEAVY_SHOAL = ("shoal.query", "shoal.server", "shoal.frontends", "shoal.maintenance",
               "shoal.frontends.prometheus.binding", "shoal.types.prometheus",
               # the other commands: built only when they run (shoal.cli.main.COMMANDS)
               "shoal.cli.sql", "shoal.cli.serve", "shoal.cli.pipeline_", "shoal.cli.maintain",
               "shoal.cli.promql", "shoal.cli.demo", "shoal.cli.extent", "shoal.cli.tables")


def _heavy(modules: list[str], *extra_tops: str) -> list[str]:
    tops = HEAVY_TOPS + extra_tops
    return sorted(m for m in modules
                  if m.split(".")[0] in tops or m.startswith(HEAVY_SHOAL))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    db = shoal.connect(data_dir=str(d))
    db.create_table("logs", [shoal.Column("service", shoal.STRING),
                             shoal.Column("n", shoal.LONG)])
    db.close()
    return d


def test_ingest_imports_only_what_it_needs(tmp_path: Path, data: Path) -> None:
    src = tmp_path / "one.ndjson"
    src.write_bytes(b'{"service": "a", "n": 1}\n')
    report = tmp_path / "report.json"
    out = subprocess.run([sys.executable, str(PROBE), str(report), "--data-dir", str(data),
                          "ingest", str(src), "--table", "logs"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ingested 1 rows into logs")
    got = json.loads(report.read_text())
    assert got["first_chunk_at"] is not None
    # Up to the first chunk: not even pandas (pyarrow 26 imports it on the first
    # pa.array / pa.scalar / to_numpy of the process, which the coercion makes).
    assert _heavy(got["first_chunk_modules"], "pandas", "rich") == []
    # The whole command, off a terminal: no progress bar, so no rich either; and the
    # embedded catalog's commits go through sqlite3 (shoal.catalog.lite), not SQLAlchemy.
    assert _heavy(got["exit_modules"], "rich", "sqlalchemy") == []


@pytest.mark.services
def test_the_command_tunes_blas_and_arrows_allocator(tmp_path: Path, data: Path) -> None:
    """numpy's import starts an OpenBLAS thread per core that spins, CPU taken from the
    ingest (shoal.native.one_blas_thread): the command keeps it to one. Arrow allocates from
    glibc's malloc, which the command tunes to keep freed blocks (shoal.native
    .tune_allocators). A user's own OPENBLAS_NUM_THREADS / ARROW_DEFAULT_MEMORY_POOL win."""
    src = tmp_path / "one.ndjson"
    src.write_bytes(b'{"service": "a", "n": 1}\n')
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "ARROW_DEFAULT_MEMORY_POOL")}

    def settings(extra_env: dict[str, str]) -> tuple[int, str]:
        report = tmp_path / "report.json"
        out = subprocess.run([sys.executable, str(PROBE), str(report), "--data-dir", str(data),
                              "ingest", str(src), "--table", "logs"], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path, env={**env, **extra_env})
        assert out.returncode == 0, out.stderr
        assert "stays as it is" not in out.stderr   # tuned before pyarrow was imported
        got = json.loads(report.read_text())
        assert got["blas_threads"] is not None, "no OpenBLAS in the process: cannot tell"
        return int(got["blas_threads"]), got["arrow_pool"]

    blas, pool = settings({})
    assert blas == 1
    if glibc():
        assert pool == "system"
    if (os.cpu_count() or 1) > 1:
        assert settings({"OPENBLAS_NUM_THREADS": "2", "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
                        ) == (2, "jemalloc")


def test_help_does_not_load_arrow_or_the_client() -> None:
    code = ("import sys, runpy; sys.argv = ['shoal', '--help']\n"
            "try:\n    runpy.run_module('shoal', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pyarrow', 'numpy', 'sqlalchemy', 'msgspec') or m.startswith('shoal.client')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "COLUMNS": "100"})
    assert out.returncode == 0, out.stderr
    assert "Usage: shoal" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _run_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run `shoal args` with stdin, stdout and stderr on a new pseudo-terminal; what it drew
    and its exit code."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "shoal", *args], stdin=slave, stdout=slave,
                            stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    drawn = bytearray()
    while True:
        try:
            block = os.read(master, 65536)
        except OSError:        # EIO: every holder of the terminal's other end has closed it
            break
        if not block:
            break
        drawn += block
    os.close(master)
    return proc.wait(timeout=300), drawn.decode("utf-8", "replace")


def _rows(n: int, start: int = 0) -> bytes:
    return b"".join(json.dumps({"service": f"svc-{i % 7}", "n": i, "pad": "p" * 900}).encode()
                    + b"\n" for i in range(start, start + n))


@pytest.mark.services
def test_progress_bar_on_a_terminal_summary_line_off_it(tmp_path: Path, data: Path) -> None:
    src = tmp_path / "in.ndjson"
    src.write_bytes(_rows(2500))      # ~2.4 MB: three 1 MB chunks
    args = ["--data-dir", str(data), "ingest", str(src), "--table", "logs", "--chunk-mb", "1",
            "--mode", "drop"]
    code, drawn = _run_on_a_terminal(args, tmp_path)
    assert code == 0, drawn
    assert "in.ndjson -> logs" in drawn          # the bar's description
    assert "━" in drawn                         # the bar itself
    assert "2.4/2.4 MB" in drawn                # bytes done of the total, at the end
    assert "ingested 2500 rows into logs in 3 chunk(s)" in drawn
    plain = subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                           text=True, timeout=300, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stderr == ""
    assert plain.stdout.count("\n") == 1
    assert plain.stdout.startswith("ingested 2500 rows into logs in 3 chunk(s)")


def test_the_first_chunk_is_read_while_the_catalog_opens(tmp_path: Path, data: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The command reads its first chunk on a thread while it imports and opens the catalog
    (`shoal.ingest.bulk.ReadAhead`): opening the catalog here waits until that chunk has been
    read, which only another thread can do."""
    from typer.testing import CliRunner

    import shoal.cli.ingest as command
    import shoal.ingest.bulk as pipeline
    from shoal.cli.main import app

    read = threading.Event()
    real_chunks, real_connect = pipeline.iter_file_chunks, command.connect_or_exit

    def chunks(fd: int, chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
        for item in real_chunks(fd, chunk_bytes):
            read.set()
            yield item

    def connect(ctx: Any) -> Any:
        # a hang guard, not a clock: the read either happens meanwhile or never does
        assert read.wait(timeout=60), "nothing read the first chunk while the catalog opened"
        return real_connect(ctx)

    monkeypatch.setattr(pipeline, "iter_file_chunks", chunks)
    monkeypatch.setattr(command, "connect_or_exit", connect)
    src = tmp_path / "in.ndjson"
    src.write_bytes(_rows(3))
    out = CliRunner().invoke(app, ["--data-dir", str(data), "ingest", str(src), "--table",
                                   "logs", "--mode", "drop"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("ingested 3 rows into logs in 1 chunk(s)")
    db = shoal.connect(data_dir=str(data))
    try:
        assert sorted(r["n"] for r in db.query("SELECT n FROM logs").to_pylist()) == [0, 1, 2]
    finally:
        db.close()


class _Speculated:
    """Every speculative coercion of the command (`Speculation.run`): how many began, and
    an event set when one has ended."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import shoal.ingest.bulk as pipeline

        self.count = 0
        self.ended = threading.Event()
        real_run = pipeline.Speculation.run

        def run(speculation: Any, body: bytes) -> None:
            self.count += 1
            try:
                real_run(speculation, body)
            finally:
                self.ended.set()

        monkeypatch.setattr(pipeline.Speculation, "run", run)


def test_the_first_chunk_is_coerced_while_the_catalog_opens(tmp_path: Path, data: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """With an embedded catalog the command reads the table's schema without SQLAlchemy
    (`shoal.catalog.peek`) and coerces its first chunk against it on the reading thread;
    opening the catalog here waits for that coercion to end."""
    from typer.testing import CliRunner

    import shoal.cli.ingest as command
    from shoal.cli.main import app

    ran = _Speculated(monkeypatch)
    real_connect = command.connect_or_exit

    def connect(ctx: Any) -> Any:
        # a hang guard, not a clock: the coercion either happens meanwhile or never does
        assert ran.ended.wait(timeout=60), "nothing coerced while the catalog opened"
        return real_connect(ctx)

    monkeypatch.setattr(command, "connect_or_exit", connect)
    src = tmp_path / "in.ndjson"
    src.write_bytes(b'{"service": "a", "n": 1}\n{"service": "b", "n": 2}\n')
    out = CliRunner().invoke(app, ["--data-dir", str(data), "ingest", str(src), "--table",
                                   "logs"])
    assert out.exit_code == 0, out.output
    assert ran.count == 1
    db = shoal.connect(data_dir=str(data))
    try:
        got = db.query("SELECT service, n FROM logs ORDER BY n").to_pylist()
        assert got == [{"service": "a", "n": 1}, {"service": "b", "n": 2}]
    finally:
        db.close()


def test_a_stale_schema_hint_costs_a_coercion_not_a_row(tmp_path: Path, data: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The table gained a column after the hint was read (here: the hint is made stale on
    purpose, the race it stands for cannot be timed): the first chunk is coerced again
    against the schema the catalog loads, so the new column holds its values."""
    from typer.testing import CliRunner

    import shoal.catalog.peek as peek
    from shoal.cli.main import app

    db = shoal.connect(data_dir=str(data))
    try:
        before = db.catalog.load_table("logs").schema
        db.add_columns("logs", [shoal.Column("region", shoal.STRING)])
    finally:
        db.close()
    monkeypatch.setattr(peek, "peek_table", lambda url, table: (before, "evolve"))
    ran = _Speculated(monkeypatch)
    src = tmp_path / "in.ndjson"
    src.write_bytes(b'{"service": "a", "n": 1, "region": "eu"}\n')
    out = CliRunner().invoke(app, ["--data-dir", str(data), "ingest", str(src), "--table",
                                   "logs"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("ingested 1 rows into logs")
    assert "new columns" not in out.output
    assert ran.count == 1 and ran.ended.is_set()    # the stale coercion did happen
    db = shoal.connect(data_dir=str(data))
    try:
        got = db.query("SELECT service, n, region FROM logs").to_pylist()
        assert got == [{"service": "a", "n": 1, "region": "eu"}]
    finally:
        db.close()
