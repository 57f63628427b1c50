"""DROP / UNDROP / RENAME and every table property through SQL (docs/sql.md): parsing with
positioned errors, then each statement against a real shoal on SQLite and Postgres, and the
files of a dropped table on a local directory and on S3, which stay until its snapshot
retention has passed and maintenance purges them."""

from __future__ import annotations

import time

import pytest

import shoal
from shoal.errors import (DdlSyntaxError, DroppedTableNotFoundError, InvalidSchemaError,
                          LocationNotAllowedError, PayloadError, TableAlreadyExistsError,
                          TableNameReusedError, TableNotFoundError)
from shoal.lifecycle import undrop_table
from shoal.maintenance.gc import collect_garbage
from shoal.maintenance.retention import purge_dropped_tables
from shoal.query.ddl import (AlterTableSetProperties, DropTable, RenameTable,
                             ShowTblProperties, UndropTable, parse_ddl)
from shoal.query.guard import classify


# -- parsing ---------------------------------------------------------------------------------
def test_parse_the_lifecycle_statements():
    assert parse_ddl("drop table Logs") == DropTable("logs", False)
    assert parse_ddl("DROP TABLE IF EXISTS `Logs`;") == DropTable("Logs", True)
    assert parse_ddl("UNDROP TABLE logs") == UndropTable("logs")
    assert parse_ddl("ALTER TABLE a RENAME TO b") == RenameTable("a", "b")
    assert parse_ddl("SHOW TBLPROPERTIES logs") == ShowTblProperties("logs")
    assert parse_ddl("ALTER TABLE t SET TBLPROPERTIES ('mode' = 'reject', kafka_topic = 'x', "
                     "'n' = 3)") == AlterTableSetProperties(
        "t", {"mode": "reject", "kafka_topic": "x", "n": 3})
    assert parse_ddl("ALTER TABLE t UNSET TBLPROPERTIES ('mode', filedrop_path)") == \
        AlterTableSetProperties("t", {"mode": None, "filedrop_path": None})
    assert parse_ddl("DROP VIEW v") is None          # not shoal's: the guard refuses it
    for sql in ("DROP TABLE t", "UNDROP TABLE t", "ALTER TABLE t RENAME TO u"):
        assert classify(sql).kind == "admin_ddl"
    assert classify("SHOW TBLPROPERTIES t").kind == "ddl"


@pytest.mark.parametrize("sql, message", [
    ("DROP TABLE", "line 1, col 11: expected a table name, found end of input"),
    ("DROP TABLE IF t", 'line 1, col 15: expected EXISTS, found "t"'),
    ("DROP TABLE a b", 'line 1, col 14: expected end of statement, found "b"'),
    ("UNDROP TABLE", "line 1, col 13: expected a table name, found end of input"),
    ("ALTER TABLE a RENAME b", 'line 1, col 22: expected TO or COLUMN, found "b"'),
    ("ALTER TABLE a RENAME TO", "line 1, col 24: expected a table name, found end of input"),
    ("SHOW TBLPROPERTIES", "line 1, col 19: expected a table name, found end of input"),
    ("ALTER TABLE t SET TBLPROPERTIES (mode = reject)",
     'line 1, col 41: expected mode as a string literal, found "reject"'),
])
def test_syntax_errors_are_positioned(sql, message):
    with pytest.raises(DdlSyntaxError) as info:
        parse_ddl(sql)
    assert str(info.value) == "DDL syntax error at " + message


# -- running them ------------------------------------------------------------------------------
@pytest.fixture
def db(tmp_path, catalog_url):
    client = shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url,
                           query_engine="local")
    yield client
    client.close()


def rows(db, sql: str) -> list[dict]:
    return db.sql(sql).table.to_pylist()


def test_drop_frees_the_name_and_undrop_brings_the_rows_back(db):
    db.sql("CREATE TABLE logs (msg string)")
    db.ingest_ndjson("logs", b'{"msg": "a"}\n{"msg": "b"}\n')
    assert rows(db, "DROP TABLE logs") == [{"name": "logs", "status": "dropped"}]
    assert rows(db, "SHOW TABLES") == []
    with pytest.raises(TableNotFoundError):
        db.sql("SELECT * FROM logs")
    with pytest.raises(TableNotFoundError):
        db.ingest_ndjson("logs", b'{"msg": "c"}\n')
    with pytest.raises(TableNotFoundError):
        db.sql("DROP TABLE logs")
    assert rows(db, "DROP TABLE IF EXISTS logs") == [{"name": "logs", "status": "absent"}]

    undone = rows(db, "UNDROP TABLE logs")
    assert undone[0]["status"] == "undropped"
    assert rows(db, "SELECT msg FROM logs ORDER BY msg") == [{"msg": "a"}, {"msg": "b"}]
    with pytest.raises(DroppedTableNotFoundError, match="no dropped table of that name"):
        db.sql("UNDROP TABLE logs")


