"""Idempotency keys a client may send (`X-Idempotency-Key` on REST and OTLP/HTTP, the
`x-idempotency-key` gRPC metadata): the one rule every edge applies.

A key is 1-256 printable characters and does not start with a prefix shoal's own
pipelines write into the same ledger (`filedrop:<sha256>` names a dropped file's content,
`prw:<table>:<hash>` a remote-write body, `sentry:<table>:<project>:<event id>` a
Sentry event): a client key `filedrop:<sha>` would otherwise
answer as a replay of that file, or make the file-drop pipeline skip a file nobody ingested.
"""

from __future__ import annotations

MAX_IDEMPOTENCY_KEY = 256
REMOTE_WRITE_KEY_PREFIX = "prw:"
SENTRY_KEY_PREFIX = "sentry:"
RESERVED_KEY_PREFIXES: tuple[str, ...] = ("filedrop:", REMOTE_WRITE_KEY_PREFIX,
                                          SENTRY_KEY_PREFIX)


def client_key_problem(key: str) -> str | None:
    """What is wrong with a client's idempotency key, or None when it may be used."""
    if not key or len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        return f"X-Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY} printable characters"
    for prefix in RESERVED_KEY_PREFIXES:
        if key.startswith(prefix):
            return (f"X-Idempotency-Key may not start with {prefix!r}: the prefix is "
                    "reserved for shoal's own pipelines")
    return None
