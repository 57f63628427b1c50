"""Spark deployment by configuration: which settings a session starts with, what
is refused before it starts, and the check that its executors can do shoal's work.

Settings, strongest first:

1. shoal's required settings (`REQUIRED`, plus `SPARK_HARDENING`): the session time zone and
   the Arrow paths shoal's answers depend on;
2. the user's: the config's `[spark]` table / `SHOAL_SPARK_CONF` (`Config.spark_conf`);
3. `spark-defaults.conf` (`$SPARK_CONF_DIR`, else `$SPARK_HOME/conf`), which Spark applies
   itself: shoal's defaults skip every key it sets;
4. shoal's defaults (`defaults`), applied only where nothing above set the key.

On a non-local master the job carries what executors need, not the workers' environment:
the catalog and store URLs and the S3 endpoint travel in every task's payload (scan specs,
file-drop specs, work units), and the driver's S3 credentials and region become
`spark.executorEnv.*` (unless the user set them). `shoal serve` (`role="serve"`) caps
its share of the cluster (`spark.cores.max`, `spark.executor.memory`) so that other apps
(`shoal sql`, `maintain`, pipelines) get cores too.

Refused before the JVM starts (`check_deployment`): a non-local master with the embedded
SQLite catalog or a `file://` store, which executors on other machines cannot share.

Checked once the session runs (`probe_executors`): one small job whose tasks import shoal
and its dependencies, open the catalog and list the store, from the executors. The task
function is shipped by value (cloudpickle), so it runs even where shoal is missing, and it
reports what failed instead of raising. A missing module, an unreachable catalog or store,
or a Python that cannot start becomes one `SparkDeploymentError` line within seconds; a
cluster that gives the app no executor within `Config.spark_start_timeout_s` (all cores
held by other apps) is reported as such instead of waiting silently.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from shoal.config import Config
from shoal.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("shoal.query.cluster")

SparkRole = Literal["app", "serve"]
LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")
ARCHIVE_ALIAS = "shoalenv"
SHIP_HINT = ("build an environment with `shoal spark pack` and ship it with "
             f"spark.archives=<pack>.tar.gz#{ARCHIVE_ALIAS} and "
             f"spark.pyspark.python=./{ARCHIVE_ALIAS}/bin/python (docs/deployment.md)")
# What executors must import for shoal's tasks (the rest of shoal's dependencies load lazily).
EXECUTOR_MODULES = ("shoal", "shoal.query.spark.datasource", "shoal.frontends.filedrop.task",
                    "shoal.maintenance.compaction", "pyarrow", "numpy", "sqlalchemy",
                    "psycopg", "xxhash", "msgspec")
# Passed to executors when the driver has them and the user did not set them.
EXECUTOR_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_REGION", "AWS_DEFAULT_REGION")
# Settings whose values shoal's answers depend on: always shoal's.
REQUIRED = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.pythonUDF.arrow.enabled": "true",
}
SERVE_CORES_MAX = "2"
SERVE_EXECUTOR_MEMORY = "2g"


class SparkDeploymentError(ConfigError):
    """The Spark deployment cannot run shoal: refused before start, or found at start."""

    code = "spark_deployment"


def is_local(master: str) -> bool:
    return LOCAL_MASTER.fullmatch(master.strip()) is not None


def defaults(master: str, *, role: SparkRole = "app", log4j: str | None = None,
             env: Mapping[str, str] | None = None, driver_memory: str = "2g") -> dict[str, str]:
    """shoal's defaults for a session on `master` (applied only where nothing else sets a
    key); `driver_memory` is `Config.spark_driver_memory`."""
    env = os.environ if env is None else env
    out = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": driver_memory,
        "spark.python.worker.reuse": "true",
    }
    if log4j is not None:
        out["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
    if is_local(master):
        out["spark.ui.enabled"] = "false"       # one process, nobody to look at it
    elif role == "serve":
        out["spark.cores.max"] = SERVE_CORES_MAX
        out["spark.executor.memory"] = SERVE_EXECUTOR_MEMORY
    if not is_local(master):
        for name in EXECUTOR_ENV:
            if env.get(name):
                out[f"spark.executorEnv.{name}"] = env[name]
    return out


def spark_defaults_file(env: Mapping[str, str] | None = None) -> Path | None:
    env = os.environ if env is None else env
    conf_dir = env.get("SPARK_CONF_DIR")
    if conf_dir is None:
        home = env.get("SPARK_HOME")
        if home is None:
            try:
                import pyspark
            except ImportError:
                return None
            home = os.path.dirname(pyspark.__file__)
        conf_dir = os.path.join(home, "conf")
    path = Path(conf_dir) / "spark-defaults.conf"
    return path if path.is_file() else None


def read_spark_defaults(path: Path | None) -> dict[str, str]:
    """The keys and values of a `spark-defaults.conf` (Java properties, whitespace or `=`)."""
    if path is None:
        return {}
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = re.match(r"(\S+?)\s*[=:\s]\s*(.*)$", line)
        if match:
            out[match.group(1)] = match.group(2).strip()
    return out


def session_settings(config: Config, *, role: SparkRole = "app", log4j: str | None = None,
                     env: Mapping[str, str] | None = None,
                     spark_defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings shoal passes to a new session (see the module docstring for the order);
    keys `spark-defaults.conf` sets are left to it unless the user set them too."""
    if spark_defaults is None:
        spark_defaults = read_spark_defaults(spark_defaults_file(env))
    user = config.spark_settings
    out = {k: v for k, v in defaults(config.spark_master, role=role, log4j=log4j, env=env,
                                     driver_memory=config.spark_driver_memory).items()
           if k not in user and k not in spark_defaults}
    out.update(user)
    out.update(REQUIRED)
    if "spark.pyspark.python" in out:
        # SQL's Python runners (data source reads, UDFs) on executors: the same interpreter.
        out.setdefault("spark.sql.execution.pyspark.python", out["spark.pyspark.python"])
    return out


