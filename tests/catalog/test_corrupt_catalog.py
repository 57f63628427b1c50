"""Corrupt catalog data raises `CatalogCorruptError` naming the catalog table and the row.

Rows are damaged behind the catalog's back with the sqlite3 module (as a disk fault or a
hand edit would), then read through the catalog API: the error is a `ShoalError` (500 at the
HTTP edge), its cause the decoding failure."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from shoal.catalog import open_catalog
from shoal.catalog.base import LedgerEntry, ManifestEntry
from shoal.errors import CatalogCorruptError, ShoalError
from shoal.format.base import Equals
from shoal.format.membership import BloomFilter
from shoal.http.errors import status_for
from shoal.types import INT, STRING, Column, Schema

SCHEMA = Schema.create([Column("service", STRING), Column("status", INT)])
BAD_JSON = "{not json"
BAD_SCHEMA = json.dumps({"columns": [{"name": "a", "type": "no-such-type"}], "version": 1})


@pytest.fixture
def setup(sqlite_catalog_url):
    """A table "logs" with one appended extent (stats, a membership filter), one ledger key
    and one work unit; the sqlite3 connection to damage them with."""
    catalog = open_catalog(sqlite_catalog_url)
    catalog.create_table("logs", SCHEMA)
    eid = uuid.uuid4().hex
    bloom = BloomFilter.build([f"svc-{i}" for i in range(2000)]).to_bytes()
    catalog.commit("logs", expected_snapshot_id=1, operation="append",
                   commit_id=uuid.uuid4().hex, summary={"rows": 5},
                   add=[ManifestEntry(extent_id=eid, object_path=f"tables/t/{eid}.tlm",
                                      byte_size=1, row_count=5, block_count=1, min_ts=0,
                                      max_ts=10, schema_version=1,
                                      column_stats={"status": {"distinct": [1]}},
                                      membership_filters={"service": bloom})],
                   ledger=[LedgerEntry("req-1", {"rows": 5})])
    unit = catalog.enqueue_work("compact", table="logs", payload={"table": "logs"})
    db = sqlite3.connect(sqlite_catalog_url.removeprefix("sqlite:///"))
    yield catalog, db, eid, unit.id
    db.close()
    catalog.close()


CASES: list[tuple[str, str, str, Callable[[Any], Any], str]] = [
    ("tables.properties", "UPDATE tables SET properties = ?", BAD_JSON,
     lambda c: c.load_table("logs"), 'tables (table "logs")'),
    ("tables.properties, listed", "UPDATE tables SET properties = ?", BAD_JSON,
     lambda c: c.list_tables(), 'tables (table "logs")'),
    ("schema_versions.schema", "UPDATE schema_versions SET schema = ?", BAD_JSON,
     lambda c: c.load_table("logs"), 'schema_versions (table "logs" version 1)'),
    ("schema_versions.schema, invalid", "UPDATE schema_versions SET schema = ?", BAD_SCHEMA,
     lambda c: c.schema_history("logs"), 'schema_versions (table "logs")'),
    ("snapshots.summary", "UPDATE snapshots SET summary = ? WHERE snapshot_id = 2", BAD_JSON,
     lambda c: c.snapshot("logs"), 'snapshots (table "logs" snapshot 2)'),
    ("manifests.column_stats", "UPDATE manifests SET column_stats = ?", BAD_JSON,
     lambda c: c.manifests("logs"), 'manifests (table "logs" snapshot 2)'),
    ("manifests.present_paths", "UPDATE manifests SET present_paths = ?", BAD_JSON,
     lambda c: c.plan_extents("logs"), 'manifests (table "logs" snapshot 2)'),
    ("manifest_filters.filter", "UPDATE manifest_filters SET filter = ?", b"\x00bad",
     lambda c: c.plan_extents("logs", Equals("service", "svc-1")),
     "manifest_filters (extent {eid} column service)"),
    ("ingest_ledger.ack", "UPDATE ingest_ledger SET ack = ?", BAD_JSON,
     lambda c: c.ledger_get("req-1"), 'ingest_ledger (key "req-1")'),
    ("work_units.payload", "UPDATE work_units SET payload = ?", BAD_JSON,
     lambda c: c.list_work(), "work_units (unit {unit})"),
    ("work_units.payload, claimed", "UPDATE work_units SET payload = ?", "[1, 2]",
     lambda c: c.claim_work("w1"), "work_units (unit {unit})"),
]


@pytest.mark.parametrize(("sql", "value", "call", "where"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_corrupt_row_raises_catalog_corrupt_error(setup, sql, value, call, where):
    catalog, db, eid, unit = setup
    with db:
        db.execute(sql, (value,))
    with pytest.raises(CatalogCorruptError) as info:
        call(catalog)
    err = info.value
    assert isinstance(err, ShoalError) and status_for(err) == 500
    assert f"corrupt catalog data in {where.format(eid=eid, unit=unit)}: " in str(err)
    assert err.catalog_table == where.split(" ", 1)[0]
    assert err.__cause__ is not None        # the decoding failure, chained


def test_undamaged_rows_still_read(setup):
    """The same reads as above, before any damage: nothing is mistaken for corruption."""
    catalog, _db, _eid, unit = setup
    for _name, _sql, _value, call, _where in CASES:
        call(catalog)
    assert catalog.list_work()[0].id == unit
