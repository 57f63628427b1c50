"""Ingest frontends (SPEC §7): each only turns bytes into calls on the shared write path."""
