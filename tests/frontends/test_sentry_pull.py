"""Sentry pull against a local HTTP server (a real socket) serving Sentry's documented issue
and event payloads: cursor pagination from the `Link` header, 429 + `Retry-After` waited
out through the injected sleep, and exactly once across failures and restarts (the
position is committed with the rows)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

import shoal
from shoal.client import Shoal
from shoal.errors import InvalidPropertyError, InvalidSchemaError, LocationNotAllowedError
from shoal.frontends.sentry.binding import parse_binding, resolve_token
from shoal.frontends.sentry.kind import SentryKind, resolve_sentry_binding
from shoal.frontends.sentry.pull import (Position, SentryPullError, SentryPuller, next_cursor,
                                         retry_after_s)
from shoal.frontends.supervisor import BindingState
from tests.support.sentry_api import FakeSentry, event, fake_sentry, issue

T0 = 1_767_225_600_000     # 2026-01-01T00:00:00Z in ms


class Sleeps:
    """The injected sleep: records each wait and returns at once (not stopped)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, stop: threading.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        return stop.is_set()


@pytest.fixture
def sentry() -> Iterator[FakeSentry]:
    with fake_sentry() as fake:
        yield fake


def _open(path: str, fake: FakeSentry) -> Shoal:
    return shoal.connect(data_dir=path, allowed_hosts=fake.host)


@pytest.fixture
def db(tmp_path, sentry) -> Iterator[Shoal]:
    d = _open(str(tmp_path / "data"), sentry)
    yield d
    d.close()


def _create(db: Shoal, fake: FakeSentry, table: str = "sentry_issues", **extra: str) -> None:
    props = {"sentry_url": fake.url, "sentry_org": "acme", "sentry_project": "web",
             "sentry_token_env": "SENTRY_TOKEN", "sentry_interval": "5m", **extra}
    with_ = ", ".join(f"{k} = '{v}'" for k, v in props.items())
    db.sql(f"CREATE TABLE {table} WITH ({with_})")


def _puller(db: Shoal, table: str, sleeps: Sleeps, token: str = "secret-token") -> SentryPuller:
    binding = resolve_token(resolve_sentry_binding(db, table), {"SENTRY_TOKEN": token})
    return SentryPuller(db, binding, sleep=sleeps)


def _rows(db: Shoal, table: str) -> list[dict]:
    data, _ = db.read(table)
    return data.to_pylist()


def test_pages_429_and_a_restart_pull_every_issue_exactly_once(tmp_path, sentry, db):
    sentry.token = "secret-token"
    for n in range(250):
        sentry.put_issue(issue(n, T0 + n * 1000, count=n + 1))
    _create(db, sentry)
    sleeps = Sleeps()
    sentry.rate_limit_next(1, retry_after="7")     # the first page is rate-limited once
    with _puller(db, "sentry_issues", sleeps) as puller:
        # Page 1 (after a 429), page 2, then Sentry fails on page 3: the round fails.
        original = sentry.answer
        calls = {"n": 0}

        def flaky(path, query, auth):
            calls["n"] += 1
            if calls["n"] == 4:                 # 429, page 1, page 2, then page 3 fails
                return 500, {}, {"detail": "boom"}
            return original(path, query, auth)

        sentry.answer = flaky  # type: ignore[method-assign]
        with pytest.raises(SentryPullError, match="HTTP status 500") as err:
            puller.pull()
        assert "secret-token" not in str(err.value)
        sentry.answer = original  # type: ignore[method-assign]
    assert sleeps.waits == [7.0]
    assert len(_rows(db, "sentry_issues")) == 200
    pos, _ = SentryPuller(db, parse_binding("sentry_issues", db.catalog.load_table(
        "sentry_issues").properties), sleep=sleeps).position()
    assert pos.walking and pos.cursor is not None

    # New issues arrive at the head while the walk is under way: not in this walk.
    sentry.put_issue(issue(300, T0 + 900_000))
    db.close()
    # A restart: a new process state, the same catalog. It resumes at page 3.
    again = _open(str(tmp_path / "data"), sentry)
    try:
        with _puller(again, "sentry_issues", sleeps) as puller:
            first = puller.pull()
            assert first.walk_finished and first.rows == 50
            # The next round takes what became newer since the walk began.
            for n in (3, 7, 11):        # seen again: a new observation of each
                sentry.put_issue(issue(n, T0 + 1_000_000 + n, count=n + 100))
            second = puller.pull()
            assert second.rows == 4     # the one that arrived, and the three seen again
            assert puller.pull().rows == 0      # nothing new: nothing written
        rows = _rows(again, "sentry_issues")
    finally:
        again.close()
    seen = Counter((r["id"], r["last_seen"]) for r in rows)
    assert max(seen.values()) == 1                          # no duplicate observation
    assert {r["id"] for r in rows} == set(sentry.issues)    # nothing lost
    latest: dict[str, dict] = {}
    for r in sorted(rows, key=lambda r: r["_timestamp"]):
        latest[r["id"]] = r
    assert {i: r["count"] for i, r in latest.items()} == {
        i: int(o["count"]) for i, o in sentry.issues.items()}
    assert set(sentry.auth_seen) == {"Bearer secret-token"}
    assert latest["1003"]["project"] == "web" and latest["1003"]["short_id"] == "WEB-3"


