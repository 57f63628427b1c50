"""Bearer-token authentication with scopes, and the loopback rule (docs/security.md).

Tokens come from `Config.tokens` (`"tok1=ingest,query;tok2=admin"`) and/or
`Config.tokens_file` (one `token scope,scope` per line; blank lines and `#` comments
ignored); a token listed twice gets the union of its scopes. Scopes are `ingest`, `query`,
`metrics` and `admin`; `admin` implies the others. `metrics` reads the server's own
`/metrics` and nothing else (for a Prometheus that scrapes shoal); `query` reads it too.

- No tokens configured: authentication is off, and `check_bind()` refuses any host that is
  not loopback (127.0.0.0/8, ::1, `localhost`), so an open server is never exposed.
- A request without `Authorization: Bearer <token>`, or with an unknown token, fails with
  `UnauthorizedError` (401 + `WWW-Authenticate: Bearer`); a known token without the route's
  scope with `ForbiddenError` (403). Tokens are compared in constant time, against every
  configured token, so timing reveals neither a prefix nor which entry matched.

Error messages never contain a token.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fastapi import Request

from shoal.config import Config
from shoal.errors import ConfigError
from shoal.http.errors import ForbiddenError, UnauthorizedError

AuthScope = Literal["ingest", "query", "metrics", "admin"]
SCOPES: tuple[AuthScope, ...] = ("ingest", "query", "metrics", "admin")


@dataclass(frozen=True)
class TokenTable:
    """The configured tokens; empty means authentication is off."""

    entries: tuple[tuple[bytes, frozenset[str]], ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.entries)

    def scopes_of(self, token: str) -> frozenset[str] | None:
        """The scopes of `token`, or None if unknown. Constant time in the token's content."""
        given = token.encode("utf-8", "surrogateescape")
        found: frozenset[str] | None = None
        for known, scopes in self.entries:      # no early exit: every entry is compared
            if hmac.compare_digest(given, known):
                found = scopes
        return found

    def allows(self, token: str | None, scope: AuthScope, *also: AuthScope) -> None:
        """Return if `token` grants `scope` (or one of `also`); raise
        `UnauthorizedError`/`ForbiddenError`."""
        if token is None:
            raise UnauthorizedError("missing bearer token (Authorization: Bearer <token>)",
                                    token_given=False)
        scopes = self.scopes_of(token)
        if scopes is None:
            raise UnauthorizedError("invalid bearer token", token_given=True)
        if "admin" not in scopes and scope not in scopes and scopes.isdisjoint(also):
            raise ForbiddenError(scope, also=also)


def _scopes(text: str, where: str) -> frozenset[str]:
    scopes = frozenset(s.strip().lower() for s in text.split(",") if s.strip())
    if not scopes:
        raise ConfigError(f"{where}: a token needs at least one scope ({', '.join(SCOPES)})")
    unknown = sorted(scopes - set(SCOPES))
    if unknown:
        raise ConfigError(f"{where}: unknown scope {unknown[0]!r} "
                          f"(expected {', '.join(SCOPES)})")
    return scopes


def parse_token_spec(spec: str) -> list[tuple[str, frozenset[str]]]:
    """Read `"tok1=ingest,query;tok2=admin"` (SHOAL_TOKENS)."""
    out: list[tuple[str, frozenset[str]]] = []
    for i, part in enumerate(p.strip() for p in spec.split(";")):
        if not part:
            continue
        token, sep, scopes = part.partition("=")
        where = f"SHOAL_TOKENS entry {i + 1}"
        if not sep or not token.strip():
            raise ConfigError(f"{where}: expected token=scope[,scope...]")
        out.append((token.strip(), _scopes(scopes, where)))
    return out


def parse_token_file(path: str | Path) -> list[tuple[str, frozenset[str]]]:
    """Read a tokens file: `token scope,scope` per line, `#` comments."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"tokens file {path}: {e.strerror or e}") from None
    out: list[tuple[str, frozenset[str]]] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise ConfigError(f"tokens file {path} line {n}: expected 'token scope[,scope...]'")
        out.append((parts[0], _scopes(parts[1], f"tokens file {path} line {n}")))
    return out


def token_table(pairs: Iterable[tuple[str, frozenset[str]]]) -> TokenTable:
    merged: dict[str, frozenset[str]] = {}
    for token, scopes in pairs:
        merged[token] = merged.get(token, frozenset()) | scopes
    return TokenTable(tuple((t.encode("utf-8", "surrogateescape"), s)
                            for t, s in merged.items()))


def load_tokens(config: Config) -> TokenTable:
    pairs: list[tuple[str, frozenset[str]]] = []
    if config.tokens:
        pairs += parse_token_spec(config.tokens)
    if config.tokens_file:
        pairs += parse_token_file(config.tokens_file)
    return token_table(pairs)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; False for wildcards and other names."""
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: TokenTable) -> None:
    """Refuse to serve without authentication on anything but loopback."""
    if not tokens.enabled and not is_loopback(host):
        raise ConfigError(
            f"refusing to bind to {host} without authentication: configure tokens "
            "(SHOAL_TOKENS or a tokens file) or bind to 127.0.0.1")


def bearer_of(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value (HTTP, gRPC, Flight)."""
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def bearer_token(request: Request) -> str | None:
    return bearer_of(request.headers.get("authorization"))


def require_scope(scope: AuthScope, *also: AuthScope) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency: the route needs `scope` or one of `also` (a no-op when auth is
    off)."""

    async def dependency(request: Request) -> None:
        tokens: TokenTable = request.app.state.shoal.tokens
        if tokens.enabled:
            tokens.allows(bearer_token(request), scope, *also)

    dependency.__name__ = f"require_{scope}"
    return dependency
