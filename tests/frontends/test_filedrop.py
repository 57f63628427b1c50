"""File-drop pipeline: a local directory and the S3-compatible server.

50 files (some gzipped, two identical copies, one with a bad line) are dropped; each distinct
file's rows land once, the copy no-ops, the bad line is in `<table>__rejects` with its file and
line; a second scan (same process, and a fresh pipeline that only has the ledger) changes
nothing; a file changed by one byte ingests again. Ground truth: the generated rows, read back
through the catalog with pyarrow (no Spark on the read side). Plus the task's edge cases
without Spark (corrupt gzip, streaming large objects, chunk boundaries, modes), the CLI
through a real process, and a source bound to a table (`WITH (filedrop_path=...)`): the CLI
with `--table` alone, and `shoal serve` running it with Prometheus metrics.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from shoal.client import Shoal
from shoal.config import Config
from shoal.frontends.filedrop import DropSource, FileDropPipeline, TaskSpec, process_files
from shoal.storage import open_store
from shoal.types import LONG, Column
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
N_FILES = 50
BAD_FILE = 17          # its line BAD_LINE is not JSON
BAD_LINE = 4
COPY_OF = 10           # file 49 is a byte-for-byte copy of file 10


def file_lines(i: int) -> list[bytes]:
    n = 5 + i % 7
    lines = [json.dumps({"file_no": i, "n": j, "msg": f"event {i}-{j}",
                         "_timestamp": 1_700_000_000_000_000_000 + i * 1000 + j},
                        separators=(",", ":")).encode() for j in range(n)]
    if i == BAD_FILE:
        lines[BAD_LINE - 1] = b'{"file_no": 17, "n": oops}'
    return lines


def drop_files() -> dict[str, bytes]:
    """name -> object bytes: 50 objects, every third gzipped, the 49th a copy of the 10th."""
    files: dict[str, bytes] = {}
    for i in range(N_FILES - 1):
        body = b"\n".join(file_lines(i)) + b"\n"
        if i % 3 == 0:
            files[f"batch/{i:02d}.ndjson.gz"] = gzip.compress(body, mtime=0)
        else:
            files[f"batch/{i:02d}.ndjson"] = body
    original = next(k for k in files if k.startswith(f"batch/{COPY_OF:02d}."))
    files["copies/" + original.split("/")[1]] = files[original]
    files["batch/_tmp-upload.ndjson"] = b'{"n": 1}\n'     # an upload in progress: ignored
    files["batch/notes.txt"] = b"not ndjson\n"            # not an NDJSON name: ignored
    return files


def expected_rows() -> Counter:
    return Counter((i, j) for i in range(N_FILES - 1) for j in range(len(file_lines(i)))
                   if not (i == BAD_FILE and j == BAD_LINE - 1))


class Drop:
    """A watched prefix: a local directory or an S3 prefix, written through an ObjectStore."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.store = open_store(url)
        self.source = DropSource.parse(url)

    def put(self, name: str, data: bytes) -> None:
        self.store.put(name, data)


@pytest.fixture(params=["local-sqlite",
                        pytest.param("s3-postgres", marks=[pytest.mark.s3, pytest.mark.postgres])])
def lake(request, tmp_path):
    """(Shoal client, Drop): local dir + SQLite, or S3 (drop and extents) + Postgres."""
    if request.param == "local-sqlite":
        (tmp_path / "drop").mkdir()
        cfg = Config(data_dir=str(tmp_path / "data"))
        drop = Drop(str(tmp_path / "drop"))
    else:
        base = request.getfixturevalue("s3_store_url")
        cfg = Config(data_dir=str(tmp_path / "data"),
                     catalog_url=request.getfixturevalue("pg_catalog_url"),
                     storage_url=f"{base}/lake", s3_endpoint=os.environ["SHOAL_S3_ENDPOINT"])
        drop = Drop(f"{base}/drop")
    db = Shoal(cfg)
    db.create_table("events", [Column("n", LONG)])
    yield db, drop
    db.close()


def rows(db: Shoal, table: str) -> list[dict]:
    data, _ = db.read(table)
    return data.to_pylist()


def objects(db: Shoal) -> set[str]:
    return {o.path for o in db.store.list("")}


