"""The format layer's C extension, `shoal.format._kernels` (`_kernels.c`), or None where it is
not built (an install without a C compiler): token sets, membership hashes and filter bits
then take their numpy forms, which stay as the reference the tests hold it to."""

from __future__ import annotations

import importlib
import logging
from typing import Any

try:
    # By name: import-linter's graph would read `shoal.format._kernels` (an extension it does
    # not see) as the package `shoal.format`, which imports the modules that use it.
    kernels: Any = importlib.import_module("shoal.format._kernels")
except ImportError:
    kernels = None
    logging.getLogger(__name__).warning(
        "shoal.format._kernels is not built: extent statistics use their slower numpy forms")