def test_a_stop_during_a_429_wait_commits_nothing_and_the_next_round_resumes(sentry, db):
    for n in range(150):
        sentry.put_issue(issue(n, T0 + n))
    _create(db, sentry)
    stop = threading.Event()

    def sleep_then_stop(ev: threading.Event, seconds: float) -> bool:
        stop.set()
        return True

    with _puller(db, "sentry_issues", Sleeps()) as puller:
        first = puller.pull()          # both pages in one round
        assert (first.pages, first.rows, first.walk_finished) == (2, 150, True)
    for n in range(150, 260):
        sentry.put_issue(issue(n, T0 + n))
    binding = resolve_token(resolve_sentry_binding(db, "sentry_issues"),
                            {"SENTRY_TOKEN": "t"})
    with SentryPuller(db, binding, sleep=sleep_then_stop) as puller:
        sentry.rate_limit_next(1)
        result = puller.pull(stop)
        assert result.stopped and result.rows == 0
    with _puller(db, "sentry_issues", Sleeps()) as puller:
        assert puller.pull().rows == 110
    assert sorted(int(r["id"]) for r in _rows(db, "sentry_issues")) == \
        [1000 + n for n in range(260)]


def test_events_are_pulled_with_tags_and_frames(sentry, db, monkeypatch):
    for n in range(30):
        sentry.put_event(event(n, T0 + n * 10))
    _create(db, sentry, table="sentry_pulled_events", sentry_resource="events")
    with _puller(db, "sentry_pulled_events", Sleeps()) as puller:
        original = sentry.answer
        calls = {"n": 0}

        def arrive_mid_walk(path, query, auth):
            calls["n"] += 1
            if calls["n"] == 2:         # an event arrives between the walk's pages
                sentry.put_event(event(50, T0 + 4000))
            return original(path, query, auth)

        sentry.answer = arrive_mid_walk  # type: ignore[method-assign]
        monkeypatch.setattr("shoal.frontends.sentry.pull.PAGE_LIMIT", 7)   # several pages
        assert puller.pull().rows == 30
        sentry.answer = original  # type: ignore[method-assign]
        assert puller.pull().rows == 1  # the one that arrived mid-walk, once
        sentry.put_event(event(99, T0 + 5000))
        assert puller.pull().rows == 1
    got = db.sql("SELECT get_json_object(tags, '$.customer') AS c, count(*) AS n "
                 "FROM sentry_pulled_events GROUP BY 1 ORDER BY 1").table.to_pylist()
    assert got == [{"c": "c0", "n": 11}, {"c": "c1", "n": 10}, {"c": "c2", "n": 11}]
    ids = [r["event_id"] for r in _rows(db, "sentry_pulled_events")]
    assert len(ids) == len(set(ids)) == 32
    first = [r for r in _rows(db, "sentry_pulled_events") if r["event_id"] == f"{5:032x}"]
    entries = json.loads(first[0]["entries"])
    assert entries[0]["data"]["values"][0]["stacktrace"]["frames"][0]["lineNo"] == 5