def test_a_new_table_of_a_dropped_name_is_new_and_blocks_undrop(db):
    db.sql("CREATE TABLE t (a long)")
    db.ingest_ndjson("t", b'{"a": 1}\n')
    db.sql("DROP TABLE t")
    db.sql("CREATE TABLE t (b string)")
    assert rows(db, "SELECT count(*) AS n FROM t") == [{"n": 0}]
    assert [c["name"] for c in db.describe("t")["columns"]][-1] == "b"
    with pytest.raises(TableNameReusedError, match="rename or drop that one first"):
        db.sql("UNDROP TABLE t")
    db.sql("ALTER TABLE t RENAME TO t_new")
    db.sql("UNDROP TABLE t")
    assert rows(db, "SELECT a FROM t") == [{"a": 1}]


def test_undrop_after_the_snapshot_retention_is_refused_saying_why(db):
    db.sql("CREATE TABLE t (a long) WITH (snapshot_retention = '1h')")
    db.sql("DROP TABLE t")
    with pytest.raises(DroppedTableNotFoundError, match=r"snapshot_retention \(1h\)"):
        undrop_table(db, "t", now=time.time() + 3601)
    assert undrop_table(db, "t", now=time.time()).name == "t"


def test_rename_moves_data_rejects_and_keeps_the_kafka_group(db):
    db.sql("CREATE TABLE src (n long) WITH (kafka_topic = 'events')")
    db.ingest_ndjson("src", b'{"n": 1}\n')
    db.sql("CREATE TABLE src__rejects (raw string)")
    db.sql("CREATE TABLE other (n long)")
    with pytest.raises(TableAlreadyExistsError):
        db.sql("ALTER TABLE src RENAME TO other")
    out = rows(db, "ALTER TABLE src RENAME TO dst")
    assert out[0]["name"] == "dst" and out[0]["status"] == "renamed"
    assert rows(db, "SELECT n FROM dst") == [{"n": 1}]
    assert sorted(t["name"] for t in db.tables()) == ["dst", "dst__rejects", "other"]
    # The consumer group stays the one the table consumed with, so offsets carry over.
    assert db.catalog.load_table("dst").properties["kafka_group"] == "shoal-src"
    db.sql("DROP TABLE dst")
    assert [t["name"] for t in db.tables()] == ["other"]     # the reject table went along
    db.sql("UNDROP TABLE dst")
    assert sorted(t["name"] for t in db.tables()) == ["dst", "dst__rejects", "other"]


def test_every_property_can_be_set_and_unset_and_is_checked_as_at_create(db):
    db.sql("CREATE TABLE t (a long)")
    db.sql("ALTER TABLE t SET TBLPROPERTIES ('mode' = 'reject', 'owner' = 'team-a', "
           "retention = '7d', 'target_rows' = 500)")
    assert rows(db, "SHOW TBLPROPERTIES t") == [
        {"key": "mode", "value": "reject"}, {"key": "owner", "value": "team-a"},
        {"key": "retention", "value": "7d"}, {"key": "target_rows", "value": "500"}]
    with pytest.raises(PayloadError, match='"extra"'):     # reject mode now applies
        db.ingest_ndjson("t", b'{"a": 1, "extra": 2}\n')
    db.sql("ALTER TABLE t UNSET TBLPROPERTIES ('mode', owner, 'not_there')")
    assert db.catalog.load_table("t").mode == "evolve"        # back to the default
    assert db.ingest_ndjson("t", b'{"a": 1, "extra": 2}\n').new_columns == ["extra"]
    for sql, error in [
            ("ALTER TABLE t SET TBLPROPERTIES ('mode' = 'loose')", InvalidSchemaError),
            ("ALTER TABLE t SET TBLPROPERTIES (retention = 'forever')", InvalidSchemaError),
            ("ALTER TABLE t SET TBLPROPERTIES (sort_by = 'nope')", InvalidSchemaError),
            ("ALTER TABLE t SET TBLPROPERTIES (filedrop_path = '/etc')",
             LocationNotAllowedError),
            ("ALTER TABLE t SET TBLPROPERTIES (kafka_bootstrap = 'evil.example:9092')",
             LocationNotAllowedError),
            ("ALTER TABLE t SET TBLPROPERTIES (scrape_targets = 'localhost:9100')",
             InvalidSchemaError)]:     # a scrape binding needs the Prometheus layout
        before = db.catalog.load_table("t")
        with pytest.raises(error):
            db.sql(sql)
        after = db.catalog.load_table("t")
        assert (after.properties, after.mode) == (before.properties, before.mode), sql
    inside = db.config.data_path / "incoming"
    db.sql(f"ALTER TABLE t SET TBLPROPERTIES (filedrop_path = '{inside}')")
    assert db.catalog.load_table("t").properties["filedrop_path"] == str(inside)
    with pytest.raises(TableNotFoundError):
        db.sql("SHOW TBLPROPERTIES nope")


