"""shoal.native: the allocator settings `shoal ingest` and `shoal serve` run with."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shoal.native import glibc

# In a process of its own (the setting is for the whole process): allocate and free a 48 MB
# buffer ten times (past the 32 MB up to which glibc adapts by itself) and count the page
# faults of the last nine rounds.
PROBE = """
import resource, sys
from shoal.native import keep_freed_memory
took = keep_freed_memory(1 << 30, 2 << 30) if sys.argv[1] == "keep" else None
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


def huge_pages_always() -> bool:
    """Transparent huge pages for every mapping: a fresh 48 MB buffer then faults in 2 MB
    at a time, and the count below no longer tells reuse from a fresh mapping."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[always]" in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not glibc(), reason="the setting is glibc's (elsewhere it does nothing)")
@pytest.mark.skipif(huge_pages_always(), reason="page faults count 2 MB pages here")
def test_freed_buffers_are_reused_without_page_faults() -> None:
    took, kept = probe("keep")
    _, default = probe("default")
    assert took == "True"
    pages = 9 * (48 << 20) // os.sysconf("SC_PAGE_SIZE")
    # By default every 48 MB buffer is a fresh mapping: a fault per page it writes.
    assert default > pages // 2
    # Kept: the freed buffer is the next one, already mapped.
    assert kept < pages // 20


# tune_allocators in a process of its own, then the pool pyarrow allocates from.
TUNE = """
import os, sys
from shoal.native import LONG_RUNNING, tune_allocators
if sys.argv[1] == "late":
    import pyarrow
took = tune_allocators(*LONG_RUNNING)
import pyarrow as pa
print(took, pa.default_memory_pool().backend_name)
"""


def tune(mode: str, **env: str) -> tuple[list[str], str]:
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", TUNE, mode], capture_output=True, text=True,
                         check=True, env={**base, **env})
    return out.stdout.split(), out.stderr


@pytest.mark.skipif(not glibc(), reason="the setting is glibc's (elsewhere it does nothing)")
def test_arrow_allocates_from_the_tuned_malloc_unless_told_otherwise() -> None:
    assert tune("early")[0] == ["True", "system"]
    # The user's choice wins.
    assert tune("early", ARROW_DEFAULT_MEMORY_POOL="jemalloc")[0] == ["True", "jemalloc"]
    # Too late once pyarrow is imported: nothing changes, and it says so.
    (took, pool), err = tune("late")
    assert took == "False" and pool != "system"   # pyarrow's own default (mimalloc in 26)
    assert "pyarrow is imported already" in err


# exit_now in a process of its own; stdout is a pipe (block-buffered: nothing is written
# until a flush).
EXIT = """
import atexit, sys, threading
from shoal.native import exit_now
atexit.register(lambda: print(" atexit ran", end=""))
print("out", end="")
if sys.argv[1] == "busy":
    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    exit_now(3)
    print(" returned", end="")
    done.set()
    worker.join()
    sys.exit(4)
exit_now(3)
print(" not reached", end="")
"""


def test_exit_now_runs_atexit_flushes_and_ends_with_the_code() -> None:
    out = subprocess.run([sys.executable, "-c", EXIT, "idle"], capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (3, "out atexit ran")


def test_exit_now_leaves_a_process_with_threads_to_its_normal_exit() -> None:
    out = subprocess.run([sys.executable, "-c", EXIT, "busy"], capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (4, "out returned atexit ran")
