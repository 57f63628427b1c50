"""shoal's DDL (docs/sql.md): parsing, positioned syntax errors, and every statement run
against a real embedded shoal, header rules included."""

from __future__ import annotations

import pyarrow as pa
import pytest

import shoal
from shoal.errors import (DdlSyntaxError, IncompatibleSchemaChangeError, InvalidSchemaError,
                          TableAlreadyExistsError, TableNotFoundError)
from shoal.query.ddl import (AlterTableAddColumns, AlterTableSetProperties, CreateTable,
                             DescribeTable, ShowTables, column_ddl, execute_ddl, parse_ddl)
from shoal.types import BYTES, HEADERS, INT, LONG, REAL, STRING, TIMESTAMP, Column, vector

HEADERS_TYPE = "ARRAY<STRUCT<key STRING, value BYTES>>"


@pytest.fixture
def db(tmp_path):
    client = shoal.connect(data_dir=str(tmp_path))
    yield client
    client.close()


def run(db, sql: str) -> pa.Table:
    stmt = parse_ddl(sql)
    assert stmt is not None, sql
    return execute_ddl(stmt, db)


# -- recognising statements ----------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "SELECT * FROM logs", "WITH x AS (SELECT 1) SELECT * FROM x", "EXPLAIN SELECT 1",
    "CREATE VIEW v AS SELECT 1", "CREATE OR REPLACE TEMP VIEW v AS SELECT 1",
    "ALTER VIEW v AS SELECT 1", "DESCRIBE FUNCTION int_from_bytes", "DESC QUERY SELECT 1",
    "DESCRIBE EXTENDED logs", "DESCRIBE TABLE FORMATTED logs", "SHOW FUNCTIONS", "", "  ",
    "-- only a comment", "SELECT 'unterminated",
])
def test_statements_for_spark_are_not_ddl(sql):
    assert parse_ddl(sql) is None


def test_parse_create_with_every_clause():
    stmt = parse_ddl("""
        create Table IF NOT EXISTS `Events` (
          "svc" STRING NOT NULL DEFAULT 'it''s',   -- quoted identifiers keep their case
          Status int default -3,
          ratio double DEFAULT 1.5e3,
          ok boolean DEFAULT TRUE,
          at timestamp DEFAULT null,
          emb vector( 3 ),
          hs array<struct<key string, value bytes>> HEADERS
        ) WITH (MODE = 'drop', retention = ' 7d ', kafka_topic = 'events', target_rows = 500);
    """)
    assert stmt == CreateTable(
        name="Events",
        columns=(Column("svc", STRING, nullable=False, default="it's"),
                 Column("status", INT, default=-3), Column("ratio", REAL, default=1500.0),
                 Column("ok", shoal.BOOL, default=True), Column("at", TIMESTAMP),
                 Column("emb", vector(3)), Column("hs", HEADERS, header="*")),
        if_not_exists=True, mode="drop",
        properties={"retention": "7d", "kafka_topic": "events", "target_rows": 500})


def test_parse_set_and_unset_tblproperties():
    assert parse_ddl("alter table T set TBLPROPERTIES ('sort_by' = ' Service, _timestamp ', "
                     "target_extent_size = 1048576, 'RETENTION' = '7d')") == \
        AlterTableSetProperties("t", {"sort_by": "Service, _timestamp",
                                      "target_extent_size": 1048576, "retention": "7d"})
    assert parse_ddl("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('sort_by', retention);") == \
        AlterTableSetProperties("t", {"sort_by": None, "retention": None})


def test_parse_other_statements():
    assert parse_ddl("create table t") == CreateTable("t", ())
    assert parse_ddl("CREATE TABLE t () WITH (mode='reject')") == CreateTable(
        "t", (), mode="reject")
    alter = AlterTableAddColumns("t", (Column("a", LONG), Column("b", BYTES, header="k")))
    assert parse_ddl("ALTER TABLE t ADD COLUMN a bigint, b binary HEADER('k')") == alter
    assert parse_ddl("alter table t add columns (a long, b bytes HEADER('k'));") == alter
    assert parse_ddl("ALTER TABLE t ADD a long, b bytes HEADER('k')") == alter
    assert parse_ddl("DESCRIBE t") == DescribeTable("t")
    assert parse_ddl("desc TABLE `t`;") == DescribeTable("t")
    assert parse_ddl("show tables") == ShowTables()


