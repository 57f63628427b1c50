"""Kafka pipeline (docs/kafka.md): exactly-once under SIGKILL, rejects, header columns.

A librdkafka mock cluster runs in a helper process (`tests.support.kafka`; a real broker is
used instead when SHOAL_TEST_KAFKA_BOOTSTRAP is set). The exactly-once test runs the real
`shoal pipeline kafka` as a subprocess and SIGKILLs it three times mid-run; the other tests
run the pipeline in-process on the session's Spark (`spark` fixture).
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidPropertyError, PayloadError
from shoal.frontends.kafka import KafkaPipeline, resolve_binding, source_name
from tests.support.kafka import kafka_broker
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker():
    with kafka_broker() as b:
        yield b


def _topic(base: str) -> str:  # unique per run, so a real broker can be reused
    return f"{base}-{os.getpid()}-{random.randrange(1 << 30)}"


def _shoal(data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "shoal", "--data-dir", str(data_dir), *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["SHOAL_SPARK_MASTER"] = "local[2]"
    env["PYTHONPATH"] = str(ROOT / "src")
    return env


# ---- Must show 1 and 4: exactly-once under SIGKILL; header columns through `shoal sql` ---------

N_RECORDS = 100_000
PARTITIONS = 4


def _headers(i: int) -> list[tuple[str, bytes]]:
    # "n" twice: HEADER('n') must hold the LAST one; "zz" never appears.
    return [("n", struct.pack(">i", -1)), ("trace", b"t%d" % i), ("n", struct.pack(">i", i)),
            ("big", struct.pack(">q", i * 1_000_003)), ("d", struct.pack(">d", i / 4))]


@pytest.mark.slow
def test_exactly_once_under_sigkill(broker, tmp_path):
    topic = _topic("eo")
    broker.create_topic(topic, PARTITIONS)
    data = tmp_path / "data"
    db = shoal.connect(data_dir=str(data))
    db.sql("CREATE TABLE eo (i long, s string, n BYTES HEADER('n'), big BYTES HEADER('big'), "
           "d BYTES HEADER('d'), zz BYTES HEADER('zz'), _kafka_partition int, "
           f"_kafka_offset long, _kafka_topic string) WITH (kafka_topic='{topic}')")
    broker.produce(topic, [(i % PARTITIONS, b'{"i":%d,"s":"v%d","junk":1}' % (i, i),
                            _headers(i)) for i in range(N_RECORDS)])

    # Bound source: no --topic, the table's kafka_topic; bootstrap from SHOAL_KAFKA_BOOTSTRAP.
    env = {**_env(), "SHOAL_KAFKA_BOOTSTRAP": broker.bootstrap}
    cmd = _shoal(data, "pipeline", "kafka", "--table", "eo", "--trigger", "0.2",
                 "--max-records-per-partition", "2000")
    rng = random.Random(5)
    kills = 0
    while kills < 3:
        before = db.catalog.load_table("eo").current_snapshot_id
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        # A random point of the running pipeline: once it has committed 1 or 2 micro-batches
        # in this run (it goes on meanwhile; the kill lands wherever it is then).
        commits = rng.randint(1, 2)

        def snapshot(proc: subprocess.Popen = proc) -> int:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            return db.catalog.load_table("eo").current_snapshot_id

        try:
            eventually(snapshot, f"{commits} commits of the pipeline (snapshot id)",
                       until=lambda sid, want=before + commits: sid >= want,
                       timeout_s=600)    # a hang guard for a process that starts Spark
        finally:  # also when the wait fails: no pipeline left running after the test
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        kills += 1
        assert db.catalog.table_counts("eo")[0] < N_RECORDS, "killed too late to matter"

    # To completion: larger micro-batches, stop once caught up and idle.
    done = subprocess.run([*cmd[:-1], "30000", "--until-idle", "1.0"], env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("kafka -> eo: ") and summary.endswith("lag 0")

    rows, _ = db.read("eo")
    assert rows.num_rows == N_RECORDS
    got = rows.select(["i", "s", "n", "big", "d", "zz", "_kafka_partition", "_kafka_offset",
                       "_kafka_topic"]).sort_by("i").to_pydict()
    assert got["i"] == list(range(N_RECORDS))           # each record exactly once
    assert got["s"] == [f"v{i}" for i in range(N_RECORDS)]
    assert got["n"] == [struct.pack(">i", i) for i in range(N_RECORDS)]
    assert got["big"] == [struct.pack(">q", i * 1_000_003) for i in range(N_RECORDS)]
    assert got["zz"] == [None] * N_RECORDS
    assert got["_kafka_partition"] == [i % PARTITIONS for i in range(N_RECORDS)]
    assert got["_kafka_offset"] == [i // PARTITIONS for i in range(N_RECORDS)]
    assert set(got["_kafka_topic"]) == {topic}
    assert "junk" not in rows.column_names  # mode drop: unknown fields are dropped

    last = N_RECORDS // PARTITIONS - 1
    assert db.catalog.source_offsets(source_name("shoal-eo", topic)) == {
        str(p): last for p in range(PARTITIONS)}
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "shoal-eo"})
    committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    c.close()
    assert [tp.offset for tp in committed] == [last + 1] * PARTITIONS  # for lag tools

    # Must show 4: the byte functions over header columns through `shoal sql` (one process).
    q = subprocess.run(_shoal(data, "sql", "--format", "json",
                              "SELECT count(*) AS n, "
                              "sum(CASE WHEN int_from_bytes(n) = i THEN 1 ELSE 0 END) AS ints, "
                              "sum(CASE WHEN bigint_from_bytes(big, 'BIG_ENDIAN') = i * 1000003 "
                              "THEN 1 ELSE 0 END) AS longs, "
                              "sum(CASE WHEN double_from_bytes(d) = i / 4.0 THEN 1 ELSE 0 END) "
                              "AS doubles, count(int_from_bytes(zz)) AS absent, "
                              "max(int_from_bytes(n, 'LITTLE_ENDIAN')) AS le FROM eo "
                              "WHERE int_from_bytes(n) < 50000"),
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr[-2000:]
    doc = json.loads(q.stdout)
    row = dict(zip([c["name"] for c in doc["columns"]], doc["rows"][0]))
    le_max = max(struct.unpack("<i", struct.pack(">i", i))[0] for i in range(50_000))
    assert row == {"n": 50_000, "ints": 50_000, "longs": 50_000, "doubles": 50_000,
                   "absent": 0, "le": le_max}
    db.close()


# ---- Must show 2: a poison record mid-partition; HEADERS; pseudo-columns; new partitions ---------

def _run_until_idle(db, binding, idle_s: float = 1.0, **kw) -> KafkaPipeline:
    p = KafkaPipeline(db, binding, trigger_s=0.2, **kw)
    try:
        p.run(until_idle_s=idle_s)
    finally:
        p.close()
    return p


def test_poison_record_is_rejected_and_partition_moves_on(broker, spark, tmp_path,
                                                          catalog_url):
    topic = _topic("poison")
    broker.create_topic(topic, 2)
    db = shoal.connect(data_dir=str(tmp_path), catalog_url=catalog_url, spark_master="local[2]")
    db.sql("CREATE TABLE ev (v long, hs ARRAY<STRUCT<key STRING, value BYTES>> HEADERS, "
           "_kafka_topic string, _kafka_partition long, _kafka_offset long, "
           "_kafka_timestamp timestamp, _kafka_key string)")
    records = []
    for off in range(200):
        for part in (0, 1):
            hdrs = [("k", b"a"), ("x", struct.pack(">i", off)), ("k", b"b")] if off % 2 else []
            records.append((part, b'{"v":%d}' % (off * 10 + part), hdrs))
    poison = {(1, 100): b'{"v": "not a number"}', (0, 50): b"", (0, 120): b"{not json"}
    records = [(p, poison.get((p, i // 2), v), h) for i, (p, v, h) in enumerate(records)]
    t0 = time.time()
    broker.produce(topic, records, key=b"key-1")

    binding = resolve_binding(db.catalog, "ev", bootstrap=broker.bootstrap, topics=[topic])
    _run_until_idle(db, binding)

    rej, _ = db.read("ev__rejects")
    rej = rej.sort_by([("partition", "ascending"), ("offset", "ascending")]).to_pylist()
    assert [(r["topic"], r["partition"], r["offset"], r["raw"]) for r in rej] == [
        (topic, 0, 50, b""), (topic, 0, 120, b"{not json"),
        (topic, 1, 100, b'{"v": "not a number"}')]
    assert all(r["source"] == "kafka" for r in rej)
    assert rej[0]["error"] == f"{topic}[0]@50: record value is empty (a tombstone or blank record)"
    assert rej[2]["field"] == "v" and rej[2]["error"].startswith(f'{topic}[1]@100: field "v": ')
    assert "invalid JSON" in rej[1]["error"]

    rows, _ = db.read("ev")
    assert rows.num_rows == 397
    by_pos = {(r["_kafka_partition"], r["_kafka_offset"]): r for r in rows.to_pylist()}
    assert (1, 100) not in by_pos and (1, 101) in by_pos and (1, 199) in by_pos  # moved on
    r = by_pos[(1, 101)]
    assert r["v"] == 1011 and r["_kafka_topic"] == topic and r["_kafka_key"] == "key-1"
    assert r["hs"] == [{"key": "k", "value": b"a"}, {"key": "x", "value": struct.pack(">i", 101)},
                       {"key": "k", "value": b"b"}]           # every header, in order
    assert by_pos[(0, 2)]["hs"] == []
    assert abs(r["_kafka_timestamp"].timestamp() - t0) < 120

    # A second run over the same (fully applied) records changes nothing.
    _run_until_idle(db, binding, idle_s=0.5)
    assert db.read("ev")[0].num_rows == 397 and db.read("ev__rejects")[0].num_rows == 3

    # Header values through SQL on the session's Spark.
    got = db.query("SELECT int_from_bytes(element_at(hs, 2).value) AS x, "
                   "int_from_bytes(element_at(hs, 1).value) AS bad FROM ev "
                   "WHERE _kafka_partition = 0 AND _kafka_offset = 7").to_pylist()
    assert got == [{"x": 7, "bad": None}]   # 1 byte is not an int: null
    db.close()


def test_topics_and_partitions_added_while_running_are_picked_up(broker, spark, tmp_path):
    first, later = _topic("multi-a"), _topic("multi-b")
    broker.create_topic(first, 1)
    db = shoal.connect(data_dir=str(tmp_path), spark_master="local[2]")
    db.sql("CREATE TABLE mt (v long, _kafka_topic string)")
    broker.produce(first, [(0, b'{"v":%d}' % i, []) for i in range(50)])
    binding = resolve_binding(db.catalog, "mt", bootstrap=broker.bootstrap,
                              topics=[first, later], group="g-mt")
    pipeline = KafkaPipeline(db, binding, trigger_s=0.2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            pipeline.run()              # until stopped
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    def rows_landed() -> int:
        assert runner.is_alive(), errors
        return db.catalog.table_counts("mt")[0]

    runner = threading.Thread(target=run)
    runner.start()
    try:
        eventually(rows_landed, "the first topic's 50 records", until=lambda n: n >= 50)
        broker.create_topic(later, 3)  # new partitions of a bound topic appear mid-run
        broker.produce(later, [(i % 3, b'{"v":%d}' % (1000 + i), []) for i in range(30)])
        eventually(rows_landed, "the later topic's 30 records too", until=lambda n: n >= 80)
    finally:
        pipeline.stop()
        runner.join(90)
        pipeline.close()
    assert not runner.is_alive() and not errors, errors
    rows = db.read("mt")[0].to_pydict()
    assert sorted(rows["v"]) == list(range(50)) + list(range(1000, 1030))
    assert db.catalog.source_offsets(source_name("g-mt", later)) == {"0": 9, "1": 9, "2": 9}
    db.close()


# ---- binding, errors, and header columns refused elsewhere ---------------------------------------

@pytest.mark.services
def test_binding_and_cli_errors(broker, tmp_path):
    db = shoal.connect(data_dir=str(tmp_path), allowed_hosts="h")
    db.sql("CREATE TABLE b1 (v long) WITH (kafka_topic='a, b', kafka_bootstrap='h:1', "
           "kafka_group='grp', kafka_mode='reject')")
    db.sql("CREATE TABLE b2 (v long)")
    b = resolve_binding(db.catalog, "b1")
    assert (b.topics, b.bootstrap, b.group, b.mode) == (("a", "b"), "h:1", "grp", "reject")
    b = resolve_binding(db.catalog, "b1", topics=["c"], bootstrap="x:2", mode="evolve")
    assert (b.topics, b.bootstrap, b.group, b.mode) == (("c",), "x:2", "grp", "evolve")
    with pytest.raises(InvalidPropertyError, match="no Kafka topic"):
        resolve_binding(db.catalog, "b2", default_bootstrap="h:1")
    with pytest.raises(InvalidPropertyError, match="no Kafka bootstrap"):
        resolve_binding(db.catalog, "b2", topics=["t"])
    assert resolve_binding(db.catalog, "b2", topics=["t"], default_bootstrap="h:9").group \
        == "shoal-b2"
    db.close()
    env = {k: v for k, v in _env().items() if k != "SHOAL_KAFKA_BOOTSTRAP"}
    r = subprocess.run(_shoal(tmp_path, "pipeline", "kafka", "--table", "b2"), env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        'error: no Kafka topic for table "b2": pass --topic or bind one with '
        "CREATE TABLE ... WITH (kafka_topic='...')"]


def test_header_columns_refuse_other_write_paths(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path))
    db.sql("CREATE TABLE hh (v long, k BYTES HEADER('k'))")
    with pytest.raises(PayloadError) as e:
        db.ingest_ndjson("hh", b'{"v":1}\n{"v":2,"k":"AAAA"}\n')
    assert "line 2: field \"k\"" in str(e.value.errors[0].message)
    assert "Kafka header column" in e.value.errors[0].message
    ack = db.ingest_ndjson("hh", b'{"v":1}\n', partial=True)
    assert ack.rows == 1
    assert db.read("hh")[0].column("k").to_pylist() == [None]
    assert pa.types.is_binary(db.read("hh")[0].schema.field("k").type)
    db.close()


# ---- the server runs bound sources, with Prometheus metrics ------------------------------------

def test_server_runs_bound_sources_with_metrics(broker, spark, tmp_path):
    import httpx

    from shoal.frontends.kafka.kind import KafkaKind
    from shoal.frontends.supervisor import BindingSupervisor
    from shoal.server import create_app
    from tests.support.server import serve_app

    topic = _topic("served")
    broker.create_topic(topic, 2)
    db = shoal.connect(data_dir=str(tmp_path), spark_master="local[2]",
                       kafka_bootstrap=broker.bootstrap)
    app = create_app(db, config=db.config, sweep_ledger=False)
    app.state.pipelines = BindingSupervisor(
        db.catalog, [KafkaKind(db, default_bootstrap=broker.bootstrap, trigger_s=0.2)],
        rescan_s=0.3)
    broker.produce(topic, [(i % 2, b'{"v":%d}' % i if i != 7 else b"[1]", [])
                           for i in range(300)])
    try:
        with serve_app(app) as url:
            # Bound after the server started: the next rescan picks it up.
            r = httpx.post(f"{url}/v1/query", json={
                "sql": f"CREATE TABLE served (v long) WITH (kafka_topic='{topic}')"})
            assert r.status_code == 200, r.text
            text = eventually(
                lambda: httpx.get(f"{url}/metrics").text,
                "the served table's 300 records read with lag 0 in /metrics",
                until=lambda text: 'shoal_kafka_lag{table="served"} 0.0' in text
                and 'shoal_kafka_records_total{table="served"} 300.0' in text)
            assert 'shoal_kafka_rows_total{table="served"} 299.0' in text
            assert 'shoal_kafka_rejects_total{table="served"} 1.0' in text
            assert 'shoal_kafka_pipeline_up{table="served"} 1.0' in text
            assert 'shoal_kafka_lag{table="served"} 0.0' in text
        assert db.read("served")[0].num_rows == 299
    finally:
        db.close()


def test_evolve_mode_runs_the_write_path_on_the_driver(broker, spark, tmp_path):
    topic = _topic("evolve")
    broker.create_topic(topic, 1)
    db = shoal.connect(data_dir=str(tmp_path), spark_master="local[2]")
    db.sql("CREATE TABLE evo (v long, tag BYTES HEADER('tag'))")
    broker.produce(topic, [(0, b'{"v":1}', [("tag", b"x")]),
                           (0, b'{"v":2,"color":"red"}', []),
                           (0, b'{\n  "v": 3,\n  "color": "blue"\n}',   # pretty-printed
                            [("tag", b"y"), ("tag", b"z")]),
                           (0, b'{"v":4,"tag":"mine"}', [])])
    binding = resolve_binding(db.catalog, "evo", bootstrap=broker.bootstrap, topics=[topic],
                              mode="evolve")
    pipeline = _run_until_idle(db, binding, idle_s=0.5)
    assert not pipeline._staged
    rows = db.read("evo")[0].sort_by("v").to_pydict()
    assert rows["v"] == [1, 2, 3]
    assert rows["color"] == [None, "red", "blue"]      # evolve: a new column
    assert rows["tag"] == [b"x", None, b"z"]
    rej = db.read("evo__rejects")[0].to_pylist()
    assert [(r["offset"], r["field"]) for r in rej] == [(3, "tag")]
    assert "Kafka header column" in rej[0]["error"]
    db.close()


# ---- the sink's exactly-once rules, without Spark or a broker ------------------------------------

def _records(rows: list[tuple[int, int, bytes]], topic: str = "t") -> pa.Table:
    from shoal.frontends.kafka.source import RECORD_SCHEMA
    return pa.Table.from_pylist(
        [{"topic": topic, "partition": p, "offset": o, "timestamp": 1_700_000_000_000,
          "key": None, "value": v, "headers": [{"key": "h", "value": b"%d" % o}]}
         for p, o, v in rows], schema=RECORD_SCHEMA)


def test_sink_replay_crash_between_commits_and_racing_pipelines(tmp_path):
    from shoal.frontends.kafka import ConcurrentPipelineError, KafkaSink
    from shoal.frontends.kafka.sink import OffsetMismatchError, StagedBatch, prepare_records
    from shoal.commit.rejects import commit_rejects

    db = shoal.connect(data_dir=str(tmp_path))
    db.sql("CREATE TABLE s (v long, h BYTES HEADER('h'))")
    sink = KafkaSink(db.catalog, db.coordinator, table="s", group="g", topics=["t"])
    batch = _records([(0, 0, b'{"v":0}'), (0, 1, b'{"v":"x"}'), (1, 0, b'{"v":10}')])

    # A crash after the rejects landed but before the data: the re-run skips them by key.
    prep = prepare_records(batch, db.catalog.load_table("s").schema, group="g", mode="drop")
    assert commit_rejects(db.coordinator, db.catalog, "s", prep.rejects) == 1
    r = sink.write(batch)
    assert (r.rows, r.rejects, r.offsets) == (2, 0, {("t", 0): 1, ("t", 1): 0})
    assert db.read("s__rejects")[0].num_rows == 1

    # The same batch again (a replay): nothing is applied twice.
    again = sink.write(_records([(0, 1, b'{"v":"x"}'), (0, 2, b'{"v":2}'), (1, 0, b'{"v":10}')]))
    assert (again.records, again.rows, again.skipped) == (1, 1, 2)
    assert sorted(db.read("s")[0].column("v").to_pylist()) == [0, 2, 10]
    assert db.read("s")[0].sort_by("v").column("h").to_pylist() == [b"0", b"2", b"0"]

    # Another pipeline moved the offsets since this one read them: nothing commits.
    stale = {("t", 0): 2, ("t", 1): 0}
    other = KafkaSink(db.catalog, db.coordinator, table="s", group="g", topics=["t"])
    other.write(_records([(0, 3, b'{"v":3}')]))
    with pytest.raises(ConcurrentPipelineError, match="another pipeline"):
        sink.commit_staged([StagedBatch(None, [], {("t", 0): 3}, {("t", 0): 3}, 1, 0, 7)],
                           base=stale)
    # A staged extent straddling the catalog's offset cannot be split: refused.
    with pytest.raises(OffsetMismatchError, match=r"t\[0\] start at offset 2"):
        sink.commit_staged([StagedBatch(None, [], {("t", 0): 2}, {("t", 0): 5}, 4, 0, 28)])
    assert sorted(db.read("s")[0].column("v").to_pylist()) == [0, 2, 3, 10]
    assert db.catalog.source_offsets("kafka:g:t") == {"0": 3, "1": 0}
    db.close()


def test_records_deleted_by_retention_before_read_are_reported(broker, spark, tmp_path):
    if broker.proc is None:
        pytest.skip("relies on the mock cluster's ~5 MB per-partition retention")
    topic = _topic("retention")
    broker.create_topic(topic, 1)
    db = shoal.connect(data_dir=str(tmp_path), spark_master="local[2]")
    db.sql("CREATE TABLE rt (v long, pad string)")
    binding = resolve_binding(db.catalog, "rt", bootstrap=broker.bootstrap, topics=[topic])
    broker.produce(topic, [(0, b'{"v":%d}' % i, []) for i in range(10)])
    _run_until_idle(db, binding, idle_s=0.3)
    pad = "x" * 2000
    broker.produce(topic, [(0, b'{"v":%d,"pad":"%s"}' % (i, pad.encode()), [])
                           for i in range(10, 4010)])     # ~8 MB: the oldest are deleted
    pipeline = _run_until_idle(db, binding, idle_s=0.3)
    lost = pipeline.progress.lost
    assert lost > 0 and "records lost to retention" in pipeline.progress.summary("rt")
    rows = db.read("rt")[0].column("v").to_pylist()
    assert len(rows) == 4010 - lost and sorted(rows)[10] == 10 + lost
    db.close()


def test_transactional_topic_ends_on_a_marker_and_still_goes_idle(broker, spark, tmp_path):
    """A transactional producer leaves a commit marker after its records: the last offset
    below the high watermark holds no record. The pipeline must read up to the marker
    without stalling, report lag 0 and stop once idle; a second transaction lands too."""
    from confluent_kafka import Producer

    topic = _topic("txn")
    broker.create_topic(topic, 2)
    db = shoal.connect(data_dir=str(tmp_path), spark_master="local[2]")
    db.sql("CREATE TABLE tx (i long)")
    binding = resolve_binding(db.catalog, "tx", bootstrap=broker.bootstrap, topics=[topic])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 3,
                         "transactional.id": f"shoal-test-{topic}"})
    producer.init_transactions(30)

    def transaction(values: range) -> None:
        producer.begin_transaction()
        for i in values:
            producer.produce(topic, value=b'{"i":%d}' % i, partition=i % 2)
        producer.commit_transaction(30)

    transaction(range(0, 20))
    # A pipeline stuck before the marker never goes idle: wait for it to end, showing the
    # lag it reports (the time this takes is bench/bench_timings.py's figure).
    first = KafkaPipeline(db, binding, trigger_s=0.2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            first.run(until_idle_s=0.3)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        eventually(lambda: (runner.is_alive(), first.progress.lag),
                   "the pipeline to read up to the commit marker and go idle "
                   "(running, lag)", until=lambda seen: not seen[0])
    finally:
        first.stop()
        runner.join(60)
        first.close()
    assert not errors, errors
    assert first.progress.lag == 0
    transaction(range(20, 30))
    second = _run_until_idle(db, binding, idle_s=0.3)
    assert second.progress.lag == 0
    assert sorted(db.read("tx")[0].column("i").to_pylist()) == list(range(30))
    db.close()


def test_staged_and_driver_extents_follow_the_sort_key(tmp_path):
    """The sort key reaches both Kafka write paths: a Spark task's staged extent (the key
    travels in its StageSpec) and the driver's own write (without Spark or a broker)."""
    from shoal.frontends.kafka import KafkaSink
    from shoal.frontends.kafka.staged import StageSpec, stage_task

    db = shoal.connect(data_dir=str(tmp_path))
    values = [b'{"svc":"%s","v":%d}' % (s, i) for i, s in enumerate([b"c", b"a", b"b", b"a"])]
    batch = _records([(0, i, v) for i, v in enumerate(values)])

    def extent_rows(entry):
        reader = db.formats[entry.format].open_extent(db.store, entry.object_path)
        return pa.Table.from_batches([reader.read_block(b)
                                      for b in range(reader.metadata().block_count)])

    db.sql("CREATE TABLE staged (svc string, v long) WITH (sort_by = 'svc')")
    info = db.catalog.load_table("staged")
    spec = StageSpec.from_option(StageSpec(
        table="staged", table_id=info.id, schema=info.schema.to_json(), mode="drop",
        group="g", storage_url=db.config.resolved_storage_url, sort_by=("svc",)).to_option())
    assert spec.sort_by == ("svc",)
    staged = stage_task(spec, [iter(batch.to_batches())])
    rows = extent_rows(staged.entry)
    assert (rows["svc"].to_pylist(), rows["v"].to_pylist()) == (["a", "a", "b", "c"],
                                                                [1, 3, 2, 0])

    db.sql("CREATE TABLE driver (svc string, v long) WITH (sort_by = 'svc')")
    sink = KafkaSink(db.catalog, db.coordinator, table="driver", group="g", topics=["t"])
    assert sink.write(batch).rows == 4
    (entry,) = db.catalog.manifests("driver")
    assert extent_rows(entry)["v"].to_pylist() == [1, 3, 2, 0]
    db.close()


