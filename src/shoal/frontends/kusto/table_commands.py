"""Kusto management commands on one table, answered in Kusto's v1 shape (docs/kql.md).

- `.drop table T [ifexists]`: drops T as `DROP TABLE [IF EXISTS]` does; the answer lists
  the tables that remain (TableName, DatabaseName), as Kusto's does.
- `.rename table T to U`: `ALTER TABLE T RENAME TO U`; the answer is U's `.show tables` row.
- `.alter table T policy retention '<json>'` (the JSON may also be quoted with ``` or ");
  its `SoftDeletePeriod` (a Kusto timespan, `d.hh:mm:ss`) becomes T's `retention` property;
  `Recoverability` is accepted and not kept (shoal keeps dropped data for the table's
  `snapshot_retention` either way). The answer is Kusto's policy row (PolicyName,
  EntityName, Policy, ChildEntities, EntityType).
- `.show table T details`: what shoal knows of T at its current snapshot, in Kusto's
  columns: extents, their bytes and rows (shoal keeps no copy of the original input, so
  TotalOriginalSize is null; it has no cold tier, so the Hot* columns equal the totals),
  the retention policy, the creation time of the oldest and newest live extent.

The three changing commands need the `admin` scope (a `query` token gets 403); `.show`
needs `query`, like the rest of the route.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from shoal.catalog.base import TableInfo
from shoal.errors import InvalidPropertyError
from shoal.http.errors import BadRequestError

_NAME = r"(\[?['\"]?)([A-Za-z_][A-Za-z0-9_]*)\{n}\]?"
_DROP = re.compile(r"^\.drop\s+table\s+" + _NAME.format(n=1) + r"(\s+ifexists)?\s*;?$",
                   re.IGNORECASE)
_RENAME = re.compile(r"^\.rename\s+table\s+" + _NAME.format(n=1) + r"\s+to\s+"
                     + _NAME.format(n=3) + r"\s*;?$", re.IGNORECASE)
_RETENTION = re.compile(r"^\.alter\s+table\s+" + _NAME.format(n=1)
                        + r"\s+policy\s+retention\s+(```|'|\")(.*)\3\s*;?$",
                        re.IGNORECASE | re.DOTALL)
_DETAILS = re.compile(r"^\.show\s+table\s+" + _NAME.format(n=1) + r"\s+details\s*;?$",
                      re.IGNORECASE)
_TIMESPAN = re.compile(r"^\s*(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,7}))?\s*$")

# A v1 table: column names, Kusto types, rows (built by the caller's `v1_table`).
V1 = tuple[list[str], list[str], list[list[Any]]]


def is_changing(csl: str) -> bool:
    """Whether `csl` is one of the commands that change a table (admin scope)."""
    return any(p.match(csl) for p in (_DROP, _RENAME, _RETENTION))


def run_table_command(csl: str, db: Any, database: str) -> V1 | None:
    """The answer of `csl` if it is one of this module's commands, else None. `db` is the
    server's `shoal.client.Shoal`; blocking (the caller runs it in a worker thread)."""
    for pattern, handler in ((_DROP, _drop), (_RENAME, _rename), (_RETENTION, _retention),
                             (_DETAILS, _details)):
        m = pattern.match(csl)
        if m is not None:
            run: Callable[[re.Match[str], Any, str], V1] = handler
            return run(m, db, database)
    return None


def _drop(m: re.Match[str], db: Any, database: str) -> V1:
    db.drop_table(m.group(2).lower(), if_exists=m.group(3) is not None)
    return (["TableName", "DatabaseName"], ["string", "string"],
            [[t.name, database] for t in db.catalog.list_tables()])


def _rename(m: re.Match[str], db: Any, database: str) -> V1:
    info = db.rename_table(m.group(2).lower(), m.group(4).lower())
    return (["TableName", "DatabaseName", "Folder", "DocString"], ["string"] * 4,
            [[info.name, database, "", ""]])


