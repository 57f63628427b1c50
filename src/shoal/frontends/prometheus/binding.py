"""Scrape targets bound to a table in its properties, like a Kafka topic.

    CREATE TABLE node_metrics WITH (
        scrape_targets = '127.0.0.1:9100,host2:9100', scrape_interval = '15s',
        scrape_timeout = '10s', scrape_job = 'node', scrape_path = '/metrics',
        scrape_scheme = 'http', scrape_labels = 'env=prod,dc=x', scrape_honor_labels = 'false')

`scrape_targets` (comma-separated `host:port`) binds the table; the rest are optional:
interval (default 15s) and timeout (default 10s, at most the interval) as Prometheus
durations (`500ms`, `15s`, `1m30s`) or plain seconds; `job` (default: the table's name),
`path` (default `/metrics`), `scheme` (`http` or `https`), `labels` (extra target labels,
`name=value` pairs; names as Prometheus allows, none reserved `__*`, nor `job`/`instance`),
`honor_labels` (`true`/`false`, default false).

The configuration is flat (no sections), so each scrape job is the properties of the table it
fills. It is registered as the checker of `scrape_targets` (`shoal.bindings`), so that
`Shoal.create_table` checks them when a table is created (a typo is a 400 there, not a
failing pipeline later); the hosts of the targets are checked against
`SHOAL_ALLOWED_HOSTS` by `shoal.locations` as Kafka's are. A table bound to scrape targets
has the Prometheus layout (`shoal.types.prometheus`): created without columns it gets
`PROM_SAMPLES_SCHEMA`'s; columns that differ from those are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.errors import InvalidPropertyError, InvalidSchemaError
from shoal.types.prometheus import PROM_SAMPLES_SCHEMA
from shoal.types.schema import DEFAULT_COLUMNS, Column

TARGETS_PROPERTY = "scrape_targets"
PROPERTIES = ("scrape_targets", "scrape_interval", "scrape_timeout", "scrape_job",
              "scrape_path", "scrape_scheme", "scrape_labels", "scrape_honor_labels")
DEFAULT_INTERVAL_S = 15.0
DEFAULT_TIMEOUT_S = 10.0
MAX_TARGETS = 1000

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?\Z")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")
_HOST = re.compile(r"^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)\Z")


@dataclass(frozen=True)
class ScrapeBinding:
    """One table's scrape job: what to fetch, how often, and the target labels to add."""

    table: str
    targets: tuple[str, ...]
    interval_s: float = DEFAULT_INTERVAL_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    job: str = ""
    path: str = "/metrics"
    scheme: str = "http"
    labels: tuple[tuple[str, str], ...] = ()
    honor_labels: bool = False

    def url(self, target: str) -> str:
        return f"{self.scheme}://{target}{self.path}"


def is_bound(properties: Mapping[str, Any]) -> bool:
    """True when a table's properties bind scrape targets."""
    return bool(str(properties.get(TARGETS_PROPERTY) or "").strip())


