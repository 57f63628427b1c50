"""The format layer's C extension, `shoal.format._kernels` (`_kernels.c`), or None where it is
not built (an install without a C compiler): token sets, membership hashes and filter bits
then take their numpy forms, which stay as the reference the tests hold it to."""

from __future__ import annotations

from typing import Any

from shoal.native import optional_extension

kernels: Any = optional_extension("shoal.format._kernels",
                                  "extent statistics use their slower numpy forms")
