"""Keeping passwords out of what shoal shows (docs/security.md).

A table property may carry a connection URL with a password in it (a foreign table's
`source`, a sync's `sync_source`), or be a secret itself (a property whose name ends in
`password`, `secret` or `token`; not `*_env`, which names an environment variable and holds
no secret). shoal keeps the properties as given, since it needs the password to connect, but
everything it shows — describe documents, `SHOW TBLPROPERTIES`, query errors, log lines —
goes through `mask_url` / `mask_properties` first, and a driver's error text through
`scrub`, which also removes a password that came from the environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"

# scheme://user:password@host — the password is whatever lies between the first ":" after
# the user and the last "@" before the host.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^\s/]*)@")


def mask_url(text: str) -> str:
    """`text` with the password of every `scheme://user:password@` in it replaced by
    `***`."""
    return _USERINFO.sub(lambda m: f"{m.group('head')}{MASK}@", text)


_SECRET_NAMES = ("password", "secret", "token")


def mask_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The properties with every string value's URL passwords masked, and the whole value
    of a property named like a secret."""
    out: dict[str, Any] = {}
    for key, value in properties.items():
        if key.lower().endswith(_SECRET_NAMES) and value not in (None, ""):
            out[key] = MASK
        else:
            out[key] = mask_url(value) if isinstance(value, str) else value
    return out


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with URL passwords masked and each non-empty secret replaced by `***`."""
    out = mask_url(text)
    for secret in secrets:
        if secret:
            out = out.replace(secret, MASK)
    return out
