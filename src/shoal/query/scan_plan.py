"""One planned scan of one table reference, as Spark's DataSource receives it.

The planner runs stage 1 (catalog) and stage 2 (block stats) for each table reference of a
statement and writes the outcome as a `ScanSpec`: which extents, which of their blocks,
which columns in which Spark types, grouped into Spark partitions. The spec travels to the
DataSource as one JSON option, so every table reference is its own fresh `load()` with its
own plan — never the shared pushed-filter state that gives wrong answers on self-joins.

An extent written before a column was renamed or dropped stores the names of its own schema
version: its task carries where the columns of the version read are in it (`ScanTask.stored`,
from `shoal.types.schema.stored_names`), and stage 2 looks its block stats up under those
names (`shoal.format.predicates.rename_columns`), never under a dropped column's.

Stage 2 needs each candidate extent's block stats, and for an equality on a column with
per-block membership filters those filters (`shoal.format.blockfilters`). Extents are
immutable, so both are cached per process (`FooterCache`; the filters bounded by bytes): a
warm needle query touches no extent it will not read, and reads one block of a big one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from shoal.catalog.base import Catalog, ManifestEntry
from shoal.format.base import BlockPredicate, SegmentFormat
from shoal.format.blockfilters import BlockFilter, prune_blocks
from shoal.format.predicates import rename_columns
from shoal.lru import MISSING, Lru
from shoal.storage.base import ObjectStore
from shoal.types.schema import TIMESTAMP_NS_COLUMN, Schema, stored_names

StoredNames = dict[int, dict[str, str | None]]   # by schema version written

@dataclass
class ScanStats:
    """What one table reference's scan considered, pruned and read (its stats)."""

    extents_considered: int = 0
    extents_pruned: int = 0
    extents_read: int = 0
    blocks_considered: int = 0
    blocks_pruned: int = 0
    blocks_read: int = 0
    bytes_read: int = 0

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


# A virtual column: `_timestamp` in integer nanoseconds (Spark's timestamps stop at µs).
# Reserved in the types layer, so no table can have a real column of this name.
TIMESTAMP_NS = TIMESTAMP_NS_COLUMN


@dataclass(frozen=True)
class ScanTask:
    """One extent's share of a scan: its surviving blocks (None = every block) and the
    bytes they take in the extent (its size times the share of its blocks: an upper bound
    of what reading them fetches, since a projection reads fewer)."""

    path: str
    format: str
    blocks: list[int] | None
    rows: int
    planned_bytes: int = 0
    stored: dict[str, str | None] | None = None   # read name -> name in the extent (renamed
                                                  # or dropped since it was written)


@dataclass
class ScanSpec:
    table: str
    snapshot_id: int
    storage_url: str
    s3_endpoint: str | None
    schema: dict[str, Any]              # Schema.to_json() of the version read
    columns: list[str]                  # output columns, in order (may hold TIMESTAMP_NS)
    partitions: list[list[ScanTask]] = field(default_factory=list)
    stats_token: str | None = None      # where readers report bytes read (see datasource)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ScanSpec:
        doc = json.loads(text)
        doc["partitions"] = [[ScanTask(**t) for t in part] for part in doc["partitions"]]
        return cls(**doc)

    def read_schema(self) -> Schema:
        return Schema.from_json(self.schema)

    def tasks(self) -> list[ScanTask]:
        return [t for part in self.partitions for t in part]

    @property
    def planned_bytes(self) -> int:
        return sum(t.planned_bytes for t in self.tasks())

    @property
    def projected_bytes(self) -> int:
        """An estimate of the stored bytes reading the spec's columns fetches: the planned
        bytes times the columns' share of a row (`column_share`)."""
        return round(self.planned_bytes * column_share(self.read_schema(), self.columns))

    @property
    def planned_rows(self) -> int:
        return sum(t.rows for t in self.tasks())

    def repartitioned(self, parallelism: int) -> ScanSpec:
        return replace(self, partitions=partition_tasks(self.tasks(), parallelism))


# Rough stored bytes of one value, by column kind. The format keeps no per-column sizes (an
# extent records its whole size; a block its rows and min/max), so what a projection reads is
# estimated from its columns' share of a row, weighed by these. Text and JSON weigh most:
# in the logs measured they were most of an extent.
KIND_WEIGHTS = {"bool": 1, "int": 4, "long": 8, "real": 8, "timestamp": 8, "string": 24,
                "dynamic": 48, "bytes": 32, "vector": 64, "headers": 32}


