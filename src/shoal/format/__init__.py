"""Extent formats behind the SegmentFormat protocols (SPEC §6.1)."""