def cluster_cores(config: Config, *, role: SparkRole = "app") -> int | None:
    """The cores a session on a non-local master may use, as its settings say
    (`spark.cores.max`, else `spark.executor.instances` x `spark.executor.cores`); None when
    they do not say (or the master is local). Reads no JVM: what the engine choice weighs
    before any session starts."""
    if is_local(config.spark_master):
        return None
    settings = {**read_spark_defaults(spark_defaults_file()),
                **session_settings(config, role=role)}

    def number(key: str) -> int | None:
        try:
            value = int(settings[key])
        except (KeyError, ValueError):
            return None
        return value if value > 0 else None

    most = number("spark.cores.max")
    if most is not None:
        return most
    instances, cores = number("spark.executor.instances"), number("spark.executor.cores")
    return instances * cores if instances is not None and cores is not None else None


def check_deployment(config: Config) -> None:
    """Refuse, before Spark starts, what executors on other machines could not use."""
    master = config.spark_master
    if is_local(master):
        return
    catalog = config.resolved_catalog_url
    if catalog.startswith("sqlite"):
        raise SparkDeploymentError(
            f"spark master {master} runs tasks on other machines, but the catalog is the "
            f"embedded SQLite file {catalog.removeprefix('sqlite:///')}: set catalog_url "
            "(SHOAL_CATALOG_URL) to a postgresql:// URL every node reaches")
    store = config.resolved_storage_url
    if store.startswith("file:") or "://" not in store:
        raise SparkDeploymentError(
            f"spark master {master} runs tasks on other machines, but the store is the local "
            f"directory {store}: set storage_url (SHOAL_STORAGE_URL) to an s3:// URL every "
            "node reaches")


# ---- the executor check ----------------------------------------------------------------------