def column_share(schema: Schema, columns: Sequence[str]) -> float:
    """The estimated share of a row's stored bytes that `columns` of `schema` take (0..1);
    `_timestamp_ns` is read from `_timestamp`."""
    weights = {c.name: KIND_WEIGHTS.get(c.type.kind, 16) for c in schema.columns}
    wanted = {"_timestamp" if c == TIMESTAMP_NS else c for c in columns} & weights.keys()
    total = sum(weights.values())
    return sum(weights[c] for c in wanted) / total if total else 1.0


@dataclass(frozen=True)
class Footer:
    block_stats: list[dict[str, Any]] | None
    block_count: int
    row_count: int


DEFAULT_FILTER_CACHE_BYTES = 64 * 2**20


class FooterCache:
    """Block stats of extents by object path (extents never change), least recently used
    out first; beside them (`filters`) decoded block filters by (path, column), bounded by
    `filter_bytes`."""

    def __init__(self, capacity: int = 50_000, *,
                 filter_bytes: int = DEFAULT_FILTER_CACHE_BYTES) -> None:
        self.capacity = capacity
        self._items = Lru(capacity)                 # weight 1 each: bounded by count
        self.filters = Lru(filter_bytes)

    def get(self, path: str) -> Footer | None:
        footer = self._items.get(path)
        return None if footer is MISSING else footer

    def put(self, path: str, footer: Footer) -> None:
        self._items.put(path, footer, 1)