def test_column_ddl_reads_back():
    columns = (Column("a", STRING, nullable=False, default="x'y"), Column("b", REAL, default=-2.5),
               Column("h", BYTES, header="k'1"), Column("v", vector(4)))
    sql = "CREATE TABLE t (" + ", ".join(column_ddl(c) for c in columns) + ")"
    assert parse_ddl(sql) == CreateTable("t", columns)


# -- syntax errors: position, expected, found ------------------------------------------------
@pytest.mark.parametrize("sql, message", [
    ("CREATE TABLE t (a bytes HEADERS HEADER('k'))",
     'line 1, col 33: expected NOT NULL, DEFAULT, "," or ")", found "HEADER"'),
    ("CREATE TABLE t (a int NULL)",
     'line 1, col 23: expected NOT NULL, DEFAULT, HEADERS, HEADER(\'key\'), "," or ")", '
     'found "NULL"'),
    ("CREATE TABLE t (a bytes HEADER)", 'line 1, col 31: expected "(", found ")"'),
    ("CREATE TABLE t (\n  a int,\n  b bytes HEADER(\"k\")\n)",
     "line 3, col 18: expected a header key in single quotes, found '\"k\"'"),
    ("CREATE TABLE t (a int,)", 'line 1, col 23: expected a column name, found ")"'),
    ("CREATE TABLE t (a)", 'line 1, col 18: expected a column type, found ")"'),
    ("CREATE TABLE t (a DEFAULT 1)", 'line 1, col 19: expected a column type, found "DEFAULT"'),
    ("CREATE TABLE t (a vector(3>)", 'line 1, col 27: expected ")", found ">"'),
    (f"CREATE TABLE t (h {HEADERS_TYPE[:-1]} HEADERS)",
     'line 1, col 64: expected ">", found ")"'),
    ("CREATE TABLE t (a string DEFAULT x)",
     'line 1, col 34: expected a literal (string, number, true, false, null), found "x"'),
    ("CREATE TABLE t (a int DEFAULT -)", 'line 1, col 32: expected a number, found ")"'),
    ("CREATE TABLE t (a string DEFAULT 'x)",
     "line 1, col 34: expected a closing ', found end of input"),
    ("CREATE TABLE t (a int /* note", 'line 1, col 23: expected "*/" closing the comment, '
     "found end of input"),
    ("CREATE TABLE t (a int", 'line 1, col 22: expected NOT NULL, DEFAULT, HEADERS, '
     'HEADER(\'key\'), "," or ")", found end of input'),
    ("CREATE TABLE t x", 'line 1, col 16: expected "(", WITH or end of statement, found "x"'),
    ("CREATE TABLE t (a int) x", 'line 1, col 24: expected WITH or end of statement, found "x"'),
    ("CREATE TABLE IF EXISTS t", 'line 1, col 17: expected NOT, found "EXISTS"'),
    ("CREATE TABLE t (a int) WITH (mode=1)",
     'line 1, col 35: expected mode as a string literal, found "1"'),
    ("CREATE TABLE t (a int) WITH (x=1, X=2)",
     'line 1, col 35: expected a property other than "x" (given twice), found "X"'),
    ("CREATE TABLE t (a int) WITH (x 1)", 'line 1, col 32: expected "=", found "1"'),
    ("CREATE TABLE t (a int) WITH (x=1", 'line 1, col 33: expected "," or ")", '
     "found end of input"),
    ("ALTER TABLE t DROP COLUMN a", 'line 1, col 15: expected ADD, SET TBLPROPERTIES or '
     'UNSET TBLPROPERTIES, found "DROP"'),
    ("ALTER TABLE t SET TBLPROPERTIES ('kafka_topic' = 'x')",
     "line 1, col 34: expected a property ALTER TABLE can change (sort_by, block_rows, "
     "retention, snapshot_retention, target_extent_size, compact_min_extents, "
     "timestamp_unit or props), found "
     "\"'kafka_topic'\""),
    ("ALTER TABLE t SET TBLPROPERTIES (\n  'sort_by' = service)",
     'line 2, col 15: expected sort_by as a string literal, found "service"'),
    ("ALTER TABLE t SET TBLPROPERTIES sort_by = 'a'",
     'line 1, col 33: expected "(", found "sort_by"'),
    ("ALTER TABLE t SET PROPERTIES ('sort_by' = 'a')",
     'line 1, col 19: expected TBLPROPERTIES, found "PROPERTIES"'),
    ("ALTER TABLE t SET TBLPROPERTIES ('sort_by' = 'a', sort_by = 'b')",
     'line 1, col 51: expected a property other than "sort_by" (given twice), '
     'found "sort_by"'),
    ("ALTER TABLE t UNSET TBLPROPERTIES ('sort_by' = 'a')",
     'line 1, col 46: expected "," or ")", found "="'),
    ("CREATE TABLE t (a int) WITH (sort_by = a)",
     'line 1, col 40: expected sort_by as a string literal, found "a"'),
    ("ALTER TABLE t ADD COLUMN a int)", 'line 1, col 31: expected NOT NULL, DEFAULT, HEADERS, '
     'HEADER(\'key\'), "," or end of statement, found ")"'),
    ("DESCRIBE t x", 'line 1, col 12: expected end of statement, found "x"'),
    ("DESCRIBE", "line 1, col 9: expected a table name, found end of input"),
    ("SHOW TABLES LIKE 'x'", 'line 1, col 13: expected end of statement, found "LIKE"'),
])
def test_syntax_errors_name_position_expected_and_found(sql, message):
    with pytest.raises(DdlSyntaxError) as info:
        parse_ddl(sql)
    assert str(info.value) == "DDL syntax error at " + message
    assert info.value.code == "ddl_syntax"
    line, col = message.removeprefix("line ").split(":")[0].split(", col ")
    assert (info.value.line, info.value.column) == (int(line), int(col))


