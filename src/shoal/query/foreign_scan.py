"""One reference to a foreign table in a statement: the SQL sent to its source and the
answer in the shapes the engines read.

`plan_foreign_scan` runs while the statement is planned: it checks the source's host
against the allowed hosts again (a table created before the policy changed must not
connect), reads the source's columns and builds the SELECT — the reference's columns, the
pushed filter (`shoal.query.federation.pushdown`) and `LIMIT cap + 1`. EXPLAIN shows that
SELECT. `ForeignScan.read` runs it once per statement (both engines and a hand-off from one
to the other share the answer) and refuses an answer over the cap rather than cutting it,
since a cut input would change a join's answer.

The answer is shaped exactly as a shoal scan of the same columns (`to_spark_batch`): µs UTC
timestamps, `_timestamp_ns` from `_timestamp`. The table's `_timestamp` and `props` columns
(every shoal table has them) read as null. The embedded engine gets it as an Arrow view;
Spark as a DataFrame the driver builds from it (a local relation, which Spark broadcasts to
a join when it is small): the row cap bounds what the driver holds.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import pyarrow as pa

from shoal.catalog.base import TableInfo
from shoal.config import Config
from shoal.errors import ForeignRowCapError, QueryError
from shoal.locations import LocationPolicy
from shoal.query.federation.pushdown import pushed_filter
from shoal.query.federation.readers import read_source, source_columns
from shoal.query.federation.source import Family, Source, parse_source
from shoal.query.planner import TableRef
from shoal.query.scan_read import stored_columns, to_spark_batch
from shoal.types import Schema

log = logging.getLogger("shoal.query.federation")
ROWS_ALIAS = "__shoal_rows"


@dataclass
class ForeignScan:
    table: str
    alias: str
    source: Source
    schema: Schema
    columns: list[str]                      # the reference's columns (engine names)
    sql: str                                # the SELECT sent to the source
    pushed: list[str]                       # its WHERE conjuncts
    cap: int | None
    rows_fetched: int | None = None         # once read
    _answer: pa.Table | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read(self, timeout_s: float | None) -> pa.Table:
        """The answer as the engines read it (read once, then kept for the statement)."""
        with self._lock:
            if self._answer is None:
                raw = read_source(self.source, self.sql, timeout_s=timeout_s)
                self.rows_fetched = raw.num_rows
                log.info("foreign table %s: %d rows from %s", self.table, raw.num_rows,
                         self.source.masked)
                if self.cap is not None and raw.num_rows > self.cap:
                    raise ForeignRowCapError(self.table, self.cap)
                self._answer = self._shape(raw)
            return self._answer

    def _shape(self, raw: pa.Table) -> pa.Table:
        n = raw.num_rows
        stored = stored_columns(self.columns)
        arrays = []
        for name in stored:
            arrow_type = self.schema.column(name).type.arrow()
            if name in raw.column_names:
                col = raw.column(name)
                if pa.types.is_timestamp(col.type) and col.type.tz is None:
                    col = col.cast(pa.timestamp(col.type.unit, tz="UTC"))
                arrays.append(col.cast(arrow_type))
            else:
                arrays.append(pa.nulls(n, arrow_type))
        table = pa.Table.from_arrays(arrays, names=stored) if stored else pa.table(
            {"_timestamp": pa.nulls(n, self.schema.column("_timestamp").type.arrow())})
        batches = [to_spark_batch(b, self.schema, self.columns)
                   for b in table.combine_chunks().to_batches()] or [
            to_spark_batch(pa.RecordBatch.from_pylist([], schema=table.schema), self.schema,
                           self.columns)]
        return pa.Table.from_batches(batches)


def plan_foreign_scan(info: TableInfo, ref: TableRef, config: Config, *,
                      timeout_s: float | None) -> ForeignScan:
    """The scan of one reference to the foreign table `info` (connects to read the source's
    columns; never reads rows)."""
    if ref.version is not None or ref.timestamp is not None:
        raise QueryError(f"foreign table {info.name} reads its source live: it has no "
                         "VERSION AS OF / TIMESTAMP AS OF")
    LocationPolicy.from_config(config).check_properties(info.properties)
    source = parse_source(dict(info.properties), table=info.name)
    found = {c.name.lower(): (c.name, c.family)
             for c in source_columns(source, timeout_s=timeout_s, table=info.name)}
    columns: dict[str, tuple[str, Family]] = {}
    for col in info.schema.columns:
        if col.name in found:
            columns[col.name] = found[col.name]
    wanted = [c for c in stored_columns(ref.columns) if c in columns]
    missing = [c for c in stored_columns(ref.columns)
               if c not in columns and c not in ("_timestamp", "props")]
    if missing:
        raise QueryError(f"foreign table {info.name}: column {missing[0]} is no longer in "
                         f"{source.qualified} at the source")
    select = [f"{columns[c][1].select.format(source.quote_name(columns[c][0]))} AS "
              f"{source.quote_name(c)}" for c in wanted] or [
        f"1 AS {source.quote_name(ROWS_ALIAS)}"]
    pushed = pushed_filter(ref.conjuncts, source=source, alias=ref.alias, sole=ref.sole,
                           columns=columns)
    cap = config.query_max_rows
    sql = f"SELECT {', '.join(select)} FROM {source.from_clause}"
    if pushed:
        sql += " WHERE " + " AND ".join(pushed)
    if cap is not None:
        sql += f" LIMIT {cap + 1}"
    return ForeignScan(info.name, ref.alias, source, info.schema, list(ref.columns), sql,
                       pushed, cap)
