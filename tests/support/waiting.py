"""Waiting on state in tests: poll a condition until it holds.

The deadline only guards against a hang (a failure message instead of a stuck run); no test
asserts how long anything took.
"""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_S = 0.05


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = 180.0) -> None:
    """Return once `condition()` is true; fail naming `what` after `deadline_s`."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(POLL_S)
