"""Bound pipelines follow table DDL: with a real embedded shoal (SQLite catalog) and the
statements a user runs, the supervisor (woken by the client after each statement, never by
its periodic rescan, which is set to an hour here) restarts a run whose binding property
changed, moves a renamed table's run to the new name and stops a dropped table's run,
saying why in the log.

The kind is a recording one bound by a property `probe_source` (the real Kafka and
file-drop kinds need a broker or Spark; `test_supervisor.py` checks that they resolve a
dropped table to no binding, which is all the supervisor relies on)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from typing import Any

import pytest

import shoal
from shoal.errors import TableNotFoundError
from shoal.frontends.supervisor import BindingState, BindingSupervisor

WAIT_S = 30.0   # a safety net for queue waits, never a budget a passing test gets near


class ProbeKind:
    name = "probe"
    counters = ()
    gauges = ()

    def __init__(self, db: shoal.Shoal) -> None:
        self.db = db
        self.started: queue.Queue[tuple[str, str]] = queue.Queue()
        self.stopped: queue.Queue[tuple[str, str]] = queue.Queue()

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        return bool(properties.get("probe_source"))

    def resolve(self, table: str) -> tuple[str, str] | None:
        try:
            props = self.db.catalog.load_table(table).properties
        except TableNotFoundError:
            return None
        return (table, props["probe_source"]) if self.is_bound(props) else None

    def run(self, binding: tuple[str, str], stop: threading.Event,
            state: BindingState) -> None:
        self.started.put(binding)
        assert stop.wait(WAIT_S)
        self.stopped.put(binding)


@pytest.fixture
def setup(tmp_path):
    db = shoal.connect(data_dir=str(tmp_path / "data"))
    kind = ProbeKind(db)
    sup = BindingSupervisor(db.catalog, [kind], rescan_s=3600.0)
    db.on_tables_changed(sup.poke)
    sup.start()
    yield db, kind, sup
    sup.stop(timeout_s=WAIT_S)
    db.close()


def test_pipelines_follow_property_changes_renames_and_drops(setup, caplog):
    db, kind, sup = setup
    caplog.set_level(logging.WARNING, logger="shoal.probe")
    db.sql("CREATE TABLE t (n long) WITH (probe_source = 'a')")
    assert kind.started.get(timeout=WAIT_S) == ("t", "a")

    db.sql("ALTER TABLE t SET TBLPROPERTIES ('probe_source' = 'b')")
    assert kind.stopped.get(timeout=WAIT_S) == ("t", "a")
    assert kind.started.get(timeout=WAIT_S) == ("t", "b")

    db.sql("ALTER TABLE t RENAME TO u")
    assert kind.stopped.get(timeout=WAIT_S) == ("t", "b")
    assert kind.started.get(timeout=WAIT_S) == ("u", "b")
    assert "probe pipeline of table t stops: the table is gone (dropped or renamed)" in \
        caplog.text

    db.sql("ALTER TABLE u UNSET TBLPROPERTIES ('probe_source')")
    assert kind.stopped.get(timeout=WAIT_S) == ("u", "b")
    assert "probe pipeline of table u stops: the table no longer binds it" in caplog.text

    db.sql("ALTER TABLE u SET TBLPROPERTIES ('probe_source' = 'c')")
    assert kind.started.get(timeout=WAIT_S) == ("u", "c")
    caplog.clear()
    db.sql("DROP TABLE u")
    assert kind.stopped.get(timeout=WAIT_S) == ("u", "c")
    assert "probe pipeline of table u stops: the table is gone (dropped or renamed)" in \
        caplog.text
    db.sql("UNDROP TABLE u")
    assert kind.started.get(timeout=WAIT_S) == ("u", "c")


def test_the_real_kinds_resolve_after_ddl(tmp_path):
    """Kafka and file-drop bindings as the statements leave them: changed by SET
    TBLPROPERTIES, moved by RENAME (the Kafka group stays the one the table consumed
    with), gone after DROP."""
    from shoal.frontends.filedrop.kind import FileDropKind
    from shoal.frontends.kafka.kind import KafkaKind

    drop, other = tmp_path / "drop", tmp_path / "other"
    drop.mkdir()
    other.mkdir()
    db = shoal.connect(data_dir=str(tmp_path / "data"), allowed_paths=str(tmp_path))
    try:
        db.sql(f"CREATE TABLE t (n long) WITH (kafka_topic = 'a', filedrop_path = '{drop}')")
        kafka = KafkaKind(db, default_bootstrap="127.0.0.1:9092")
        filedrop = FileDropKind(db)
        assert kafka.resolve("t").group == "shoal-t"
        before = filedrop.resolve("t")
        db.sql(f"ALTER TABLE t SET TBLPROPERTIES ('kafka_topic' = 'b', "
               f"'filedrop_path' = '{other}')")
        assert kafka.resolve("t").topics == ("b",)
        assert filedrop.resolve("t") != before
        db.sql("ALTER TABLE t RENAME TO u")
        assert kafka.resolve("t") is None and filedrop.resolve("t") is None
        moved = kafka.resolve("u")
        assert (moved.group, moved.topics) == ("shoal-t", ("b",))
        assert filedrop.resolve("u") is not None
        db.sql("DROP TABLE u")
        assert kafka.resolve("u") is None and filedrop.resolve("u") is None
    finally:
        db.close()
