"""The catalog Spark tasks share: one per URL per process, a bounded pool, and at
most `EXECUTOR_CATALOGS` URLs kept open."""

from __future__ import annotations

from shoal.catalog import EXECUTOR_CATALOGS, EXECUTOR_MAX_OVERFLOW, EXECUTOR_POOL_SIZE
from shoal.catalog import executor_catalog


def test_one_bounded_catalog_per_url_and_few_urls(tmp_path):
    urls = [f"sqlite:///{tmp_path / f'c{i}.db'}" for i in range(EXECUTOR_CATALOGS + 1)]
    first = executor_catalog(urls[0])
    assert executor_catalog(urls[0]) is first               # shared by the next task
    pool = first.engine.pool                                # type: ignore[attr-defined]
    assert pool.size() == EXECUTOR_POOL_SIZE
    assert pool._max_overflow == EXECUTOR_MAX_OVERFLOW      # noqa: SLF001
    for url in urls[1:]:
        executor_catalog(url)
    # The least recently used URL was closed and dropped: asking again opens a new one.
    again = executor_catalog(urls[0])
    assert again is not first
    assert again.list_tables() == []