def test_unknown_type_names_the_column():
    with pytest.raises(InvalidSchemaError, match=r'^column "a": unknown column type "blob"'):
        parse_ddl("CREATE TABLE t (a blob)")


# -- header columns (docs/kafka.md) ------------------------------------------------------------
def test_valid_header_forms(db):
    run(db, f"CREATE TABLE all_h (id long, hs {HEADERS_TYPE} HEADERS)")
    run(db, "CREATE TABLE keyed (id long, trace BYTES HEADER('trace-id'), "
            "tenant bytes HEADER('tenant'))")
    run(db, "CREATE TABLE none_yet (id long)")
    run(db, "ALTER TABLE none_yet ADD COLUMN tenant bytes HEADER('tenant')")
    headers = {t: {c["name"]: c["header"] for c in db.describe(t)["columns"] if c["header"]}
               for t in ("all_h", "keyed", "none_yet")}
    assert headers == {"all_h": {"hs": "*"},
                       "keyed": {"trace": "trace-id", "tenant": "tenant"},
                       "none_yet": {"tenant": "tenant"}}
    described = run(db, "DESCRIBE all_h").to_pylist()[-1]
    assert described == {"name": "hs", "type": HEADERS_TYPE, "nullable": True,
                         "default": None, "header": "*"}


@pytest.mark.parametrize("columns, message", [
    (f"a {HEADERS_TYPE} HEADERS, b {HEADERS_TYPE} HEADERS",
     'at most one HEADERS column is allowed, found "a", "b"'),
    ("h bytes HEADERS",
     f'HEADERS column "h" must have type {HEADERS_TYPE}, got bytes'),
    ("h ARRAY<STRUCT<k STRING, v BYTES>> HEADERS",
     f'HEADERS column "h" must have type {HEADERS_TYPE}, got ARRAY<STRUCT<k STRING, v BYTES>>'),
    ("h ARRAY<STRUCT<value BYTES, key STRING>> HEADERS",
     f'HEADERS column "h" must have type {HEADERS_TYPE}, '
     "got ARRAY<STRUCT<value BYTES, key STRING>>"),
    ("a string HEADER('k')", "HEADER('k') column \"a\" must have type BYTES, got string"),
    (f"a {HEADERS_TYPE} HEADER('k')",
     f"HEADER('k') column \"a\" must have type BYTES, got {HEADERS_TYPE}"),
    ("a blob HEADER('k')", "HEADER('k') column \"a\" must have type BYTES, got blob"),
    ("a bytes HEADER('k'), b bytes HEADER('k')",
     "HEADER('k') is bound twice: columns \"a\" and \"b\""),
    (f"h {HEADERS_TYPE} HEADERS, a bytes HEADER('k')",
     "HEADERS column \"h\" cannot be combined with HEADER('k') column \"a\""),
    (f"h {HEADERS_TYPE}", f'column "h" of type {HEADERS_TYPE} must be declared HEADERS'),
    ("a bytes NOT NULL HEADER('k')", 'header column "a" cannot be NOT NULL'),
    (f"h {HEADERS_TYPE} NOT NULL HEADERS", 'header column "h" cannot be NOT NULL'),
])
def test_invalid_header_forms_fail_precisely_and_create_nothing(db, columns, message):
    with pytest.raises(InvalidSchemaError) as info:
        run(db, f"CREATE TABLE t (id long, {columns})")
    assert str(info.value) == message
    assert db.tables() == []


