"""A shoal driver process for the cluster tests: `python -m
tests.support.cluster_driver`, configured by its environment alone (`SHOAL_*`, as a
deployment is), answering one JSON command per stdin line with one JSON line on stdout.

PySpark allows one SparkContext per process and the test process already has its
`local[2]` session, so the cluster's driver is this child. Commands run through shoal's
public API (`shoal.connect()`, `db.sql`, `FileDropPipeline`, `compact_table`,
`KafkaPipeline`, orphan GC). While a command runs Spark tasks, the first time any are
running the driver prints `{"event": "tasks_running"}`, which the worker-kill tests wait on.

Answers: `{"ok": true, ...}` or `{"ok": false, "error": "<ErrorClass>: <message>"}`.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from typing import Any

_out_lock = threading.Lock()


def emit(doc: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(doc, default=str) + "\n")
        sys.stdout.flush()


class _TaskWatch:
    """Prints `tasks_running` once while a command's Spark stages have running tasks."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _TaskWatch:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self.stop.wait(0.05):
            try:
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is not None and info.numActiveTasks > 0:
                        emit({"event": "tasks_running", "stage": sid})
                        return
            except Exception as e:  # noqa: BLE001 - the context may be stopping
                print(f"task watch: {e}", file=sys.stderr)
                return


def _executor_facts(_rows: Any) -> list[dict[str, Any]]:
    """Runs on an executor (shipped by value: this module is `__main__`)."""
    import os
    import socket

    import shoal

    return [{"host": socket.gethostname(), "python": sys.executable, "shoal": shoal.__file__,
             "aws_key": "AWS_ACCESS_KEY_ID" in os.environ,
             "pythonpath": os.environ.get("PYTHONPATH", "")}]


class Driver:
    def __init__(self) -> None:
        import shoal

        self.db = shoal.connect()

    @property
    def spark(self) -> Any:
        return self.db.query_engine.spark

    def do_start(self) -> dict[str, Any]:
        sc = self.spark.sparkContext
        return {"app_id": sc.applicationId, "ui": sc.uiWebUrl, "master": sc.master}

    def do_executors(self) -> dict[str, Any]:
        sc = self.spark.sparkContext
        return {"facts": sc.parallelize(range(4), 4).mapPartitions(_executor_facts).collect()}

    def do_sql(self, sql: str, engine: str | None = None) -> dict[str, Any]:
        with _TaskWatch(self.spark):
            result = self.db.query_engine.execute(sql, engine=engine)
        return {"rows": result.table.to_pylist(), "stats": result.stats.to_json()}

    def do_create(self, table: str, columns: list[list[str]]) -> dict[str, Any]:
        from shoal.types import Column, parse_type

        self.db.create_table(table, [Column(n, parse_type(t)) for n, t in columns])
        return {}

    def do_ingest(self, table: str, ndjson: str) -> dict[str, Any]:
        ack = self.db.ingest_ndjson(table, ndjson.encode())
        return {"ack": repr(ack)}

    def do_filedrop(self, table: str, path: str) -> dict[str, Any]:
        from shoal.frontends.filedrop.pipeline import FileDropPipeline
        from shoal.frontends.filedrop.source import DropSource

        source = DropSource.parse(path, s3_endpoint=self.db.config.s3_endpoint)
        pipeline = FileDropPipeline.from_client(self.db, self.spark, source, table,
                                                create=True)
        with _TaskWatch(self.spark):
            summary = pipeline.scan()
        return {"ingested": summary.ingested, "rows": summary.rows, "known": summary.known,
                "duplicates": summary.duplicates, "listed": summary.listed}

    def do_compact(self, table: str) -> dict[str, Any]:
        from shoal.maintenance.compaction import compact_table
        from shoal.maintenance.runner import SparkTaskRunner

        cfg = self.db.config
        with _TaskWatch(self.spark):
            report = compact_table(self.db.catalog, self.db.coordinator,
                                   SparkTaskRunner(self.spark), table,
                                   storage_url=cfg.resolved_storage_url,
                                   s3_endpoint=cfg.s3_endpoint, formats=self.db.formats)
        return {"report": report.to_json()}

    def do_extents(self, table: str) -> dict[str, Any]:
        entries = self.db.catalog.manifests(table)
        return {"extents": [e.extent_id for e in entries],
                "paths": [e.object_path for e in entries],
                "rows": sum(e.row_count for e in entries)}

    def do_gc(self) -> dict[str, Any]:
        from shoal.maintenance.gc import collect_garbage
        from shoal.maintenance.orphans import find_orphans

        report = collect_garbage(self.db.catalog, self.db.store, grace_s=0.0)
        left = find_orphans(self.db.catalog, self.db.store, grace_s=0.0)
        return {"deleted": report.deleted, "orphans_left": [o.path for o in left]}

    def do_kafka(self, table: str, bootstrap: str, topic: str) -> dict[str, Any]:
        from shoal.frontends.kafka import KafkaPipeline, resolve_binding

        binding = resolve_binding(self.db.catalog, table, bootstrap=bootstrap, topics=[topic])
        pipeline = KafkaPipeline(self.db, binding, trigger_s=0.2)
        try:
            progress = pipeline.run(until_idle_s=2.0)
        finally:
            pipeline.close()
        return {"progress": repr(progress)}


def main() -> None:
    try:
        driver = Driver()
    except Exception as e:  # noqa: BLE001 - reported to the test
        emit({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return
    emit({"ok": True, "ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd.pop("op")
        try:
            answer = getattr(driver, f"do_{op}")(**cmd)
            emit({"ok": True, **answer})
        except Exception as e:  # noqa: BLE001 - reported to the test
            traceback.print_exc(file=sys.stderr)
            emit({"ok": False, "error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