def _retention(m: re.Match[str], db: Any, database: str) -> V1:
    name = m.group(2).lower()
    try:
        policy = json.loads(m.group(4))
    except ValueError as e:
        raise BadRequestError(f"the retention policy is not JSON: {e}",
                              details=[{"line": None, "field": "policy",
                                        "message": str(e)}]) from None
    if not isinstance(policy, dict) or "SoftDeletePeriod" not in policy:
        raise BadRequestError('the retention policy needs "SoftDeletePeriod" (a timespan '
                              'such as "30.00:00:00")',
                              details=[{"line": None, "field": "SoftDeletePeriod",
                                        "message": "missing"}])
    seconds = timespan_seconds(policy["SoftDeletePeriod"])
    info = db.set_properties(name, {"retention": duration_text(seconds)})
    return (["PolicyName", "EntityName", "Policy", "ChildEntities", "EntityType"],
            ["string"] * 5,
            [["RetentionPolicy", f"[{database}].[{info.name}]",
              json.dumps(retention_policy(info)), "", "Table"]])


def _details(m: re.Match[str], db: Any, database: str) -> V1:
    names, types, row = table_details(db.catalog.load_table(m.group(2).lower()), db, database)
    return names, types, [row]


_DETAIL_COLUMNS = [("TableName", "string"), ("DatabaseName", "string"), ("Folder", "string"),
                   ("DocString", "string"), ("TotalExtents", "long"),
                   ("TotalExtentSize", "real"), ("TotalOriginalSize", "real"),
                   ("TotalRowCount", "long"), ("HotExtents", "long"),
                   ("HotExtentSize", "real"), ("HotOriginalSize", "real"),
                   ("HotRowCount", "long"), ("RetentionPolicy", "dynamic"),
                   ("MinExtentsCreationTime", "datetime"),
                   ("MaxExtentsCreationTime", "datetime")]


def table_details(info: TableInfo | None, db: Any, database: str
                  ) -> tuple[list[str], list[str], list[Any]]:
    """The columns of `.show table T details` and T's row (empty without a table)."""
    names, types = [n for n, _ in _DETAIL_COLUMNS], [t for _, t in _DETAIL_COLUMNS]
    if info is None:
        return names, types, []
    entries = db.catalog.manifests(info.name)
    created = {s.snapshot_id: s.created_at for s in db.catalog.snapshots(info.name)}
    times = sorted(created[e.added_snapshot_id] for e in entries
                   if e.added_snapshot_id in created)
    extents = len(entries)
    size = float(sum(e.byte_size for e in entries))
    rows = sum(e.row_count for e in entries)
    policy = retention_policy(info)
    row = [info.name, database, "", "", extents, size, None, rows, extents, size, None, rows,
           None if policy is None else json.dumps(policy),
           _iso(times[0]) if times else None, _iso(times[-1]) if times else None]
    return names, types, row


def retention_policy(info: TableInfo) -> dict[str, Any] | None:
    """Kusto's retention policy document of a table (None without `retention`)."""
    from shoal.maintenance.policy import parse_duration

    value = info.properties.get("retention")
    if value in (None, ""):
        return None
    return {"SoftDeletePeriod": seconds_timespan(parse_duration(value)),
            "Recoverability": "Enabled"}


def timespan_seconds(value: Any) -> float:
    """Seconds of a Kusto timespan `[d.]hh:mm:ss[.fffffff]`; 400 naming the field if bad."""
    m = _TIMESPAN.match(value) if isinstance(value, str) else None
    if m is None:
        raise InvalidPropertyError(f"SoftDeletePeriod {value!r}: expected a timespan such as "
                                   '"30.00:00:00" (days.hours:minutes:seconds)')
    days, hours, minutes, secs, frac = m.groups()
    seconds = (int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + int(secs)
               + (int(frac) / 10 ** len(frac) if frac else 0.0))
    if seconds <= 0:
        raise InvalidPropertyError(f"SoftDeletePeriod {value!r}: must be positive")
    return seconds


def seconds_timespan(seconds: float) -> str:
    """A Kusto timespan of `seconds` (`d.hh:mm:ss`)."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}.{hours:02d}:{minutes:02d}:{secs:02d}"


def duration_text(seconds: float) -> str:
    """`seconds` as shoal writes a duration property (`30d`, `12h`, `90m`, `45s`)."""
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
