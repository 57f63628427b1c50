"""A Spark standalone cluster for tests: a master and workers started from the
pyspark package's own `spark-class`, each in a nearly empty environment.

Workers get only PATH (for `java`), JAVA_HOME when set, SPARK_HOME and HOME: no AWS
variables, no PYTHONPATH, no shoal. Each worker runs in a process group of its own, so
`kill_worker` SIGKILLs the worker's JVM together with its executor and Python workers.
The master's JSON API (`state()`) is the ground truth the tests assert from: which apps ran,
with which executors on which workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.waiting import eventually

HOST = "127.0.0.1"
START_TIMEOUT_S = 120.0
# Master and workers agree on it (workers heartbeat every quarter of it): a killed worker is
# noticed in seconds, not the default minute.
WORKER_TIMEOUT = "-Dspark.worker.timeout=15"


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def bare_env() -> dict[str, str]:
    """What a freshly provisioned node has: java on PATH, SPARK_HOME, HOME; nothing else."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH: the Spark cluster tests need Java 17+")
    java_bin = os.path.dirname(os.path.realpath(java))
    env = {"PATH": f"{java_bin}:/usr/bin:/bin", "SPARK_HOME": spark_home(),
           "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = START_TIMEOUT_S,
             interval_s: float = 0.2) -> Any:
    """`eventually(check)`, an OSError or ValueError of `check` (a port not open yet, a JSON
    page half written) counting as "not yet"."""
    def probe() -> Any:
        try:
            return check()
        except (OSError, ValueError):
            return None

    return eventually(probe, what, timeout_s=timeout_s, poll_s=interval_s)


@dataclass
class SparkCluster:
    root: Path
    master_port: int
    webui_port: int
    master: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{HOST}:{self.webui_port}/json/", timeout=60) as r:
            return json.loads(r.read())

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def _spark_class(self, cls: str, *args: str, log: str,
                     extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        env = bare_env()
        env["SPARK_LOG_DIR"] = str(self.root / "logs")
        env.update(extra_env or {})
        out = open(self.root / log, "ab")  # noqa: SIM115 - the child keeps it
        try:
            return subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), cls, *args],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.root)
        finally:
            out.close()

    def start_master(self) -> None:
        self.master = self._spark_class(
            "org.apache.spark.deploy.master.Master", "--host", HOST,
            "--port", str(self.master_port), "--webui-port", str(self.webui_port),
            log="master.log", extra_env={"SPARK_MASTER_OPTS": WORKER_TIMEOUT})
        wait_for("the Spark master", lambda: self.state().get("status") == "ALIVE")

    def add_worker(self, *, cores: int = 1, memory: str = "2g") -> subprocess.Popen[bytes]:
        n = len(self.workers)
        work = self.root / f"worker-{n}"
        work.mkdir(parents=True, exist_ok=True)
        before = len(self.alive_workers())
        proc = self._spark_class(
            "org.apache.spark.deploy.worker.Worker", "--host", HOST, "--port", "0",
            "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory,
            "--work-dir", str(work), self.url, log=f"worker-{n}.log",
            extra_env={"SPARK_WORKER_OPTS": WORKER_TIMEOUT})
        self.workers.append(proc)
        wait_for("a Spark worker to register", lambda: len(self.alive_workers()) > before)
        return proc

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker `index` with its executor and Python workers (its process group)."""
        proc = self.workers[index]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)

    def stop(self) -> None:
        """SIGKILL every process group of the cluster (a test cluster keeps nothing)."""
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)

    def log_tail(self, chars: int = 3000) -> str:
        out = []
        for path in sorted(self.root.glob("*.log")):
            out.append(f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)


@contextmanager
def spark_cluster(root: Path, *, workers: int = 2, cores: int = 1,
                  memory: str = "2g") -> Iterator[SparkCluster]:
    cluster = SparkCluster(root=root, master_port=free_port(), webui_port=free_port())
    root.mkdir(parents=True, exist_ok=True)
    try:
        cluster.start_master()
        for _ in range(workers):
            cluster.add_worker(cores=cores, memory=memory)
        yield cluster
    finally:
        cluster.stop()
