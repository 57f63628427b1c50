"""The extra listeners of the server (OTLP/gRPC, Arrow Flight SQL) and whether each serves.

A listener on a port the user set is required: a taken port stops the server (the caller
lets the `ConfigError` through). One on its default port (`Config.listener_port`) is best
effort: a taken port, or a start that fails, is a warning in the log and in `/readyz`
(`Listeners.report`), and the server serves everything else.

A port is probed with a plain socket bound with SO_REUSEADDR only, the way the gRPC
servers bind (the OTLP server turns SO_REUSEPORT off; the probe keeps Flight SQL from
sharing a port some other process holds).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.errors import ConfigError

log = logging.getLogger("shoal.server")


def port_taken(host: str, port: int) -> str | None:
    """Why `port` on `host` cannot be bound now (None: it can)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError as e:
            return str(e.strerror or e)
    return None


@dataclass
class ListenerState:
    """One extra listener: its port, whether the port was set (required), whether it
    serves, and if not, why."""

    port: int
    required: bool
    serving: bool = False
    reason: str | None = None

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"port": self.port, "serving": self.serving,
                               "required": self.required}
        if self.reason is not None:
            doc["reason"] = self.reason
        return doc


@dataclass
class Listeners:
    """The extra listeners of one app, by name (`otlp_grpc`, `flight_sql`)."""

    host: str
    states: dict[str, ListenerState] = field(default_factory=dict)

    def start(self, name: str, what: str, flag: str, port: int, *, required: bool,
              start: Callable[[], int]) -> bool:
        """Start a listener (`start()` binds and returns the bound port). Required: any
        failure raises. Best effort: a taken port or a failed start is logged as a warning
        and recorded; False then."""
        state = ListenerState(port, required)
        self.states[name] = state
        if required:
            state.port = start()
            state.serving = True
            return True
        taken = port_taken(self.host, port)
        if taken is None:
            try:
                state.port = start()
                state.serving = True
                return True
            except ConfigError as e:
                taken = str(e)
        state.reason = (f"{what} is not serving: the default port {self.host}:{port} is "
                        f"taken ({taken}); set {flag} N to serve it on another port, or 0 "
                        "to turn it off")
        log.warning("%s", state.reason)
        return False

    def report(self) -> dict[str, Any]:
        """`/readyz`'s part: each listener's state, and `warnings` for those not serving
        (nothing when the app has no extra listener)."""
        if not self.states:
            return {}
        doc: dict[str, Any] = {"listeners": {n: s.document() for n, s in self.states.items()}}
        warnings = [s.reason for s in self.states.values() if s.reason is not None]
        if warnings:
            doc["warnings"] = warnings
        return doc
