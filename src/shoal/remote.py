"""A client of a running shoal server: the CLI's `--url` mode and `shoal.connect(url=...)`.

    db = shoal.connect(url="http://127.0.0.1:8720", token="...")
    result = db.sql("SELECT service, count(*) AS n FROM logs GROUP BY service")
    result.table, result.stats.to_json()

The work runs in the server (its warm Spark, its embedded engine, its write path); this
process only sends statements and bodies and reads answers, so it never starts Spark or
opens the catalog. Statements go to `POST /v1/query` and come back as Arrow IPC streams
(the types the embedded client returns); `answer_document` asks for the JSON document
instead (what `shoal sql --format json` prints; no pyarrow needed). Ingest posts NDJSON to
`POST /v1/ingest/{table}`, tables are listed, described and created through `/v1/tables`,
PromQL goes to the Prometheus API.

A refused request raises the `ShoalError` of the branch its status belongs to (403
`ServerNotAllowedError`, 404 `ServerNotFoundError`, 409, 429/503, other 4xx, 5xx), carrying the
answer's `status`, `code` and `details`; an ingest's 400 `bad_payload` is a
`ServerPayloadError` whose `errors` are the bad lines. A server that does not answer is a
`ServerUnreachableError`.

Imports stay light (the standard library; pyarrow only when an Arrow answer is decoded): a
CLI command in this mode starts in a fraction of the embedded one's time.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from shoal.errors import (LineError, ServerConflictError, ServerInternalError,
                          ServerNotAllowedError, ServerNotFoundError, ServerPayloadError,
                          ServerRequestError, ServerUnavailableError, ServerUnreachableError,
                          ShoalError)

if TYPE_CHECKING:
    import pyarrow as pa

    from shoal.types.conventions import IngestWarning

ARROW_STREAM = "application/vnd.apache.arrow.stream"
DEFAULT_TIMEOUT_S = 900.0   # above the server's own query timeout (300 s by default)
_SUMMARY = re.compile(r"^([\d,]+) lines? rejected")


# ---- answers -----------------------------------------------------------------------------


class RemoteStats:
    """The pruning stats of a remote answer: `to_json()` is the document the server sent
    (the totals, the engine and why, each scan; and `truncated`)."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self._doc = dict(doc)

    def to_json(self) -> dict[str, Any]:
        return dict(self._doc)


@dataclass
class RemoteResult:
    """A statement's answer, with the fields of the embedded client's `QueryResult`."""

    table: pa.Table
    stats: RemoteStats
    kind: str = "select"                     # select | ddl | explain
    truncated: str | None = None             # the cap that cut the answer
    render: dict[str, Any] | None = None     # a KQL query's render hint
    translated_sql: str | None = None        # the SQL a KQL query ran as


@dataclass(frozen=True)
class RemoteAck:
    """What an ingest request committed, with the fields of the write path's `IngestAck`."""

    table: str
    snapshot_id: int
    rows: int
    replayed: bool = False
    new_columns: list[str] = field(default_factory=list)
    rejected: list[LineError] = field(default_factory=list)
    extent_ids: list[str] = field(default_factory=list)
    rejected_count: int | None = None
    warnings: list[IngestWarning] = field(default_factory=list)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RemoteAck:
        warnings: list[IngestWarning] = []
        if doc.get("warnings"):     # rare: the conventions module brings the type modules in
            from shoal.types.conventions import IngestWarning

            warnings = [IngestWarning.from_json(w) for w in doc["warnings"]]
        return cls(table=doc["table"], snapshot_id=doc["snapshot_id"], rows=doc["rows"],
                   replayed=bool(doc.get("replayed")),
                   new_columns=list(doc.get("new_columns") or ()),
                   rejected=[_line_error(d) for d in doc.get("rejected") or ()],
                   extent_ids=list(doc.get("extent_ids") or ()),
                   rejected_count=doc.get("rejected_count"),
                   warnings=warnings)

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "snapshot_id": self.snapshot_id, "rows": self.rows,
                "replayed": self.replayed, "new_columns": self.new_columns,
                "rejected": [r.to_json() for r in self.rejected],
                "rejected_count": self.rejected_count, "extent_ids": self.extent_ids,
                "warnings": [w.to_json() for w in self.warnings]}