@pytest.mark.parametrize("existing, added, message", [
    (f"h {HEADERS_TYPE} HEADERS", f"h2 {HEADERS_TYPE} HEADERS",
     'at most one HEADERS column is allowed, found "h", "h2"'),
    (f"h {HEADERS_TYPE} HEADERS", "a bytes HEADER('k')",
     "HEADERS column \"h\" cannot be combined with HEADER('k') column \"a\""),
    ("a bytes HEADER('k')", "b bytes HEADER('k')",
     "HEADER('k') is bound twice: columns \"a\" and \"b\""),
])
def test_alter_applies_the_header_rules(db, existing, added, message):
    run(db, f"CREATE TABLE t ({existing})")
    with pytest.raises(InvalidSchemaError) as info:
        run(db, f"ALTER TABLE t ADD COLUMN {added}")
    assert str(info.value) == message
    assert db.describe("t")["schema_version"] == 1


# -- other schema rules come from Schema / the catalog ---------------------------------------
@pytest.mark.parametrize("sql, message", [
    ("CREATE TABLE t (props string)", 'column name "props" is reserved'),
    ("CREATE TABLE t (_timestamp timestamp)", 'column name "_timestamp" is reserved'),
    ('CREATE TABLE t ("Bad" int)',
     'column name "Bad" is not identifier-safe (expected ^[a-z_][a-z0-9_]*$)'),
    ("CREATE TABLE t (`has space` int)",
     'column name "has space" is not identifier-safe (expected ^[a-z_][a-z0-9_]*$)'),
    ('CREATE TABLE "T" (a int)',
     'table name "T" is not identifier-safe (expected ^[a-z_][a-z0-9_]*$)'),
    ("CREATE TABLE t (a int, A long)", 'duplicate column "a"'),
    ("CREATE TABLE t (a int DEFAULT 'x')",
     "column \"a\": default \"x\" is not a valid int: "),
    ("CREATE TABLE t (a int) WITH (mode='strict')",
     "unknown schema mode 'strict' (expected one of evolve, drop, reject)"),
    ("CREATE TABLE t (a int) WITH (retention='  ')", "retention must not be empty"),
])
def test_schema_rules(db, sql, message):
    with pytest.raises(InvalidSchemaError) as info:
        run(db, sql)
    assert str(info.value).startswith(message)
    assert db.tables() == []


# -- CREATE ---------------------------------------------------------------------------------
def test_create_returns_the_table_and_with_properties_show_in_describe(db):
    result = run(db, "CREATE TABLE events (svc string NOT NULL DEFAULT 'api', n int) "
                     "WITH (mode='reject', retention='7d', kafka_topic='events.v1', "
                     "target_rows=500, compact=true)")
    assert result.schema.names == ["name", "status", "schema_version", "snapshot_id", "mode",
                                   "retention", "columns", "properties"]
    assert result.to_pylist() == [{
        "name": "events", "status": "created", "schema_version": 1, "snapshot_id": 1,
        "mode": "reject", "retention": "7d",
        "columns": "_timestamp timestamp, props dynamic, svc string NOT NULL DEFAULT 'api', "
                   "n int",
        "properties": '{"compact": true, "kafka_topic": "events.v1", "retention": "7d", '
                      '"target_rows": 500}'}]
    doc = db.describe("events")
    assert (doc["mode"], doc["retention"]) == ("reject", "7d")
    assert doc["properties"] == {"retention": "7d", "kafka_topic": "events.v1",
                                 "target_rows": 500, "compact": True}


def test_create_if_not_exists(db):
    run(db, "CREATE TABLE t (a int)")
    with pytest.raises(TableAlreadyExistsError, match='table "t" already exists'):
        run(db, "CREATE TABLE t (b long)")
    again = run(db, "CREATE TABLE IF NOT EXISTS t (b long)").to_pylist()[0]
    assert (again["status"], again["columns"]) == ("exists",
                                                   "_timestamp timestamp, props dynamic, a int")
    with pytest.raises(InvalidSchemaError, match="is reserved"):  # still validated
        run(db, "CREATE TABLE IF NOT EXISTS t (props long)")