@pytest.mark.slow
def test_fifty_files_once_copies_noop_bad_line_rejected_rescan_noop_changed_byte(lake, spark):
    db, drop = lake
    files = drop_files()
    for name, data in files.items():
        drop.put(name, data)
    assert drop.store.get("batch/03.ndjson.gz") == files["batch/03.ndjson.gz"]  # stored as is
    pipeline = FileDropPipeline.from_client(db, spark, drop.source, "events")

    first = pipeline.scan()
    assert (first.listed, first.ingested, first.duplicates, first.known) == (50, 49, 1, 0)
    assert first.rejected == 1 and first.rows == sum(expected_rows().values())
    got = rows(db, "events")
    assert Counter((int(r["file_no"]), r["n"]) for r in got) == expected_rows()
    assert all(c == 1 for c in expected_rows().values())          # each row exactly once
    assert first.new_columns == ["file_no", "msg"]                 # evolve: new string columns
    assert {r["msg"] for r in got if r["file_no"] == "3"} == {f"event 3-{j}" for j in range(8)}

    rejects = rows(db, "events__rejects")
    assert len(rejects) == 1
    bad = rejects[0]
    assert bad["file"] == drop.source.display(f"batch/{BAD_FILE:02d}.ndjson")
    assert bad["line"] == BAD_LINE and bad["source"] == "filedrop"
    assert bad["raw"] == b'{"file_no": 17, "n": oops}'
    assert bad["error"].startswith(f"line {BAD_LINE}: ")

    snap = db.catalog.load_table("events").current_snapshot_id
    rsnap = db.catalog.load_table("events__rejects").current_snapshot_id
    stored = objects(db)

    # Second scan, same process (skip cache) and a fresh pipeline (only the ledger knows).
    again = pipeline.scan()
    assert (again.ingested, again.rows, again.rejected, again.duplicates) == (0, 0, 0, 0)
    fresh = FileDropPipeline.from_client(db, spark, drop.source, "events").scan()
    assert (fresh.ingested, fresh.known, fresh.rows, fresh.rejected) == (0, 50, 0, 0)
    assert db.catalog.load_table("events").current_snapshot_id == snap
    assert db.catalog.load_table("events__rejects").current_snapshot_id == rsnap
    assert objects(db) == stored                                    # no stray extents either

    # One byte changed (file 5's "n":0 -> "n":9): a new file, its rows land again.
    name = "batch/05.ndjson"
    changed = files[name].replace(b'"n":0,', b'"n":9,', 1)
    assert len(changed) == len(files[name]) and changed != files[name]
    drop.put(name, changed)
    third = pipeline.scan()
    assert (third.ingested, third.rows, third.rejected) == (1, len(file_lines(5)), 0)
    after = Counter((int(r["file_no"]), r["n"]) for r in rows(db, "events"))
    assert after - expected_rows() == Counter([(5, 9)] + [(5, j) for j in range(1, 10)])
    assert len(rows(db, "events__rejects")) == 1


