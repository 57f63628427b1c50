"""What one server app holds: the client, its config, tokens, metrics, lifecycle flags, the
query lane's bounds (slots, limits) and the supervisor of its Spark session.

Kept on `app.state.shoal`, so handlers reach it through the request and several apps (one
per test) live side by side in one process.
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
from dataclasses import dataclass, field

import anyio
from fastapi import Request

from shoal.client import Shoal
from shoal.config import Config
from shoal.query.limits import QueryLimits
from shoal.http.auth import TokenTable, bearer_token
from shoal.http.errors import NotReadyError, TooManyQueriesError
from shoal.http.metrics import ServerMetrics
from shoal.http.spark_health import SparkSupervisor


class QuerySlots:
    """At most `limit` statements run on the engine at once; one more is refused at once
    with `TooManyQueriesError` (429 + Retry-After) rather than queued: a queue would hold
    a worker thread and the client's connection per waiting query, and the client knows
    better than the server whether to wait.

    Fair per client: one client (`client_key`: its token when tokens are configured, else
    its address) holds at most `per_client` slots, by default all but one
    (`default_per_client`), so one client that holds its streams open or floods the server
    leaves a slot to everyone else. `acquire(client=None)` / `release(client=None)` count
    only towards the total (internal work that answers no client)."""

    def __init__(self, limit: int, *, retry_after_s: float = 1.0,
                 per_client: int | None = None) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if per_client is not None and per_client < 1:
            raise ValueError(f"per_client must be at least 1 (None: all but one), "
                             f"got {per_client}")
        self.limit = limit
        self.per_client = min(limit, per_client or default_per_client(limit))
        self.retry_after_s = retry_after_s
        self.running = 0
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, client: str | None = None) -> None:
        with self._lock:
            if self.running >= self.limit:
                raise TooManyQueriesError(self.limit, retry_after_s=self.retry_after_s)
            if client is not None:
                held = self._held.get(client, 0)
                if held >= self.per_client:
                    raise TooManyQueriesError(self.limit, retry_after_s=self.retry_after_s,
                                              per_client=self.per_client)
                self._held[client] = held + 1
            self.running += 1

    def release(self, client: str | None = None) -> None:
        with self._lock:
            self.running -= 1
            if client is not None:
                held = self._held.pop(client, 0) - 1
                if held > 0:
                    self._held[client] = held

    def held_by(self, client: str) -> int:
        """The slots `client` holds now."""
        with self._lock:
            return self._held.get(client, 0)


def _canonical_host(host: str | None) -> str:
    """One spelling per address: an IPv4 address mapped into IPv6 (`::ffff:10.0.0.1`, what a
    dual-stack socket reports) is the IPv4 address."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def default_per_client(limit: int) -> int:
    """The slots one client may hold when `query_concurrency_per_client` is 0 (auto): all
    but one, at least one."""
    return max(1, limit - 1)


@dataclass
class ServerState:
    db: Shoal
    config: Config
    tokens: TokenTable
    metrics: ServerMetrics
    max_body_bytes: int
    query_slots: QuerySlots
    query_limits: QueryLimits
    spark: SparkSupervisor
    # False until the lifespan has started, and again once shutdown begins.
    accepting: bool = False
    # Readiness probes get threads of their own: a server saturated with ingest work must
    # still answer /readyz promptly.
    probe_limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(2))

    def client_key(self, token: str | None, host: str | None) -> str:
        """Who a caller is for the per-client slot bound: its token when tokens are
        configured (any address), else its address (`host`: the HTTP client's, the Flight
        peer's; one key for every connection from that address). A digest, not the
        token itself, so the key can be logged or shown."""
        if self.tokens.enabled and token is not None:
            return "token:" + hashlib.sha256(token.encode()).hexdigest()[:16]
        return f"host:{_canonical_host(host)}"

    def check_accepting(self) -> None:
        if not self.accepting:
            raise NotReadyError("the server is starting or shutting down; retry shortly")


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.shoal
    return state


def request_client(request: Request) -> str:
    """`ServerState.client_key` of an HTTP request: its bearer token, or the address of the
    connection's peer (a proxy in front of shoal is one address: configure tokens there)."""
    host = request.client.host if request.client is not None else None
    return server_state(request).client_key(bearer_token(request), host)
