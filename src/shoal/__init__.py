"""shoal: a telemetry and event lakehouse (see SPEC.md).

`shoal.connect()` opens the embedded client; the column types and `Column` are re-exported
so that table definitions read naturally. The client (SQLAlchemy, stores) is imported on
first use, so `import shoal.types` in a Spark worker stays cheap.
"""

from typing import Any

from shoal.config import Config, load_config
from shoal.errors import ShoalError
from shoal.types import (BOOL, BYTES, DYNAMIC, HEADERS, INT, LONG, REAL, STRING, TIMESTAMP,
                         Column, Schema, vector)

__all__ = ["BOOL", "BYTES", "DYNAMIC", "HEADERS", "INT", "LONG", "REAL", "STRING", "TIMESTAMP",
           "Column", "Config", "Schema", "Shoal", "ShoalError", "connect", "load_config",
           "vector"]


def __getattr__(name: str) -> Any:
    if name in ("Shoal", "connect"):
        from shoal import client

        return getattr(client, name)
    raise AttributeError(f"module 'shoal' has no attribute {name!r}")
