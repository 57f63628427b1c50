"""Keep pyarrow from importing pandas in a process that only ingests.

pyarrow 26 imports pandas (when installed) on the first `pa.array()`, `pa.scalar()` or
`to_numpy()` of a process, to recognise pandas inputs: 0.3-0.5 s on an idle machine,
seconds on a loaded one, paid by the first chunk of every `shoal ingest` and by every
coercion worker. Neither needs pandas; an import hook that answers `import pandas` with
ImportError (which pyarrow takes as "not installed") saves that. (`sys.modules["pandas"] =
None` does not: pyarrow's Cython import then hands it None.) Only for processes of their
own: the command's code also runs inside other processes (tests, `shoal serve`) where
pandas users may follow.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ImportError(f"{fullname} is not used by this process (shoal.ingest.nopandas)")
        return None


def forgo_pandas() -> None:
    """Answer `import pandas` with ImportError in this process, unless pandas is imported."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
