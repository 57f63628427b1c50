"""A private PostgreSQL server with `wal_level=logical`, started from Debian's binaries.

The machine's shared server runs `wal_level=replica`, which logical decoding refuses, so the
change-data-capture tests start their own: `initdb` into a temporary directory owned by the
`postgres` user, `pg_ctl start` on a free port with the socket in that directory, then wait
until a connection succeeds (no sleeping: each try is a real connection attempt). `stop()`
shuts it down fast and removes the directory. Runs as root (the tests' container) or as
`postgres`; any other user skips.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

PG_BIN = "/usr/lib/postgresql/15/bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


@dataclass
class LogicalPostgres:
    datadir: str
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        subprocess.run(_as_postgres([f"{PG_BIN}/pg_ctl", "-D", self.datadir, "-m", "immediate",
                                     "-w", "stop"]), capture_output=True, check=False)
        shutil.rmtree(os.path.dirname(self.datadir), ignore_errors=True)


def start_logical_postgres(wal_level: str = "logical") -> LogicalPostgres:
    """Start a server (see the module docstring); skip when the binaries are missing."""
    if not os.path.exists(f"{PG_BIN}/initdb"):
        pytest.skip(f"no PostgreSQL 15 binaries in {PG_BIN}")
    if os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != "postgres":
        pytest.skip("starting a private PostgreSQL needs root or the postgres user")
    root = tempfile.mkdtemp(prefix="shoal-pg-")
    datadir = os.path.join(root, "data")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    subprocess.run(_as_postgres([f"{PG_BIN}/initdb", "-D", datadir, "-U", "postgres",
                                 "-A", "trust", "--no-sync"]),
                   capture_output=True, check=True)
    port = free_port()
    opts = (f"-p {port} -c wal_level={wal_level} -c listen_addresses=127.0.0.1 -k {root} "
            "-c fsync=off -c max_replication_slots=20 -c max_wal_senders=20")
    subprocess.run(_as_postgres([f"{PG_BIN}/pg_ctl", "-D", datadir, "-o", opts, "-l",
                                 os.path.join(root, "log"), "-w", "-t", "60", "start"]),
                   capture_output=True, check=True)
    server = LogicalPostgres(datadir, port)
    _wait_ready(server)
    return server


def _wait_ready(server: LogicalPostgres) -> None:
    import psycopg

    last: Exception | None = None
    for _ in range(600):   # pg_ctl -w already waited; this only covers the listener racing
        try:
            with psycopg.connect(server.url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as e:
            last = e
    server.stop()
    raise RuntimeError(f"private PostgreSQL on port {server.port} never accepted: {last}")


@contextmanager
def logical_postgres(wal_level: str = "logical") -> Iterator[LogicalPostgres]:
    server = start_logical_postgres(wal_level)
    try:
        yield server
    finally:
        server.stop()
