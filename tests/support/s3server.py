"""A real S3-compatible HTTP server for tests, and a byte-counting TCP proxy in front of it.

`s3_server()` runs moto's server mode (`moto.server`, werkzeug, threaded) in a separate
Python process on 127.0.0.1 and a free port, waits until it answers, creates `bucket` with
boto3, yields the endpoint URL (`http://127.0.0.1:<port>`) and stops the process on exit.
Being a separate process, it survives tests that fork or kill their own workers. The child
exits by itself when its stdin closes, i.e. when the test process dies, even by SIGKILL;
its request log goes to a temporary file whose path is in the error if it fails to start.

Any access key / secret is accepted; use `TEST_ENV` for the standard AWS variables.

`counting_proxy(endpoint)` forwards TCP to the server and counts the bytes each way, so a
test can prove that a range read did not download a whole object.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import boto3

from tests.support.tiers import guard
from tests.support.waiting import HANG_GUARD_S, eventually

TEST_BUCKET = "shoal-test"
TEST_REGION = "us-east-1"
TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": TEST_REGION,
    "AWS_DEFAULT_REGION": TEST_REGION,
    "AWS_EC2_METADATA_DISABLED": "true",    # no instance-metadata probing off EC2
}

# Runs in the child: leave as soon as the parent goes away (stdin reaches EOF).
_BOOT = """
import os, sys, threading
def _watch_parent():
    sys.stdin.read()
    os._exit(0)
threading.Thread(target=_watch_parent, daemon=True).start()
from moto.server import main
main(sys.argv[1:])
"""


@contextmanager
def s3_server(*, bucket: str = TEST_BUCKET,
              startup_timeout_s: float = HANG_GUARD_S) -> Iterator[str]:
    """Run moto's S3 server with `bucket` created; yield its endpoint URL (`startup_timeout_s`
    only guards against a hang)."""
    guard("the S3 server", "s3")
    log = tempfile.NamedTemporaryFile(prefix="shoal-moto-", suffix=".log", delete=False)
    proc: subprocess.Popen[bytes] | None = None
    endpoint = ""
    for _ in range(3):     # the free port can be taken between probing and binding
        port = _free_port()
        endpoint = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, **TEST_ENV}, start_new_session=True)
        if _wait_ready(proc, endpoint, startup_timeout_s):
            break
        _stop(proc)
        proc = None
    if proc is None:
        log.close()
        raise RuntimeError(f"moto S3 server did not start; see {log.name}")
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name=TEST_REGION,
                     aws_access_key_id="testing", aws_secret_access_key="testing",
                     ).create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        _stop(proc)
        log.close()
        os.unlink(log.name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_ready(proc: subprocess.Popen[bytes], endpoint: str, timeout_s: float) -> bool:
    """Poll until moto answers (True) or its process ends (False); `timeout_s` only guards
    against a hang (False too, after it)."""
    def state() -> str:
        if proc.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):
                return "ready"
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            return f"not answering ({type(e).__name__})"

    try:
        return eventually(state, f"moto at {endpoint}", until=lambda s: s in ("ready", "exited"),
                          timeout_s=timeout_s) == "ready"
    except AssertionError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()      # the child's watcher exits on EOF
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


# ---- byte-counting proxy ---------------------------------------------------------------------

class CountingProxy:
    """TCP forwarder on 127.0.0.1 that counts bytes client->server (`up`) and back (`down`)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.up = 0
        self.down = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.up = self.down = 0

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return      # listener closed
            server = socket.create_connection(self._target)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down"), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while chunk := src.recv(65536):
                with self._lock:
                    setattr(self, direction, getattr(self, direction) + len(chunk))
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@contextmanager
def counting_proxy(endpoint: str) -> Iterator[CountingProxy]:
    proxy = CountingProxy(endpoint)
    try:
        yield proxy
    finally:
        proxy.close()
