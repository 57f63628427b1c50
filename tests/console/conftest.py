"""The console tests' world: one live `shoal serve` per module with generated log data, one
Debian chromium per module (Playwright), a fresh page per test at 1280x800.

The `logs` fixture returns what was generated, so tests compute the answers they expect
from it. Rows are one minute apart going back from the moment the data was made, with the
`deadlock` rows at 10.5, 24.5, 41.5, 100.5 and 200.5 minutes ago (the first three one per
service): a "last hour" search finds those three for as long as a test run takes (under
18 minutes).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import sync_playwright

from tests.support.browser import VIEWPORT, launch_chromium
from tests.support.server import ServerHandle, start_server

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
SERVICES = ("api", "web", "db")
DEADLOCK_MINUTES = (10, 24, 41, 100, 200)   # row i is i + 0.5 minutes old


@dataclass
class Generated:
    """The rows written to table `logs`, as sent."""

    made_at: float
    rows: list[dict[str, Any]] = field(default_factory=list)

    def matching(self, word: str, since_s: float) -> list[dict[str, Any]]:
        cut = self.made_at - since_s
        return [r for r in self.rows if word in r["message"].split() and r["_ts"] >= cut]


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + "Z"


def generate(now: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two batches: 240 recent rows, then 60 older ones that bring a new field (`region`)."""
    recent, older = [], []
    for i in range(240):
        ts = now - (i * 60 + 30)
        error = i % 5 == 0
        words = f"GET /orders/{i} {'failed deadlock' if i in DEADLOCK_MINUTES else 'ok'}"
        recent.append({"_ts": ts, "_timestamp": _iso(ts), "service": SERVICES[i % 3],
                       "level": "error" if error else "info", "message": words,
                       "latency_ms": (i * 7) % 97,
                       "attrs": {"http": {"status": 500 if error else 200}}})
    for j in range(60):
        ts = now - ((240 + j) * 60 + 30)
        older.append({"_ts": ts, "_timestamp": _iso(ts), "service": SERVICES[j % 3],
                      "level": "info", "message": "cache warm", "latency_ms": j,
                      "attrs": {"http": {"status": 200}}, "region": ("eu", "us")[j % 2]})
    return recent, older


def ndjson(rows: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps({k: v for k, v in r.items() if k != "_ts"})
                     for r in rows).encode()


def ingest(url: str, table: str, rows: list[dict[str, Any]], token: str | None = None) -> None:
    headers = {"Content-Type": "application/x-ndjson"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    r = httpx.post(f"{url}/v1/ingest/{table}", content=ndjson(rows), headers=headers,
                   timeout=60)
    r.raise_for_status()


def sql(url: str, statement: str, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.post(f"{url}/v1/query", json={"sql": statement}, headers=headers, timeout=120)
    r.raise_for_status()
    doc: dict[str, Any] = r.json()
    return doc


def load_logs(url: str, token: str | None = None) -> Generated:
    sql(url, "CREATE TABLE logs (service string, level string, message string, "
             "latency_ms long, attrs dynamic) WITH (retention='30d')", token)
    made = Generated(made_at=time.time())
    recent, older = generate(made.made_at)
    ingest(url, "logs", recent, token)
    ingest(url, "logs", older, token)      # evolves the schema: `region` appears
    made.rows = recent + older
    return made


@pytest.fixture(scope="module")
def playwright_driver() -> Iterator[Any]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright_driver: Any) -> Iterator[Any]:
    b = launch_chromium(playwright_driver)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with start_server(tmp_path_factory.mktemp("console"), extra_args=["--lazy-spark"]) as h:
        yield h


@pytest.fixture(scope="module")
def logs(server: ServerHandle) -> Generated:
    made = load_logs(server.url)
    add_rejects(server)
    return made


REJECTS = ((1, b'{"latency_ms": "slow"}', "latency_ms"), (2, b"{not json", None))


def add_rejects(server: ServerHandle) -> None:
    """Two rejects of `logs`, committed the way the file-drop pipeline commits its own (the
    server's catalog and store, opened by a second client)."""
    import shoal
    from shoal.commit.rejects import RejectRecord, commit_rejects

    db = shoal.connect(data_dir=str(server.data_dir))
    try:
        records = [RejectRecord(key=f"filedrop-reject:console-test:{line}", raw=raw,
                                error=f"line {line}: cannot read this record",
                                source="filedrop", field=field, file="drop/a.ndjson",
                                line=line) for line, raw, field in REJECTS]
        assert commit_rejects(db.coordinator, db.catalog, "logs", records) == len(records)
    finally:
        db.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (empty storage) per test; page errors fail the test."""
    context = browser.new_context(viewport=VIEWPORT)
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield p
    finally:
        context.close()
    assert not errors, f"errors in the page: {errors}"


def screenshot(page: Any, name: str) -> None:
    """Photograph the page; with SHOAL_UPDATE_SCREENSHOTS=1 into docs/console/<name>.png
    (committed; the README shows them), otherwise only taken (a test run leaves the
    checkout as it found it)."""
    png = page.screenshot()
    assert png.startswith(b"\x89PNG"), name
    if os.environ.get("SHOAL_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        (SCREENSHOTS / f"{name}.png").write_bytes(png)
