"""A table's sort key end to end (docs/storage.md, docs/sql.md): set by CREATE ... WITH or
ALTER TABLE ... SET TBLPROPERTIES, applied by every commit and by compaction, and what it buys:
a filter on the key's leading column reads only that value's blocks of a long extent."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidPropertyError, InvalidSchemaError, LocationNotAllowedError
from shoal.maintenance.compaction import compact_table

DAY0 = datetime(2026, 11, 2, tzinfo=UTC)
SERVICES = 50
MINUTES = 1440
BLOCK_ROWS = 1024


class InlineRunner:
    """The maintenance `TaskRunner` protocol in this process (Spark runs these in tasks)."""

    def map(self, fn, payloads, *, description=""):
        return [fn(p) for p in payloads]


@pytest.fixture
def db(tmp_path):
    client = shoal.connect(data_dir=str(tmp_path))
    yield client
    client.close()


def _day_rows(schema: pa.Schema) -> pa.Table:
    """One row per service per minute of a day, in arrival (time) order, services shuffled
    within each minute."""
    rng = np.random.default_rng(7)
    minute = np.repeat(np.arange(MINUTES, dtype=np.int64), SERVICES)
    service = np.concatenate([rng.permutation(SERVICES) for _ in range(MINUTES)])
    ts = int(DAY0.timestamp() * 1e9) + minute * 60_000_000_000 + service * 1_000_000
    return pa.table({
        "_timestamp": pa.array(ts, pa.timestamp("ns", tz="UTC")),
        "props": pa.nulls(len(ts), schema.field("props").type),
        "service": pa.array([f"s{i}" for i in service]),
        "x": pa.array(rng.random(len(ts))),
    }, schema=schema)


def _commit(db, table: str, rows: pa.Table, *, block_rows: int = BLOCK_ROWS) -> None:
    info = db.catalog.load_table(table)
    entry = db.coordinator.write_extent(info, rows.to_batches(max_chunksize=5000),
                                        block_rows=block_rows)
    db.coordinator.append(table, [entry])


def _extent_rows(db, table: str) -> list[pa.Table]:
    out = []
    for e in sorted(db.catalog.manifests(table), key=lambda e: e.extent_id):
        reader = db.formats[e.format].open_extent(db.store, e.object_path)
        out.append(pa.Table.from_batches(
            [reader.read_block(b) for b in range(reader.metadata().block_count)]))
    return out


def _is_sorted(rows: pa.Table, key: list[str]) -> bool:
    tuples = list(zip(*(rows[c].to_pylist() for c in key), strict=True))
    return tuples == sorted(tuples)


def _window_sql(table: str, service: str = "s7") -> str:
    lo = DAY0 + timedelta(hours=9)
    hi = lo + timedelta(minutes=15)
    return (f"SELECT count(*) AS n, avg(x) AS ax FROM {table} WHERE service = '{service}' "
            f"AND _timestamp BETWEEN TIMESTAMP '{lo:%Y-%m-%d %H:%M:%S}' "
            f"AND TIMESTAMP '{hi:%Y-%m-%d %H:%M:%S}'")


def _scan(result) -> dict:
    (scan,) = result.stats.scans
    return scan["stats"].to_json()


def test_one_service_fifteen_minutes_reads_only_that_services_blocks(db):
    db.sql("CREATE TABLE plain (service string, x double)")
    db.sql("CREATE TABLE keyed (service string, x double) "
           "WITH (sort_by = 'service, _timestamp')")
    rows = _day_rows(db.catalog.load_table("plain").schema.arrow())
    _commit(db, "plain", rows)
    _commit(db, "keyed", rows)
    (extent,) = db.catalog.manifests("keyed")
    blocks = extent.block_count
    assert blocks == -(-SERVICES * MINUTES // BLOCK_ROWS)        # one extent, 71 blocks
    ts = pa.compute.min_max(rows["_timestamp"].cast(pa.int64()))
    assert (extent.min_ts, extent.max_ts) == (ts["min"].as_py(), ts["max"].as_py())
    (written,) = _extent_rows(db, "keyed")
    assert _is_sorted(written, ["service", "_timestamp"])

    plain = db.sql(_window_sql("plain"), engine="local")
    keyed = db.sql(_window_sql("keyed"), engine="local")
    assert keyed.table["n"].to_pylist() == plain.table["n"].to_pylist() == [15]
    assert keyed.table["ax"][0].as_py() == pytest.approx(plain.table["ax"][0].as_py())
    stats = _scan(keyed)
    assert stats["blocks_considered"] == blocks
    assert stats["blocks_read"] <= 2                     # s7's 1,440 rows span 2 blocks

    # The service over the whole day: the unsorted table reads every block.
    whole = "SELECT count(*) AS n, sum(x) AS sx FROM {} WHERE service = 's7'"
    plain = db.sql(whole.format("plain"), engine="local")
    keyed = db.sql(whole.format("keyed"), engine="local")
    assert keyed.table["n"].to_pylist() == plain.table["n"].to_pylist() == [MINUTES]
    assert keyed.table["sx"][0].as_py() == pytest.approx(plain.table["sx"][0].as_py())
    assert _scan(plain)["blocks_read"] == blocks
    assert _scan(keyed)["blocks_read"] <= 3
    # both pay the same tail read (64 KiB) to open the extent
    assert _scan(keyed)["bytes_read"] * 5 < _scan(plain)["bytes_read"]


def test_group_commits_through_the_write_path_are_sorted(db):
    db.sql("CREATE TABLE logs (service string, n long) WITH (sort_by = 'service')")
    rng = np.random.default_rng(3)

    def send(k: int) -> None:
        lines = [json.dumps({"service": f"s{int(s)}", "n": k * 1000 + i,
                             "_timestamp": 1_700_000_000_000 + i})
                 for i, s in enumerate(rng.integers(0, 20, 300))]
        db.ingest_ndjson("logs", "\n".join(lines).encode())

    threads = [threading.Thread(target=send, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    extents = _extent_rows(db, "logs")
    assert sum(e.num_rows for e in extents) == 1200
    for rows in extents:
        assert _is_sorted(rows, ["service"])
        # rows equal on the key keep their arrival order (a stable sort)
        for s in set(rows["service"].to_pylist()):
            ns = [n for svc, n in zip(rows["service"].to_pylist(), rows["n"].to_pylist(),
                                      strict=True) if svc == s]
            by_request = {}
            for n in ns:
                by_request.setdefault(n // 1000, []).append(n)
            assert all(v == sorted(v) for v in by_request.values())


def test_alter_sets_the_key_later_commits_sort_and_compaction_sorts_old_extents(db):
    db.sql("CREATE TABLE ev (service string, x double)")
    rows = _day_rows(db.catalog.load_table("ev").schema.arrow()).slice(0, 6000)
    _commit(db, "ev", rows.slice(0, 3000))
    (before,) = _extent_rows(db, "ev")
    assert not _is_sorted(before, ["service", "_timestamp"])

    altered = db.sql("ALTER TABLE ev SET TBLPROPERTIES ('sort_by' = 'Service, _timestamp')")
    result = altered.table.to_pylist()[0]
    assert result["status"] == "altered"
    assert json.loads(result["properties"]) == {"sort_by": "service, _timestamp"}
    assert db.describe("ev")["properties"] == {"sort_by": "service, _timestamp"}
    again = db.sql("ALTER TABLE ev SET TBLPROPERTIES (sort_by = 'service, _timestamp')")
    assert again.table.to_pylist()[0]["status"] == "unchanged"

    _commit(db, "ev", rows.slice(3000))
    first, second = sorted(_extent_rows(db, "ev"), key=lambda t: t["_timestamp"][0].value)
    assert not _is_sorted(first, ["service", "_timestamp"])
    assert _is_sorted(second, ["service", "_timestamp"])
    answer = "SELECT service, count(*) AS n, sum(x) AS sx FROM ev GROUP BY service ORDER BY 1"
    expected = db.sql(answer).table.to_pylist()

    report = compact_table(db.catalog, db.coordinator, InlineRunner(), "ev",
                           storage_url=db.config.resolved_storage_url, s3_endpoint=None,
                           formats=db.formats)
    assert (report.extents_removed, report.extents_added) == (2, 1)
    (merged,) = _extent_rows(db, "ev")
    assert merged.num_rows == 6000
    assert _is_sorted(merged, ["service", "_timestamp"])
    got = db.sql(answer).table.to_pylist()
    assert [(r["service"], r["n"]) for r in got] == [(r["service"], r["n"]) for r in expected]
    assert [r["sx"] for r in got] == pytest.approx([r["sx"] for r in expected])

    unset = db.sql("ALTER TABLE ev UNSET TBLPROPERTIES ('sort_by')").table.to_pylist()[0]
    assert (unset["status"], json.loads(unset["properties"])) == ("altered", {})
    unset = db.sql("ALTER TABLE ev UNSET TBLPROPERTIES IF EXISTS ('sort_by')")
    assert unset.table.to_pylist()[0]["status"] == "unchanged"


@pytest.mark.parametrize(("key", "message"), [
    ("service, sevrice", 'sort key column "sevrice" is not a column of the table'),
    ("service, props", 'sort key column "props" is of type dynamic, which cannot be sorted'),
    ("blob", 'sort key column "blob" is of type bytes'),
    ("", "table property sort_by is empty"),
])
def test_bad_keys_are_refused_at_create_and_alter(db, key, message):
    with pytest.raises(InvalidSchemaError, match=message):
        db.sql(f"CREATE TABLE bad (service string, blob bytes) WITH (sort_by = '{key}')")
    assert "bad" not in {t["name"] for t in db.tables()}
    db.sql("CREATE TABLE good (service string, blob bytes) WITH (sort_by = 'service')")
    with pytest.raises(InvalidSchemaError, match=message):
        db.sql(f"ALTER TABLE good SET TBLPROPERTIES ('sort_by' = '{key}')")
    assert db.describe("good")["properties"] == {"sort_by": "service"}


def test_properties_of_an_existing_table_are_checked_as_at_create(db):
    db.sql("CREATE TABLE t (n long)")
    with pytest.raises(LocationNotAllowedError, match="filedrop_path '/etc' is outside"):
        db.sql("ALTER TABLE t SET TBLPROPERTIES ('filedrop_path' = '/etc')")
    with pytest.raises(InvalidSchemaError, match="expected a positive duration"):
        db.sql("ALTER TABLE t SET TBLPROPERTIES ('retention' = 'soon')")
    db.sql("ALTER TABLE t SET TBLPROPERTIES ('retention' = '7d', target_extent_size = '64MB')")
    assert db.describe("t")["properties"] == {"retention": "7d", "target_extent_size": "64MB"}
    assert db.describe("t")["retention"] == "7d"


def _block_rows(db, table: str) -> list[list[int]]:
    """Rows per block of each of the table's extents, in commit order."""
    out = []
    for m in sorted(db.catalog.manifests(table), key=lambda m: m.added_snapshot_id or 0):
        meta = db.formats[m.format].open_extent(db.store, m.object_path).metadata()
        out.append([b["rows"] for b in meta.block_stats])
    return out