@pytest.mark.slow
def test_two_pipelines_racing_on_one_prefix_ingest_each_file_once(tmp_path, spark):
    (tmp_path / "drop").mkdir()
    cfg = Config(data_dir=str(tmp_path / "data"))
    dbs = [Shoal(cfg), Shoal(cfg)]
    dbs[0].create_table("events", [Column("n", LONG)])
    drop = Drop(str(tmp_path / "drop"))
    for name, data in list(drop_files().items())[:20]:
        drop.put(name, data)
    summaries = []

    def run(db: Shoal) -> None:
        summaries.append(FileDropPipeline.from_client(db, spark, drop.source, "events").scan())

    threads = [threading.Thread(target=run, args=(db,)) for db in dbs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(s.ingested for s in summaries) == 20
    got = Counter((int(r["file_no"]), r["n"]) for r in rows(dbs[0], "events"))
    want = Counter((i, j) for i in range(20) for j in range(len(file_lines(i)))
                   if not (i == BAD_FILE and j == BAD_LINE - 1))
    assert got == want
    assert len(rows(dbs[0], "events__rejects")) == 1
    for db in dbs:
        db.close()


# -- the task without Spark ------------------------------------------------------------------

@pytest.fixture
def task_env(tmp_path):
    (tmp_path / "drop").mkdir()
    cfg = Config(data_dir=str(tmp_path / "data"))
    db = Shoal(cfg)
    db.create_table("events", [Column("n", LONG)])
    drop = Drop(str(tmp_path / "drop"))

    def spec(**kw) -> TaskSpec:
        return TaskSpec(table="events", mode=kw.pop("mode", "evolve"), source=drop.source,
                        catalog_url=cfg.resolved_catalog_url,
                        storage_url=cfg.resolved_storage_url, **kw)

    yield db, drop, spec
    db.close()


def listing(drop: Drop):
    return drop.source.candidates(drop.store)


def test_streamed_large_object_matches_in_memory_and_lines_count_across_chunks(task_env):
    db, drop, spec = task_env
    lines = [json.dumps({"n": i, "pad": "x" * 50}).encode() for i in range(3000)]
    lines[1234] = b'{"n": "not a number"}'
    lines[2999] = b"[1, 2]"
    body = b"\n".join(lines) + b"\n"
    drop.put("big.ndjson.gz", gzip.compress(body))
    (whole,) = process_files(spec(chunk_bytes=4096), listing(drop))
    (streamed,) = process_files(spec(chunk_bytes=4096, memory_limit=1000), listing(drop))
    for r in (whole, streamed):
        assert r.status == "new" and r.rows == 2998 and r.lines == 3000
        assert [(x.line, x.raw) for x in r.rejects] == [(1235, lines[1234]), (3000, b"[1, 2]")]
        assert r.rejects[0].error.startswith('line 1235: field "n"')
        assert r.rejects[0].key == f"filedrop-reject:{r.sha256}:1235"
    assert whole.sha256 == streamed.sha256
    import hashlib
    assert whole.sha256 == hashlib.sha256(drop.store.get("big.ndjson.gz")).hexdigest()
    assert whole.new_columns == ["pad"]
    # The task wrote extents (not yet committed): together they hold every good row.
    for r in (whole, streamed):
        assert sum(e.row_count for e in r.extents) == 2998
        assert all(db.store.exists(e.object_path) for e in r.extents)


def test_field_appearing_mid_file_evolves_and_starts_an_extent_under_the_new_version(task_env):
    db, drop, spec = task_env
    lines = [json.dumps({"n": i} if i < 500 else {"n": i, "region": f"r{i % 3}"}).encode()
             for i in range(1000)]
    drop.put("late.ndjson", b"\n".join(lines) + b"\n")
    (r,) = process_files(spec(chunk_bytes=2048), listing(drop))
    assert r.new_columns == ["region"] and r.rows == 1000 and r.rejects == []
    assert sorted({e.schema_version for e in r.extents}) == [1, 2]
    from shoal.catalog.base import LedgerEntry
    db.coordinator.append("events", r.extents, ledger=[LedgerEntry(r.key, r.ack("events"))])
    got = {x["n"]: x["region"] for x in rows(db, "events")}
    assert got == {i: (None if i < 500 else f"r{i % 3}") for i in range(1000)}


def test_a_large_file_rolls_over_several_extents(task_env, monkeypatch):
    from shoal.frontends.filedrop import task

    db, drop, spec = task_env
    monkeypatch.setattr(task, "EXTENT_ROWS", 300)
    drop.put("many.ndjson", b"".join(b'{"n": %d}\n' % i for i in range(1000)))
    (r,) = process_files(spec(chunk_bytes=1024), listing(drop))
    assert len(r.extents) >= 3 and all(e.row_count <= 300 + 100 for e in r.extents)
    assert sum(e.row_count for e in r.extents) == 1000


def test_corrupt_gzip_is_one_whole_file_reject_and_known_files_are_not_parsed(task_env):
    db, drop, spec = task_env
    good = gzip.compress(b'{"n": 1}\n' * 1000)
    drop.put("a.ndjson.gz", good[:len(good) // 2])                 # truncated upload
    drop.put("b.ndjson", b'{"n": 2}\n')
    (a, b) = process_files(spec(), listing(drop))
    assert a.status == "new" and a.rows == 0 and a.extents == []
    assert [(x.line, x.file) for x in a.rejects] == [(0, drop.source.display("a.ndjson.gz"))]
    assert "not a valid gzip stream" in a.rejects[0].error
    assert b.status == "new" and b.rows == 1
    # Once b's key is in the ledger, a task reads and hashes it but parses nothing.
    from shoal.catalog.base import LedgerEntry
    db.coordinator.append("events", b.extents, ledger=[LedgerEntry(b.key, b.ack("events"))])
    (_, b2) = process_files(spec(), listing(drop))
    assert b2.status == "known" and b2.extents == [] and b2.sha256 == b.sha256


def test_modes_drop_and_reject_follow_the_table_rules(task_env):
    db, drop, spec = task_env
    drop.put("m.ndjson", b'{"n": 1, "extra": "x"}\n{"n": 2}\n')
    (dropped,) = process_files(spec(mode="drop"), listing(drop))
    assert dropped.rows == 2 and dropped.rejects == [] and dropped.new_columns == []
    (strict,) = process_files(spec(mode="reject"), listing(drop))
    assert strict.rows == 1 and [x.line for x in strict.rejects] == [1]
    assert strict.rejects[0].field == "extra"
    assert "extra" not in db.catalog.load_table("events").schema


def test_files_follow_the_table_conventions(task_env):
    """timestamp_unit reads the epoch numbers of dropped files; props off makes a field that
    cannot become a column a reject instead of a props entry."""
    db, drop, spec = task_env
    db.set_properties("events", {"timestamp_unit": "s", "props": "off"})
    drop.put("c.ndjson", b'{"n": 1, "_timestamp": 1795929000.5}\n{"n": 2, "Bad-Key": 1}\n')
    (r,) = process_files(spec(), listing(drop))
    assert r.rows == 1 and [x.line for x in r.rejects] == [2]
    assert "keeps no props" in r.rejects[0].error
    from shoal.catalog.base import LedgerEntry
    db.coordinator.append("events", r.extents, ledger=[LedgerEntry(r.key, r.ack("events"))])
    out, _ = db.read("events")
    assert out.column("_timestamp").cast("int64").to_pylist() == [1_795_929_000_500_000_000]


def test_drop_source_paths(tmp_path):
    from shoal.errors import InvalidPropertyError
    from shoal.frontends.filedrop import is_drop_name

    assert DropSource.parse(str(tmp_path)).display("a/b.ndjson") == str(tmp_path / "a/b.ndjson")
    assert DropSource.parse("s3://bkt/in/drop/", s3_endpoint="h:1") == DropSource(
        "s3://bkt/in/drop", "h:1")
    with pytest.raises(InvalidPropertyError, match="no such directory"):
        DropSource.parse(str(tmp_path / "missing"))
    assert [n for n in ("a.ndjson", "b.JSONL.gz", "c.json", "x/.d.ndjson", "_e.ndjson",
                        "f.ndjson.part", "g.csv", "h.gz") if is_drop_name(n)] == [
        "a.ndjson", "b.JSONL.gz", "c.json"]


# -- the CLI through a real process ----------------------------------------------------------

def shoal_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "shoal"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "SHOAL_SPARK_MASTER": "local[2]", **(env or {})})


@pytest.mark.slow
def test_cli_pipeline_filedrop_once(tmp_path):
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "a.ndjson").write_bytes(b'{"n": 1, "svc": "api"}\n{"n": 2, "svc": "db"}\n')
    (drop / "b.ndjson.gz").write_bytes(gzip.compress(b'{"n": 3}\nnot json\n'))
    data = str(tmp_path / "data")

    missing = shoal_cli("--data-dir", data, "pipeline", "filedrop", "--path", str(drop),
                        "--table", "events", "--once")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"error: data directory {data} does not exist: create it with `shoal init` (or "
        "`shoal create-table`), pass --data-dir, or talk to a server with --url"]
    assert not Path(data).exists()
    assert shoal_cli("--data-dir", data, "init").returncode == 0
    missing = shoal_cli("--data-dir", data, "pipeline", "filedrop", "--path", str(drop),
                        "--table", "events", "--once")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == ['error: table "events" does not exist']

    out = shoal_cli("--data-dir", data, "pipeline", "filedrop", "--path", str(drop),
                    "--table", "events", "--once", "--create")
    assert out.returncode == 0, out.stderr
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.startswith("filedrop -> events: 2 object(s), 2 new file(s), 3 rows, "
                              "1 line(s) rejected"), summary
    assert set(summary.split("new columns: ")[1].split(";")[0].split(", ")) == {"n", "svc"}
    assert "records/s" in summary
    db = Shoal(Config(data_dir=data))
    try:
        assert sorted(int(r["n"]) for r in rows(db, "events")) == [1, 2, 3]
        assert [(r["file"], r["line"]) for r in rows(db, "events__rejects")] == [
            (str(drop / "b.ndjson.gz"), 2)]
    finally:
        db.close()


