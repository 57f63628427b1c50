"""The layouts of tables that pull Sentry (docs/sentry.md) and the mapping of Sentry's API
objects to their rows.

`issues`: one row per observation of an issue: the issue as the API listed it when its
`lastSeen` was `_timestamp`. An issue seen again later (new events) gets a new row; the
latest state of each issue is its row with the greatest `_timestamp`. Counts (`count`,
`user_count`) are numbers (the API sends `count` as a string). `metadata`, `assigned_to`
and `issue` (the whole object as listed, for fields without a column) are `dynamic`.

`events`: one row per event, `_timestamp` its `dateCreated`; `tags` (the API's list of
`{key, value}` turned into an object), `user`, `contexts`, `entries` (exception, stack
frames, breadcrumbs, request, as the API nests them) and `event` (the whole object) are
`dynamic`.

A listed object the mapping cannot read (no id, no time) is refused with the reason;
`rows()` returns the rows and those reasons.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from shoal.frontends.sentry.events import SentryPayloadError, timestamp_ns
from shoal.types.columns import BOOL, DYNAMIC, LONG, STRING, TIMESTAMP
from shoal.types.schema import Column, Schema

ISSUES_SCHEMA = Schema.create([
    Column("id", STRING), Column("short_id", STRING), Column("title", STRING),
    Column("culprit", STRING), Column("level", STRING), Column("status", STRING),
    Column("substatus", STRING), Column("platform", STRING), Column("type", STRING),
    Column("project", STRING), Column("logger", STRING), Column("is_unhandled", BOOL),
    Column("count", LONG), Column("user_count", LONG), Column("first_seen", TIMESTAMP),
    Column("last_seen", TIMESTAMP), Column("permalink", STRING),
    Column("metadata", DYNAMIC), Column("assigned_to", DYNAMIC), Column("issue", DYNAMIC),
])

EVENTS_SCHEMA = Schema.create([
    Column("event_id", STRING), Column("issue_id", STRING), Column("title", STRING),
    Column("message", STRING), Column("platform", STRING), Column("culprit", STRING),
    Column("location", STRING), Column("type", STRING), Column("tags", DYNAMIC),
    Column("user", DYNAMIC), Column("contexts", DYNAMIC), Column("entries", DYNAMIC),
    Column("event", DYNAMIC),
])

LAYOUTS: dict[str, Schema] = {"issues": ISSUES_SCHEMA, "events": EVENTS_SCHEMA}
TIME_FIELD = {"issues": "lastSeen", "events": "dateCreated"}


def _j(value: Any) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":"),
                                                 ensure_ascii=False).encode()


def _s(value: Any) -> str | None:
    return None if value is None or isinstance(value, dict | list) else str(value)


def _n(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _issue(obj: Mapping[str, Any], ts: int) -> tuple[Any, ...]:
    project = obj.get("project")
    slug = project.get("slug") if isinstance(project, Mapping) else project
    unhandled = obj.get("isUnhandled")
    return (ts, _s(obj.get("id")), _s(obj.get("shortId")), _s(obj.get("title")),
            _s(obj.get("culprit")), _s(obj.get("level")), _s(obj.get("status")),
            _s(obj.get("substatus")), _s(obj.get("platform")),
            _s(obj.get("issueType") or obj.get("type")), _s(slug), _s(obj.get("logger")),
            unhandled if isinstance(unhandled, bool) else None, _n(obj.get("count")),
            _n(obj.get("userCount")), timestamp_ns(obj.get("firstSeen"), field="firstSeen"),
            ts, _s(obj.get("permalink")), _j(obj.get("metadata")), _j(obj.get("assignedTo")),
            _j(dict(obj)))


def _tags(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, list):
        return None
    return {str(t["key"]): t.get("value") for t in value
            if isinstance(t, Mapping) and "key" in t}


def _event(obj: Mapping[str, Any], ts: int) -> tuple[Any, ...]:
    return (ts, _s(obj.get("eventID") or obj.get("id")), _s(obj.get("groupID")),
            _s(obj.get("title")), _s(obj.get("message")), _s(obj.get("platform")),
            _s(obj.get("culprit")), _s(obj.get("location")),
            _s(obj.get("event.type") or obj.get("type")), _j(_tags(obj.get("tags"))),
            _j(obj.get("user")), _j(obj.get("contexts")), _j(obj.get("entries")),
            _j(dict(obj)))


_MAPPERS: dict[str, Callable[[Mapping[str, Any], int], tuple[Any, ...]]] = {
    "issues": _issue, "events": _event}


def object_time(resource: str, obj: Any) -> tuple[str, int]:
    """(id, time in ns) of a listed object; `SentryPayloadError` when it has neither."""
    if not isinstance(obj, Mapping):
        raise SentryPayloadError(f"expected a JSON object, got {type(obj).__name__}")
    oid = obj.get("id") if resource == "issues" else (obj.get("eventID") or obj.get("id"))
    if oid is None:
        raise SentryPayloadError('it has no "id"')
    ts = timestamp_ns(obj.get(TIME_FIELD[resource]), field=TIME_FIELD[resource])
    if ts is None:
        raise SentryPayloadError(f'it has no "{TIME_FIELD[resource]}"')
    return str(oid), ts


def rows(resource: str, objects: Sequence[Mapping[str, Any]], times: Sequence[int]
         ) -> pa.RecordBatch:
    """The rows of `objects` (each with its time from `object_time`) as a record batch."""
    schema = LAYOUTS[resource]
    names = [c.name for c in schema.columns if c.name != "props"]
    fields = [schema.column(n).arrow_field() for n in names]
    mapped = [_MAPPERS[resource](o, t) for o, t in zip(objects, times, strict=True)]
    columns: list[Sequence[Any]] = (list(zip(*mapped, strict=True)) if mapped
                                    else [()] * len(names))
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, fields, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
