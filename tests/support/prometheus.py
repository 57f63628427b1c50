"""A real Prometheus server for tests (Debian's `prometheus` package; `scripts/setup.sh`
installs it), and its `promtool` for backfilling a TSDB from OpenMetrics text.

    with prometheus_server(tmp_path, scrape=[...], remote_write="http://.../api/v1/write",
                           backfill=openmetrics_text) as prom:
        prom.query("rate(x[1m])", time=t)          # Prometheus's own JSON `data`

- Its HTTP API is on a free loopback port; `--web.enable-lifecycle` lets a test reload it.
- `backfill` (OpenMetrics text with timestamps, ending in `# EOF`) becomes TSDB blocks with
  `promtool tsdb create-blocks-from openmetrics` before the server starts, so a test can
  query a fixed history at fixed evaluation times instead of waiting for scrapes.
- Retention is 100 years, so backfilled history of any age stays queryable.
- Under CI=true a missing binary is a failure, not a skip (the project's setup installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.server import free_port
from tests.support.waiting import eventually
from tests.support.tiers import guard


def binary(name: str) -> str:
    """The path of a Debian-packaged binary; skip locally, fail under CI, when it is missing."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (scripts/setup.sh installs Debian's package)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@dataclass
class ScrapeJob:
    """One `scrape_configs` entry (static targets)."""

    name: str
    targets: Sequence[str]
    interval: str = "1s"
    timeout: str = "1s"
    metrics_path: str = "/metrics"
    labels: Mapping[str, str] = field(default_factory=dict)
    honor_labels: bool = False
    bearer_token: str | None = None

    def config(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "job_name": self.name, "scrape_interval": self.interval,
            "scrape_timeout": self.timeout, "metrics_path": self.metrics_path,
            "honor_labels": self.honor_labels,
            "static_configs": [{"targets": list(self.targets), "labels": dict(self.labels)}]}
        if self.bearer_token:
            doc["authorization"] = {"type": "Bearer", "credentials": self.bearer_token}
        return doc


@dataclass
class PrometheusServer:
    url: str
    proc: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path

    def api(self, path: str, **params: Any) -> Any:
        """GET /api/v1/<path>; the `data` of a success, AssertionError otherwise."""
        r = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=120)
        doc = r.json()
        assert r.status_code == 200 and doc["status"] == "success", (r.status_code, doc)
        return doc["data"]

    def query(self, expr: str, *, time: float | None = None) -> Any:
        params: dict[str, Any] = {"query": expr}
        if time is not None:
            params["time"] = repr(float(time))
        return self.api("query", **params)

    def query_range(self, expr: str, *, start: float, end: float, step: float) -> Any:
        return self.api("query_range", query=expr, start=repr(float(start)),
                        end=repr(float(end)), step=repr(float(step)))

    def metric(self, expr: str) -> float | None:
        """The value of an instant query with one series in its answer (None when empty)."""
        result = self.query(expr)["result"]
        return float(result[0]["value"][1]) if result else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def write_config(path: Path, *, scrape: Sequence[ScrapeJob] = (),
                 remote_write: str | None = None, remote_write_token: str | None = None,
                 evaluation_interval: str = "1s") -> None:
    doc: dict[str, Any] = {"global": {"scrape_interval": "1s",
                                      "evaluation_interval": evaluation_interval},
                           "scrape_configs": [job.config() for job in scrape]}
    if remote_write:
        target: dict[str, Any] = {
            "url": remote_write, "send_exemplars": False,
            # Flush quickly and keep retrying while shoal is down (the Must-show restart).
            "queue_config": {"batch_send_deadline": "200ms", "min_backoff": "100ms",
                             "max_backoff": "1s", "capacity": 10000,
                             "max_samples_per_send": 2000},
            "metadata_config": {"send": True, "send_interval": "1s"}}
        if remote_write_token:
            target["authorization"] = {"type": "Bearer", "credentials": remote_write_token}
        doc["remote_write"] = [target]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def backfill(openmetrics: str, tsdb: Path, work: Path) -> None:
    """Turn OpenMetrics text (with timestamps, ending `# EOF`) into TSDB blocks in `tsdb`."""
    src = work / "backfill.om"
    src.write_text(openmetrics)
    tsdb.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([binary("promtool"), "tsdb", "create-blocks-from", "openmetrics",
                          str(src), str(tsdb)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr + out.stdout


@contextmanager
def prometheus_server(work: Path, *, scrape: Sequence[ScrapeJob] = (),
                      remote_write: str | None = None, remote_write_token: str | None = None,
                      backfill_text: str | None = None,
                      lookback: str = "5m") -> Iterator[PrometheusServer]:
    """Start Prometheus in `work` (config, TSDB and log there); stop it on exit."""
    guard("a Prometheus server", "services")
    exe = binary("prometheus")
    work.mkdir(parents=True, exist_ok=True)
    config = work / "prometheus.yml"
    write_config(config, scrape=scrape, remote_write=remote_write,
                 remote_write_token=remote_write_token)
    tsdb = work / "tsdb"
    if backfill_text is not None:
        backfill(backfill_text, tsdb, work)
    port = free_port()
    log_path = work / "prometheus.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [exe, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
             f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle",
             "--storage.tsdb.retention.time=100y", f"--query.lookback-delta={lookback}",
             "--log.level=info"],
            stdout=log, stderr=subprocess.STDOUT, cwd=work)
    server = PrometheusServer(f"http://127.0.0.1:{port}", proc, work, log_path)
    try:
        eventually(lambda: _ready(server), "Prometheus to be ready")
        yield server
    finally:
        server.stop()


def _ready(server: PrometheusServer) -> bool:
    if server.proc.poll() is not None:
        raise AssertionError(f"Prometheus exited ({server.proc.returncode}):\n{server.log()}")
    try:
        return httpx.get(f"{server.url}/-/ready", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def node_exporter(work: Path) -> Iterator[str]:
    """Debian's prometheus-node-exporter on a free loopback port; yields its host:port."""
    guard("a node exporter", "services")
    exe = binary("prometheus-node-exporter")
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(work / "node-exporter.log", "ab") as log:
        proc = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"node exporter exited ({proc.returncode})")
        try:
            return httpx.get(f"http://{address}/metrics", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    try:
        eventually(up, "the node exporter to serve /metrics")
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
