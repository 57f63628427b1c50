"""The binding supervisor's rules (`shoal.frontends.supervisor`), with fake kinds, a fake
catalog and a fake clock: no Spark, no broker, no sleeping.

Every rule is checked for two kinds named like the real ones (the supervisor knows nothing of
either), and the real `KafkaKind` / `FileDropKind` are checked for what the rules rely on:
discovery, a binding that compares equal until it changes, and None once unbound or dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from shoal.errors import ConfigError
from shoal.frontends.supervisor import BindingState, BindingSupervisor

WAIT_S = 30.0   # a safety net for event waits, never a budget a passing test gets near
KINDS = ["kafka", "filedrop"]


class FakeCatalog:
    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {}

    def list_tables(self) -> list[Any]:
        return [SimpleNamespace(name=n, properties=dict(p)) for n, p in self.tables.items()]


class FakeTime:
    """A clock that only moves when told to, and a `sleep` that records each wait and moves
    the clock by it. With `hold`, a wait blocks until its event is set (a wake-up)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.hold = False
        self.waits: queue.Queue[float] = queue.Queue()

    def clock(self) -> float:
        return self.now

    def sleep(self, event: threading.Event, seconds: float) -> bool:
        self.waits.put(seconds)
        if self.hold:
            return event.wait(WAIT_S)
        self.now += seconds
        return event.is_set()

    def recorded(self) -> list[float]:
        out = []
        while not self.waits.empty():
            out.append(self.waits.get_nowait())
        return out


class FakeKind:
    """Binds a table whose properties have a key named like the kind; the binding is
    (table, value); the value "bad" does not resolve. A run fails while `fail[table]` > 0
    (after moving the clock by `run_for`), else counts one item and runs until stopped."""

    counters = (("items", "Items handled"),)
    gauges = (("depth", "Queue depth"),)

    def __init__(self, name: str, catalog: FakeCatalog, time: FakeTime) -> None:
        self.name = name
        self.catalog = catalog
        self.time = time
        self.fail: dict[str, int] = {}
        self.run_for = 0.0
        self.started: queue.Queue[tuple[str, str]] = queue.Queue()
        self.stopped: queue.Queue[tuple[str, str]] = queue.Queue()

    def is_bound(self, properties: Mapping[str, Any]) -> bool:
        return self.name in properties

    def resolve(self, table: str) -> tuple[str, str] | None:
        props = self.catalog.tables.get(table)
        if props is None or self.name not in props:
            return None
        if props[self.name] == "bad":
            raise ConfigError(f"bad {self.name} binding")
        return table, props[self.name]

    def run(self, binding: tuple[str, str], stop: threading.Event,
            state: BindingState) -> None:
        table = binding[0]
        if self.fail.get(table, 0) > 0:
            self.fail[table] -= 1
            self.time.now += self.run_for
            raise RuntimeError("boom")
        state.count(items=1)
        state.gauge("depth", 3)
        self.started.put(binding)
        assert stop.wait(WAIT_S)
        self.stopped.put(binding)


def _setup(*names: str, **options: Any
           ) -> tuple[FakeCatalog, FakeTime, list[FakeKind], BindingSupervisor]:
    catalog, time = FakeCatalog(), FakeTime()
    kinds = [FakeKind(n, catalog, time) for n in names]
    options.setdefault("restart_delay_s", 5.0)
    options.setdefault("max_restart_delay_s", 300.0)
    options.setdefault("reset_after_s", 60.0)
    sup = BindingSupervisor(catalog, kinds, clock=time.clock, sleep=time.sleep,
                            **options)
    return catalog, time, kinds, sup


def _get(q: queue.Queue[Any]) -> Any:
    return q.get(timeout=WAIT_S)


def _thread(sup: BindingSupervisor, kind: str, table: str) -> threading.Thread:
    thread = sup.thread(kind, table)
    assert thread is not None
    return thread


@pytest.mark.parametrize("name", KINDS)
def test_a_failed_run_restarts_after_an_exponential_back_off(name):
    catalog, time, (kind,), sup = _setup(name, restart_delay_s=5.0, max_restart_delay_s=30.0)
    catalog.tables["t"] = {name: "v1"}
    kind.fail["t"] = 5
    try:
        sup.rescan()
        assert _get(kind.started) == ("t", "v1")
        assert time.recorded() == [5.0, 10.0, 20.0, 30.0, 30.0]   # doubled, capped
        state = sup.states[(name, "t")]
        assert (state.up, state.error) == (True, None)
        assert (state.failures, state.restarts) == (5, 5)
        assert state.counters == {"items": 1} and state.gauges == {"depth": 3}
    finally:
        sup.stop()
    assert sup.running() == [] and not sup.states[(name, "t")].up


