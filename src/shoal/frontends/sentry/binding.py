"""A table bound to a Sentry organisation and project, pulled on a schedule.

    CREATE TABLE sentry_issues WITH (
        sentry_url = 'https://sentry.example', sentry_org = 'acme', sentry_project = 'web',
        sentry_token_env = 'SENTRY_TOKEN', sentry_interval = '5m', sentry_resource = 'issues')

`sentry_url` binds the table (the base URL of the Sentry server, `http` or `https`, no
path beyond an optional prefix); `sentry_org` and `sentry_project` are slugs and required.
`sentry_token_env` names the environment variable of the server process that holds the
API token (the token itself is never a property, so it cannot show in `SHOW TBLPROPERTIES`,
and a property named `sentry_token` is refused). `sentry_interval` is a duration (default
5m, at least 10s). `sentry_resource` is `issues` (default) or `events`.

Registered as the checker of `sentry_url` (`shoal.bindings`): `CREATE TABLE` checks the
form, and `shoal.locations` checks the URL's host against `SHOAL_ALLOWED_HOSTS`. A table
created without columns gets the resource's layout (`layout.py`); given columns must be
some of that layout's, with its types.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from shoal.errors import InvalidPropertyError, InvalidSchemaError, PipelineError
from shoal.frontends.prometheus.binding import parse_duration
from shoal.frontends.sentry.layout import LAYOUTS
from shoal.types.schema import DEFAULT_COLUMNS, Column

URL_PROPERTY = "sentry_url"
PROPERTIES = ("sentry_url", "sentry_org", "sentry_project", "sentry_token_env",
              "sentry_interval", "sentry_resource")
DEFAULT_INTERVAL_S = 300.0
MIN_INTERVAL_S = 10.0
Resource = Literal["issues", "events"]
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


@dataclass(frozen=True)
class SentryBinding:
    """One table's pull: where, what, how often, and the token (never shown)."""

    table: str
    url: str                    # base URL, no trailing slash
    org: str
    project: str
    resource: Resource = "issues"
    interval_s: float = DEFAULT_INTERVAL_S
    token_env: str | None = None
    token: str | None = field(default=None, repr=False)

    @property
    def list_url(self) -> str:
        return f"{self.url}/api/0/projects/{self.org}/{self.project}/{self.resource}/"

    @property
    def source(self) -> str:
        """The catalog's source name of this pull's positions."""
        return f"sentry:{self.table}:{self.resource}:{self.org}/{self.project}"


def is_bound(properties: Mapping[str, Any]) -> bool:
    return bool(str(properties.get(URL_PROPERTY) or "").strip())


def url_host(url: str) -> str:
    """The `host[:port]` of a Sentry URL (what `SHOAL_ALLOWED_HOSTS` must allow)."""
    return urlsplit(url.strip()).netloc.rpartition("@")[2]


def _url(value: str) -> str:
    text = value.strip().rstrip("/")
    parts = urlsplit(text)
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.query
            or parts.fragment or "@" in parts.netloc):
        raise InvalidPropertyError(
            f"{URL_PROPERTY} must be the http(s) base URL of a Sentry server such as "
            "'https://sentry.example' (no credentials, query or fragment; the token comes "
            "from sentry_token_env)")
    try:
        _ = parts.port
    except ValueError:
        raise InvalidPropertyError(f"{URL_PROPERTY}: the port is not a number") from None
    return text


def parse_binding(table: str, properties: Mapping[str, Any]) -> SentryBinding:
    """The table's `SentryBinding`, without its token (`resolve_token` reads it to run);
    `InvalidPropertyError` names the property at fault."""
    if "sentry_token" in properties:
        raise InvalidPropertyError("sentry_token is not a property (it would show in SHOW "
                                   "TBLPROPERTIES): put the token in an environment variable "
                                   "of the server and name it with sentry_token_env")

    def opt(key: str) -> str | None:
        value = properties.get(key)
        return None if value is None or not str(value).strip() else str(value).strip()

    url = _url(str(properties.get(URL_PROPERTY) or ""))
    slugs = {}
    for key in ("sentry_org", "sentry_project"):
        value = opt(key)
        if value is None or not _SLUG.match(value):
            raise InvalidPropertyError(f"{key} is required: the Sentry {key[7:]} slug "
                                       f"(letters, digits, '-', '_', '.'), got {value!r}")
        slugs[key] = value
    resource = opt("sentry_resource") or "issues"
    if resource not in LAYOUTS:
        raise InvalidPropertyError(f"sentry_resource must be issues or events, got {resource!r}")
    interval = (DEFAULT_INTERVAL_S if opt("sentry_interval") is None
                else parse_duration(opt("sentry_interval"), what="sentry_interval"))
    if interval < MIN_INTERVAL_S:
        raise InvalidPropertyError(f"sentry_interval must be at least {MIN_INTERVAL_S:g}s "
                                   f"(Sentry rate-limits its API), got {interval:g}s")
    token_env = opt("sentry_token_env")
    if token_env is not None and not _ENV.match(token_env):
        raise InvalidPropertyError("sentry_token_env must be the name of an environment "
                                   f"variable (letters, digits, _), got {token_env[:40]!r}")
    return SentryBinding(table=table, url=url, org=slugs["sentry_org"],
                         project=slugs["sentry_project"], resource=resource,  # type: ignore[arg-type]
                         interval_s=interval, token_env=token_env)


def resolve_token(binding: SentryBinding, environ: Mapping[str, str] | None = None
                  ) -> SentryBinding:
    """`binding` with its token read from the environment (for a run)."""
    if binding.token_env is None:
        return binding
    env = os.environ if environ is None else environ
    token = env.get(binding.token_env) or None
    if token is None:
        raise PipelineError(f'Sentry pull of table "{binding.table}": the environment '
                            f"variable {binding.token_env} (sentry_token_env) is not set")
    return SentryBinding(**{**binding.__dict__, "token": token})


def layout_columns(table: str, resource: str, columns: Sequence[Column]) -> list[Column]:
    want = [c for c in LAYOUTS[resource].columns if c not in DEFAULT_COLUMNS]
    if not columns:
        return want
    expected = {c.name: c for c in want}
    for col in columns:
        exp = expected.get(col.name)
        if exp is None or exp.type != col.type:
            found = "not a column of it" if exp is None else f"of type {col.type}"
            raise InvalidSchemaError(
                f'table "{table}" pulls Sentry {resource}, so its columns are some of that '
                f'layout\'s (docs/sentry.md); column "{col.name}" is {found}. Leave the '
                "column list out to get the layout.", column=col.name)
    return list(columns)


def check_binding(table: str, properties: Mapping[str, Any],
                  columns: Sequence[Column]) -> list[Column]:
    """The `shoal.bindings` checker: the binding's form, then the layout."""
    binding = parse_binding(table, properties)
    return layout_columns(table, binding.resource, columns)
