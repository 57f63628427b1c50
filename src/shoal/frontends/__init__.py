"""Ingest frontends: each only turns bytes into calls on the shared write path."""