def _block_filters(store: ObjectStore, fmt: SegmentFormat, cache: FooterCache,
                   path: str, footer: Footer, column: str, stats: ScanStats
                   ) -> list[BlockFilter | None] | None:
    """One column's block filters of one extent, through the cache (bytes read count into
    `stats` on a miss)."""
    key = (path, column)
    found = cache.filters.get(key)
    if found is not MISSING:
        return found
    assert footer.block_stats is not None
    filters, nbytes = fmt.read_block_filters(store, path, footer.block_stats, column)
    stats.bytes_read += nbytes
    size = 64 + sum(96 + (f[1].m + 7) // 8 for f in filters or () if f is not None)
    cache.filters.put(key, filters, size)
    return filters


def _load_footer(store: ObjectStore, fmt: SegmentFormat, path: str) -> tuple[Footer, int]:
    reader = fmt.open_extent(store, path)
    try:
        meta = reader.metadata()
        return Footer(meta.block_stats, meta.block_count, meta.row_count), reader.bytes_read
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()


def stage2(entries: Sequence[ManifestEntry], predicate: BlockPredicate | None,
           store: ObjectStore, formats: dict[str, SegmentFormat], cache: FooterCache,
           stats: ScanStats, stored: StoredNames | None = None) -> list[ScanTask]:
    """Blocks of each extent that may match (pruning stage 2); counts into `stats`.
    `stored`: where the columns read are in extents of older schema versions (see
    `stored_by_version`)."""
    stored = stored or {}
    if predicate is None:           # nothing to decide: read every block, skip the footers
        stats.blocks_considered += sum(e.block_count for e in entries)
        return [ScanTask(e.object_path, e.format, None, e.row_count, e.byte_size,
                         stored.get(e.schema_version))
                for e in entries]
    missing = [e for e in entries if cache.get(e.object_path) is None]
    if missing:
        def load(e: ManifestEntry) -> tuple[str, Footer, int]:
            footer, nbytes = _load_footer(store, formats[e.format], e.object_path)
            return e.object_path, footer, nbytes
        if len(missing) > 4:
            with ThreadPoolExecutor(8) as pool:
                loaded = list(pool.map(load, missing))
        else:
            loaded = [load(e) for e in missing]
        for path, footer, nbytes in loaded:
            cache.put(path, footer)
            stats.bytes_read += nbytes
    tasks: list[ScanTask] = []
    for e in entries:
        footer = cache.get(e.object_path) or _load_footer(store, formats[e.format],
                                                          e.object_path)[0]
        stats.blocks_considered += footer.block_count
        if footer.block_stats is None:
            blocks = list(range(footer.block_count))
            rows = footer.row_count
        else:
            names = stored.get(e.schema_version)
            blocks = prune_blocks(
                rename_columns(predicate, names) if names else predicate, footer.block_stats,
                functools.partial(
                _block_filters, store, formats[e.format], cache, e.object_path, footer,
                stats=stats))
            rows = sum(footer.block_stats[i]["rows"] for i in blocks)
        stats.blocks_pruned += footer.block_count - len(blocks)
        if blocks:
            share = len(blocks) / max(1, footer.block_count)
            tasks.append(ScanTask(e.object_path, e.format,
                                  None if len(blocks) == footer.block_count else blocks, rows,
                                  round(e.byte_size * share), stored.get(e.schema_version)))
        else:
            stats.extents_pruned += 1
    return tasks


def stored_by_version(catalog: Catalog, table: str, read: Schema,
                      entries: Sequence[ManifestEntry]) -> StoredNames:
    """For each schema version of `entries` written before `read`'s last rename or drop, the
    stored names of `read`'s columns that differ (`stored_names`); the schema history is
    asked for only when some extent is that old."""
    old = {e.schema_version for e in entries if e.schema_version < read.reshaped}
    if not old:
        return {}
    history = {s.version: s for s in catalog.schema_history(table)}
    out: StoredNames = {}
    for v in old:
        names = stored_names(read, history[v])
        if names:
            out[v] = names
    return out


def partition_tasks(tasks: Sequence[ScanTask], parallelism: int) -> list[list[ScanTask]]:
    """Spread tasks over at most `parallelism` partitions, balanced by rows (largest first
    into the lightest partition); an extent's blocks stay together."""
    n = max(1, min(parallelism, len(tasks)))
    parts: list[list[ScanTask]] = [[] for _ in range(n)]
    load = [0] * n
    for t in sorted(tasks, key=lambda t: -t.rows):
        i = load.index(min(load))
        parts[i].append(t)
        load[i] += max(t.rows, 1)
    return parts


def build_scan_spec(catalog: Catalog, store: ObjectStore, formats: dict[str, SegmentFormat],
                    cache: FooterCache, table: str, *, predicate: BlockPredicate | None,
                    columns: Sequence[str] | None, snapshot_id: int | None,
                    storage_url: str, s3_endpoint: str | None, parallelism: int,
                    prune: bool = True) -> tuple[ScanSpec, ScanStats]:
    """Run stages 1 and 2 for one table reference and describe what Spark must read."""
    pushed = predicate if prune else None
    plan = catalog.plan_extents(table, pushed, snapshot_id=snapshot_id)
    snap = catalog.snapshot(table, plan.snapshot_id)
    schema = catalog.schema_version(table, snap.schema_version)
    stats = ScanStats(extents_considered=plan.considered, extents_pruned=plan.pruned)
    tasks = stage2(plan.entries, pushed, store, formats, cache, stats,
                   stored_by_version(catalog, table, schema, plan.entries))
    stats.extents_read = len(tasks)
    stats.blocks_read = stats.blocks_considered - stats.blocks_pruned
    wanted = list(columns) if columns is not None else schema.names
    spec = ScanSpec(table=table, snapshot_id=plan.snapshot_id, storage_url=storage_url,
                    s3_endpoint=s3_endpoint, schema=schema.to_json(), columns=wanted,
                    partitions=partition_tasks(tasks, parallelism))
    return spec, stats


def resolve_snapshot(catalog: Any, table: str, version: str | int | None,
                     timestamp: str | datetime | None) -> int | None:
    """The snapshot id for `VERSION AS OF` / `TIMESTAMP AS OF` (None = current)."""
    from shoal.errors import QueryError

    if version is not None and str(version) != "":
        try:
            sid = int(version)
        except ValueError:
            raise QueryError(f"VERSION AS OF needs a snapshot id (an integer), "
                             f"got {version!r}") from None
        catalog.snapshot(table, sid)            # raises SnapshotNotFoundError
        return sid
    if timestamp is not None and str(timestamp) != "":
        when = timestamp if isinstance(timestamp, datetime) else _parse_time(str(timestamp))
        cutoff = when.timestamp()
        older = [s for s in catalog.snapshots(table) if s.created_at <= cutoff]
        if not older:
            raise QueryError(f'table "{table}" has no snapshot at or before '
                             f"{when.isoformat()}")
        return max(older, key=lambda s: s.snapshot_id).snapshot_id
    return None


def _parse_time(text: str) -> datetime:

    from shoal.errors import QueryError

    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise QueryError(f"TIMESTAMP AS OF needs an RFC 3339 time, got {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
