"""Sentry events (errors and transactions) as rows of the `sentry_events` layout.

The layout (made on first use in mode `drop`, docs/sentry.md): one row per event, keyed by
`event_id` (32 lowercase hex digits, dashes of a UUID removed). `_timestamp` is the event's
own time (`timestamp`: seconds since the epoch as a number, or an RFC 3339 string); for a
transaction `start_timestamp` is its start and `duration_ms` the difference. `message` is
the log message (`logentry.formatted`, else `logentry.message`, else `message`), and
`exception_type` / `exception_value` are those of the last exception in the chain (the one
Sentry shows as the issue title). `trace_id`, `span_id`, `parent_span_id` and `op` come from
the trace context. The nested parts keep Sentry's own shape in `dynamic` columns: `tags` (an
object; the list-of-pairs form is turned into one), `exception` (the `values` list, each with
its `stacktrace.frames`), `contexts`, `user`, `request`, `extra`, `breadcrumbs` (the list),
`spans` (a transaction's), `sdk` and `fingerprint`.

`map_event` refuses what cannot be an event (not a JSON object, a bad `event_id` or
timestamp) with `SentryPayloadError` naming the field; unknown fields are ignored.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, UTC
from typing import Any

import pyarrow as pa

from shoal.errors import PayloadError
from shoal.types.columns import DYNAMIC, LONG, REAL, STRING, TIMESTAMP
from shoal.types.schema import Column, Schema

MAX_DEPTH = 64          # nesting of one event's JSON (Sentry's own SDKs stay far below)

SENTRY_EVENTS_SCHEMA = Schema.create([
    Column("event_id", STRING),
    Column("project_id", LONG),
    Column("type", STRING),
    Column("level", STRING),
    Column("platform", STRING),
    Column("logger", STRING),
    Column("server_name", STRING),
    Column("release", STRING),
    Column("environment", STRING),
    Column("transaction", STRING),
    Column("message", STRING),
    Column("exception_type", STRING),
    Column("exception_value", STRING),
    Column("trace_id", STRING),
    Column("span_id", STRING),
    Column("parent_span_id", STRING),
    Column("op", STRING),
    Column("status", STRING),
    Column("start_timestamp", TIMESTAMP),
    Column("duration_ms", REAL),
    Column("received", TIMESTAMP),
    Column("tags", DYNAMIC),
    Column("exception", DYNAMIC),
    Column("contexts", DYNAMIC),
    Column("user", DYNAMIC),
    Column("request", DYNAMIC),
    Column("extra", DYNAMIC),
    Column("breadcrumbs", DYNAMIC),
    Column("spans", DYNAMIC),
    Column("sdk", DYNAMIC),
    Column("fingerprint", DYNAMIC),
])

COLUMNS = ("_timestamp", *(c.name for c in SENTRY_EVENTS_SCHEMA.columns
                           if c.name not in ("_timestamp", "props")))
_HEX32 = re.compile(r"^[0-9a-f]{32}\Z")


class SentryPayloadError(PayloadError):
    """A Sentry request that cannot be read (400); nothing of it was written."""

    code = "bad_sentry_payload"

    def __init__(self, message: str) -> None:
        self.errors = []
        self.total_errors = 0
        Exception.__init__(self, message)


def event_id_of(value: Any, *, where: str) -> str:
    """A Sentry event id as 32 lowercase hex digits (a UUID's dashes removed)."""
    text = str(value).strip().lower().replace("-", "") if isinstance(value, str) else ""
    if not _HEX32.match(text):
        raise SentryPayloadError(f"{where}: event_id must be 32 hex digits (a UUID), "
                                 f"got {str(value)[:60]!r}")
    return text


def new_event_id() -> str:
    return uuid.uuid4().hex


def timestamp_ns(value: Any, *, field: str) -> int | None:
    """Nanoseconds since the epoch of a Sentry time (seconds as a number, or RFC 3339)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise SentryPayloadError(f'field "{field}": expected a time, got {value!r}')
    if isinstance(value, int | float):
        if not math.isfinite(value) or not 0 <= value < 1e11:
            raise SentryPayloadError(f'field "{field}": {value!r} is not a time in seconds')
        return round(value * 1e6) * 1000      # Sentry sends microseconds at most
    if isinstance(value, str):
        text = value.strip()
        try:
            if text.replace(".", "", 1).isdigit():
                return timestamp_ns(float(text), field=field)
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise SentryPayloadError(f'field "{field}": {value[:60]!r} is not an RFC 3339 '
                                     "time or seconds since the epoch") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return round(dt.timestamp() * 1e6) * 1000
    raise SentryPayloadError(f'field "{field}": expected a time, got {type(value).__name__}')


def _json(value: Any) -> bytes | None:
    if value is None:
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode("utf-8")


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    return str(value)


def _tags(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, list):      # [["key", "value"], ...]
        out: dict[str, Any] = {}
        for pair in value:
            if isinstance(pair, list | tuple) and len(pair) == 2:
                out[str(pair[0])] = pair[1]
        return out
    return None


def _values(value: Any) -> list[Any] | None:
    """Sentry's interface lists come as `{"values": [...]}` or as the bare list."""
    if isinstance(value, Mapping):
        value = value.get("values")
    return list(value) if isinstance(value, list) else None


def _message(event: Mapping[str, Any]) -> str | None:
    entry = event.get("logentry") or event.get("sentry.interfaces.Message")
    if isinstance(entry, Mapping):
        text = entry.get("formatted") or entry.get("message")
        if text:
            return str(text)
    message = event.get("message")
    if isinstance(message, Mapping):
        message = message.get("formatted") or message.get("message")
    return _text(message)


def _depth_ok(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def map_event(event: Any, *, project_id: int, received_ns: int, where: str,
              event_id: str | None = None, kind: str | None = None) -> tuple[Any, ...]:
    """One row (in `COLUMNS` order) of a decoded event; `event_id` from the envelope when the
    event carries none; `kind` the envelope item type (`event` or `transaction`)."""
    if not isinstance(event, Mapping):
        raise SentryPayloadError(f"{where}: an event must be a JSON object, "
                                 f"got {type(event).__name__}")
    if not _depth_ok(event, MAX_DEPTH):
        raise SentryPayloadError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    raw_id = event.get("event_id")
    eid = (event_id_of(raw_id, where=f'{where}: field "event_id"') if raw_id is not None
           else event_id or new_event_id())
    ts = timestamp_ns(event.get("timestamp"), field="timestamp") or received_ns
    start = timestamp_ns(event.get("start_timestamp"), field="start_timestamp")
    etype = _text(event.get("type")) or ("transaction" if kind == "transaction" else "error")
    contexts = event.get("contexts") if isinstance(event.get("contexts"), Mapping) else None
    trace = contexts.get("trace") if contexts else None
    trace = trace if isinstance(trace, Mapping) else {}
    exceptions = _values(event.get("exception"))
    last = exceptions[-1] if exceptions and isinstance(exceptions[-1], Mapping) else {}
    duration = (ts - start) / 1e6 if start is not None and etype == "transaction" else None
    return (ts, eid, project_id, etype, _text(event.get("level")) or (
                None if etype == "transaction" else "error"),
            _text(event.get("platform")), _text(event.get("logger")),
            _text(event.get("server_name")), _text(event.get("release")),
            _text(event.get("environment")), _text(event.get("transaction")),
            _message(event), _text(last.get("type")), _text(last.get("value")),
            _text(trace.get("trace_id")), _text(trace.get("span_id")),
            _text(trace.get("parent_span_id")), _text(trace.get("op")),
            _text(trace.get("status")), start, duration, received_ns,
            _json(_tags(event.get("tags"))), _json(exceptions), _json(contexts),
            _json(event.get("user")), _json(event.get("request")), _json(event.get("extra")),
            _json(_values(event.get("breadcrumbs"))), _json(event.get("spans")),
            _json(event.get("sdk")), _json(event.get("fingerprint")))


def rows_batch(rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
    """The rows as a record batch of the layout's Arrow types."""
    fields = [SENTRY_EVENTS_SCHEMA.column(n).arrow_field() for n in COLUMNS]
    columns: list[Sequence[Any]] = (list(zip(*rows, strict=True)) if rows
                                    else [()] * len(COLUMNS))
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, fields, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