class RemotePromResult:
    """A PromQL answer: `data()` is the `data` of Prometheus's API answer, as embedded."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def data(self) -> dict[str, Any]:
        return self._data


# ---- errors ------------------------------------------------------------------------------


def _line_error(d: Mapping[str, Any]) -> LineError:
    return LineError(int(d["line"]), d.get("field"), str(d.get("message", "")))


def server_error(status: int, body: bytes, headers: Mapping[str, str]) -> ShoalError:
    """The `ShoalError` a non-2xx answer stands for: shoal's `{"error": {...}}`, Prometheus's
    `{"status": "error", ...}`, or plain text (remote write), by its status."""
    code, message, details = _parse_error(status, body)
    if status == 400 and code == "bad_payload":
        lines = [d for d in details if isinstance(d.get("line"), int)]
        total = None
        for d in details:
            m = _SUMMARY.match(str(d.get("message", ""))) if d.get("line") is None else None
            if m:
                total = int(m.group(1).replace(",", ""))
        if lines:
            return ServerPayloadError([_line_error(d) for d in lines], total_errors=total,
                                      status=status, code=code, details=details)
    if status in (429, 503):
        after = headers.get("retry-after")
        return ServerUnavailableError(message, status=status, code=code, details=details,
                                      retry_after_s=float(after) if after and
                                      after.isdigit() else None)
    if status == 403:
        return ServerNotAllowedError(message, status=status, code=code, details=details)
    if status == 404:
        return ServerNotFoundError(message, status=status, code=code, details=details)
    if status == 409:
        return ServerConflictError(message, status=status, code=code, details=details)
    if 400 <= status < 500:
        return ServerRequestError(message, status=status, code=code, details=details)
    return ServerInternalError(message, status=status, code=code, details=details)


def _parse_error(status: int, body: bytes) -> tuple[str, str, list[dict[str, Any]]]:
    text = body.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        err = doc["error"]
        details = [d for d in err.get("details") or () if isinstance(d, dict)]
        return str(err.get("code", "error")), str(err.get("message", text)), details
    if isinstance(doc, dict) and doc.get("status") == "error":     # Prometheus's shape
        return str(doc.get("errorType", "error")), str(doc.get("error", text)), []
    return f"http_{status}", text or f"HTTP {status}", []


# ---- the connection ----------------------------------------------------------------------


class RemoteShoal:
    """A shoal server at `url` (`http://host:port`, or https), with a bearer `token`.

    Safe to share between threads: each request takes a kept-alive connection of its own
    from a small pool."""

    def __init__(self, url: str, *, token: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http://host:port or https://host:port, got {url!r}")
        self.url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    # requests
    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self._timeout_s), False

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                body: bytes | None = None, headers: Mapping[str, str] | None = None
                ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body) of one request; a request on a
        kept-alive connection the server has closed meanwhile is sent again, once, on a new
        one (the server never read it)."""
        target = self._base + path
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if query:
            target += "?" + urlencode(query)
        sent = {**(headers or {})}
        if self._token:
            sent["Authorization"] = f"Bearer {self._token}"
        for attempt in (0, 1):
            conn, reused = self._connection()
            try:
                conn.request(method, target, body=body, headers=sent)
                response = conn.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError) as e:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise ServerUnreachableError(self.url, _reason(e)) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise ServerUnreachableError(self.url, _reason(e)) from e
            answer = {k.lower(): v for k, v in response.getheaders()}
            if response.will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
            return response.status, answer, data
        raise AssertionError("unreachable")     # the loop returns or raises

    def _call(self, method: str, path: str, **kw: Any) -> tuple[dict[str, str], bytes]:
        status, headers, data = self.request(method, path, **kw)
        if not 200 <= status < 300:
            raise server_error(status, data, headers)
        return headers, data

    def _json(self, method: str, path: str, doc: Any = None, **kw: Any) -> Any:
        headers = {"Accept": "application/json"}
        body = None
        if doc is not None:
            body = json.dumps(doc).encode()
            headers["Content-Type"] = "application/json"
        _, data = self._call(method, path, body=body, headers=headers, **kw)
        return json.loads(data) if data else None

    # queries
    def _statement(self, text: str, *, kql: bool, prune: bool, engine: str | None,
                   accept: str) -> tuple[dict[str, str], bytes]:
        params = {"prune": None if prune else "false", "engine": engine,
                  "scans": "true" if accept == ARROW_STREAM else None}
        body = json.dumps({"kql" if kql else "sql": text}).encode()
        return self._call("POST", "/v1/query", params=params, body=body,
                          headers={"Content-Type": "application/json", "Accept": accept})

    def sql(self, statement: str, *, prune: bool = True,
            engine: str | None = None) -> RemoteResult:
        """Run one statement in the server: a `RemoteResult` (`.table` pyarrow, `.stats`)."""
        return self._arrow(statement, kql=False, prune=prune, engine=engine)

    def kql(self, query: str, *, prune: bool = True,
            engine: str | None = None) -> RemoteResult:
        """Run one KQL query in the server; `.translated_sql` and `.render` as embedded."""
        return self._arrow(query, kql=True, prune=prune, engine=engine)

    def query(self, statement: str, *, prune: bool = True,
              engine: str | None = None) -> pa.Table:
        """The answer of one statement as a pyarrow Table."""
        return self.sql(statement, prune=prune, engine=engine).table

    def _arrow(self, text: str, *, kql: bool, prune: bool, engine: str | None
               ) -> RemoteResult:
        import pyarrow as pa

        headers, data = self._statement(text, kql=kql, prune=prune, engine=engine,
                                        accept=ARROW_STREAM)
        with pa.ipc.open_stream(data) as reader:
            table = reader.read_all()
        stats = json.loads(headers.get("x-shoal-stats") or "{}")
        render = headers.get("x-shoal-render")
        sql = headers.get("x-shoal-sql")
        return RemoteResult(table, RemoteStats(stats), kind=headers.get("x-shoal-kind",
                                                                         "select"),
                            truncated=stats.get("truncated_by"),
                            render=json.loads(render) if render else None,
                            translated_sql=json.loads(sql) if sql else None)

    def answer_document(self, text: str, *, kql: bool = False, prune: bool = True,
                        engine: str | None = None) -> tuple[str, dict[str, Any]]:
        """(kind, the JSON answer of `POST /v1/query`): columns, rows as JSON values, stats
        (and for KQL `sql` and `render`). No pyarrow: what the CLI prints from."""
        headers, data = self._statement(text, kql=kql, prune=prune, engine=engine,
                                        accept="application/json")
        doc: dict[str, Any] = json.loads(data)
        return headers.get("x-shoal-kind", "select"), doc

    def promql(self, expr: str, *, time: float | None = None, start: float | None = None,
               end: float | None = None, step: float | None = None) -> RemotePromResult:
        """A PromQL query in the server: instant at `time` (unix seconds; default now), or
        with `start`, `end` and `step` (seconds) a range query."""
        if (start is not None or end is not None or step is not None) and (
                start is None or end is None or step is None or time is not None):
            raise ValueError("a range query takes start, end and step (and no time)")
        return RemotePromResult(self.promql_data(expr, time=time, start=start, end=end,
                                                 step=step))

    def promql_data(self, expr: str, *, time: float | str | None = None,
                    start: float | str | None = None, end: float | str | None = None,
                    step: float | str | None = None) -> dict[str, Any]:
        """The `data` of the Prometheus API's answer; times and the step as that API takes
        them (unix seconds or RFC 3339; a step in seconds or a duration such as `1m`)."""
        if start is None:
            doc = self._json("GET", "/api/v1/query", params={
                "query": expr, "time": _clock() if time is None else time})
        else:
            doc = self._json("GET", "/api/v1/query_range",
                             params={"query": expr, "start": start, "end": end, "step": step})
        data: dict[str, Any] = doc["data"]
        return data

    # ingest
    def ingest_ndjson(self, name: str, body: bytes, *, mode: str | None = None,
                      partial: bool = False, idempotency_key: str | None = None,
                      **_ignored: Any) -> RemoteAck:
        """NDJSON (or gzip of it) into table `name`, committed when this returns."""
        headers = {"Content-Type": "application/x-ndjson"}
        if body[:2] == b"\x1f\x8b":
            headers["Content-Encoding"] = "gzip"
        if idempotency_key is not None:
            headers["X-Idempotency-Key"] = idempotency_key
        params = {"mode": mode, "partial": "true" if partial else None}
        _, data = self._call("POST", f"/v1/ingest/{quote(name, safe='')}", params=params,
                             body=body, headers=headers)
        return RemoteAck.from_json(json.loads(data))

    # tables
    def tables(self) -> list[dict[str, Any]]:
        """Every table's describe document."""
        doc = self._json("GET", "/v1/tables")
        return list(doc["tables"])

    def describe(self, name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self._json("GET", f"/v1/tables/{quote(name, safe='')}")
        return doc

    def create_table(self, name: str, columns: Iterable[Any], *, mode: str = "evolve",
                     retention: str | None = None,
                     properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Create a table: `columns` are `shoal.Column`s or `{"name", "type", "nullable"?}`
        documents. Returns its describe document. Of the properties, `retention` is taken
        here; set others with `ALTER TABLE ... SET TBLPROPERTIES` through `sql`."""
        props = dict(properties or {})
        retention = props.pop("retention", retention)
        if props:
            raise ValueError(f"create_table over a server takes retention only, not "
                             f"{', '.join(sorted(props))}: set them with ALTER TABLE ... SET "
                             "TBLPROPERTIES")
        doc: dict[str, Any] = {"name": name, "columns": [_column_doc(c) for c in columns],
                               "mode": mode}
        if retention is not None:
            doc["retention"] = retention
        out: dict[str, Any] = self._json("POST", "/v1/tables", doc)
        return out

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __enter__(self) -> RemoteShoal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _column_doc(column: Any) -> dict[str, Any]:
    if isinstance(column, Mapping):
        return dict(column)
    doc: dict[str, Any] = {"name": column.name, "type": str(column.type),
                           "nullable": column.nullable}
    if getattr(column, "default", None) is not None:
        doc["default"] = column.default
    if getattr(column, "header", None) is not None:
        doc["header"] = column.header
    return doc


def _clock() -> float:
    import time

    return time.time()


def _reason(e: BaseException) -> str:
    if isinstance(e, socket.timeout):
        return "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


def connect_remote(url: str, token: str | None = None, **options: Any) -> RemoteShoal:
    """A client of the server at `url` (`shoal.connect(url=...)`); `token` defaults to the
    configured one (`SHOAL_TOKEN`, the config file's `token`)."""
    if token is None:
        from shoal.config import load_config

        token = load_config().token
    return RemoteShoal(url, token=token, **options)


__all__ = ["RemoteAck", "RemotePromResult", "RemoteResult", "RemoteShoal", "RemoteStats",
           "connect_remote", "server_error"]
