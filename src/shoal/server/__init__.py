"""The HTTP server of shoal (docs/http-api.md): `create_app()` builds it, `shoal serve` runs it."""

from shoal.server.app import create_app
from shoal.http.auth import TokenTable, check_bind, is_loopback, load_tokens

__all__ = ["TokenTable", "check_bind", "create_app", "is_loopback", "load_tokens"]
