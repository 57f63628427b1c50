"""shoal and the native code under it: the optional C extensions (`shoal.ingest._scan`,
`shoal.format._kernels`, built by setup from `_scan.c` / `_kernels.c`), and process-wide
settings of the C libraries below for the `shoal` command's own process.

Each layer's `_ext` module takes its extension from `optional_extension`, which returns None
where it is not built (an install without a C compiler) and says once what then runs
instead. Light on purpose (no numpy, no pyarrow): `shoal --help` imports it."""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import sys
import threading
from typing import Any


def optional_extension(name: str, without: str) -> Any:
    """The extension module `name`, or None with a warning naming `without` (what its users
    do instead). Imported by name: import-linter's graph would read `shoal.format._kernels`
    (an extension it does not see) as the package `shoal.format`, which imports the modules
    that use it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        logging.getLogger(name.rpartition(".")[0] + "._ext").warning(
            "%s is not built: %s", name, without)
        return None


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(blocks_up_to: int, heap_top: int) -> bool:
    """Have glibc's malloc keep freed blocks of up to `blocks_up_to` bytes for reuse, and up
    to `heap_top` bytes of free memory at the top of a heap, instead of handing them back to
    the kernel; True when it took (False, nothing changed, off glibc). By default blocks past
    128 KB (a threshold that adapts only up to 32 MB) are mmap'd and unmapped one by one and
    a heap's top is trimmed past 128 KB: a process that allocates and frees the same large
    buffers over and over (every chunk's or body's bytes, scan results, Arrow columns) then
    pays a page fault per 4 KB touched, each time. The process keeps its high-water mark
    instead of shrinking after a burst."""
    if not glibc():
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError) as e:
        logging.getLogger(__name__).warning("glibc without mallopt (%s): freed memory is "
                                            "unmapped as usual", e)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, blocks_up_to)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                           heap_top))


# `shoal serve` and its coercion workers: blocks up to 64 MB reused, 256 MB of free heap kept
# (REST ingest measured the same as with 1 GB / 2 GB, 135 vs 137 MB/s); bigger blocks (a
# query's large results) still go back to the kernel when freed.
LONG_RUNNING = (64 << 20, 256 << 20)


def tune_allocators(blocks_up_to: int, heap_top: int) -> bool:
    """For an ingesting process (`shoal ingest`, `shoal serve` and its coercion workers):
    `keep_freed_memory`, and Arrow's buffers from that same malloc instead of the allocator
    pyarrow bundles (mimalloc in pyarrow 26; `ARROW_DEFAULT_MEMORY_POOL=system`, unless the
    user set it; read when pyarrow first allocates, so before pyarrow is imported; inherited
    by child processes). Measured (2026-11-27, same minutes): the 538 MB file through `shoal
    ingest` 1.96-2.03 s -> 1.75-1.78 s and 55 MB less RSS on top of the kept blocks alone;
    REST (8 clients x 1 MB) 124 -> 145 MB/s with both: pyarrow's allocator hands freed pages
    back to the kernel soon after, and they are faulted in again. True when both took;
    False (nothing changed) off glibc or after pyarrow was imported."""
    if "pyarrow" in sys.modules:
        logging.getLogger(__name__).warning("pyarrow is imported already: its memory pool "
                                            "stays as it is")
        return False
    if not keep_freed_memory(blocks_up_to, heap_top):
        return False
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    return True


def glibc() -> bool:
    """Whether this process runs on glibc (whose malloc `keep_freed_memory` tunes)."""
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False    # not glibc: its allocator has no such knobs


def own_cli_process() -> bool:
    """Whether this process is the `shoal` command itself (the script or `python -m shoal`),
    not a host that runs its code (pytest's CliRunner, an embedding application): only then
    may shoal change process-wide settings."""
    main = sys.argv[0] if sys.argv else ""
    return os.path.basename(main) == "shoal" or main.endswith(os.path.join("shoal",
                                                                           "__main__.py"))


def one_blas_thread() -> None:
    """Run OpenBLAS (numpy's) on the calling thread, unless the user chose otherwise; before
    numpy is imported. shoal does no linear algebra, but numpy's import starts a BLAS thread
    per core that spins: measured (2026-11-27, 2 cores) 0.13 s of CPU in a one-line `shoal
    ingest` (0.42 -> 0.29 s), ~4% of a 538 MB one, taken from the work on a small machine.
    The command's child processes (coercion workers, Spark's Python workers) inherit it."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def exit_now(code: int = 0) -> None:
    """End the `shoal` command's own process now, when nothing but its main thread runs: the
    atexit handlers run (logging's flush among them), stdio is flushed, and `os._exit` skips
    the interpreter's teardown (freeing every object and module one by one, the C++ static
    destructors of pyarrow and its thread pools): measured 0.08-0.12 s (2026-11-27), a tenth
    of `shoal ingest` of a 157 MB file. Returns (for a normal exit) when another non-daemon
    thread is still alive, which a normal exit would wait for."""
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120     # what Python's own exit gives when stdout cannot flush
    os._exit(code)