def test_the_kind_reports_a_failed_round_and_goes_on(sentry, db):
    sentry.put_issue(issue(1, T0))
    _create(db, sentry)
    kind = SentryKind(db, sleep=Sleeps())
    state = BindingState("sentry", "sentry_issues",
                         counters={n: 0 for n, _ in kind.counters},
                         gauges={n: None for n, _ in kind.gauges})
    with _puller(db, "sentry_issues", Sleeps()) as puller:
        sentry.fail_next(1)
        assert kind.round(puller, threading.Event(), state) is None
        assert not state.up and "HTTP status 500" in (state.error or "")
        assert kind.round(puller, threading.Event(), state) is not None
        assert state.up and state.counters["rows"] == 1
        assert state.counters["round_failures"] == 1


def test_a_missing_token_variable_is_named_not_shown(sentry, db):
    _create(db, sentry)
    binding = resolve_sentry_binding(db, "sentry_issues")
    with pytest.raises(Exception, match="SENTRY_TOKEN"):
        resolve_token(binding, {})
    assert "secret" not in repr(resolve_token(binding, {"SENTRY_TOKEN": "secret"}))


def test_the_binding_is_checked_at_create(sentry, db):
    base = (f"sentry_url = '{sentry.url}', sentry_org = 'acme', sentry_project = 'web'")
    with pytest.raises(LocationNotAllowedError, match="SHOAL_ALLOWED_HOSTS"):
        db.sql("CREATE TABLE bad WITH (sentry_url = 'https://sentry.example', "
               "sentry_org = 'acme', sentry_project = 'web')")
    with pytest.raises(InvalidPropertyError, match="sentry_project is required"):
        db.sql(f"CREATE TABLE bad WITH (sentry_url = '{sentry.url}', sentry_org = 'acme')")
    with pytest.raises(InvalidPropertyError, match="sentry_token_env"):
        db.sql(f"CREATE TABLE bad WITH ({base}, sentry_token = 'hunter2')")
    with pytest.raises(InvalidPropertyError, match="at least 10s"):
        db.sql(f"CREATE TABLE bad WITH ({base}, sentry_interval = '1s')")
    with pytest.raises(InvalidPropertyError, match="issues or events"):
        db.sql(f"CREATE TABLE bad WITH ({base}, sentry_resource = 'releases')")
    with pytest.raises(InvalidSchemaError, match='column "nope"'):
        db.sql(f"CREATE TABLE bad (nope string) WITH ({base})")
    assert "bad" not in [t.name for t in db.catalog.list_tables()]
    db.sql(f"CREATE TABLE ok WITH ({base}, sentry_token_env = 'SENTRY_TOKEN')")
    shown = {r["key"]: r["value"] for r in db.sql("SHOW TBLPROPERTIES ok").table.to_pylist()}
    assert shown["sentry_token_env"] == "SENTRY_TOKEN"
    assert not any("secret" in str(v) for v in shown.values())
    assert [c["name"] for c in db.describe("ok")["columns"]][:4] == \
        ["_timestamp", "props", "id", "short_id"]


def test_link_headers_and_retry_after():
    link = ('<https://s/api/0/x/?cursor=0:0:1>; rel="previous"; results="false"; '
            'cursor="0:0:1", <https://s/api/0/x/?cursor=1700:100:0>; rel="next"; '
            'results="true"; cursor="1700:100:0"')
    assert next_cursor(link) == "1700:100:0"
    assert next_cursor(link.replace('results="true"', 'results="false"')) is None
    assert next_cursor(None) is None
    assert retry_after_s("7", now=0) == 7.0
    assert retry_after_s(None, now=0) == 60.0
    assert retry_after_s("Thu, 01 Jan 1970 00:00:30 GMT", now=10) == 20.0
    assert retry_after_s("99999", now=0) == 600.0
    with pytest.raises(SentryPullError, match="not of the form"):
        Position(walking=True, cursor="abc").offsets("u")


