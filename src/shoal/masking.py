"""Secrets kept out of answers: passwords inside URLs, and properties named like a secret.

`mask_url` replaces the password of every `scheme://user:password@host` in a text with
`***`; `mask_properties` does that to every property value, and replaces the whole value of
a property whose name ends in `password`, `secret` or `token` (not `*_env`: those name an
environment variable, they do not hold the secret). `SHOW TBLPROPERTIES` and `DESCRIBE`
answer with masked properties; the catalog keeps them as given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s]*@")
_SECRET_NAMES = ("password", "secret", "token")


def mask_url(text: str) -> str:
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text)


def mask_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in properties.items():
        if key.lower().endswith(_SECRET_NAMES) and value not in (None, ""):
            out[key] = MASK
        elif isinstance(value, str):
            out[key] = mask_url(value)
        else:
            out[key] = value
    return out
