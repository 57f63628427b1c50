"""What one server app holds: the client, its config, tokens, metrics, lifecycle flags, the
query lane's bounds (slots, limits) and the supervisor of its Spark session.

Kept on `app.state.shoal`, so handlers reach it through the request and several apps (one
per test) live side by side in one process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import anyio
from fastapi import Request

from shoal.client import Shoal
from shoal.config import Config
from shoal.query.limits import QueryLimits
from shoal.server.auth import TokenTable
from shoal.server.errors import NotReadyError, TooManyQueriesError
from shoal.server.metrics import ServerMetrics
from shoal.server.spark_health import SparkSupervisor


class QuerySlots:
    """At most `limit` statements run on the engine at once; one more is refused at once
    with `TooManyQueriesError` (429 + Retry-After) rather than queued: a queue would hold
    a worker thread and the client's connection per waiting query, and the client knows
    better than the server whether to wait."""

    def __init__(self, limit: int, *, retry_after_s: float = 1.0) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self.retry_after_s = retry_after_s
        self.running = 0
        self._lock = threading.Lock()

    def acquire(self) -> None:
        with self._lock:
            if self.running >= self.limit:
                raise TooManyQueriesError(self.limit, retry_after_s=self.retry_after_s)
            self.running += 1

    def release(self) -> None:
        with self._lock:
            self.running -= 1


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

    def check_accepting(self) -> None:
        if not self.accepting:
            raise NotReadyError("the server is starting or shutting down; retry shortly")


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.shoal
    return state