def test_records_follow_the_table_conventions(tmp_path):
    """A Kafka-bound table's timestamp_unit reads epoch numbers (driver and staged tasks
    share `prepare_records`); with props off an unknown field in evolve mode is a reject."""
    from shoal.frontends.kafka.sink import KafkaSink
    from shoal.frontends.kafka.staged import StageSpec
    from shoal.types.conventions import IngestConventions

    db = shoal.connect(data_dir=str(tmp_path))
    try:
        db.sql("CREATE TABLE c (v long) WITH (timestamp_unit = 'ms', props = 'off')")
        sink = KafkaSink(db.catalog, db.coordinator, table="c", group="g", topics=["t"],
                         mode="evolve")
        r = sink.write(_records([(0, 0, b'{"v": 1, "_timestamp": 1795929000123}'),
                                 (0, 1, b'{"v": 2, "Bad-Key": 1}')]))
        assert (r.rows, r.rejects) == (1, 1)
        out = db.read("c")[0]
        assert out.column("_timestamp").cast("int64").to_pylist() == [1_795_929_000_123 * 10**6]
        rejects = db.read("c__rejects")[0].to_pylist()
        assert "keeps no props" in rejects[0]["error"]
        spec = StageSpec(table="c", table_id=1, schema={}, mode="drop", group="g",
                         storage_url="", conventions=IngestConventions("s").to_json())
        assert StageSpec.from_option(spec.to_option()).conventions == {"timestamp_unit": "s",
                                                                        "props": True}
    finally:
        db.close()
