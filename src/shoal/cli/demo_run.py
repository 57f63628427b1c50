"""What `shoal demo` runs: the whole system end to end on the embedded default, over HTTP.

In a fresh temporary directory (kept with `--keep`) it starts `shoal serve` as a child
process on a free port (or `--port`), waits for `/readyz`, then, as a client would:

1. creates a `logs` table with SQL DDL through `POST /v1/query`;
2. ingests generated logs over four hours as NDJSON batches through `POST /v1/ingest/logs`,
   each with its own `X-Idempotency-Key` (one batch is usually one extent). Half-way the
   records gain a `region` field, so the schema evolves (the ack's `new_columns`);
3. replays one batch with its key: the ack says `replayed: true` with the first snapshot id
   and nothing is written;
4. runs a few queries through Spark (a trace-id needle, a service + 15-minute window, a
   token lookup with `has()`, a count by level, the evolved column, `DESCRIBE`) and prints
   the first rows of each with its pruning stats.

The server is always stopped (SIGTERM, then SIGKILL of its process group if it hangs) and
the directory removed, also on failure or interrupt. The child gets the embedded default:
`SHOAL_*` settings other than Spark's are not passed on and it runs in the temporary
directory, so no `./shoal.toml` applies. Returns the exit code: 0 on success, 1 after a
one-line `error: ...` on stderr, 130 when interrupted.

Only the standard library talks HTTP here (`urllib.request`, no proxies): the demo is a
client of the server, and shoal's own HTTP client libraries are test-only dependencies.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from shoal.errors import InternalError, ShoalError

SERVICES = ["api", "auth", "billing", "search", "checkout", "mailer"]
SLOTS = 12                         # 20-minute slots: four hours of logs
SLOT = timedelta(minutes=20)
ROWS_PER_BATCH = 1000
EVOLVE_AT_SLOT = SLOTS // 2        # records carry `region` from here on
REPLAY_BATCH = 10
NEEDLE_BATCH, NEEDLE_ROW = 50, 417
WINDOW_SERVICE, WINDOW_SLOT = "billing", 8
RARE_SERVICE, RARE_SLOT, RARE_TOKEN = "billing", 9, "deadlock"
PREVIEW_ROWS = 5
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
INTERRUPTED_STOP_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 300.0             # the first query may wait for Spark's warm-up
KEEP_ENV = ("SHOAL_SPARK_MASTER", "SHOAL_SPARK_DRIVER_MEMORY")

CREATE_LOGS = ("CREATE TABLE logs (service string, level string, message string, "
               "trace_id string, status int, duration_ms real) WITH (retention='7d')")

# (level, status choices, message template) per service; {n} {u} {ms} {hex} are filled in.
MESSAGES: dict[str, list[tuple[str, list[int], str]]] = {
    "api": [("info", [200, 201], "GET /v1/orders/{n} served in {ms} ms"),
            ("info", [200], "POST /v1/cart updated cart {n} for user {u}"),
            ("warn", [404], "GET /v1/products/{n} not found"),
            ("warn", [429], "rate limit exceeded for user {u}"),
            ("error", [502, 503], "upstream search unavailable after {ms} ms")],
    "auth": [("info", [200], "login ok for user {u}"),
             ("info", [200], "token refreshed for user {u} session {hex}"),
             ("warn", [401], "login failed for user {u}: bad password"),
             ("error", [500], "session store timeout after {ms} ms")],
    "billing": [("info", [200], "invoice {n} charged to user {u}"),
                ("info", [200], "refund issued for invoice {n}"),
                ("warn", [402], "payment declined for invoice {n}: card expired"),
                ("error", [500], "ledger write failed for invoice {n}, retrying")],
    "search": [("info", [200], "query returned {n} hits in {ms} ms"),
               ("info", [200], "index shard {n} cache hit"),
               ("warn", [200], "index shard {n} cache miss, slow path {ms} ms"),
               ("error", [500], "shard {n} query failed: connection reset")],
    "checkout": [("info", [200], "cart {n} checked out by user {u}"),
                 ("info", [200], "shipping quote for cart {n} in {ms} ms"),
                 ("warn", [409], "cart {n} changed during checkout, retrying"),
                 ("error", [504], "upstream timeout calling billing after {ms} ms")],
    "mailer": [("info", [250], "receipt sent to user {u}"),
               ("info", [250], "password reset mail queued for user {u}"),
               ("warn", [421], "smtp server busy, deferring mail {hex}"),
               ("error", [554], "mail to user {u} bounced: mailbox unavailable")],
}
LEVEL_WEIGHTS = {"info": 82, "warn": 12, "error": 6}


class DemoError(InternalError):
    code = "demo_failed"


# ---- the generated sample ----------------------------------------------------------------
@dataclass(frozen=True)
class Batch:
    index: int
    service: str
    start: datetime
    key: str
    body: bytes
    has_region: bool


def _rfc3339(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _sql_ts(t: datetime) -> str:
    return "TIMESTAMP '" + t.strftime("%Y-%m-%d %H:%M:%S") + "'"


def generate(rng: random.Random, start: datetime) -> tuple[list[Batch], str]:
    """Every batch of the sample (slot-major, one batch per service and slot), and the
    trace id of one row to look for."""
    batches: list[Batch] = []
    needle = ""
    for slot in range(SLOTS):
        slot_start = start + slot * SLOT
        for service in SERVICES:
            i = len(batches)
            offsets = sorted(rng.uniform(0, SLOT.total_seconds()) for _ in range(ROWS_PER_BATCH))
            lines = []
            for row, off in enumerate(offsets):
                level = rng.choices(list(LEVEL_WEIGHTS), weights=list(LEVEL_WEIGHTS.values()))[0]
                _, statuses, template = rng.choice(
                    [m for m in MESSAGES[service] if m[0] == level])
                ms = round(rng.lognormvariate(3.5, 0.9), 1)
                rec: dict[str, Any] = {
                    "_timestamp": _rfc3339(slot_start + timedelta(seconds=off)),
                    "service": service, "level": level,
                    "message": template.format(n=rng.randint(1, 99_999),
                                               u=rng.randint(1000, 9999), ms=ms,
                                               hex=f"{rng.getrandbits(32):08x}"),
                    "trace_id": f"{rng.getrandbits(128):032x}",
                    "status": rng.choice(statuses), "duration_ms": ms,
                }
                if service == RARE_SERVICE and slot == RARE_SLOT and row % 300 == 150:
                    rec.update(level="error", status=500, message=(
                        f"{RARE_TOKEN} detected on invoices, transaction {rng.randint(1, 10**6)} "
                        "rolled back"))
                if slot >= EVOLVE_AT_SLOT:
                    rec["region"] = rng.choice(["eu-west-1", "us-east-1"])
                if i == NEEDLE_BATCH and row == NEEDLE_ROW:
                    needle = rec["trace_id"]
                lines.append(json.dumps(rec, separators=(",", ":")))
            batches.append(Batch(i, service, slot_start, f"demo-batch-{i:03d}",
                                 ("\n".join(lines) + "\n").encode(), slot >= EVOLVE_AT_SLOT))
    return batches, needle


# ---- the server as a child process and HTTP to it ----------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the kernel sends the child SIGTERM if the demo dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ServerProcess:
    """`python -m shoal --data-dir D serve --port N`, in its own process group."""

    def __init__(self, root: Path, data_dir: Path, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = root / "serve.log"
        self.stopped = False
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("SHOAL_") or k in KEEP_ENV}
        # No OTLP/gRPC port (4317 may be another server's) and no background maintenance
        # (compaction would change the pruning figures the demo prints mid-run).
        env.update(SHOAL_OTLP_GRPC_PORT="0", SHOAL_FLIGHT_PORT="0", SHOAL_MAINTENANCE="false")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "shoal", "--data-dir", str(data_dir),
                 "serve", "--port", str(port), "--log-level", "warning"],
                cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None)

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def wait_ready(self, http: Http, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if http.ready():
                return True
            time.sleep(0.1)
        return False

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; SIGKILL the whole group (Spark's JVM too) if it hangs.
        The exit status, or None if it had to be killed."""
        self.stopped = True
        status: int | None = self.proc.poll()
        try:
            if status is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    status = self.proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    status = None
        finally:    # also on a second Ctrl-C: whatever is left in the group goes
            with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
                os.killpg(self.proc.pid, signal.SIGKILL)
            if self.proc.poll() is None:
                self.proc.wait(timeout=30)
        return status