@pytest.mark.parametrize("name", KINDS)
def test_a_run_that_lasted_starts_the_back_off_anew(name):
    catalog, time, (kind,), sup = _setup(name, restart_delay_s=5.0, reset_after_s=60.0)
    catalog.tables["t"] = {name: "v1"}
    kind.fail["t"] = 3
    kind.run_for = 60.0     # each failing run lasted reset_after_s
    try:
        sup.rescan()
        _get(kind.started)
        assert time.recorded() == [5.0, 5.0, 5.0]
    finally:
        sup.stop()


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("how", ["dropped", "unbound"])
def test_a_dropped_or_unbound_table_retires_its_runner_and_state(name, how):
    catalog, time, (kind,), sup = _setup(name)
    catalog.tables["t"] = {name: "v1"}
    catalog.tables["u"] = {name: "v1"}
    try:
        sup.rescan()
        assert {_get(kind.started), _get(kind.started)} == {("t", "v1"), ("u", "v1")}
        assert sup.running() == ["t", "u"]
        thread = _thread(sup, name, "t")
        if how == "dropped":
            del catalog.tables["t"]
        else:
            catalog.tables["t"] = {"other": "x"}
        sup.rescan()
        assert _get(kind.stopped) == ("t", "v1")
        thread.join(WAIT_S)
        assert not thread.is_alive()
        assert sup.running() == ["u"]
        assert set(sup.states) == {(name, "u")}
        assert time.recorded() == []       # a retirement is no failure: no back-off
    finally:
        sup.stop()


@pytest.mark.parametrize("name", KINDS)
def test_a_changed_binding_restarts_the_run_at_once(name):
    catalog, time, (kind,), sup = _setup(name)
    catalog.tables["t"] = {name: "v1"}
    try:
        sup.rescan()
        assert _get(kind.started) == ("t", "v1")
        sup.rescan()                        # unchanged: nothing happens
        assert kind.stopped.empty()
        catalog.tables["t"] = {name: "v2"}
        sup.rescan()
        assert _get(kind.stopped) == ("t", "v1")
        assert _get(kind.started) == ("t", "v2")
        state = sup.states[(name, "t")]
        assert (state.restarts, state.failures) == (1, 0)
        assert state.counters == {"items": 2}   # counters live as long as the binding
        assert time.recorded() == []
    finally:
        sup.stop()


@pytest.mark.parametrize("name", KINDS)
def test_a_bad_new_binding_leaves_the_run_going_with_one_warning(name, caplog):
    catalog, _time, (kind,), sup = _setup(name)
    catalog.tables["t"] = {name: "v1"}
    try:
        sup.rescan()
        _get(kind.started)
        catalog.tables["t"] = {name: "bad"}
        with caplog.at_level(logging.WARNING, logger=f"shoal.{name}"):
            sup.rescan()
            sup.rescan()
        warnings = [r for r in caplog.records if "does not resolve" in r.getMessage()]
        assert len(warnings) == 1, caplog.text
        assert kind.stopped.empty() and sup.states[(name, "t")].up
        catalog.tables["t"] = {name: "v3"}
        sup.rescan()
        assert _get(kind.started) == ("t", "v3")
    finally:
        sup.stop()


@pytest.mark.parametrize("name", KINDS)
def test_a_binding_that_cannot_start_waits_and_a_fix_wakes_it(name):
    catalog, time, (kind,), sup = _setup(name, restart_delay_s=5.0)
    time.hold = True            # a back-off wait lasts until something wakes it
    catalog.tables["t"] = {name: "bad"}
    try:
        sup.rescan()
        assert _get(time.waits) == 5.0
        state = sup.states[(name, "t")]
        assert not state.up and state.failures == 1
        assert state.error == f"ConfigError: bad {name} binding"
        catalog.tables["t"] = {name: "v1"}
        sup.rescan()                # the binding resolves now: the runner is woken
        assert _get(kind.started) == ("t", "v1")
        assert state.up and state.error is None and state.restarts == 1
    finally:
        sup.stop()