def parse_duration(text: Any, *, what: str) -> float:
    """Seconds of a Prometheus duration (`1m30s`, `500ms`) or a plain positive number."""
    if isinstance(text, bool):
        raise InvalidPropertyError(f"{what}: expected a duration such as '15s', got {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        s = str(text).strip()
        m = _DURATION.match(s)
        if s and m and any(m.groups()):
            h, mi, sec, ms = (int(g or 0) for g in m.groups())
            seconds = h * 3600 + mi * 60 + sec + ms / 1000
        else:
            try:
                seconds = float(s)
            except ValueError:
                raise InvalidPropertyError(
                    f"{what}: expected a duration such as '15s', '500ms' or '1m', "
                    f"got {text!r}") from None
    if not 0 < seconds < 366 * 86400:    # also refuses NaN and infinity
        raise InvalidPropertyError(f"{what} must be positive (and under a year), got {text!r}")
    return seconds


def _target(entry: str, position: int) -> str:
    host, port = entry, ""
    if entry.startswith("["):
        close = entry.find("]")
        host, port = entry[:close + 1], entry[close + 1:].removeprefix(":")
    elif ":" in entry:
        host, _, port = entry.rpartition(":")
    if (not _HOST.match(host) or (port and not (port.isdigit() and 0 < int(port) < 65536))
            or not port):
        raise InvalidPropertyError(
            f"{TARGETS_PROPERTY}: target {position} ({entry!r}) is not host:port "
            "(no scheme, no path; the path is scrape_path)")
    return entry


def _labels(text: str) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for position, pair in enumerate((p for p in text.split(",") if p.strip()), start=1):
        name, eq, value = pair.partition("=")
        name = name.strip()
        if not eq or not _LABEL_NAME.match(name):
            raise InvalidPropertyError(
                f"scrape_labels: pair {position} ({pair.strip()!r}) is not name=value with a "
                "label name of letters, digits and _")
        if name.startswith("__") or name in ("job", "instance"):
            raise InvalidPropertyError(
                f"scrape_labels: label {name!r} is reserved (job is scrape_job, instance the "
                "target, __* are internal)")
        if name in out:
            raise InvalidPropertyError(f"scrape_labels: label {name!r} is given twice")
        out[name] = value.strip()
    return tuple(sorted(out.items()))


def _boolean(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise InvalidPropertyError(f"{what}: expected true or false, got {value!r}")


def parse_binding(table: str, properties: Mapping[str, Any]) -> ScrapeBinding:
    """The table's `ScrapeBinding`; `InvalidPropertyError` names the property at fault."""
    entries = [t.strip() for t in str(properties.get(TARGETS_PROPERTY) or "").split(",")]
    if not any(entries):
        raise InvalidPropertyError(
            f'no scrape targets for table "{table}": bind them with '
            "CREATE TABLE ... WITH (scrape_targets='host:port,...')")
    targets = tuple(_target(e, i) for i, e in enumerate(entries, start=1) if e)
    if len(targets) > MAX_TARGETS:
        raise InvalidPropertyError(f"{TARGETS_PROPERTY}: at most {MAX_TARGETS} targets, "
                                   f"got {len(targets)}")
    if len(set(targets)) != len(targets):
        raise InvalidPropertyError(f"{TARGETS_PROPERTY}: a target is listed twice")

    def opt(key: str) -> Any:
        value = properties.get(key)
        return None if value is None or (isinstance(value, str) and not value.strip()) \
            else value

    interval = (DEFAULT_INTERVAL_S if opt("scrape_interval") is None
                else parse_duration(opt("scrape_interval"), what="scrape_interval"))
    timeout = (min(DEFAULT_TIMEOUT_S, interval) if opt("scrape_timeout") is None
               else parse_duration(opt("scrape_timeout"), what="scrape_timeout"))
    if timeout > interval:
        raise InvalidPropertyError(
            f"scrape_timeout ({timeout:g}s) must not exceed scrape_interval ({interval:g}s)")
    path = str(opt("scrape_path") or "/metrics").strip()
    if not path.startswith("/") or any(c in path for c in " \t\r\n#"):
        raise InvalidPropertyError(f"scrape_path must be an absolute URL path such as "
                                   f"'/metrics', got {path!r}")
    scheme = str(opt("scrape_scheme") or "http").strip().lower()
    if scheme not in ("http", "https"):
        raise InvalidPropertyError(f"scrape_scheme must be http or https, got {scheme!r}")
    job = str(opt("scrape_job") or table).strip()
    return ScrapeBinding(table=table, targets=targets, interval_s=interval, timeout_s=timeout,
                         job=job, path=path, scheme=scheme,
                         labels=_labels(str(opt("scrape_labels") or "")),
                         honor_labels=_boolean(opt("scrape_honor_labels") or False,
                                               "scrape_honor_labels"))


def prometheus_columns(table: str, columns: Sequence[Column]) -> list[Column]:
    """The user columns of a table bound to scrape targets: `PROM_SAMPLES_SCHEMA`'s when none
    are given; the given ones when they are exactly those (in any order); else refused."""
    want = [c for c in PROM_SAMPLES_SCHEMA.columns if c not in DEFAULT_COLUMNS]
    if not columns:
        return want
    given = {c.name: c for c in columns}
    expected = {c.name: c for c in want}
    for name, col in given.items():
        exp = expected.get(name)
        if exp is None or exp.type != col.type:
            found = "an unknown column" if exp is None else f"type {col.type}"
            raise InvalidSchemaError(
                f'table "{table}" binds scrape targets, so its columns are the Prometheus '
                f"layout (metric string, labels dynamic, series string, series_id long, "
                f"value real, special string, histogram dynamic); column \"{name}\" is "
                f"{found}. Leave the column list out to get the layout.", column=name)
    missing = [n for n in expected if n not in given]
    if missing:
        raise InvalidSchemaError(
            f'table "{table}" binds scrape targets but lacks the Prometheus columns '
            f"{', '.join(missing)}; leave the column list out to get the layout.",
            column=missing[0])
    return want


def check_binding(table: str, properties: Mapping[str, Any],
                  columns: Sequence[Column]) -> list[Column]:
    """The `shoal.bindings` checker: the binding's form, then the Prometheus layout."""
    parse_binding(table, properties)
    return prometheus_columns(table, columns)
