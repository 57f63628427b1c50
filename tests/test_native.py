"""shoal.native: the allocator setting `shoal ingest` runs with."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# In a process of its own (the setting is for the whole process): allocate and free a 48 MB
# buffer ten times (past the 32 MB up to which glibc adapts by itself) and count the page
# faults of the last nine rounds.
PROBE = """
import resource, sys
from shoal.native import keep_freed_memory
took = keep_freed_memory(1 << 30) if sys.argv[1] == "keep" else None
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
b = b"x" * (48 << 20); del b
f0 = faults()
for _ in range(9):
    b = b"x" * (48 << 20); del b
print(took, faults() - f0)
"""


def probe(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0], int(out[1])


def glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


@pytest.mark.skipif(not glibc(), reason="the setting is glibc's (elsewhere it does nothing)")
def test_freed_buffers_are_reused_without_page_faults() -> None:
    took, kept = probe("keep")
    _, default = probe("default")
    assert took == "True"
    pages = 9 * (48 << 20) // os.sysconf("SC_PAGE_SIZE")
    # By default every 48 MB buffer is a fresh mapping: a fault per page it writes.
    assert default > pages // 2
    # Kept: the freed buffer is the next one, already mapped.
    assert kept < pages // 20
