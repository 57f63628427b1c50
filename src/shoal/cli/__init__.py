"""Command line edges of shoal."""
