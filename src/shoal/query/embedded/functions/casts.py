"""Casts with Spark's ANSI meaning on the embedded engine."""