# -- exactly-once across a crash, the poll loop, the ledger's TTL -----------------------------

@pytest.mark.slow
def test_crash_between_rejects_and_data_commit_reruns_once(task_env, spark, monkeypatch):
    db, drop, _ = task_env
    drop.put("a.ndjson", b'{"n": 1}\n{"n": "bad"}\n{"n": 3}\n')
    from shoal.commit import CommitCoordinator

    real_run = CommitCoordinator.run

    def dying_run(self, table, build, **kw):
        if table == "events":   # the data commit, after the rejects landed
            raise SystemExit("killed between the two commits")
        return real_run(self, table, build, **kw)

    monkeypatch.setattr(CommitCoordinator, "run", dying_run)
    with pytest.raises(SystemExit):
        FileDropPipeline.from_client(db, spark, drop.source, "events").scan()
    assert rows(db, "events") == [] and len(rows(db, "events__rejects")) == 1
    monkeypatch.setattr(CommitCoordinator, "run", real_run)
    drop.put("b.ndjson.gz", gzip.compress(b'{"n": 4}\n'))

    rerun = FileDropPipeline.from_client(db, spark, drop.source, "events").scan()
    assert (rerun.ingested, rerun.rows, rerun.rejected) == (2, 3, 0)   # rejects skipped by key
    assert sorted(r["n"] for r in rows(db, "events")) == [1, 3, 4]
    assert [(r["line"], r["raw"]) for r in rows(db, "events__rejects")] == [(2, b'{"n": "bad"}')]


