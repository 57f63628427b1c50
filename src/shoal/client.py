"""The embedded Python client: one object wiring catalog, object store and formats.

    import shoal
    db = shoal.connect(data_dir="./shoal-data")   # or catalog_url=..., storage_url=...
    db.create_table("logs", [shoal.Column("service", shoal.STRING)])
    db.append("logs", pyarrow_table)
    table, stats = db.read("logs", Equals("service", "api"))

Everything a process needs is opened once here from a `Config`; nothing below reads the
environment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, overload

import pyarrow as pa

from shoal.catalog import open_catalog
from shoal.catalog.base import Catalog, ManifestEntry, Snapshot, TableInfo
from shoal.catalog.describe import describe_table
from shoal.config import Config, load_config
from shoal.format import default_formats
from shoal.format.base import BlockPredicate
from shoal.commit import CommitCoordinator, CommitOutcome
from shoal.ingest.write_path import IngestAck, WritePath
from shoal.storage import ObjectStore, open_store
from shoal.types import Column, ColumnType, Schema, SchemaMode
from shoal.types.conventions import normalize as normalize_conventions
from shoal.types.sortkey import (BLOCK_ROWS, SORT_BY, format_sort_key, parse_block_rows,
                                 parse_sort_key)

if TYPE_CHECKING:
    from shoal.remote import RemoteShoal

# Imported where used, to keep `shoal ingest`'s start-up to what ingest needs:
# shoal.bindings' checkers, shoal.locations,
# shoal.maintenance.policy (table properties), shoal.query (reads).


class Shoal:
    def __init__(self, config: Config, *, create: bool = True) -> None:
        """Open shoal on `config`; its data directory is made if missing, or with
        `create=False` must exist (`DataDirNotFoundError`)."""
        if not config.spark_master.strip().startswith("local"):
            # A cluster master: refuse, before anything is created on this machine, what
            # executors elsewhere could not use (imported only then: `shoal ingest` start-up).
            from shoal.query.spark.cluster import check_deployment

            check_deployment(config)
        self.config = config
        if create:
            config.ensure_data_dir()
        else:
            config.require_data_dir()
        self.catalog: Catalog = open_catalog(config.resolved_catalog_url)
        self.store: ObjectStore = open_store(config.resolved_storage_url,
                                             s3_endpoint=config.s3_endpoint)
        self.formats = default_formats(shred_on_write=self.config.shred_on_write)
        self.coordinator = CommitCoordinator(self.catalog, self.store, self.formats["tlm"])
        self._write_path: WritePath | None = None
        self._query_engine = None
        self._promql: Any = None
        self._table_listeners: list[Callable[[], None]] = []

    @property
    def write_path(self) -> WritePath:
        """The shared write path (staging buffer threads start on first use)."""
        if self._write_path is None:
            self._write_path = WritePath(self.catalog, self.coordinator)
        return self._write_path

    def ingest_ndjson(self, name: str, body: bytes, **options: Any) -> IngestAck:
        """NDJSON through the shared write path (see `WritePath.ingest_ndjson`)."""
        return self.write_path.ingest_ndjson(name, body, **options)

    def ingest_arrow(self, name: str, data: pa.Table | pa.RecordBatch,
                     **options: Any) -> IngestAck:
        """Arrow rows through the shared write path (see `WritePath.ingest_arrow`)."""
        return self.write_path.ingest_arrow(name, data, **options)

    # tables
    def create_table(self, name: str, columns: Sequence[Column], *,
                     mode: SchemaMode = "evolve",
                     properties: dict[str, Any] | None = None) -> TableInfo:
        """Create a table; properties that bind a path or host must lie inside the allowed
        locations (`shoal.locations`), and maintenance properties (`retention`,
        `target_extent_size`, ...) must parse, so a typo fails here and not in every later
        maintenance run. A table bound to a source (`shoal.bindings`: scrape targets, ...) has its
        binding checked and the layout it imposes as its columns."""
        if properties:
            from shoal.bindings import check_bound
            from shoal.locations import LocationPolicy
            from shoal.maintenance.policy import TablePolicy

            locations = LocationPolicy.from_config(self.config)
            columns = check_bound(name, properties, columns,   # its form first, then hosts
                                  locations=locations)
            locations.check_properties(properties)
            TablePolicy.from_properties(properties)
        schema = Schema.create(columns)
        if properties and properties.get(SORT_BY) is not None:
            properties = {**properties, SORT_BY: format_sort_key(
                parse_sort_key(properties[SORT_BY], schema, table=name))}
        if properties and properties.get(BLOCK_ROWS) is not None:
            properties = {**properties, BLOCK_ROWS: parse_block_rows(properties[BLOCK_ROWS])}
        if properties:
            properties = normalize_conventions(properties)
        info = self.catalog.create_table(name, schema, mode=mode, properties=properties)
        self._tables_changed()
        return info

    def add_columns(self, name: str, columns: Sequence[Column]) -> TableInfo:
        return self.coordinator.evolve_schema(name, columns)

    def rename_column(self, name: str, old: str, new: str) -> TableInfo:
        """Rename column `old` to `new` as a new schema version; rows written before read
        under the new name. A sort key naming the column follows the rename."""
        info = self.coordinator.change_schema(
            name, lambda s: s.rename_column(old, new, table=name))
        key = info.properties.get(SORT_BY)
        names = [c.strip() for c in key.split(",")] if isinstance(key, str) else []
        if old != new and old in names:
            info = self.catalog.set_properties(name, {SORT_BY: format_sort_key(
                [new if c == old else c for c in names])})
        return info

    def drop_column(self, name: str, column: str) -> TableInfo:
        """Drop `column` as a new schema version: it is gone from every read, old rows
        included; its name is free for a new column. A column in the sort key cannot be
        dropped (change or unset `sort_by` first)."""
        info = self.catalog.load_table(name)
        key = info.properties.get(SORT_BY)
        if isinstance(key, str) and column in info.schema and column in [
                c.strip() for c in key.split(",")]:
            from shoal.errors import IncompatibleSchemaChangeError

            raise IncompatibleSchemaChangeError(
                name, column, "in the sort key", "dropped",
                f"sort_by is '{key}': change or unset sort_by first")
        return self.coordinator.change_schema(name, lambda s: s.drop_column(column, table=name))

    def alter_column_type(self, name: str, column: str, new_type: ColumnType) -> TableInfo:
        """Widen `column` to `new_type` (only widenings: int -> long, ... -> string)."""
        return self.coordinator.change_schema(
            name, lambda s: s.alter_column_type(column, new_type, table=name))

    def set_properties(self, name: str, properties: dict[str, Any]) -> TableInfo:
        """Change properties (and `mode`) of an existing table; a None value unsets one.
        Every property may change; the result is checked as `create_table` checks it
        (`shoal.lifecycle.set_properties`)."""
        from shoal.lifecycle import set_properties

        info = set_properties(self, name, properties)
        self._tables_changed()
        return info

    def drop_table(self, name: str, *, if_exists: bool = False) -> bool:
        """Drop a table (`shoal.lifecycle`); False if it was absent and `if_exists`."""
        from shoal.lifecycle import drop_table

        dropped = drop_table(self, name, if_exists=if_exists)
        self._tables_changed()
        return dropped

    def undrop_table(self, name: str) -> TableInfo:
        from shoal.lifecycle import undrop_table

        info = undrop_table(self, name)
        self._tables_changed()
        return info

    def rename_table(self, name: str, new_name: str) -> TableInfo:
        from shoal.lifecycle import rename_table

        info = rename_table(self, name, new_name)
        self._tables_changed()
        return info

    def on_tables_changed(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every create, drop, undrop, rename or property change made
        through this client (the server wakes its pipeline supervisor this way)."""
        self._table_listeners.append(listener)

    def _tables_changed(self) -> None:
        for listener in list(self._table_listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - a listener's failure must not fail the DDL
                logging.getLogger("shoal.tables").warning(
                    "a table-change listener failed", exc_info=True)

    def describe(self, name: str) -> dict[str, Any]:
        return describe_table(self.catalog, name)

    def tables(self) -> list[dict[str, Any]]:
        return [describe_table(self.catalog, t.name) for t in self.catalog.list_tables()]

    # data
    @property
    def stage_rewrite(self) -> Callable[..., ManifestEntry]:
        """See `shoal.query.database.Database.stage_rewrite`."""
        from shoal.commit import stage_rewrite

        return stage_rewrite

    def replace_extents(self, name: str,
                        changes: Sequence[tuple[ManifestEntry, ManifestEntry | None, int]], *,
                        operation: str, summary: dict[str, Any],
                        on_stage: Callable[..., None] | None = None) -> Snapshot | None:
        """A delete's commit (`shoal.query.delete`): `swap_extents`, all or none."""
        from shoal.commit import Replacement, swap_extents

        coordinator = self.coordinator if on_stage is None else CommitCoordinator(
            self.catalog, self.store, self.coordinator.format, on_stage=on_stage)
        outcome = swap_extents(coordinator, name,
                               [Replacement([old], new, dropped) for old, new, dropped in changes],
                               operation=operation, all_or_none=True, summary=summary)
        return outcome.snapshot

    def append(self, name: str, data: pa.Table | Iterable[pa.RecordBatch]) -> CommitOutcome:
        """Append Arrow data already shaped to the table's current schema."""
        batches = data.to_batches() if isinstance(data, pa.Table) else data
        return self.coordinator.append_batches(name, batches)

    def read(self, name: str, predicate: BlockPredicate | None = None, *,
             snapshot_id: int | None = None, columns: Sequence[str] | None = None,
             prune: bool = True):
        """(pyarrow.Table, ScanStats) of the blocks that may match `predicate`.

        Pruning only skips: the caller still filters rows by the predicate. The scan is
        planned and read as a `sql()` reference to the table is (same stages, same stats).
        """
        return self.query_engine.read(name, predicate, snapshot_id=snapshot_id,
                                      columns=columns, prune=prune)

    # queries: DDL here; SELECTs planned, then run by the embedded engine or Spark
    @property
    def query_engine(self):
        """The query engine (its Spark session starts on the first query)."""
        if self._query_engine is None:
            from shoal.query.engine import QueryEngine

            self._query_engine = QueryEngine(self)
        return self._query_engine

    def sql(self, statement: str, *, prune: bool = True, engine: str | None = None):
        """Run one statement: a `QueryResult` with `.table` (pyarrow) and `.stats`.
        `engine`: auto | local | spark (None = `config.query_engine`)."""
        return self.query_engine.execute(statement, prune=prune, engine=engine)

    def kql(self, query: str, *, prune: bool = True, engine: str | None = None):
        """Run one KQL query (`shoal.frontends.kusto.kql`): a `QueryResult` as `sql` gives,
        plus the SQL it ran as (`translated_sql`) and its `render` hint."""
        return self.query_engine.execute_kql(query, prune=prune, engine=engine)

    def query(self, statement: str, *, prune: bool = True,
              engine: str | None = None) -> pa.Table:
        """The answer of one statement as a pyarrow Table."""
        return self.sql(statement, prune=prune, engine=engine).table

    def promql(self, expr: str, *, time: float | None = None, start: float | None = None,
               end: float | None = None, step: float | None = None):
        """A PromQL query over the Prometheus-layout tables
        (`shoal.frontends.prometheus.promql`, the "promql" of `shoal.languages`): an instant
        query at `time` (unix seconds; default now), or with `start`, `end` and `step`
        (seconds) a range query. A `PromResult`: `.data()` is the `data` of
        Prometheus's API answer."""
        import time as clock

        from shoal.languages import language

        if self._promql is None:
            promql_for = language("promql").promql_for
            self._promql = promql_for(self.query_engine, self.config,
                                      lookback_ms=round(self.config.promql_lookback_s * 1000),
                                      max_samples=self.config.promql_max_samples)
        if start is None and end is None and step is None:
            at = clock.time() if time is None else time
            return self._promql.instant(expr, round(at * 1000))
        if start is None or end is None or step is None or time is not None:
            raise ValueError("a range query takes start, end and step (and no time)")
        return self._promql.range(expr, round(start * 1000), round(end * 1000),
                                  round(step * 1000))

    def spark_sql(self, statement: str, *, prune: bool = True):
        """A SELECT as a Spark DataFrame (each table reference planned and pruned now)."""
        return self.query_engine.dataframe(statement, prune=prune)[0]

    def spark_table(self, name: str, *, version: int | None = None):
        """A whole table (or one snapshot of it) as a Spark DataFrame."""
        reader = (self.query_engine.spark.read.format("shoal").option("table", name)
                  .option("catalog_url", self.config.resolved_catalog_url)
                  .option("storage_url", self.config.resolved_storage_url))
        if self.config.s3_endpoint:
            reader = reader.option("s3_endpoint", self.config.s3_endpoint)
        if version is not None:
            reader = reader.option("version", str(version))
        return reader.load()

    def close(self) -> None:
        if self._write_path is not None:
            self._write_path.close()
        if self._query_engine is not None:
            self._query_engine.close()
        self.catalog.close()


@overload
def connect(config: Config | None = None, *, url: None = None, **settings: Any) -> Shoal: ...


@overload
def connect(config: None = None, *, url: str, token: str | None = None,
            **options: Any) -> RemoteShoal: ...


def connect(config: Config | None = None, *, url: str | None = None,
            token: str | None = None, **settings: Any) -> Shoal | RemoteShoal:
    """Open shoal from a Config, or from settings layered over file/env defaults.

    With `url`, a client of the server there instead (`shoal.remote.RemoteShoal`: the same
    `sql`, `kql`, `query`, `promql`, `ingest_ndjson`, `tables`, `describe` and answers, run
    by the server); `token` defaults to the configured one (`SHOAL_TOKEN`)."""
    if url is not None:
        from shoal.remote import connect_remote

        if config is not None:
            raise ValueError("connect takes a config or a url, not both")
        return connect_remote(url, token, **settings)
    return Shoal(config or load_config(**settings))
