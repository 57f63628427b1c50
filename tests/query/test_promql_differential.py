"""Must show: shoal's PromQL answers what a real Prometheus answers.

A fixed hour of history (counters with a reset, gauges, a classic histogram, an info
metric, a series that stops half-way) is backfilled into a real Prometheus 2.x with
`promtool` and remote-written into a live `shoal serve` (`POST /api/v1/write`,
`load_samples`). Each query is asked of both HTTP APIs at the same evaluation times,
instant and range; the answers must have the same label sets and timestamps and values
within rel 1e-9 / abs 1e-12 (NaN equals NaN). Order matters only where Prometheus defines
it (sort, sort_desc, topk, bottomk).
"""

from __future__ import annotations

import math
import re
from typing import Any

import httpx
import pytest

from tests.support.promdata import history, load_samples, openmetrics, samples
from tests.support.prometheus import prometheus_server
from tests.support.server import start_server

pytestmark = pytest.mark.services

T0 = 1_700_000_000 - 1_700_000_000 % 3600      # an hour boundary (seconds)
END = T0 + 3600
# Instant evaluation times: mid-way, just after the stopped series' last sample (inside the
# lookback), after the lookback has passed, the end of the history.
INSTANT_TIMES = [T0 + 900, T0 + 1800 + 120, T0 + 1800 + 420, END]
RANGES = [(T0, END, 60), (T0 + 1234, T0 + 3000, 45)]

QUERIES = [
    "http_requests_total",
    'http_requests_total{job="api"}',
    'http_requests_total{instance=~"i.", job!="web"}',
    'http_requests_total{job=~"\\\\p{Ll}+", instance!~"\\\\x{69}2"}',   # RE2 syntax
    'temperature{instance!~"i[12]"}',
    "rate(http_requests_total[5m])",
    "rate(http_requests_total[1m])",
    "irate(http_requests_total[5m])",
    "increase(http_requests_total[10m])",
    "delta(temperature[5m])",
    "idelta(temperature[5m])",
    "deriv(temperature[10m])",
    "resets(http_requests_total[30m])",
    "changes(temperature[10m])",
    "avg_over_time(temperature[5m])",
    "min_over_time(temperature[5m])",
    "max_over_time(temperature[5m])",
    "sum_over_time(temperature[5m])",
    "count_over_time(temperature[7m])",
    "last_over_time(temperature[5m])",
    "quantile_over_time(0.9, temperature[10m])",
    "stddev_over_time(temperature[10m])",
    "stdvar_over_time(temperature[10m])",
    "present_over_time(temperature[2m])",
    "histogram_quantile(0.9, sum by (le) (rate(request_duration_seconds_bucket[5m])))",
    "histogram_quantile(0.5, rate(request_duration_seconds_bucket[5m]))",
    "histogram_quantile(0.99, sum by (job, le) (rate(request_duration_seconds_bucket[10m])))",
    "rate(request_duration_seconds_sum[5m]) / rate(request_duration_seconds_count[5m])",
    "sum by (job) (rate(http_requests_total[5m]))",
    "sum without (instance) (rate(http_requests_total[5m]))",
    "avg by (job) (temperature)",
    "min by (job) (temperature)",
    "max without (job) (temperature)",
    "count by (job) (temperature)",
    "group by (instance) (temperature)",
    "stddev(temperature)",
    "stdvar by (job) (temperature)",
    "quantile by (job) (0.75, temperature)",
    "topk(2, temperature)",
    "bottomk(2, temperature)",
    "topk by (job) (1, rate(http_requests_total[5m]))",
    'count_values("inst_count", count by (instance) (temperature))',
    "rate(http_requests_total[5m]) / on(job, instance) temperature",
    "http_requests_total - ignoring(job) group_left http_requests_total{job=\"api\"}",
    "temperature * on(job) group_left(team) job_info",
    "job_info * on(job) group_right(team) temperature",
    "temperature + 2 * 3 - 1",
    "2 ^ 3 - time() / 1000",
    "-temperature % 7",
    "temperature > 25",
    "temperature > bool 25",
    "25 < temperature",
    "temperature == bool on(job, instance) temperature",
    "temperature and on(instance) http_requests_total",
    "temperature unless on(job) job_info{team=\"red\"}",
    "temperature or on(instance) http_requests_total",
    'absent(nonexistent{job="x"})',
    "absent(temperature)",
    'absent_over_time(temperature{instance="i3"}[5m])',
    "temperature offset 10m",
    "rate(http_requests_total[5m] offset 5m)",
    f"temperature @ {T0 + 1200}",
    f"rate(http_requests_total[5m] @ {T0 + 1500})",
    "temperature @ end()",
    "temperature @ start()",
    "timestamp(temperature)",
    "sort(temperature)",
    "sort_desc(rate(http_requests_total[5m]))",
    "clamp(temperature, 21, 30)",
    "clamp_min(temperature, 26)",
    "clamp_max(temperature, 26)",
    "round(temperature, 0.5)",
    "abs(-temperature)",
    "ceil(temperature) - floor(temperature)",
    "sqrt(temperature) + ln(temperature) - exp(temperature / 100)",
    'label_replace(temperature, "host", "h-$1", "instance", "i(.*)")',
    'label_join(temperature, "both", "/", "job", "instance")',
    "scalar(sum(temperature))",
    "vector(3) * 2",
    "max_over_time(rate(http_requests_total[5m])[15m:1m])",
    "sum(temperature) by (job) / on(job) group_left sum(job_info) by (job)",
    '{__name__=~"temp.*"}',
    '{__name__=~"http_requests_total|temperature", job="api"}',
    'count by (__name__) ({__name__=~".+", instance="i1"})',
    "predict_linear(temperature[10m], 600)",
    "deriv(http_requests_total[5m])",
    "max_over_time(temperature[5m:45s])",
    "avg_over_time(rate(http_requests_total[2m])[10m:30s] offset 1m)",
    "absent_over_time(nonexistent[5m])",
    "timestamp(rate(http_requests_total[5m]))",
    'scalar(temperature{instance="i1", job="api"}) * 2',
    "vector(time()) - 1",
    "hour() + minute() + day_of_week() + day_of_month() + month() + year()",
    "minute(timestamp(temperature))",
    "sgn(delta(temperature[5m])) * log2(temperature) + log10(temperature)",
    "-http_requests_total offset 1m",
    f"http_requests_total @ {T0 + 1200} offset 5m",
    'label_replace(temperature, "x", "$2-$1", "instance", "(i)(.)")',
    'label_replace(temperature, "job", "", "instance", "i3")',
    "sum by (job) (temperature) > bool 50",
    "sort_desc(sum by (job) (temperature))",
    "quantile(0.3, temperature)",
    "stddev by (job) (rate(http_requests_total[5m]))",
    "count(temperature > 24)",
    "(temperature > 22) < 30",
    "temperature != bool 21.5",
    "1 - temperature / on(job, instance) group_left max by (job, instance) (temperature)",
    "rate(request_duration_seconds_count[5m]) == on(job, instance) "
    'rate(request_duration_seconds_bucket{le="+Inf"}[5m])',
    "increase(request_duration_seconds_bucket[15m])",
    "changes(http_requests_total[1h])",
    "resets(temperature[1h])",
    "odd",
    "max_over_time(odd[2m])",
    "min_over_time(odd[2m])",
    "avg_over_time(odd[2m])",
    "sum_over_time(odd[1m])",
    "count_over_time(odd[5m])",
    "last_over_time(odd[1m])",
    "changes(odd[5m])",
    "delta(odd[5m])",
    "max(odd)",
    "min(odd)",
    "sum by (job) (odd)",
    "odd > 1",
    "odd == bool odd",
    "-odd",
    "clamp_max(odd, 2)",
    "odd * on(job, instance) group_left temperature",
]