class Http:
    """JSON over HTTP with the standard library; errors become `DemoError`s."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def ready(self) -> bool:
        try:
            with self.opener.open(f"{self.url}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def call(self, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> Any:
        req = urllib.request.Request(f"{self.url}{path}", data=body, method=method,
                                     headers={"Accept": "application/json", **(headers or {})})
        try:
            with self.opener.open(req, timeout=HTTP_TIMEOUT_S) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read())["error"]
                what = f"{err['code']}: {err['message']}"
            except (ValueError, KeyError, TypeError):
                what = e.reason
            raise DemoError(f"{method} {path}: HTTP {e.code} {what}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise DemoError(f"{method} {path}: {reason}") from None

    def sql(self, statement: str) -> dict[str, Any]:
        doc: dict[str, Any] = self.call("POST", "/v1/query",
                                        json.dumps({"sql": statement}).encode(),
                                        {"Content-Type": "application/json"})
        return doc

    def ingest(self, table: str, batch: Batch) -> dict[str, Any]:
        doc: dict[str, Any] = self.call("POST", f"/v1/ingest/{table}", batch.body,
                                        {"Content-Type": "application/x-ndjson",
                                         "X-Idempotency-Key": batch.key})
        return doc


def start_server(root: Path, data_dir: Path, port: int | None,
                 started: list[ServerProcess]) -> tuple[ServerProcess, Http]:
    """Start the server and wait for `/readyz`; a port we picked is re-picked if taken.
    Every process started is appended to `started` at once, for the caller to stop."""
    for _ in range(1 if port is not None else 3):
        server = ServerProcess(root, data_dir, port if port is not None else _free_port())
        started.append(server)
        http = Http(server.url)
        if server.wait_ready(http, READY_TIMEOUT_S):
            return server, http
        status = server.stop(timeout_s=10)
        tail = server.log_tail()
        if port is None and "address already in use" in tail.lower():
            continue
        sys.stderr.write(f"--- shoal serve log, last lines ---\n{tail}\n---\n")
        if status is None or status == 0:
            raise DemoError(f"shoal serve did not become ready on {server.url} within "
                            f"{READY_TIMEOUT_S:g}s")
        raise DemoError(f"shoal serve exited with status {status} before it was ready on "
                        f"{server.url}")
    raise DemoError("shoal serve found no free port (address already in use three times)")


# ---- output ------------------------------------------------------------------------------
def _size(n: int) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1000 or unit == "MB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n:.1f} GB"  # pragma: no cover


def stats_line(stats: dict[str, Any]) -> str:
    if not stats.get("scans"):
        return "no scan: answered from the catalog"
    return (f"read {stats['extents_read']} of {stats['extents_considered']} extents, "
            f"{stats['blocks_read']}/{stats['blocks_considered']} blocks, "
            f"{_size(stats['bytes_read'])}")


def _cell(value: Any, type_name: str) -> str:
    if value is None:
        return "[dim]null[/]"
    if type_name.startswith("timestamp") and isinstance(value, str):
        return escape(value.replace("T", " ")[:23])    # to the millisecond
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return escape(text if len(text) <= 64 else text[:63] + "…")


def rows_table(doc: dict[str, Any], limit: int = PREVIEW_ROWS) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    types = [c["type"] for c in doc["columns"]]
    for c in doc["columns"]:
        table.add_column(c["name"], no_wrap=True, overflow="ellipsis")
    for row in doc["rows"][:limit]:
        table.add_row(*(_cell(v, t) for v, t in zip(row, types, strict=True)))
    return table


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM/SIGHUP act like Ctrl-C while the demo runs, so its `finally` cleans up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# ---- the demo ----------------------------------------------------------------------------
def run_demo(*, keep: bool = False, port: int | None = None) -> int:
    console = Console(highlight=False, soft_wrap=True,
                      width=None if sys.stdout.isatty() else 120)
    root = Path(tempfile.mkdtemp(prefix="shoal-demo-"))
    started: list[ServerProcess] = []
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        with _signals_interrupt():
            grace = STOP_TIMEOUT_S
            try:
                _demo(console, root, port, keep, started, timings)
            except KeyboardInterrupt:
                grace = INTERRUPTED_STOP_TIMEOUT_S      # the user is waiting: less patience
                console.print("interrupted: stopping the server")
                raise
            finally:
                for server in (s for s in started if not s.stopped):
                    s0 = time.perf_counter()
                    status = server.stop(timeout_s=grace)
                    timings["stop"] = time.perf_counter() - s0
                    if status in (0, -signal.SIGTERM):
                        note = "stopped (SIGTERM)"
                    elif status is None:
                        note = f"killed: it did not stop within {grace:g}s"
                    else:
                        note = f"exited with status {status}"
                    console.print(f"server   {note} in {timings['stop']:.1f}s")
        console.print(f"[bold]demo finished in {time.perf_counter() - t0:.1f}s[/] ("
                      + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + ")")
        return 0
    except ShoalError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted; server stopped\n")
        return 130
    finally:
        if keep:
            console.print(f"kept     {root} (server log serve.log, data in data/)")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _demo(console: Console, root: Path, port: int | None, keep: bool,
          started: list[ServerProcess], timings: dict[str, float]) -> None:
    data_dir = root / "data"
    console.print("[bold]shoal demo[/]: server + HTTP ingest + Spark SQL on the embedded default "
                  "(SQLite catalog, local object store)")
    console.print(f"data dir {data_dir}" + ("" if keep else " (removed at the end)"))
    t0 = time.perf_counter()
    server, http = start_server(root, data_dir, port, started)
    timings["server start"] = time.perf_counter() - t0
    console.print(f"server   shoal serve on {server.url}, ready in {timings['server start']:.1f}s "
                  f"(pid {server.proc.pid}; Spark warms up in the background)")
    try:
        _exercise(console, http, timings)
    except BaseException:
        if server.proc.poll() is not None:
            sys.stderr.write(f"--- shoal serve log, last lines ---\n{server.log_tail()}\n---\n")
        raise


def _exercise(console: Console, http: Http, timings: dict[str, float]) -> None:
    # 1. DDL over HTTP
    doc = http.sql(CREATE_LOGS)
    row = dict(zip([c["name"] for c in doc["columns"]], doc["rows"][0], strict=True))
    console.print(f"\n[bold]create[/]   POST /v1/query {{\"sql\": \"{CREATE_LOGS}\"}}")
    console.print(f"         -> {row['status']} table {row['name']}, schema version "
                  f"{row['schema_version']}, retention {row['retention']}")

    # 2. ingest over HTTP, with a field that appears half-way
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    end = now - timedelta(minutes=now.minute % 20)
    start = end - SLOTS * SLOT
    batches, needle = generate(random.Random(42), start)
    console.print(f"\n[bold]ingest[/]   POST /v1/ingest/logs: {len(batches)} NDJSON batches of "
                  f"{ROWS_PER_BATCH:,} rows, {len(SERVICES)} services, {start:%H:%M}-{end:%H:%M} "
                  "UTC, one X-Idempotency-Key each")
    t0 = time.perf_counter()
    acks: list[dict[str, Any]] = []
    wire = 0
    for batch in batches:
        ack = http.ingest("logs", batch)
        acks.append(ack)
        wire += len(batch.body)
        if ack["new_columns"]:
            console.print(f"         batch {batch.index} ({batch.service} {batch.start:%H:%M}) "
                          f"carries a new field: ack new_columns {ack['new_columns']}, "
                          f"snapshot {ack['snapshot_id']}")
    timings["ingest"] = took = time.perf_counter() - t0
    rows = sum(a["rows"] for a in acks)
    console.print(f"         {rows:,} rows ({_size(wire)} of NDJSON) in {took:.1f}s: "
                  f"{rows / took:,.0f} rows/s, {len(batches) / took:.1f} requests/s")

    # 3. an idempotent replay
    batch, first = batches[REPLAY_BATCH], acks[REPLAY_BATCH]
    again = http.ingest("logs", batch)
    if not again["replayed"] or again["snapshot_id"] != first["snapshot_id"]:
        raise DemoError(f"replaying key {batch.key} was not recognised: {again}")
    desc = http.call("GET", "/v1/tables/logs")
    console.print(f"\n[bold]replay[/]   batch {batch.index} again, X-Idempotency-Key {batch.key}: "
                  f"replayed: {json.dumps(again['replayed'])}, snapshot {again['snapshot_id']} "
                  "(the first ack's), nothing written")
    console.print(f"         GET /v1/tables/logs: {desc['row_count']:,} rows in "
                  f"{desc['extent_count']} extents, snapshot {desc['snapshot_id']}, schema "
                  f"version {desc['schema_version']}")
    if desc["row_count"] != rows:
        raise DemoError(f"logs holds {desc['row_count']} rows, expected {rows}")

    # 4. queries through Spark, each with its pruning stats
    t0 = time.perf_counter()
    for n, (title, statement) in enumerate(_queries(start, needle), 1):
        q0 = time.perf_counter()
        doc = http.sql(statement)
        took = time.perf_counter() - q0
        limit = 20 if statement.startswith("DESCRIBE") else PREVIEW_ROWS
        console.print(f"\n[bold]query {n}[/]  {title}")
        console.print(f"[dim]{escape(statement)}[/]")
        console.print(rows_table(doc, limit=limit))
        total = len(doc["rows"])
        shown = f" ({limit} shown)" if total > limit else ""
        wait = " (waited for Spark's warm-up)" if n == 1 else ""
        console.print(f"-> {total} row{'' if total == 1 else 's'}{shown}; "
                      f"{stats_line(doc['stats'])}; {took:.2f}s{wait}")
    timings["queries"] = time.perf_counter() - t0
    console.print()


def _queries(start: datetime, needle: str) -> list[tuple[str, str]]:
    lo = start + WINDOW_SLOT * SLOT + timedelta(minutes=5)
    hi = lo + timedelta(minutes=15)
    return [
        ("needle: one trace id among 72,000 rows",
         "SELECT _timestamp, service, level, status, message FROM logs "
         f"WHERE trace_id = '{needle}'"),
        (f"one service in a 15-minute window: the slowest {WINDOW_SERVICE} requests",
         "SELECT _timestamp, level, status, duration_ms, message FROM logs "
         f"WHERE service = '{WINDOW_SERVICE}' AND _timestamp >= {_sql_ts(lo)} "
         f"AND _timestamp < {_sql_ts(hi)} ORDER BY duration_ms DESC LIMIT {PREVIEW_ROWS}"),
        ("a rare word: has() uses the per-extent token sets",
         "SELECT _timestamp, service, status, message FROM logs "
         f"WHERE has(message, '{RARE_TOKEN}') ORDER BY _timestamp"),
        ("count by level: no predicate, so every extent is read",
         "SELECT level, count(*) AS n, round(avg(duration_ms), 1) AS avg_ms FROM logs "
         "GROUP BY level ORDER BY n DESC"),
        ("the evolved column: rows written before region existed read as null",
         "SELECT region, count(*) AS n, min(_timestamp) AS first_seen FROM logs "
         "GROUP BY region ORDER BY region NULLS FIRST"),
        ("the schema after evolution", "DESCRIBE logs"),
    ]
