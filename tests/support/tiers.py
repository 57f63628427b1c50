"""The fast tier (`pytest --fast`, `bash scripts/test.sh --fast`): the tests that need no
Spark, no external server (PostgreSQL, the S3 server, a Kafka broker, Prometheus, a
`shoal serve` subprocess) and no browser — the inner loop for a change to the parser, the
planner, the format or the write path.

A test is left out of the fast tier when
- it carries one of the markers in `HEAVY_MARKERS` (`slow`, `postgres`, `s3`, `spark`,
  `spark_cluster`, `services`), or
- its fixtures (directly or through other fixtures) include one in `HEAVY_FIXTURES`.

A test that starts one of those things without saying so is caught, not slowed: in the
fast tier starting a Spark session or a `shoal serve` subprocess fails the test with a
message asking for the `spark` or `services` marker (`guard()`), so the tier stays fast
and its classification stays true as the suite grows. The full suite (no flag) runs
everything, as CI does.

Property tests stay in the tier with fewer examples: `--fast` selects the hypothesis profile
`fast`, and each property test runs the share of its own example count that the profile
holds of hypothesis' default (a fifth: 150 examples become 30, at least one). The full
suite runs every test's own count.
"""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import settings

HEAVY_MARKERS = ("slow", "postgres", "s3", "spark", "spark_cluster", "services")
HEAVY_FIXTURES = frozenset({
    "spark", "s3_endpoint", "pg_server", "playwright_driver", "browser", "page",
    "kafka_broker", "mariadb_source",
})
FAST_ENV = "SHOAL_TEST_FAST"
FAST_PROFILE = "fast"
settings.register_profile(FAST_PROFILE, max_examples=20)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true", default=False,
                     help="run only the tests that need no Spark, external server or browser")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: starts a Spark session without the `spark` "
                                       "fixture (left out of the fast tier)")
    config.addinivalue_line("markers", "services: starts a `shoal` process (`serve` or a "
                                       "command run end to end) or another external service "
                                       "(left out of the fast tier)")
    if config.getoption("--fast"):
        os.environ[FAST_ENV] = "1"
        _refuse_spark()


def _refuse_spark() -> None:
    """Make a Spark start fail loudly (in whatever thread it happens) in the fast tier."""
    from shoal.query.spark import session

    def refused(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("this test starts a Spark session, which the fast tier leaves "
                           "out: mark it @pytest.mark.spark (or use the `spark` fixture)")

    session._session = refused  # type: ignore[assignment]


def is_heavy(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(name) for name in HEAVY_MARKERS):
        return True
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(fixtures & HEAVY_FIXTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--fast"):
        return
    keep, drop = [], []
    for item in items:
        (drop if is_heavy(item) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    _fewer_examples(items)


def _fewer_examples(items: list[pytest.Item]) -> None:
    """Scale each kept property test's example count by the `fast` profile's share.

    A test's settings (its own `@settings` or the profile in force when it was defined) are
    read when it runs, so they are replaced here, after every test module is imported; the
    profile is loaded for settings made from now on."""
    share = (settings.get_profile(FAST_PROFILE).max_examples
             / settings.get_profile("default").max_examples)
    settings.load_profile(FAST_PROFILE)
    done: set[int] = set()
    for item in items:
        test = getattr(item, "function", None)
        if not getattr(test, "is_hypothesis_test", False) or id(test) in done:
            continue
        done.add(id(test))
        own: settings = test._hypothesis_internal_use_settings  # type: ignore[union-attr]
        test._hypothesis_internal_use_settings = settings(  # type: ignore[union-attr]
            own, max_examples=max(1, math.ceil(own.max_examples * share)))


def fast_tier() -> bool:
    return os.environ.get(FAST_ENV) == "1"


def guard(what: str, marker: str) -> None:
    """Fail at once when the fast tier is about to start something it leaves out."""
    if fast_tier():
        pytest.fail(f"this test starts {what}, which the fast tier leaves out: mark it "
                    f"@pytest.mark.{marker} (or use the fixture that provides it)",
                    pytrace=False)