ORDERED_PREFIXES = ("sort(", "sort_desc(", "topk(2", "bottomk(")


@pytest.fixture(scope="module")
def apis(tmp_path_factory):
    families = history(T0)
    rows = list(samples(families))
    work = tmp_path_factory.mktemp("promql-diff")
    with prometheus_server(work / "prom", backfill_text=openmetrics(families)) as prom, \
            start_server(work / "shoal", extra_args=["--lazy-spark"]) as shoal:
        load_samples(shoal.url, rows)
        yield prom.url, shoal.url


def _get(url: str, path: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    r = httpx.get(f"{url}/api/v1/{path}", params=params, timeout=120)
    return r.status_code, r.json()


def _close(a: str, b: str) -> bool:
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= max(1e-12, 1e-9 * max(abs(x), abs(y)))


def _key(metric: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(metric.items()))


def assert_same(expr: str, want: dict[str, Any], got: dict[str, Any]) -> None:
    assert got["resultType"] == want["resultType"], (expr, want, got)
    kind = want["resultType"]
    if kind in ("scalar", "string"):
        assert got["result"][0] == want["result"][0], (expr, want, got)
        assert _close(got["result"][1], want["result"][1]), (expr, want, got)
        return
    field = "value" if kind == "vector" else "values"
    w = {_key(s["metric"]): s[field] for s in want["result"]}
    g = {_key(s["metric"]): s[field] for s in got["result"]}
    assert set(g) == set(w), (expr, sorted(w), sorted(g))
    if kind == "vector" and expr.startswith(ORDERED_PREFIXES):
        assert [_key(s["metric"]) for s in got["result"]] == \
            [_key(s["metric"]) for s in want["result"]], (expr, want, got)
    for labels, wv in w.items():
        gv = g[labels]
        points_w = [wv] if kind == "vector" else wv
        points_g = [gv] if kind == "vector" else gv
        assert [p[0] for p in points_g] == [p[0] for p in points_w], (expr, labels)
        for pw, pg in zip(points_w, points_g, strict=True):
            assert _close(pg[1], pw[1]), (expr, labels, pw, pg)


@pytest.mark.parametrize("expr", QUERIES)
def test_instant_queries_agree(apis, expr):
    prom, shoal = apis
    for t in INSTANT_TIMES:
        ws, want = _get(prom, "query", {"query": expr, "time": t})
        gs, got = _get(shoal, "query", {"query": expr, "time": t})
        assert ws == 200, want
        assert gs == 200, got
        assert_same(f"{expr} @ {t}", want["data"], got["data"])


@pytest.mark.parametrize("expr", QUERIES)
def test_range_queries_agree(apis, expr):
    prom, shoal = apis
    for start, end, step in RANGES:
        params = {"query": expr, "start": start, "end": end, "step": step}
        ws, want = _get(prom, "query_range", params)
        gs, got = _get(shoal, "query_range", params)
        assert ws == 200, want
        assert gs == 200, got
        assert_same(f"{expr} [{start},{end},{step}]", want["data"], got["data"])


def test_the_stopped_series_ends_with_the_lookback(apis):
    """The series that stops half-way is present for 5 minutes after its last sample and
    gone afterwards, in both systems (the lookback delta, not a staleness marker)."""
    prom, shoal = apis
    sel = 'temperature{instance="i3"}'
    for url in (prom, shoal):
        _, inside = _get(url, "query", {"query": sel, "time": T0 + 1800 + 120})
        _, after = _get(url, "query", {"query": sel, "time": T0 + 1800 + 420})
        assert len(inside["data"]["result"]) == 1
        assert after["data"]["result"] == []


@pytest.mark.parametrize("expr", [
    "sum(rate(http_requests_total[5m])",         # unclosed parenthesis
    "http_requests_total{job=}",                 # a matcher without a value
    "rate(http_requests_total)",                 # a range function given an instant vector
    "foo bar",
])
def test_bad_queries_fail_as_prometheus_fails(apis, expr):
    prom, shoal = apis
    ws, want = _get(prom, "query", {"query": expr, "time": END})
    gs, got = _get(shoal, "query", {"query": expr, "time": END})
    assert (gs, got["status"], got["errorType"]) == (ws, want["status"], want["errorType"])
    assert got["error"].startswith('invalid parameter "query": ')
    assert "parse error: " in got["error"]


# Where promql-parser's message and the place shoal finds for it (`promql/errpos.py`) agree
# with Prometheus's `line:column` (the parser itself reports no place).
@pytest.mark.parametrize("expr", [
    "sum(rate(http_requests_total[5m])", 'x{a="b"', "1 +", "foo bar", 'x{a="b"}}', '"abc',
    "foo(x)", "x +== y", "x[5m] offset 1m)", "sum(x) by", "x\n  + )", "x offset", "x[5m",
    "(1", "x)", "]", "x / / y", "x and", "1 2", "max_over_time(x[5m:1m]",
])
def test_parse_errors_name_the_place_prometheus_names(apis, expr):
    prom, shoal = apis
    where = re.compile(r'^invalid parameter "query": (\d+:\d+): parse error: ')
    _, want = _get(prom, "query", {"query": expr, "time": END})
    _, got = _get(shoal, "query", {"query": expr, "time": END})
    w, g = where.match(want["error"]), where.match(got["error"])
    assert w and g and g.group(1) == w.group(1), (want["error"], got["error"])


@pytest.mark.parametrize("expr", [
    'http_requests_total{job=~"(?=a)api"}',          # lookahead: not RE2, as in Prometheus
    'label_replace(temperature, "x", "$1", "job", "(?<=a)(.*)")',
])
def test_regexes_are_re2_as_in_prometheus(apis, expr):
    prom, shoal = apis
    ws, want = _get(prom, "query", {"query": expr, "time": END})
    gs, got = _get(shoal, "query", {"query": expr, "time": END})
    assert (gs, got["status"], got["errorType"]) == (ws, want["status"], want["errorType"])


@pytest.mark.parametrize(("expr", "words"), [
    ("temperature * on(job) http_requests_total", "many-to-many matching not allowed"),
    ("temperature + on(job) group_left temperature", "many-to-many matching not allowed"),
    ("temperature * ignoring(instance) job_info",
     "many-to-one matching must be explicit"),
    ("job_info * on(job) group_right temperature", ""),
    ('label_replace(temperature, "instance", "x", "job", ".*")', "same labelset"),
])
def test_matching_errors_are_execution_errors(apis, expr, words):
    prom, shoal = apis
    ws, want = _get(prom, "query", {"query": expr, "time": T0 + 900})
    gs, got = _get(shoal, "query", {"query": expr, "time": T0 + 900})
    if ws == 200:       # the control: a valid group_right answers the same
        assert gs == 200, got
        assert_same(expr, want["data"], got["data"])
        return
    assert (gs, got["errorType"]) == (ws, want["errorType"]) == (422, "execution")
    assert words in got["error"] and words in want["error"]
