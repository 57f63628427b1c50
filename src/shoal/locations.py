"""Where bound pipelines may read from or connect to (`SHOAL_ALLOWED_*`, docs/security.md).

A table property can make the server read a directory (`filedrop_path`) or connect to a host
(`kafka_bootstrap`, `scrape_targets`, `sentry_url`, a foreign table's `source` URL). Whoever
may create tables could otherwise point the server at any file or any host it can reach, so
every such property must lie inside the locations the operator allowed:

- paths: the data directory, plus each entry of `allowed_paths` (comma-separated local
  directories or `s3://bucket/prefix` prefixes). A local path is compared after resolving
  `..` and symbolic links, on whole path segments (`/data/in` allows `/data/in/x`, not
  `/data/inbox`); an S3 path by bucket and whole key segments;
- hosts: each entry of `allowed_hosts` (`host` allows every port, `host:port` that one);
  none by default. Names are compared case-insensitively, as written: no DNS lookup here.
  HTTP fetches of such hosts (scrapes) go through `shoal.outbound`, which applies these
  entries again to every hop of every fetch and also checks the addresses a name resolves to.

`LocationPolicy.check_properties` is what DDL and the Python API call when a table is
created; the pipeline supervisors check again when they start a binding (a table created
before the policy changed must not run). Values the operator gives directly (`--path`,
`--bootstrap`, `SHOAL_KAFKA_BOOTSTRAP`) are trusted and not checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from shoal.config import Config
from shoal.errors import LocationNotAllowedError

PATH_PROPERTIES = frozenset({"filedrop_path"})
HOST_PROPERTIES = frozenset({"kafka_bootstrap", "scrape_targets"})
# properties holding one URL (`scheme://[user[:password]@]host[:port]/...`): its host and
# port are checked; a missing port is the scheme's default one
URL_PROPERTIES = frozenset({"source", "sentry_url"})
DEFAULT_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mariadb": 3306,
                 "mongodb": 27017, "http": 80, "https": 443}


def _split(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _local_path(value: str) -> Path:
    if value.startswith("file://"):
        value = urlparse(value).path
    return Path(os.path.realpath(os.path.expanduser(value)))


def _s3_parts(value: str) -> tuple[str, tuple[str, ...]]:
    parsed = urlparse(value)
    return parsed.netloc.lower(), tuple(p for p in parsed.path.split("/") if p)


@dataclass(frozen=True)
class LocationPolicy:
    """The allowed local directories, S3 prefixes and hosts."""

    local: tuple[Path, ...] = ()
    s3: tuple[tuple[str, tuple[str, ...]], ...] = ()
    hosts: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def from_config(cls, config: Config) -> LocationPolicy:
        local = [_local_path(str(config.data_path))]
        s3: list[tuple[str, tuple[str, ...]]] = []
        for entry in _split(config.allowed_paths):
            if entry.startswith("s3://"):
                s3.append(_s3_parts(entry))
            else:
                local.append(_local_path(entry))
        hosts = [_host_port(e, "allowed_hosts") for e in _split(config.allowed_hosts)]
        return cls(tuple(local), tuple(s3), tuple(hosts))

    # ---- checks ------------------------------------------------------------------------
    def check_path(self, value: str, *, what: str = "path") -> None:
        """Raise `LocationNotAllowedError` unless `value` lies inside an allowed location."""
        value = value.strip()
        if value.startswith("s3://"):
            bucket, keys = _s3_parts(value)
            for b, prefix in self.s3:
                if b == bucket and keys[:len(prefix)] == prefix:
                    return
            raise LocationNotAllowedError(what, value, "SHOAL_ALLOWED_PATHS")
        if "://" in value and not value.startswith("file://"):
            raise LocationNotAllowedError(what, value, "SHOAL_ALLOWED_PATHS")
        path = _local_path(value)
        if any(path == root or root in path.parents for root in self.local):
            return
        raise LocationNotAllowedError(what, value, "SHOAL_ALLOWED_PATHS")

    def check_hosts(self, value: str, *, what: str = "hosts") -> None:
        """Every `host[:port]` of the comma-separated `value` must be allowed."""
        for entry in _split(value) or [value]:
            host, port = _host_port(entry, what)
            if not any(h == host and (p is None or p == port) for h, p in self.hosts):
                raise LocationNotAllowedError(what, entry, "SHOAL_ALLOWED_HOSTS")

    def check_properties(self, properties: Mapping[str, Any]) -> None:
        """Check every location-bearing table property."""
        for key, value in properties.items():
            if value is None or not str(value).strip():
                continue
            if key in PATH_PROPERTIES:
                self.check_path(str(value), what=key)
            elif key in HOST_PROPERTIES:
                self.check_hosts(str(value), what=key)
            elif key in URL_PROPERTIES:
                self.check_url(str(value), what=key)

    def check_url(self, value: str, *, what: str = "source") -> None:
        """The host and port of a database URL must be allowed; the refusal shows the
        host, never the URL (it may hold a password)."""
        parsed = urlparse(value.strip())
        try:
            port = parsed.port or DEFAULT_PORTS.get(parsed.scheme.lower())
        except ValueError:
            port = None
        host = (parsed.hostname or "").lower()
        shown = f"{host}:{port}" if port is not None else host
        if not host or not any(h == host and (p is None or p == port)
                               for h, p in self.hosts):
            raise LocationNotAllowedError(what, shown, "SHOAL_ALLOWED_HOSTS")


def _host_port(entry: str, what: str) -> tuple[str, int | None]:
    text = entry.strip()
    if "://" in text:                     # tolerate PLAINTEXT://host:port style entries
        text = text.split("://", 1)[1]
    text = text.rstrip("/")
    if text.startswith("["):              # [::1]:9092
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    port: int | None = None
    if port_text:
        if not port_text.isdigit():
            raise LocationNotAllowedError(what, entry, "SHOAL_ALLOWED_HOSTS")
        port = int(port_text)
    return host.lower(), port