# Defined from source so that cloudpickle ships the function by value: it must run (and say
# what is missing) on an executor that cannot import shoal.
_PROBE_SOURCE = '''
def probe(_index, _rows, modules=None, catalog_url=None, storage_url=None, s3_endpoint=None):
    import socket, sys, traceback
    host = socket.gethostname()
    def cause(e):
        text = str(e).strip().splitlines()
        return type(e).__name__ + (": " + text[0] if text else "")
    for name in modules:
        try:
            __import__(name)
        except BaseException as e:
            return [(host, "module", name, cause(e), sys.executable)]
    try:
        from shoal.catalog import open_catalog
        catalog = open_catalog(catalog_url)
        try:
            catalog.list_tables()
        finally:
            catalog.close()
    except BaseException as e:
        return [(host, "catalog", catalog_url, cause(e), sys.executable)]
    try:
        from shoal.storage import open_store
        store = open_store(storage_url, s3_endpoint=s3_endpoint)
        next(iter(store.list(".shoal-probe/")), None)
    except BaseException as e:
        return [(host, "store", storage_url, cause(e), sys.executable)]
    return [(host, "ok", "", "", sys.executable)]
'''


def _probe_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "shoal_executor_probe"}
    exec(compile(_PROBE_SOURCE, "<shoal executor probe>", "exec"), namespace)
    return namespace["probe"]


def probe_executors(spark: SparkSession, config: Config) -> list[tuple[str, ...]]:
    """Run the executor check (module docstring) on a non-local session; returns the
    executors' answers or raises `SparkDeploymentError`."""
    from functools import partial

    sc = spark.sparkContext
    tasks = max(2, int(sc.defaultParallelism))
    fn = partial(_probe_function(), modules=EXECUTOR_MODULES,
                 catalog_url=config.resolved_catalog_url,
                 storage_url=config.resolved_storage_url, s3_endpoint=config.s3_endpoint)
    group = f"shoal-probe-{uuid.uuid4().hex}"
    result: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            sc.setJobGroup(group, "shoal: check that executors can run shoal", True)
            result["rows"] = sc.parallelize(range(tasks), tasks).mapPartitionsWithIndex(
                fn).collect()
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            result["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="shoal-executor-probe", daemon=True).start()
    if not done.wait(config.spark_start_timeout_s):
        sc.cancelJobGroup(group)
        raise SparkDeploymentError(
            f"no executor of spark master {config.spark_master} ran a task within "
            f"{config.spark_start_timeout_s:g} s: the cluster has no free cores or memory for "
            "this app (another app, e.g. a `shoal serve` without spark.cores.max, may hold "
            "them; see docs/deployment.md)")
    if "error" in result:
        raise SparkDeploymentError(_task_failure(result["error"]))
    rows: list[tuple[str, ...]] = [tuple(r) for r in result["rows"]]
    for host, what, name, cause, python in rows:
        if what == "module":
            raise SparkDeploymentError(
                f"executor on {host} ({python}) cannot import {name} ({cause}): "
                f"{SHIP_HINT}")
        if what == "catalog":
            raise SparkDeploymentError(
                f"executor on {host} cannot reach the catalog {_redact(name)}: {cause}")
        if what == "store":
            raise SparkDeploymentError(
                f"executor on {host} cannot reach the store {name}: {cause}")
    log.info("executors checked: %s", sorted({(r[0], r[4]) for r in rows}))
    return rows


def _task_failure(e: BaseException) -> str:
    from shoal.query.spark.failures import spark_message

    text = str(e)
    match = re.search(r'Cannot run program "([^"]+)"', text)
    if match:
        return (f"executors cannot start Python {match.group(1)!r} (not on the workers): "
                f"{SHIP_HINT}")
    return f"executors failed shoal's start-up check: {spark_message(e)}"


def _redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)


__all__ = ["SparkDeploymentError", "check_deployment", "defaults", "is_local",
           "probe_executors", "session_settings"]
