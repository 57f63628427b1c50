"""Waiting on state in tests: `eventually()` polls a probe until its value satisfies a
condition.

Its timeout only guards against a hang (a failure message instead of a stuck run): it is
generous and never a speed budget; no test asserts how long anything took (speed figures
live in bench/). The failure says what was awaited and the last value seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.05
HANG_GUARD_S = 120.0


def eventually(probe: Callable[[], T], what: str, *,
               until: Callable[[T], bool] = bool, timeout_s: float = HANG_GUARD_S,
               poll_s: float = POLL_S) -> T:
    """Call `probe()` until `until(value)` holds; return that value.

    On timeout, fail with `what` (the awaited state, e.g. "the first commit") and the last
    value `probe()` returned. An exception raised by `probe` propagates at once.
    """
    end = time.monotonic() + timeout_s
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; "
                                 f"last value seen: {value!r}")
        time.sleep(poll_s)
