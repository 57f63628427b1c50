"""Where maintenance tasks run: Spark tasks, one per payload (bulk work runs on Spark).

A `TaskRunner` maps a module-level function over picklable payloads and returns the results
in payload order. `SparkTaskRunner` runs each payload as one Spark task
(`parallelize(payloads, len(payloads)).map(fn).collect()`), so compaction scales with the
cluster; tasks talk to the object store only, never to the catalog: the driver commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

P = TypeVar("P")
R = TypeVar("R")


class TaskRunner(Protocol):
    def map(self, fn: Callable[[Any], Any], payloads: Sequence[Any], *,
            description: str = "") -> list[Any]: ...


class SparkTaskRunner:
    """Runs each payload as one task of a Spark job on `spark` (any master)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def map(self, fn: Callable[[Any], Any], payloads: Sequence[Any], *,
            description: str = "") -> list[Any]:
        if not payloads:
            return []
        sc = self.spark.sparkContext
        if description:
            sc.setJobDescription(description)
        try:
            return sc.parallelize(list(payloads), len(payloads)).map(fn).collect()
        finally:
            if description:
                sc.setJobDescription(None)  # type: ignore[arg-type]
