"""shoal on a Spark standalone cluster, by configuration alone.

One cluster per module: a master and two workers started from the pyspark package with an
EMPTY environment (no AWS variables, no shoal on any Python path), the real Postgres
catalog and the moto S3 server. The driver is a child process configured by `SHOAL_*`
variables only (`tests.support.cluster_driver`); executors get shoal from the archive
`shoal spark pack` builds (cached per environment hash), and their S3 credentials from the
job (`spark.executorEnv.*`, set by shoal). What ran where is asserted from the master's JSON
API and the driver's REST API (every executor ran tasks; the driver ran none).

Must show 1: DDL, ingest, a query with pruning stats, file-drop of 20 objects, compaction
and a Kafka pipeline on the executors, with exact results. Must show 2: a worker SIGKILLed
mid-file-drop and mid-query: exact results, no duplicate extents, no orphans after GC.
Must show 3: the fail-fast cases, each one line, within seconds.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.pg import fresh_schema, require_postgres
from tests.support.kafka import kafka_broker
from tests.support.s3server import TEST_BUCKET
from tests.support.sparkcluster import SparkCluster, free_port, spark_cluster, wait_for

pytestmark = [pytest.mark.spark_cluster, pytest.mark.postgres, pytest.mark.s3,
              pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PACK_CACHE = Path(os.environ.get("SHOAL_TEST_PACK_CACHE", "/tmp/shoal-test-packs"))
PACKS_KEPT = 3
HANG_GUARD_S = 240.0
# The driver's environment keeps the test process's (dummy AWS credentials included, as a
# deployment's driver has its own) but none of what would hide a missing setting.
_DRIVER_DROP = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "PYTHONPATH",
                "SHOAL_SPARK_CONF", "SHOAL_CONFIG")


# ---- fixtures ------------------------------------------------------------------------------

def _environment_hash() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for dist in sorted(metadata.distributions(), key=lambda d: d.metadata["Name"] or ""):
        digest.update(f"{dist.metadata['Name']}=={dist.version}\n".encode())
    for path in sorted((ROOT / "src" / "shoal").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    return digest.hexdigest()[:20]


@pytest.fixture(scope="session")
def shoal_pack() -> Path:
    """`shoal spark pack`'s archive of this environment, built once per environment hash."""
    path = PACK_CACHE / f"shoal-env-{_environment_hash()}.tar.gz"
    if not path.exists():
        PACK_CACHE.mkdir(parents=True, exist_ok=True)
        # Built under a name of its own and renamed: a concurrent run never sees half a pack.
        part = path.with_name(f"part-{os.getpid()}-{path.name}")
        done = subprocess.run([sys.executable, "-m", "shoal", "spark", "pack", "-o", str(part)],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert "spark.archives=" in done.stdout
        part.rename(path)
        # Every source change makes a new ~150 MB pack: keep the newest few only.
        packs = sorted(PACK_CACHE.glob("shoal-env-*.tar.gz"), key=lambda p: p.stat().st_mtime)
        for old in packs[:-PACKS_KEPT]:
            old.unlink(missing_ok=True)
    return path


@pytest.fixture(scope="module")
def work_dir() -> Iterator[Path]:
    """This module's own directory: pytest prunes old numbered temporary directories, also
    those of other pytest runs on the machine, and the workers' directories must outlive
    any of those."""
    path = Path(tempfile.mkdtemp(prefix="shoal-cluster-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(work_dir) -> Iterator[SparkCluster]:
    # Two workers advertising 2 cores each: the main driver takes one core on each (its
    # spark.cores.max=2), which leaves cores for the short apps of the fail-fast cases.
    with spark_cluster(work_dir / "spark", workers=2, cores=2, memory="2g") as c:
        yield c


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with fresh_schema(require_postgres()) as url:
        yield url


@pytest.fixture(scope="module")
def broker():
    with kafka_broker() as b:
        yield b


class DriverProcess:
    """The shoal driver child: one JSON command per line (`tests.support.cluster_driver`)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.cluster_driver"],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, text=True)
        self.events: list[dict[str, Any]] = []
        self._answers: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self._next_answer()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            doc = json.loads(line)
            with self._cond:
                (self.events if "event" in doc else self._answers).append(doc)
                self._cond.notify_all()
        try:
            tail = self.log.read_text(errors="replace")[-3000:]
        except OSError as e:
            tail = str(e)
        with self._cond:
            self._answers.append({"ok": False, "error": "the driver exited: " + tail})
            self._cond.notify_all()

    def _next_answer(self) -> dict[str, Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: self._answers, HANG_GUARD_S):
                raise AssertionError("the driver did not answer; its log:\n"
                                     + self.log.read_text(errors="replace")[-3000:])
            return self._answers.pop(0)

    def send(self, op: str, **args: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        self.send(op, **args)
        answer = self._next_answer()
        assert answer["ok"], answer["error"]
        return answer

    def wait_event(self, name: str) -> dict[str, Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: any(e["event"] == name for e in self.events),
                                       HANG_GUARD_S):
                raise AssertionError(f"no {name} event from the driver")
            event = next(e for e in self.events if e["event"] == name)
            self.events.remove(event)
            return event

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


def _driver_env(cluster: SparkCluster, *, catalog_url: str, storage_url: str,
                s3_endpoint: str, data_dir: Path, spark_conf: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DRIVER_DROP}
    env.update({
        "SHOAL_SPARK_MASTER": cluster.url, "SHOAL_CATALOG_URL": catalog_url,
        "SHOAL_STORAGE_URL": storage_url, "SHOAL_S3_ENDPOINT": s3_endpoint,
        "SHOAL_DATA_DIR": str(data_dir), "SHOAL_QUERY_ENGINE": "spark",
        "SHOAL_SPARK_START_TIMEOUT_S": "150",
        "SHOAL_SPARK_CONF": ";".join(f"{k}={v}" for k, v in spark_conf.items()),
    })
    return env


def _base_conf(pack: Path | None) -> dict[str, str]:
    conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "768m", "spark.driver.memory": "1g"}
    if pack is not None:
        conf["spark.archives"] = f"{pack}#shoalenv"
        conf["spark.pyspark.python"] = "./shoalenv/bin/python"
    return conf


@pytest.fixture(scope="module")
def driver(cluster, shoal_pack, pg_url, s3_endpoint, work_dir) -> Iterator[
        tuple[DriverProcess, int]]:
    ui_port = free_port()
    conf = {**_base_conf(shoal_pack), "spark.cores.max": "2", "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port)}
    data = work_dir / "driver"
    data.mkdir()
    env = _driver_env(cluster, catalog_url=pg_url,
                      storage_url=f"s3://{TEST_BUCKET}/cluster-{uuid.uuid4().hex[:8]}",
                      s3_endpoint=s3_endpoint, data_dir=data, spark_conf=conf)
    d = DriverProcess(env, data / "driver.log")
    try:
        assert d.ready["ok"], d.ready
        d.call("start")
        yield d, ui_port
    finally:
        d.close()


def _app_api(ui_port: int, path: str) -> Any:
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    with urllib.request.urlopen(base, timeout=60) as r:
        app_id = json.loads(r.read())[0]["id"]
    with urllib.request.urlopen(f"{base}/{app_id}/{path}", timeout=60) as r:
        return json.loads(r.read())


def _tasks_by_executor(ui_port: int) -> dict[str, int]:
    return {e["id"]: e["totalTasks"] for e in _app_api(ui_port, "allexecutors")}


def _put_objects(endpoint: str, prefix: str, objects: dict[str, bytes]) -> None:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    for key, body in objects.items():
        s3.put_object(Bucket=TEST_BUCKET, Key=f"{prefix}/{key}", Body=body)


DROP_TABLE = "CREATE TABLE {name} (ts timestamp, f long, n long, tag string, msg string)"


def _drop_objects(n: int, rows: int, *, tag: str) -> tuple[dict[str, bytes], int]:
    objects = {}
    total = 0
    for i in range(n):
        lines = "".join(json.dumps({"ts": f"2026-01-{1 + i % 28:02d}T00:00:{j % 60:02d}Z",
                                    "f": i, "n": j, "tag": tag, "msg": f"m{j % 97}"}) + "\n"
                        for j in range(rows))
        body = lines.encode()
        objects[f"f{i:02d}.ndjson.gz" if i % 2 else f"f{i:02d}.ndjson"] = (
            gzip.compress(body, 1) if i % 2 else body)
        total += rows
    return objects, total


# ---- settings (no cluster) -------------------------------------------------------------------

def test_user_settings_win_and_shoal_defaults_fill_the_rest():
    from shoal.config import Config
    from shoal.query.spark.cluster import REQUIRED, session_settings

    cfg = Config(spark_master="spark://m:7077", catalog_url="postgresql://h/db",
                 storage_url="s3://b/p",
                 spark_conf=(("spark.sql.shuffle.partitions", "64"),
                             ("spark.executorEnv.AWS_REGION", "eu-west-1"),
                             ("spark.sql.session.timeZone", "Europe/Paris")))
    env = {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "us-east-1"}
    got = session_settings(cfg, env=env, spark_defaults={"spark.driver.memory": "8g"})
    assert got["spark.sql.shuffle.partitions"] == "64"             # the user's
    assert "spark.driver.memory" not in got                        # spark-defaults.conf's
    assert got["spark.executorEnv.AWS_ACCESS_KEY_ID"] == "AK"      # shipped with the job
    assert got["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == "SK"
    assert got["spark.executorEnv.AWS_REGION"] == "eu-west-1"      # the user's again
    assert "spark.ui.enabled" not in got                           # Spark's own on a cluster
    assert "spark.cores.max" not in got                            # only `serve` is capped
    assert got["spark.sql.session.timeZone"] == REQUIRED["spark.sql.session.timeZone"]
    serve = session_settings(cfg, role="serve", env=env, spark_defaults={})
    assert serve["spark.cores.max"] == "2" and serve["spark.executor.memory"] == "2g"
    capped = session_settings(Config(spark_master="spark://m:7077",
                                     spark_conf=(("spark.cores.max", "6"),)),
                              role="serve", env={}, spark_defaults={})
    assert capped["spark.cores.max"] == "6"
    local = session_settings(Config(), env=env, spark_defaults={})
    assert local["spark.ui.enabled"] == "false"
    assert not any(k.startswith("spark.executorEnv.") for k in local)  # one process


def test_spark_section_and_shoal_spark_conf(tmp_path):
    from shoal.config import load_config

    toml = tmp_path / "shoal.toml"
    toml.write_text('spark_master = "spark://m:7077"\n[spark]\n'
                    '"spark.executor.memory" = "4g"\nspark.driver.host = "10.0.0.5"\n'
                    'spark.dynamicAllocation.enabled = false\n')
    cfg = load_config(config_file=str(toml), env={
        "SHOAL_SPARK_CONF": "spark.executor.memory=6g; spark.jars.packages=a:b:1,c:d:2"})
    assert cfg.spark_settings == {"spark.executor.memory": "6g",
                                  "spark.driver.host": "10.0.0.5",
                                  "spark.dynamicAllocation.enabled": "false",
                                  "spark.jars.packages": "a:b:1,c:d:2"}


def test_the_executor_error_is_the_message():
    from shoal.query.spark.failures import spark_message

    trace = ("An error occurred while calling z:org.apache.spark.api.python.PythonRDD."
             "collectAndServe.\n: org.apache.spark.SparkException: Job aborted due to stage "
             "failure: Task 0 in stage 1.0 failed 4 times, most recent failure: Lost task 0.3 "
             "(TID 7) (10.0.0.7 executor 1): org.apache.spark.api.python.PythonException: "
             "Traceback (most recent call last):\n  File \"/w/worker.py\", line 1, in main\n"
             "    process()\nshoal.errors.StorageError: cannot read s3://b/x: ACCESS_DENIED\n"
             "\n\tat org.apache.spark.api.python.BasePythonRunner.handle(Py.scala:1)\n"
             "\tat scala.Option.foreach(Option.scala:1)\nDriver stacktrace:\n\tat x.y(z:1)\n")
    assert spark_message(RuntimeError(trace)) == "StorageError: cannot read s3://b/x: " \
                                                 "ACCESS_DENIED"
    banner = ("An exception was thrown from the Python worker. Please see the stack trace "
              "below.\nTraceback (most recent call last):\n  File \"x\", line 2\n"
              "ValueError: boom")
    assert spark_message(RuntimeError(banner)) == "ValueError: boom"
    assert spark_message(RuntimeError("[TABLE_OR_VIEW_NOT_FOUND] nope\n\tat a.b(c:1)")) == \
        "[TABLE_OR_VIEW_NOT_FOUND] nope"


@pytest.mark.parametrize("setting,named", [
    ({"SHOAL_STORAGE_URL": f"s3://{TEST_BUCKET}/x"}, "embedded SQLite"),
    ({"SHOAL_CATALOG_URL": "postgresql://postgres@127.0.0.1:5432/test"}, "local directory"),
])
def test_a_cluster_with_an_embedded_catalog_or_local_store_is_refused_at_once(
        tmp_path, setting, named):
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update({"SHOAL_SPARK_MASTER": "spark://127.0.0.1:7", "SHOAL_DATA_DIR": str(data),
                **setting})
    done = subprocess.run([sys.executable, "-m", "shoal", "sql", "SELECT 1 AS x"], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: spark master spark://127.0.0.1:7")
    assert named in lines[0]
    assert not data.exists()                # nothing created on this machine


# ---- on the cluster ----------------------------------------------------------------------

def _short_app(cluster: SparkCluster, tmp_path: Path, pg_url: str, s3_endpoint: str,
               conf: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = _driver_env(cluster, catalog_url=pg_url, storage_url=f"s3://{TEST_BUCKET}/ff",
                      s3_endpoint=s3_endpoint, data_dir=tmp_path, spark_conf=conf)
    env["SHOAL_SPARK_CONF"] += ";spark.cores.max=1"     # one executor is enough to fail
    return subprocess.run([sys.executable, "-m", "shoal", "sql", "SELECT 1 AS x"], env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=tmp_path)


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """shoal's one line (Spark's JVM may log its own lines on stderr before it)."""
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], done.stderr[-3000:]
    return errors[0]


def test_executors_without_shoal_are_named_at_start(cluster, pg_url, s3_endpoint, tmp_path):
    # No pack shipped: the workers' own python3 runs the check and cannot import shoal.
    done = _short_app(cluster, tmp_path, pg_url, s3_endpoint, _base_conf(None))
    line = _one_error_line(done)
    assert "cannot import shoal" in line and "shoal spark pack" in line


def test_a_catalog_executors_cannot_reach_is_named_with_their_error(
        cluster, pg_url, s3_endpoint, tmp_path):
    # The executors' environment requires TLS the server does not offer: only they fail.
    # (Executors run this venv's Python here, the way a node with shoal installed at the
    # driver's path would: it spares the test unpacking the archive on each executor.)
    conf = {**_base_conf(None), "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PGSSLMODE": "require"}
    done = _short_app(cluster, tmp_path, pg_url, s3_endpoint, conf)
    line = _one_error_line(done)
    assert "cannot reach the catalog" in line and "SSL" in line


def test_everything_runs_on_the_executors(driver, cluster, s3_endpoint, broker):
    d, ui_port = driver
    # Executors run the shipped environment, with the credentials the job gave them (the
    # workers' own environment has neither).
    for fact in d.call("executors")["facts"]:
        assert "/shoalenv/" in fact["python"] and "/shoalenv/" in fact["shoal"], fact
        assert fact["aws_key"] and "/src" not in fact["pythonpath"], fact
    # DDL and ingest (the driver), then a query with pruning on the executors.
    d.call("sql", sql="CREATE TABLE e (ts timestamp, svc string, n long)")
    for day in range(1, 6):
        body = "".join(json.dumps({"ts": f"2026-02-{day:02d}T12:00:00Z", "svc": f"s{i % 3}",
                                   "n": i}) + "\n" for i in range(200))
        d.call("ingest", table="e", ndjson=body)
    q = d.call("sql", sql="SELECT svc, count(*) AS c, sum(n) AS s FROM e "
                          "WHERE ts >= TIMESTAMP '2026-02-04 00:00:00' GROUP BY svc ORDER BY svc")
    want = {f"s{k}": sum(1 for i in range(200) if i % 3 == k) * 2 for k in range(3)}
    assert {r["svc"]: r["c"] for r in q["rows"]} == want
    assert q["stats"]["engine"] == "spark"
    assert q["stats"]["extents_considered"] == 5 and q["stats"]["extents_pruned"] == 3

    # File-drop of 20 objects (half gzip) from S3.
    objects, rows = _drop_objects(20, 300, tag="a")
    _put_objects(s3_endpoint, "drop-a", objects)
    d.call("sql", sql=DROP_TABLE.format(name="fd"))
    fd = d.call("filedrop", table="fd", path=f"s3://{TEST_BUCKET}/drop-a")
    assert (fd["ingested"], fd["rows"]) == (20, rows)
    again = d.call("filedrop", table="fd", path=f"s3://{TEST_BUCKET}/drop-a")
    assert again["ingested"] == 0
    count = d.call("sql", sql="SELECT count(*) AS c, count(DISTINCT f) AS files FROM fd")
    assert count["rows"] == [{"c": rows, "files": 20}]

    # Compaction: the five ingested extents of `e` become fewer, same rows.
    before = d.call("extents", table="e")
    report = d.call("compact", table="e")["report"]
    after = d.call("extents", table="e")
    assert len(after["extents"]) < len(before["extents"]) and after["rows"] == 1000, report
    assert d.call("sql", sql="SELECT count(*) AS c FROM e")["rows"] == [{"c": 1000}]

    # A Kafka pipeline.
    topic = f"cluster-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    broker.produce(topic, [(i % 2, json.dumps({"v": i}).encode(), []) for i in range(400)])
    d.call("sql", sql="CREATE TABLE k (v long)")
    d.call("kafka", table="k", bootstrap=broker.bootstrap, topic=topic)
    assert d.call("sql", sql="SELECT count(*) AS c, sum(v) AS s FROM k")["rows"] == [
        {"c": 400, "s": sum(range(400))}]

    # It all ran on the cluster: the master lists the app with an executor on each worker,
    # and every executor ran tasks while the driver ran none.
    state = cluster.state()
    apps = [a for a in state["activeapps"] if a["name"] == "shoal"]
    assert len(apps) == 1 and apps[0]["cores"] == 2
    assert all(w["coresused"] >= 1 for w in state["workers"] if w["state"] == "ALIVE")
    tasks = _tasks_by_executor(ui_port)
    assert tasks.pop("driver") == 0
    assert len(tasks) >= 2 and all(n > 0 for n in tasks.values()), tasks


def _no_duplicates_no_orphans(d: DriverProcess, table: str, rows: int) -> None:
    ext = d.call("extents", table=table)
    assert len(ext["extents"]) == len(set(ext["extents"])) == len(set(ext["paths"]))
    assert ext["rows"] == rows
    gc = d.call("gc")
    assert gc["orphans_left"] == []


def test_a_worker_killed_mid_filedrop_and_mid_query(driver, cluster, s3_endpoint):
    d, ui_port = driver
    objects, rows = _drop_objects(20, 4000, tag="k")
    _put_objects(s3_endpoint, "drop-k", objects)
    d.call("sql", sql=DROP_TABLE.format(name="fk"))

    d.send("filedrop", table="fk", path=f"s3://{TEST_BUCKET}/drop-k")
    d.wait_event("tasks_running")
    cluster.kill_worker(0)          # the worker's JVM, its executor and Python workers
    fd = d._next_answer()
    assert fd["ok"], fd
    assert (fd["ingested"], fd["rows"]) == (20, rows)
    # The master gave the app a replacement executor on the surviving worker.
    wait_for("a replacement executor", lambda: len([
        e for e in _app_api(ui_port, "executors") if e["id"] != "driver"]) >= 2)
    _no_duplicates_no_orphans(d, "fk", rows)

    cluster.add_worker(cores=2, memory="2g")
    sql = ("SELECT f, count(*) AS c, sum(n) AS s FROM fk GROUP BY f ORDER BY f")
    d.send("sql", sql=sql)
    d.wait_event("tasks_running")
    cluster.kill_worker(1)
    q = d._next_answer()
    assert q["ok"], q
    assert q["rows"] == [{"f": i, "c": 4000, "s": sum(range(4000))} for i in range(20)]
    assert d.call("sql", sql="SELECT count(*) AS c FROM fk")["rows"] == [{"c": rows}]
    _no_duplicates_no_orphans(d, "fk", rows)
    lost = [e for e in _app_api(ui_port, "allexecutors") if not e["isActive"]]
    assert len(lost) >= 2       # both kills took an executor of this app with them
