"""shoal: telemetry and event lakehouse."""
