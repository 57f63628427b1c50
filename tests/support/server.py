"""Running the shoal HTTP server for tests: in-process (a thread) or as a real `shoal serve`.

- `serve_app(app)`: a context manager running a FastAPI app under a real uvicorn server on
  127.0.0.1 and a kernel-chosen port, in a background thread; yields the base URL. Fast, and
  the test keeps a handle on the app's objects (e.g. a `Shoal` with a tiny staging buffer).
  It speaks HTTP through the same protocol as `shoal serve` (`shoal.server.protocol`, with
  `header_timeout_s`).
- `start_server(data_dir, ...)`: `python -m shoal --data-dir D serve --port N` as a
  subprocess (a real process that a test may SIGTERM or SIGKILL), waiting for `/readyz`.
  Returns a `ServerHandle` (`.url`, `.proc`, `.stop()`, `.kill()`, `.log()`); also a context
  manager that stops the server on exit. Inherited `SHOAL_*` variables are dropped so the
  child sees only what the test passes (OTLP/gRPC is off unless asked for). The child
  exits by itself if the test process dies (its stdin reaches EOF), so a crashed test run
  leaves no server behind.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from shoal.config import Config
from shoal.server.protocol import header_timeout_protocol
from tests.support.tiers import guard
from tests.support.waiting import HANG_GUARD_S, eventually

# Runs in the child: the `shoal` CLI exactly as `python -m shoal ...` would, plus a
# thread that leaves as soon as the parent goes away (stdin reaches EOF).
_BOOT = """
import os, runpy, sys, threading
def _watch_parent():
    sys.stdin.read()
    os._exit(70)
threading.Thread(target=_watch_parent, daemon=True).start()
sys.argv = ["shoal", *sys.argv[1:]]
runpy.run_module("shoal", run_name="__main__", alter_sys=True)
"""


@contextmanager
def serve_app(app: Any, *, startup_timeout_s: float = HANG_GUARD_S,
              header_timeout_s: float = Config.header_timeout_s) -> Iterator[str]:
    """Run `app` under uvicorn in a thread on 127.0.0.1; yield `http://127.0.0.1:<port>`.

    `startup_timeout_s` only guards against a hang."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning",
                                           access_log=False,
                                           http=header_timeout_protocol(header_timeout_s)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name=f"uvicorn-{port}", daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start: its thread ended")
        return bool(server.started)

    try:
        eventually(started, "uvicorn to start", timeout_s=startup_timeout_s, poll_s=0.01)
    except BaseException:
        server.should_exit = True
        sock.close()
        raise
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tokens_spec(tokens: str | Mapping[str, str | Iterable[str]]) -> str:
    """`{"tok": ["ingest", "query"]}` -> `"tok=ingest,query"` (SHOAL_TOKENS syntax)."""
    if isinstance(tokens, str):
        return tokens
    return ";".join(f"{t}={s if isinstance(s, str) else ','.join(s)}"
                    for t, s in tokens.items())


@dataclass
class ServerHandle:
    url: str
    proc: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    _stopped: bool = field(default=False, repr=False)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (graceful: in-flight requests finish, the buffer flushes); exit status."""
        return self._signal(signal.SIGTERM, timeout_s)

    def kill(self, timeout_s: float = 30.0) -> int:
        """SIGKILL: no shutdown of any kind; exit status (-9)."""
        return self._signal(signal.SIGKILL, timeout_s)

    def _signal(self, sig: int, timeout_s: float) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
                raise RuntimeError(f"server did not exit on signal {sig}; log:\n{self.log()}")
        if not self._stopped:
            self._stopped = True
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        return self.proc.returncode

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def start_server(data_dir: str | Path | None = None, *, catalog_url: str | None = None,
                 storage_url: str | None = None, env: Mapping[str, str] | None = None,
                 tokens: str | Mapping[str, str | Iterable[str]] | None = None,
                 host: str = "127.0.0.1", port: int | None = None,
                 extra_args: Iterable[str] = (), startup_timeout_s: float = 180.0,
                 ) -> ServerHandle:
    """Start `shoal serve` in a subprocess and wait until `/readyz` answers 200.

    `data_dir` defaults to a fresh temporary directory; `catalog_url`/`storage_url` become
    `SHOAL_CATALOG_URL`/`SHOAL_STORAGE_URL`; `tokens` becomes `SHOAL_TOKENS`; `env` is
    applied last. With `port=None` a free port is picked (and re-picked if it was taken).
    """
    guard("a `shoal serve` process", "services")
    ddir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="shoal-srv-"))
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    # OTLP/gRPC is off unless the test asks for it (`env` or `--otlp-grpc-port`): the
    # default port 4317 is one for the whole machine, and test servers run side by side.
    child_env["SHOAL_OTLP_GRPC_PORT"] = "0"
    child_env["SHOAL_FLIGHT_PORT"] = "0"      # Flight SQL likewise (default 8815)
    # Background maintenance and bound Kafka pipelines are off unless asked for: they would
    # change extent counts under tests that assert them.
    child_env["SHOAL_MAINTENANCE"] = "false"
    child_env["SHOAL_PIPELINES"] = "false"
    if catalog_url is not None:
        child_env["SHOAL_CATALOG_URL"] = catalog_url
    if storage_url is not None:
        child_env["SHOAL_STORAGE_URL"] = storage_url
    if tokens is not None:
        child_env["SHOAL_TOKENS"] = tokens_spec(tokens)
    child_env.update(env or {})
    log_fd, log_name = tempfile.mkstemp(prefix="shoal-serve-", suffix=".log")
    os.close(log_fd)
    log_path = Path(log_name)
    last_log = ""
    for _ in range(1 if port is not None else 3):
        p = port if port is not None else free_port()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, "--data-dir", str(ddir), "serve",
                 "--host", host, "--port", str(p), *extra_args],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=child_env,
                start_new_session=True)
        url = f"http://{'[' + host + ']' if ':' in host else host}:{p}"
        handle = ServerHandle(url, proc, ddir, log_path)
        if _wait_ready(proc, url, startup_timeout_s):
            return handle
        handle.kill()
        last_log = handle.log()
        if "address already in use" not in last_log.lower():
            break
    raise RuntimeError(f"shoal serve did not become ready; log:\n{last_log}")


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout_s: float) -> bool:
    """Poll until the server answers `/readyz` with 200 (True) or its process ends (False);
    `timeout_s` only guards against a hang (False too, after it)."""
    def state() -> str:
        if proc.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as r:
                return "ready" if r.status == 200 else f"HTTP {r.status}"
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
            return f"not answering ({type(e).__name__})"

    try:
        return eventually(state, f"{url}/readyz", until=lambda s: s in ("ready", "exited"),
                          timeout_s=timeout_s) == "ready"
    except AssertionError:
        return False