@pytest.mark.slow
def test_poll_loop_picks_up_new_files_reports_errors_and_stops(task_env, spark):
    db, drop, _ = task_env
    drop.put("first.ndjson", b'{"n": 1}\n')
    pipeline = FileDropPipeline.from_client(db, spark, drop.source, "later")
    stop = threading.Event()
    scans, errors = [], []
    loop = threading.Thread(target=lambda: scans.append(pipeline.run(
        interval_s=0.2, should_stop=stop.is_set, on_error=errors.append)))
    loop.start()
    try:
        # the table is missing: reported, polled on
        eventually(lambda: len(errors), "two scans to report the missing table",
                   until=lambda n: n >= 2)
        assert str(errors[0]) == 'table "later" does not exist'
        db.create_table("later", [Column("n", LONG)])
        eventually(lambda: len(rows(db, "later")), "the first file's row",
                   until=lambda n: n == 1)
        drop.put("second.ndjson", b'{"n": 2}\n')
        eventually(lambda: len(rows(db, "later")), "the second file's row",
                   until=lambda n: n == 2)
    finally:
        stop.set()
        loop.join(timeout=60)
    assert not loop.is_alive()
    assert scans[0].ingested == 2 and scans[0].rows == 2
    assert sorted(r["n"] for r in rows(db, "later")) == [1, 2]


def test_ledger_sweep_keeps_filedrop_keys(clocked_catalog, clock):
    from shoal.catalog.base import LedgerEntry
    from shoal.types import Schema

    catalog = clocked_catalog
    catalog.create_table("events", Schema.create([Column("n", LONG)]))
    for i, key in enumerate(["req-1", "filedrop:" + "ab" * 32, "filedrop-reject:x:1"]):
        catalog.commit("events", expected_snapshot_id=1 + i, operation="append",
                       commit_id=f"c{i}", ledger=[LedgerEntry(key, {})])
    clock.advance(1)
    assert catalog.sweep_ledger(0.0) == 2
    assert catalog.ledger_get("filedrop:" + "ab" * 32) is not None
    assert catalog.ledger_get("req-1") is None


# -- a file-drop source bound to a table: the CLI's `--table` alone, and `shoal serve` -------

