"""shoal's optional C extensions (`shoal.ingest._scan`, `shoal.format._kernels`, built by
setup from `_scan.c` / `_kernels.c`): each layer's `_ext` module takes its extension from
`optional_extension`, which returns None where it is not built (an install without a C
compiler) and says once what then runs instead. Light on purpose (no numpy, no pyarrow):
`shoal --help` imports it through `shoal.ingest.chunks`."""

from __future__ import annotations

import importlib
import logging
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