def test_serve_s_supervisor_runs_the_pull_of_a_bound_table(sentry, db, monkeypatch):
    from shoal.frontends.supervisor import BindingSupervisor
    from tests.support.waiting import eventually

    monkeypatch.setenv("SENTRY_TOKEN", "secret-token")
    sentry.token = "secret-token"
    for n in range(5):
        sentry.put_issue(issue(n, T0 + n))
    _create(db, sentry)
    sup = BindingSupervisor(db.catalog, [SentryKind(db)])
    sup.rescan()
    try:
        eventually(lambda: len(_rows(db, "sentry_issues")), "the first pull",
                   until=lambda n: n == 5)
        assert sup.running("sentry") == ["sentry_issues"]
        [state] = sup.snapshot()
        eventually(lambda: state.up, "the round reported")
        assert state.counters["rows"] == 5 and state.counters["pages"] == 1
    finally:
        sup.stop()


_CHILD = """
import sys, threading
import shoal
from shoal.frontends.sentry.kind import resolve_sentry_binding
from shoal.frontends.sentry import pull
from shoal.frontends.sentry.pull import SentryPuller
pull.PAGE_LIMIT = 10
db = shoal.connect(data_dir=sys.argv[1], allowed_hosts=sys.argv[2])
binding = resolve_sentry_binding(db, "sentry_issues")
with SentryPuller(db, binding, sleep=lambda stop, s: stop.wait(s)) as puller:
    while True:
        puller.pull()
"""


@pytest.mark.slow
def test_sigkill_mid_walk_then_restart_loses_and_duplicates_nothing(tmp_path, sentry, db):
    """A pulling process is killed (SIGKILL) while waiting for a page, at several points of
    successive walks; each restart goes on from the committed position."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support.waiting import HANG_GUARD_S

    for n in range(95):
        sentry.put_issue(issue(n, T0 + n * 1000))
    _create(db, sentry)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    data = str(db.config.data_path)
    requests = 0
    for hold_at, arrivals in ((3, range(95, 100)), (2, range(100, 130)), (5, range(130, 131))):
        # the child pages by 10: it dies waiting for its 3rd, 2nd, 5th page of a walk
        sentry.hold_at = requests + hold_at
        sentry.holding.clear()
        sentry.release.clear()
        child = subprocess.Popen([sys.executable, "-c", _CHILD, data, sentry.host], env=env,
                                 stdin=subprocess.DEVNULL)
        try:
            assert sentry.holding.wait(HANG_GUARD_S), "the child never reached the hold"
            for n in arrivals:              # arrive while the child is stuck mid-way
                sentry.put_issue(issue(n, T0 + 200_000 + n))
            for n in (1, 2) if hold_at == 2 else ():
                sentry.put_issue(issue(n, T0 + 300_000 + n, count=5))   # seen again
            child.send_signal(signal.SIGKILL)
            child.wait(HANG_GUARD_S)
        finally:
            if child.poll() is None:
                child.kill()
            sentry.release.set()
        requests = len([r for r in sentry.requests if "/issues/" in r])
    sentry.hold_at = None
    before = _rows(db, "sentry_issues")
    assert len(before) >= 20 and len(before) < len(sentry.issues)   # the children committed
    with _puller(db, "sentry_issues", Sleeps()) as puller:
        rounds = 1
        while puller.pull().rows:       # the walk under way, then what arrived during it
            rounds += 1
        assert rounds <= 3
    rows = _rows(db, "sentry_issues")
    seen = Counter((r["id"], r["last_seen"]) for r in rows)
    assert max(seen.values()) == 1
    assert {r["id"] for r in rows} == set(sentry.issues)
    latest = {r["id"]: r for r in sorted(rows, key=lambda r: r["_timestamp"])}
    assert {i: r["count"] for i, r in latest.items()} == {
        i: int(o["count"]) for i, o in sentry.issues.items()}