def test_binding_from_table_properties_flags_override_and_no_path_is_one_line_error(tmp_path):
    from typer.testing import CliRunner

    from shoal.cli.main import app
    from shoal.frontends.filedrop import resolve_binding

    (tmp_path / "drop").mkdir()
    (tmp_path / "other").mkdir()
    data = str(tmp_path / "data")
    db = Shoal(Config(data_dir=data, allowed_paths=str(tmp_path)))
    try:
        db.sql(f"CREATE TABLE bound (n long) WITH (filedrop_path = '{tmp_path / 'drop'}', "
               "filedrop_interval = 2.5, filedrop_mode = 'drop')")
        db.sql("CREATE TABLE plain (n long)")
        b = resolve_binding(db.catalog, "bound")
        assert (b.source.url, b.interval_s, b.mode) == (f"file://{tmp_path / 'drop'}", 2.5,
                                                        "drop")
        b = resolve_binding(db.catalog, "bound", path=str(tmp_path / "other"), interval_s=1,
                            mode="reject")
        assert (b.source.url, b.interval_s, b.mode) == (f"file://{tmp_path / 'other'}", 1.0,
                                                        "reject")
        assert resolve_binding(db.catalog, "plain", path=str(tmp_path / "drop")).interval_s == 10
        assert resolve_binding(db.catalog, "plain", path=str(tmp_path / "drop")).mode is None
    finally:
        db.close()

    out = CliRunner().invoke(app, ["--data-dir", data, "pipeline", "filedrop",
                                   "--table", "plain", "--once"])
    assert out.exit_code == 1
    assert out.stderr.strip().splitlines() == [
        'error: no file-drop path for table "plain": pass --path or bind one with '
        "CREATE TABLE ... WITH (filedrop_path='...')"]
    out = CliRunner().invoke(app, ["--data-dir", data, "pipeline", "filedrop",
                                   "--table", "bound", "--mode", "sideways"])
    assert out.exit_code == 2
    assert "'sideways' is not one of" in out.stderr    # click's usage error (rich may wrap)


def test_cli_table_only_uses_the_binding(tmp_path, spark):
    """`shoal pipeline filedrop --table t --once` in-process (the Spark session is the run's)."""
    from typer.testing import CliRunner

    from shoal.cli.main import app

    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "a.ndjson").write_bytes(b'{"n": 1, "extra": "x"}\n{"n": 2}\n')
    (drop / "b.ndjson.gz").write_bytes(gzip.compress(b'{"n": 3}\n{"n": "three"}\n'))
    data = str(tmp_path / "data")
    db = Shoal(Config(data_dir=data, allowed_paths=str(tmp_path)))
    db.sql(f"CREATE TABLE bound (n long) WITH (filedrop_path = '{drop}', filedrop_mode = 'drop')")
    db.close()
    # The binding is checked again when it runs: outside the allowed paths, nothing is read.
    out = CliRunner().invoke(app, ["--data-dir", data, "pipeline", "filedrop",
                                   "--table", "bound", "--once"])
    assert out.exit_code == 1
    assert "outside the locations this server allows" in out.stderr
    out = CliRunner().invoke(app, ["--data-dir", data, "pipeline", "filedrop",
                                   "--table", "bound", "--once"],
                             env={"SHOAL_ALLOWED_PATHS": str(tmp_path)})
    assert out.exit_code == 0, out.output
    assert out.stdout.strip().splitlines()[-1].startswith(
        "filedrop -> bound: 2 object(s), 2 new file(s), 3 rows, 1 line(s) rejected"), out.stdout
    db = Shoal(Config(data_dir=data))
    try:
        assert sorted(r["n"] for r in rows(db, "bound")) == [1, 2, 3]
        assert "extra" not in db.catalog.load_table("bound").schema.names  # filedrop_mode
        assert [(r["file"], r["line"]) for r in rows(db, "bound__rejects")] == [
            (str(drop / "b.ndjson.gz"), 2)]
    finally:
        db.close()