def test_block_rows_cuts_the_tables_blocks_and_can_change(db):
    db.sql("CREATE TABLE small (service string, n long) "
           "WITH (sort_by = 'service', block_rows = 2048)")
    schema = db.catalog.load_table("small").schema.arrow()
    ts = int(DAY0.timestamp() * 1e9) + np.arange(10_000, dtype=np.int64) * 1_000_000_000
    rows = pa.table({"_timestamp": pa.array(ts, pa.timestamp("ns", tz="UTC")),
                     "props": pa.nulls(10_000, schema.field("props").type),
                     "service": [f"s{i % 7}" for i in range(10_000)],
                     "n": list(range(10_000))}, schema=schema)
    db.append("small", rows)
    db.sql("ALTER TABLE small SET TBLPROPERTIES ('block_rows' = '4096')")
    db.append("small", rows)
    assert _block_rows(db, "small") == [[2048] * 4 + [1808], [4096] * 2 + [1808]]
    assert db.describe("small")["properties"]["block_rows"] == 4096
    got = db.sql("SELECT count(*) AS c, sum(n) AS s FROM small WHERE service = 's3'",
                 engine="local").table.to_pylist()
    want = sum(n for n in range(10_000) if n % 7 == 3)
    assert got == [{"c": 2 * len(range(3, 10_000, 7)), "s": 2 * want}]
    db.sql("ALTER TABLE small UNSET TBLPROPERTIES ('block_rows')")
    db.append("small", rows)
    assert _block_rows(db, "small")[-1] == [10_000]


@pytest.mark.parametrize("value, message", [
    ("'many'", "is not a whole number of rows"),
    ("100", "must lie between 1,024 and 1,048,576"),
    ("'4194304'", "must lie between 1,024 and 1,048,576"),
])
def test_bad_block_rows_are_refused(db, value, message):
    with pytest.raises(InvalidPropertyError, match=message):
        db.sql(f"CREATE TABLE bad (n long) WITH (block_rows = {value})")
    db.sql("CREATE TABLE good (n long)")
    with pytest.raises(InvalidPropertyError, match=message):
        db.sql(f"ALTER TABLE good SET TBLPROPERTIES ('block_rows' = {value})")
    assert db.describe("good")["properties"] == {}
