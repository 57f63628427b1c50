"""What one server app holds: the client, its config, tokens, metrics and lifecycle flags.

Kept on `app.state.shoal`, so handlers reach it through the request and several apps (one
per test) live side by side in one process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
from fastapi import Request

from shoal.client import Shoal
from shoal.config import Config
from shoal.server.auth import TokenTable
from shoal.server.errors import NotReadyError
from shoal.server.metrics import ServerMetrics


@dataclass
class ServerState:
    db: Shoal
    config: Config
    tokens: TokenTable
    metrics: ServerMetrics
    max_body_bytes: int
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