# -- ALTER ----------------------------------------------------------------------------------
def test_alter_adds_and_widens(db):
    run(db, "CREATE TABLE t (n int, s string)")
    added = run(db, "ALTER TABLE t ADD COLUMNS (host string, score double)").to_pylist()[0]
    assert (added["status"], added["schema_version"]) == ("altered", 2)
    assert added["columns"].endswith("n int, s string, host string, score real")
    widened = run(db, "ALTER TABLE t ADD COLUMN n bigint").to_pylist()[0]
    assert (widened["status"], widened["schema_version"]) == ("altered", 3)
    assert run(db, "ALTER TABLE t ADD COLUMN n real, s dynamic").to_pylist()[0][
        "columns"] == "_timestamp timestamp, props dynamic, n real, s dynamic, host string, " \
                      "score real"
    same = run(db, "ALTER TABLE t ADD COLUMN host string").to_pylist()[0]
    assert (same["status"], same["schema_version"]) == ("unchanged", 4)


@pytest.mark.parametrize("alter, message", [
    ("n int", 'table "t": column "n" is long; cannot change it to int: the schema only widens'),
    ("s long", 'table "t": column "s" is string; cannot change it to long: '
               "the schema only widens"),
    ("x int NOT NULL", 'table "t": column "x" is absent; cannot change it to int NOT NULL '
                       "(a new column must be nullable or have a default): the schema only "
                       "widens"),
])
def test_alter_rejects_narrowing_and_changes_nothing(db, alter, message):
    run(db, "CREATE TABLE t (n long, s string)")
    with pytest.raises(IncompatibleSchemaChangeError) as info:
        run(db, f"ALTER TABLE t ADD COLUMN {alter}")
    assert str(info.value) == message
    assert db.describe("t")["schema_version"] == 1


def test_alter_and_describe_unknown_table(db):
    for sql in ("ALTER TABLE nope ADD COLUMN a int", "DESCRIBE nope"):
        with pytest.raises(TableNotFoundError, match='table "nope" does not exist'):
            run(db, sql)


# -- DESCRIBE / SHOW TABLES -----------------------------------------------------------------
def test_describe(db):
    run(db, "CREATE TABLE t (svc string NOT NULL DEFAULT 'a''b', n long DEFAULT 7, "
            "emb vector(2), tenant bytes HEADER('tenant'))")
    result = run(db, "DESCRIBE TABLE t")
    assert result.schema == pa.schema([("name", pa.string()), ("type", pa.string()),
                                       ("nullable", pa.bool_()), ("default", pa.string()),
                                       ("header", pa.string())])
    assert result.to_pylist() == [
        {"name": "_timestamp", "type": "timestamp", "nullable": True, "default": None,
         "header": None},
        {"name": "props", "type": "dynamic", "nullable": True, "default": None, "header": None},
        {"name": "svc", "type": "string", "nullable": False, "default": "'a''b'",
         "header": None},
        {"name": "n", "type": "long", "nullable": True, "default": "7", "header": None},
        {"name": "emb", "type": "vector(2)", "nullable": True, "default": None, "header": None},
        {"name": "tenant", "type": "bytes", "nullable": True, "default": None,
         "header": "tenant"},
    ]


def test_show_tables(db):
    empty = run(db, "SHOW TABLES")
    assert empty.num_rows == 0
    assert empty.schema.names == ["name", "schema_version", "row_count", "extent_count",
                                  "snapshot_id"]
    run(db, "CREATE TABLE b_logs (msg string)")
    run(db, "CREATE TABLE a_metrics (v double)")
    run(db, "ALTER TABLE a_metrics ADD COLUMN host string")
    db.ingest_ndjson("b_logs", b'{"msg": "x"}\n{"msg": "y"}\n')
    assert run(db, "show tables;").to_pylist() == [
        {"name": "a_metrics", "schema_version": 2, "row_count": 0, "extent_count": 0,
         "snapshot_id": 2},
        {"name": "b_logs", "schema_version": 1, "row_count": 2, "extent_count": 1,
         "snapshot_id": 2},
    ]


@pytest.mark.parametrize(("props", "message"), [
    ("retention='abc'", "retention='abc': expected a positive duration"),
    ("snapshot_retention='-1d'", "snapshot_retention='-1d'"),
    ("target_extent_size='huge'", "target_extent_size='huge': expected a positive size"),
    ("compact_min_extents=1", "compact_min_extents"),
])
def test_maintenance_properties_that_do_not_parse_are_refused_at_create(db, props, message):
    with pytest.raises(InvalidSchemaError, match=message):
        run(db, f"CREATE TABLE bad (n int) WITH ({props})")
    assert "bad" not in {t["name"] for t in db.tables()}