@pytest.mark.parametrize("name", KINDS)
def test_a_run_that_ends_by_itself_is_a_failure(name):
    catalog, time, (kind,), sup = _setup(name)
    time.hold = True
    ended = threading.Event()

    def run(binding, stop, state):  # noqa: ANN001
        ended.set()

    kind.run = run
    catalog.tables["t"] = {name: "v1"}
    try:
        sup.rescan()
        assert _get(time.waits) == 5.0
        state = sup.states[(name, "t")]
        assert state.failures == 1 and "without being asked" in (state.error or "")
    finally:
        sup.stop()
    assert ended.is_set()


def test_both_kinds_follow_the_same_rules_side_by_side():
    catalog, time, (kafka, filedrop), sup = _setup(*KINDS)
    catalog.tables["t"] = {"kafka": "k", "filedrop": "f"}
    catalog.tables["only_files"] = {"filedrop": "f"}
    kafka.fail["t"] = 1
    try:
        sup.rescan()
        assert _get(kafka.started) == ("t", "k")
        assert {_get(filedrop.started), _get(filedrop.started)} == {("t", "f"),
                                                                   ("only_files", "f")}
        assert time.recorded() == [5.0]     # only the Kafka run failed
        assert sup.running("kafka") == ["t"]
        assert sup.running("filedrop") == ["only_files", "t"]
        assert sup.states[("kafka", "t")].failures == 1
        assert sup.states[("filedrop", "t")].failures == 0
        del catalog.tables["t"]
        sup.rescan()
        assert {_get(kafka.stopped), _get(filedrop.stopped)} == {("t", "k"), ("t", "f")}
        for name in KINDS:
            thread = sup.thread(name, "t")
            if thread is not None:
                thread.join(WAIT_S)
        assert sup.running() == ["only_files"]
        assert set(sup.states) == {("filedrop", "only_files")}
    finally:
        sup.stop()
    assert sup.running() == []
    assert _get(filedrop.stopped) == ("only_files", "f")   # stop() ended the run


def test_stop_ends_every_run_and_no_runner_starts_after_it():
    catalog, _time, (kind,), sup = _setup("kafka")
    catalog.tables["t"] = {"kafka": "v"}
    sup.rescan()
    _get(kind.started)
    sup.stop()
    assert _get(kind.stopped) == ("t", "v")
    catalog.tables["u"] = {"kafka": "v"}
    sup.rescan()
    assert sup.running() == [] and kind.started.empty()


def test_kinds_must_have_distinct_names_and_counters_be_declared():
    catalog, time = FakeCatalog(), FakeTime()
    with pytest.raises(ValueError, match="distinct"):
        BindingSupervisor(catalog, [FakeKind("a", catalog, time), FakeKind("a", catalog, time)])
    state = BindingState("a", "t", counters={"items": 0}, gauges={})
    with pytest.raises(ValueError, match="no counter"):
        state.count(other=1)


# ---- the real kinds give the supervisor what its rules need ----------------------------------

def test_real_kinds_discover_resolve_and_notice_changes(tmp_path):
    import shoal
    from shoal.frontends.filedrop.kind import FileDropKind
    from shoal.frontends.kafka.kind import KafkaKind

    drop, other = tmp_path / "drop", tmp_path / "other"
    drop.mkdir()
    other.mkdir()
    db = shoal.connect(data_dir=str(tmp_path / "data"), allowed_paths=str(tmp_path))
    try:
        db.sql(f"CREATE TABLE t (n long) WITH (kafka_topic = 'a', filedrop_path = '{drop}')")
        db.sql("CREATE TABLE plain (n long)")
        kafka = KafkaKind(db, default_bootstrap="127.0.0.1:9092")
        filedrop = FileDropKind(db)
        for kind in (kafka, filedrop):
            assert [t.name for t in db.catalog.list_tables()
                    if kind.is_bound(t.properties)] == ["t"]
            assert kind.resolve("plain") is None
            assert kind.resolve("t") == kind.resolve("t")
        before = (kafka.resolve("t"), filedrop.resolve("t"))
        db.catalog.set_properties("t", {"kafka_topic": "b", "filedrop_path": str(other)})
        assert kafka.resolve("t") != before[0]
        assert filedrop.resolve("t") != before[1]
        db.catalog.set_properties("t", {"kafka_topic": None, "filedrop_path": None})
        assert kafka.resolve("t") is None and filedrop.resolve("t") is None
        assert kafka.resolve("missing") is None and filedrop.resolve("missing") is None
    finally:
        db.close()
