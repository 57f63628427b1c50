"""shoal and the native code under it: the optional C extensions (`shoal.ingest._scan`,
`shoal.format._kernels`, built by setup from `_scan.c` / `_kernels.c`), and process-wide
settings of the C libraries below for the `shoal` command's own process.

Each layer's `_ext` module takes its extension from `optional_extension`, which returns None
where it is not built (an install without a C compiler) and says once what then runs
instead. Light on purpose (no numpy, no pyarrow): `shoal --help` imports it."""

from __future__ import annotations

import importlib
import logging
import os
import sys
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


def keep_freed_memory(up_to: int) -> bool:
    """Have glibc's malloc keep freed blocks of up to `up_to` bytes for reuse, instead of
    handing each back to the kernel (blocks past 128 KB-32 MB are mmap'd and unmapped one by
    one, and the heap's top is trimmed past 128 KB); True when it took. For a process that
    allocates and frees the same large buffers over and over (`shoal ingest`: every chunk's
    body, scan results and Arrow columns): each fresh mapping costs a page fault per 4 KB
    touched, measured (2026-11-27, 538 MB through `shoal ingest`) 270k faults and ~0.8 s of
    system time, a third of the command's CPU, down to 90k and ~0.4 s. The process keeps its
    peak instead of shrinking between chunks: for a command that exits, not for a server.
    False (nothing changed) off glibc."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
    except (ValueError, OSError):
        return False    # not glibc: its allocator has no such knobs
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError) as e:
        logging.getLogger(__name__).warning("glibc without mallopt (%s): freed memory is "
                                            "unmapped as usual", e)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, up_to)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                    2 * up_to))


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
