"""The Spark Python DataSource `shoal` (docs/architecture.md): reads planned extent blocks as Arrow.

Two ways in:

- `option("scan", ScanSpec.to_json())` — what the planner does for every table reference:
  the extents and blocks that survived stages 1 and 2, the columns to produce, the
  partitions. Nothing is planned here.
- `option("table", name)` with `catalog_url` / `storage_url` (and optionally `s3_endpoint`,
  `version` = a snapshot id, or `timestamp` = the latest snapshot at or before an RFC 3339
  time): a plain full scan for DataFrame users, planned here on the driver.

Each block is read by `shoal.query.scan_read.read_tasks`, the same reader the embedded engine
uses: only the spec's columns, upgraded to the version being read, shaped into what Spark's
Arrow path accepts (timestamps in µs, `_timestamp_ns` as a BIGINT, vectors as
`list<float>`, `dynamic` as JSON text). Spark applies every filter itself afterwards
(stage 3).

Bytes read by the executors come back to the driver through a Spark accumulator passed in
the `bytes_accumulator` option (pickled), so every answer can report what it really read.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DoubleType,
                               FloatType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from shoal.query.scan_plan import TIMESTAMP_NS, ScanSpec, ScanTask, resolve_snapshot
from shoal.query.scan_read import read_tasks
from shoal.query.scan_shape import to_spark_batch
from shoal.types.columns import ColumnType
from shoal.types.schema import Schema

__all__ = ["ShoalDataSource", "encode_accumulator", "resolve_snapshot", "spark_schema",
           "spark_type", "to_spark_batch"]

def spark_type(ctype: ColumnType) -> DataType:
    kind = ctype.kind
    if kind == "vector":
        return ArrayType(FloatType(), containsNull=True)
    if kind == "headers":
        return ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))
    return {"bool": BooleanType(), "int": IntegerType(), "long": LongType(),
            "real": DoubleType(), "string": StringType(), "timestamp": TimestampType(),
            "dynamic": StringType(), "bytes": BinaryType()}[kind]


def spark_schema(schema: Schema, columns: list[str]) -> StructType:
    fields = []
    for name in columns:
        if name == TIMESTAMP_NS:
            fields.append(StructField(name, LongType()))
        else:
            fields.append(StructField(name, spark_type(schema.column(name).type)))
    return StructType(fields)


def encode_accumulator(acc: Any) -> str:
    return base64.b64encode(pickle.dumps(acc)).decode()


class ShoalDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "shoal"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._spec: ScanSpec | None = None

    def spec(self) -> ScanSpec:
        if self._spec is None:
            if "scan" in self.options:
                self._spec = ScanSpec.from_json(self.options["scan"])
            elif "table" in self.options:
                self._spec = _plan_full_scan(dict(self.options))
            else:
                raise ValueError('the shoal data source needs option "table" (or "scan")')
        return self._spec

    def schema(self) -> StructType:
        spec = self.spec()
        return spark_schema(spec.read_schema(), spec.columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        acc = self.options.get("bytes_accumulator")
        return ShoalScanReader(self.spec(),
                               pickle.loads(base64.b64decode(acc)) if acc else None)


class ShoalScanReader(DataSourceReader):
    def __init__(self, spec: ScanSpec, bytes_accumulator: Any = None) -> None:
        self.spec = spec
        self.bytes_accumulator = bytes_accumulator

    def partitions(self) -> list[InputPartition]:
        parts = self.spec.partitions or [[]]
        return [InputPartition(p) for p in parts]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from shoal.format import default_formats
        from shoal.storage import open_store

        tasks: list[ScanTask] = partition.value
        if not tasks:
            return
        store = open_store(self.spec.storage_url, s3_endpoint=self.spec.s3_endpoint)
        acc = self.bytes_accumulator
        yield from read_tasks(self.spec, tasks, store, default_formats(),
                              None if acc is None else acc.add)


def _plan_full_scan(options: dict[str, str]) -> ScanSpec:
    """Plan an unfiltered scan from options (the DataFrame path; runs on the driver)."""
    from shoal.catalog import open_catalog
    from shoal.format import default_formats
    from shoal.query.scan_plan import FooterCache, build_scan_spec
    from shoal.storage import open_store

    table = options["table"]
    try:
        catalog_url, storage_url = options["catalog_url"], options["storage_url"]
    except KeyError as e:
        raise ValueError(f'the shoal data source needs option "{e.args[0]}"') from None
    endpoint = options.get("s3_endpoint") or None
    catalog = open_catalog(catalog_url)
    try:
        snapshot_id = resolve_snapshot(catalog, table, options.get("version"),
                                       options.get("timestamp"))
        spec, _ = build_scan_spec(
            catalog, open_store(storage_url, s3_endpoint=endpoint), default_formats(),
            FooterCache(), table, predicate=None, columns=None, snapshot_id=snapshot_id,
            storage_url=storage_url, s3_endpoint=endpoint,
            parallelism=int(options.get("parallelism", "8")))
        return spec
    finally:
        catalog.close()
