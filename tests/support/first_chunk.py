"""Run the `shoal` command and record when and with which modules it hands its first chunk to
the write path (the start-up of `shoal ingest`), and which modules it had at exit.

    python tests/support/first_chunk.py REPORT.json [shoal arguments...]

REPORT.json gets `{"first_chunk_at": <time.time()>, "first_chunk_cpu": <CPU seconds of the
process so far>, "first_chunk_modules": [...], "blas_threads": <threads of numpy's OpenBLAS>,
"arrow_pool": <pyarrow's default memory pool>, "exit_modules": [...]}` (all but the last null
when no chunk was sent). The command itself
runs unchanged: `shoal.ingest.write_path` is wrapped as it is imported, so nothing is
imported earlier than the command imports it. Used by tests/cli/test_ingest_startup.py and
bench/bench_cli_start.py (the parent takes `time.time()` just before starting this process).
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.util
import json
import runpy
import sys
import time
from typing import Any

TARGET = "shoal.ingest.write_path"
report: dict[str, Any] = {"first_chunk_at": None, "first_chunk_cpu": None,
                          "first_chunk_modules": None, "blas_threads": None,
                          "arrow_pool": None}


def blas_threads() -> int | None:
    """The threads numpy's OpenBLAS runs with in this process (None: no OpenBLAS loaded)."""
    import ctypes

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                     "openblas_get_num_threads"):
            if hasattr(lib, name):
                return int(getattr(lib, name)())
    return None


def _wrap(cls: Any) -> None:
    original = cls.ingest_ndjson

    @functools.wraps(original)
    def ingest_ndjson(*args: Any, **kwargs: Any) -> Any:
        if report["first_chunk_at"] is None:
            report["first_chunk_at"] = time.time()
            report["first_chunk_cpu"] = time.process_time()
            report["first_chunk_modules"] = sorted(sys.modules)
            report["blas_threads"] = blas_threads()
            import pyarrow

            report["arrow_pool"] = pyarrow.default_memory_pool().backend_name
        return original(*args, **kwargs)

    cls.ingest_ndjson = ingest_ndjson


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.loader is not None
        loader: Any = spec.loader
        exec_module = loader.exec_module

        def patched(module: Any) -> None:
            exec_module(module)
            _wrap(module.WritePath)

        loader.exec_module = patched
        return spec


def main() -> None:
    out = sys.argv[1]

    def dump() -> None:
        report["exit_modules"] = sorted(sys.modules)
        with open(out, "w") as f:
            json.dump(report, f)

    atexit.register(dump)
    sys.meta_path.insert(0, _Hook())
    sys.argv = ["shoal", *sys.argv[2:]]
    runpy.run_module("shoal", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