def test_server_runs_bound_filedrop_with_metrics_and_stops_at_shutdown(tmp_path, spark):
    import httpx

    from shoal.frontends.filedrop.kind import FileDropKind
    from shoal.frontends.supervisor import BindingSupervisor
    from shoal.server import create_app
    from tests.support.server import serve_app

    drop = tmp_path / "drop"
    drop.mkdir()
    first = b'{"n": 1}\n{"n": 2}\nnot json\n'
    second = gzip.compress(b'{"n": 3}\n', mtime=0)
    (drop / "a.ndjson").write_bytes(first)
    (drop / "b.ndjson.gz").write_bytes(second)
    db = Shoal(Config(data_dir=str(tmp_path / "data"), spark_master="local[2]",
                      allowed_paths=str(tmp_path)))
    app = create_app(db, config=db.config, sweep_ledger=False, pipelines=True)
    sup = BindingSupervisor(db.catalog, [FileDropKind(db)], rescan_s=0.3)
    app.state.pipelines = sup

    def metrics(url: str, table: str = "served") -> dict[str, float]:
        found = {}
        for line in httpx.get(f"{url}/metrics").text.splitlines():
            if line.startswith("shoal_filedrop_") and f'{{table="{table}"}}' in line:
                name, value = line.split(f'{{table="{table}"}} ')
                found[name] = float(value)
        return found

    def until(url: str, cond, table: str = "served") -> dict[str, float]:  # noqa: ANN001
        return eventually(lambda: metrics(url, table), f"the filedrop metrics of {table}",
                          until=cond)

    try:
        with serve_app(app) as url:
            # Bound after the server started: the next rescan picks it up.
            r = httpx.post(f"{url}/v1/query", json={
                "sql": f"CREATE TABLE served (n long) WITH (filedrop_path = '{drop}', "
                       "filedrop_interval = 0.2)"})
            assert r.status_code == 200, r.text
            m = until(url, lambda m: m.get("shoal_filedrop_files_total") == 2)
            assert m["shoal_filedrop_rows_total"] == 2 + 1
            assert m["shoal_filedrop_rejects_total"] == 1
            assert m["shoal_filedrop_bytes_total"] == len(first) + len(second)
            assert m["shoal_filedrop_scans_total"] >= 1
            assert m["shoal_filedrop_pipeline_up"] == 1
            assert sorted(r["n"] for r in rows(db, "served")) == [1, 2, 3]

            (drop / "c.ndjson").write_bytes(b'{"n": 4}\n')   # polled at its interval
            m = until(url, lambda m: m.get("shoal_filedrop_files_total") == 3)
            assert m["shoal_filedrop_rows_total"] == 4
            assert sorted(r["n"] for r in rows(db, "served")) == [1, 2, 3, 4]

            # A changed binding restarts the loop on the new path; a removed one retires it.
            moved = tmp_path / "moved"
            moved.mkdir()
            db.catalog.set_properties("served", {"filedrop_path": str(moved)})
            (moved / "e.ndjson").write_bytes(b'{"n": 6}\n')
            until(url, lambda m: m.get("shoal_filedrop_files_total") == 4)
            assert sorted(r["n"] for r in rows(db, "served")) == [1, 2, 3, 4, 6]
            (tmp_path / "gone").mkdir()
            (tmp_path / "gone" / "g.ndjson").write_bytes(b'{"n": 7}\n')
            db.sql(f"CREATE TABLE gone (n long) WITH (filedrop_path = '{tmp_path / 'gone'}', "
                   "filedrop_interval = 0.2)")
            until(url, lambda m: m.get("shoal_filedrop_files_total") == 1, "gone")
            assert sup.running() == ["gone", "served"]
            db.catalog.set_properties("gone", {"filedrop_path": None})
            until(url, lambda m: m == {}, "gone")
            assert sup.running() == ["served"]
        # Shutdown: the loop has ended, and a file dropped now stays unread.
        assert sup.running() == []
        # No thread is left that could scan (so no waiting is needed to show it stays unread).
        assert not [t.name for t in threading.enumerate()
                    if t.name.startswith(("shoal-filedrop-", "shoal-pipelines-scan"))]
        (moved / "d.ndjson").write_bytes(b'{"n": 5}\n')
        assert sorted(r["n"] for r in rows(db, "served")) == [1, 2, 3, 4, 6]
        assert [r["line"] for r in rows(db, "served__rejects")] == [3]
    finally:
        db.close()
