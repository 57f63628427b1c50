"""The process's Spark session: started once and kept warm, discarded when its JVM dies.

`spark_session` starts the session on first use (deployed as `shoal.query.spark.cluster`
says, hardened by `shoal.query.guard.SPARK_HARDENING`), with shoal's DataSource and SQL
functions registered; later calls return it. `discard_spark_session` kills its JVM and
forgets PySpark's cached gateway, context and session, so the next call starts a fresh
one; `spark_generation` counts the discards, so an engine holding a session can tell it is
gone. `spark_process` is the JVM, for a supervisor's liveness check.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

from shoal.config import Config
from shoal.query.guard import SPARK_HARDENING
from shoal.query.spark.cluster import SparkRole

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("shoal.query")

_session_lock = threading.Lock()
_generation = 0             # bumped by every discard_spark_session (under _session_lock)


def spark_session(master: str = "local[*]", *, processing_log: str | None = None,
                  max_result_bytes: int | None = None, config: Config | None = None,
                  role: SparkRole = "app") -> SparkSession:
    """The process's Spark session (started on first use), with shoal's DataSource and
    functions registered. `max_result_bytes` becomes `spark.driver.maxResultSize` when this
    call starts the session (a running session keeps its own). With `config` (what every
    edge passes), the session is deployed as `shoal.query.spark.cluster` says: its `[spark]`
    settings, refusal of what a cluster cannot use, and the executor check on a non-local
    master; `master` is then `config.spark_master`."""
    return _session(master, processing_log, max_result_bytes, config, role)[0]


def _session(master: str, processing_log: str | None, max_result_bytes: int | None,
             config: Config | None = None, role: SparkRole = "app", *,
             jvm_log: str | None = None) -> tuple[SparkSession, int]:
    """The session (made if there is none); with `jvm_log`, a new session's JVM logs its
    errors to that file instead of stderr."""
    from pyspark.sql import SparkSession

    from shoal.query.spark import cluster

    with _session_lock:
        active = SparkSession.getActiveSession()
        if active is not None and getattr(active, "_shoal_ready", False):
            return active, _generation
        if config is None:
            config = Config(spark_master=master)
            probe = False
        else:
            cluster.check_deployment(config)        # before the JVM: refused in milliseconds
            probe = not cluster.is_local(config.spark_master)
        log4j = os.path.join(os.path.dirname(__file__), "log4j2-file.properties"
                             if jvm_log is not None else "log4j2.properties")
        settings = cluster.session_settings(config, role=role, log4j=log4j)
        java = settings.get("spark.driver.extraJavaOptions", "")
        if jvm_log is not None and log4j in java:     # ours, not the user's own options
            settings["spark.driver.extraJavaOptions"] = f"{java} -Dshoal.jvm.log={jvm_log}"
        local = cluster.is_local(config.spark_master)
        # Python workers run `spark.pyspark.python` (PySpark reads it from PYSPARK_PYTHON);
        # on a local master, by default, this interpreter (it has shoal and its dependencies).
        if "spark.pyspark.python" in settings:
            os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
        elif local:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if local:
            # One machine: nothing should listen beyond loopback. On a cluster the driver's
            # address is Spark's own choice or spark.driver.host / bindAddress.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.master(config.spark_master).appName(
            settings.pop("spark.app.name", "shoal serve" if role == "serve" else "shoal"))
        for key, value in settings.items():
            builder = builder.config(key, value)
        if max_result_bytes is not None:
            builder = builder.config("spark.driver.maxResultSize", f"{max_result_bytes}b")
        for key, value in SPARK_HARDENING.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        # PySpark logs every failed statement with its JVM stack; shoal reports the error.
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        if probe:
            try:
                cluster.probe_executors(spark, config)
            except BaseException:
                spark.stop()
                raise
        from shoal.query.spark.datasource import ShoalDataSource

        register_data_source(spark, ShoalDataSource)
        _register_functions(spark, processing_log)
        spark._shoal_ready = True  # type: ignore[attr-defined]
        return spark, _generation


def register_data_source(spark: SparkSession, source: type) -> None:
    """Register a Python data source whose planning runs on this machine: Spark runs a data
    source's planner (schema, partitions, streaming offsets) in a Python process of the
    driver, with the interpreter the source was registered with, while executors read with
    `spark.sql.execution.pyspark.python` (the shipped environment's, set by
    `shoal.query.spark.cluster`). So the registration names this interpreter, whatever
    `spark.pyspark.python` says executors run."""
    sc = spark.sparkContext
    executors = sc.pythonExec
    sc.pythonExec = sys.executable
    try:
        spark.dataSource.register(source)
    finally:
        sc.pythonExec = executors


def spark_process() -> subprocess.Popen[bytes] | None:
    """The JVM this process launched for Spark (None before Spark starts, or when PySpark
    connected to a gateway it did not launch)."""
    if "pyspark" not in sys.modules:      # never imported: no JVM (and none is started here)
        return None
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)


def spark_generation() -> int:
    return _generation


def discard_spark_session(*, wait_s: float = 30.0) -> None:
    """Kill this process's Spark JVM (if it still runs) and forget PySpark's cached gateway,
    context and sessions, so that the next `spark_session` launches a fresh JVM. Engines
    holding the old session notice through the generation counter."""
    global _generation
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext

    with _session_lock:
        _generation += 1
        gateway = SparkContext._gateway
        context = SparkContext._active_spark_context
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()     # a wedged JVM would not stop gracefully; its workers follow it
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                log.error("the Spark JVM (pid %s) did not exit after SIGKILL", proc.pid)
        if context is not None:
            server = getattr(context, "_accumulatorServer", None)
            if server is not None:
                try:
                    server.shutdown()
                except Exception as e:  # noqa: BLE001 - best effort on a dead context
                    log.warning("could not stop the accumulator server: %s", e)
            context._jsc = None
        if gateway is not None:
            try:
                gateway.close()
            except Exception as e:  # noqa: BLE001 - the JVM end is gone already
                log.warning("could not close the Spark gateway: %s", e)
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        SQLContext._instantiatedContext = None


def _register_functions(spark: SparkSession, processing_log: str | None) -> None:
    from shoal.query.spark.udfs import register_functions

    register_functions(spark, processing_log)