# -- the files of a dropped table ----------------------------------------------------------------
@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store_url(request, tmp_path):
    if request.param == "local":
        return (tmp_path / "objects").as_uri()
    return request.getfixturevalue("s3_store_url")


def test_drop_keeps_files_until_the_retention_then_purge_deletes_them(tmp_path, catalog_url,
                                                                      store_url):
    import os

    db = shoal.connect(data_dir=str(tmp_path / "data"), catalog_url=catalog_url,
                       storage_url=store_url, s3_endpoint=os.environ.get("SHOAL_S3_ENDPOINT"),
                       query_engine="local")
    try:
        db.sql("CREATE TABLE t (a long) WITH (snapshot_retention = '1h')")
        db.ingest_ndjson("t", b'{"a": 1}\n')
        db.ingest_ndjson("t", b'{"a": 2}\n')
        old_files = {e.object_path for e in db.catalog.manifests("t")}
        assert len(old_files) == 2
        dropped_at = time.time()
        db.sql("DROP TABLE t")
        db.sql("CREATE TABLE t (a long)")
        db.ingest_ndjson("t", b'{"a": 3}\n')
        new_files = {e.object_path for e in db.catalog.manifests("t")}

        def stored() -> set[str]:
            return {o.path for o in db.store.list("")}

        # Orphan GC, even with no grace, leaves a dropped table's files alone.
        collect_garbage(db.catalog, db.store, grace_s=0)
        assert old_files | new_files <= stored()
        assert purge_dropped_tables(db.catalog, db.store, now=dropped_at + 60).tables_purged == 0
        assert old_files <= stored()

        report = purge_dropped_tables(db.catalog, db.store, now=dropped_at + 3601)
        assert (report.tables_purged, report.files_deleted) == (1, 2)
        assert not old_files & stored()
        assert new_files <= stored()
        assert db.catalog.dropped_tables() == []
        assert rows(db, "SELECT a FROM t") == [{"a": 3}]
        with pytest.raises(DroppedTableNotFoundError):
            db.sql("UNDROP TABLE t")
    finally:
        db.close()


def test_drop_racing_ingest_keeps_exactly_the_acknowledged_rows(db):
    """Writers ingest while the table is dropped: every request either lands before the drop
    (acknowledged, and its row is there after UNDROP) or gets a 404 and writes nothing."""
    import threading

    db.sql("CREATE TABLE hot (w long, i long)")
    acked: list[tuple[int, int]] = []
    lock = threading.Lock()
    enough = threading.Event()
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        i = 0
        try:
            while True:
                try:
                    db.ingest_ndjson("hot", f'{{"w": {w}, "i": {i}}}\n'.encode())
                except TableNotFoundError:
                    return
                with lock:
                    acked.append((w, i))
                    if len(acked) >= 20:
                        enough.set()
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)
            enough.set()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    assert enough.wait(60)
    db.sql("DROP TABLE hot")
    for t in threads:
        t.join(60)
    assert errors == []
    db.sql("UNDROP TABLE hot")
    got = {(r["w"], r["i"]) for r in rows(db, "SELECT w, i FROM hot")}
    assert got == set(acked)
    assert rows(db, "SELECT count(*) AS n FROM hot") == [{"n": len(acked)}]
