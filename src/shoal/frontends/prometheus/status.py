"""The rest of Prometheus's `/api/v1/` surface that Grafana and Prometheus clients call, in
Prometheus's documents, so that a client never meets shoal's own error shape there.

- `targets`: the scrape jobs (tables bound by `scrape_targets`, `binding.py`) as
  Prometheus's `activeTargets` (one per target; `droppedTargets` is always empty: shoal
  does no relabeling), with `health`, `lastScrape`, `lastScrapeDuration` and `lastError`
  from the server's own scrape loop (`kind.ScrapeKind.last`); a target this process has not
  scraped yet is `unknown`, as Prometheus says of one it has not reached.
- `query_exemplars` (always an empty list: exemplars are not stored), `rules`
  (`{"groups": []}`), `alerts` (`{"alerts": []}`): shoal evaluates no rules.
- `format_query`: the expression as promql-parser's `prettify` prints it (the library does
  the formatting; a parse error is 400 `bad_data`).
- `status/runtimeinfo`, `status/flags` (the settings that play the part of Prometheus's
  flags), `status/config` (`{"yaml": ...}`: the scrape jobs as a `prometheus.yml` would
  write them), `status/tsdb` (cardinality, as Prometheus reports its head block: the series
  with samples in the last two hours, the top 10 of each list; `chunkCount` is 0).
- Any other path under `/api/v1/`: 404 `not_found` (405 for a known path and another
  method), in Prometheus's error document.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import promql_parser as pp
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.routing import Match

from shoal.errors import InvalidPropertyError
from shoal.frontends.prometheus.binding import ScrapeBinding, is_bound, parse_binding
from shoal.frontends.prometheus.promql.bounds import check_bounds
from shoal.frontends.prometheus.promql.errors import PromQLBadDataError, PromQLParseError
from shoal.frontends.prometheus.promql.model import NAME, Labels
from shoal.frontends.prometheus.promql.storage import PromStorage
from shoal.frontends.prometheus.scrape import TargetScrape
from shoal.http.auth import require_scope
from shoal.http.state import ServerState

NEVER = "0001-01-01T00:00:00Z"     # Prometheus's lastScrape of a target not scraped yet
_STARTED = dt.datetime.now(dt.UTC)


def _rfc3339(ms: int) -> str:
    at = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _duration(seconds: float) -> str:
    """Seconds as a Prometheus duration (`15s`, `1m30s`, `500ms`)."""
    ms = round(seconds * 1000)
    if ms % 1000:
        return f"{ms}ms"
    s = ms // 1000
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return "".join(f"{n}{u}" for n, u in ((h, "h"), (m, "m"), (s, "s")) if n) or "0s"


def scrape_bindings(state: ServerState) -> list[ScrapeBinding]:
    """Every table's scrape job (bindings that cannot be parsed are left out: the supervisor
    reports those as failed pipelines)."""
    out = []
    for info in state.db.catalog.list_tables():
        props = state.db.catalog.load_table(info.name).properties
        if not is_bound(props):
            continue
        try:
            out.append(parse_binding(info.name, props))
        except InvalidPropertyError:
            continue
    return out


def _last_scrapes(request: Request) -> dict[tuple[str, str], TargetScrape]:
    supervisor = getattr(request.app.state, "pipelines", None)
    for kind in getattr(supervisor, "kinds", ()):
        last = getattr(kind, "last", None)
        if isinstance(last, dict):
            return last
    return {}


def active_targets(bindings: Iterable[ScrapeBinding],
                   last: dict[tuple[str, str], TargetScrape]) -> list[dict[str, Any]]:
    """Prometheus's `activeTargets` entries for the scrape jobs."""
    out = []
    for b in bindings:
        job = b.job or b.table
        for target in b.targets:
            labels = {**dict(b.labels), "instance": target, "job": job}
            discovered = {"__address__": target, "__metrics_path__": b.path,
                          "__scheme__": b.scheme, "__scrape_interval__": _duration(b.interval_s),
                          "__scrape_timeout__": _duration(b.timeout_s), "job": job,
                          **dict(b.labels)}
            seen = last.get((b.table, target))
            out.append({
                "discoveredLabels": discovered, "labels": labels, "scrapePool": job,
                "scrapeUrl": b.url(target), "globalUrl": b.url(target),
                "lastError": (seen.error or "") if seen else "",
                "lastScrape": _rfc3339(seen.start_ms) if seen else NEVER,
                "lastScrapeDuration": seen.duration_s if seen else 0,
                "health": ("up" if seen.up else "down") if seen else "unknown",
                "scrapeInterval": _duration(b.interval_s),
                "scrapeTimeout": _duration(b.timeout_s)})
    return out


def config_yaml(bindings: Iterable[ScrapeBinding], *, lookback_s: float) -> str:
    """The scrape jobs as a `prometheus.yml` would write them (strings JSON-quoted, which
    YAML reads as written)."""
    q = json.dumps
    lines = ["global:", "  scrape_interval: 15s", "  scrape_timeout: 10s",
             f"  # query lookback delta: {_duration(lookback_s)}", "scrape_configs:"]
    listed = list(bindings)
    if not listed:
        lines[-1] += " []"
    for b in listed:
        lines += [f"- job_name: {q(b.job or b.table)}",
                  f"  honor_labels: {'true' if b.honor_labels else 'false'}",
                  f"  scrape_interval: {_duration(b.interval_s)}",
                  f"  scrape_timeout: {_duration(b.timeout_s)}",
                  f"  metrics_path: {q(b.path)}", f"  scheme: {b.scheme}",
                  "  static_configs:", "  - targets:"]
        lines += [f"    - {q(t)}" for t in b.targets]
        if b.labels:
            lines.append("    labels:")
            lines += [f"      {k}: {q(v)}" for k, v in b.labels]
    return "\n".join(lines) + "\n"


def runtime_info(state: ServerState, bindings: list[ScrapeBinding]) -> dict[str, Any]:
    return {"startTime": _STARTED.isoformat().replace("+00:00", "Z"), "CWD": os.getcwd(),
            "reloadConfigSuccess": True, "lastConfigTime": _STARTED.isoformat().replace(
                "+00:00", "Z"),
            "corruptionCount": 0, "goroutineCount": 0, "GOMAXPROCS": os.cpu_count() or 1,
            "GOMEMLIMIT": 0, "GOGC": "", "GODEBUG": "",
            "storageRetention": "per table (retention property)",
            "scrapeJobs": len(bindings)}


def flags(state: ServerState) -> dict[str, str]:
    """The settings that do the work of Prometheus's flags, named as Prometheus names them."""
    config = state.config
    return {"query.lookback-delta": _duration(config.promql_lookback_s),
            "query.max-samples": str(config.promql_max_samples),
            "query.timeout": _duration(config.query_timeout_s),
            "query.max-concurrency": str(config.query_concurrency),
            "web.listen-address": f"{config.host}:{config.port}",
            "storage.tsdb.path": str(config.data_dir)}


HEAD_WINDOW_MS = 2 * 3600 * 1000    # what Prometheus's head block roughly holds
TOP = 10


def tsdb_status(series: Iterable[Labels], lo_ms: int, hi_ms: int) -> dict[str, Any]:
    """Prometheus's `status/tsdb` document for `series` (label sets) seen in [lo, hi]."""
    by_name: Counter[str] = Counter()
    values: dict[str, set[str]] = {}
    pairs: Counter[str] = Counter()
    n = 0
    for labels in series:
        n += 1
        for k, v in labels:
            if k == NAME:
                by_name[v] += 1
            values.setdefault(k, set()).add(v)
            pairs[f"{k}={v}"] += 1

    def top(counts: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
        ranked = sorted(counts, key=lambda kv: (-kv[1], kv[0]))[:TOP]
        return [{"name": k, "value": v} for k, v in ranked]

    return {"headStats": {"numSeries": n, "numLabelPairs": len(pairs), "chunkCount": 0,
                          "minTime": lo_ms, "maxTime": hi_ms},
            "seriesCountByMetricName": top(by_name.items()),
            "labelValueCountByLabelName": top((k, len(v)) for k, v in values.items()),
            "memoryInBytesByLabelName": top((k, sum(len(x) for x in v))
                                            for k, v in values.items()),
            "seriesCountByLabelValuePair": top(pairs.items())}


def format_query(text: str) -> str:
    """`text` pretty-printed by promql-parser (`prettify`), or 400 `bad_data`."""
    if not text:
        raise PromQLBadDataError('invalid parameter "query": unknown position: parse error: '
                                 "no expression found in input")
    check_bounds(text)
    try:
        node = pp.parse(text)
    except ValueError as e:
        raise PromQLParseError(str(e)) from None
    return str(node.prettify())


_QUERY = [Depends(require_scope("query"))]
CATCH_ALL = "/api/v1/{path:path}"


def install_status_routes(router: APIRouter, answer: Any, json_response: Any,
                          storage: Callable[[Request], PromStorage]) -> None:
    """Add the routes to `router`, the catch-all last; `answer(request, work, slot=)` runs
    `work(state, params)` and answers with Prometheus's documents (`api._answer`);
    `storage(request)` is the server's PromQL storage."""

    async def targets(request: Request) -> Response:
        def work(state: ServerState, params: Any) -> Any:
            wanted = (params.get("state") or "any").lower()
            pool = params.get("scrapePool")
            active = active_targets(scrape_bindings(state), _last_scrapes(request))
            if pool:
                active = [t for t in active if t["scrapePool"] == pool]
            return {"activeTargets": active if wanted in ("any", "active") else [],
                    "droppedTargets": []}
        return await answer(request, work, slot=False)

    def constant(data: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            return await answer(request, lambda _s, _p: data, slot=False)
        return endpoint

    async def exemplars(request: Request) -> Response:
        def work(_state: ServerState, params: Any) -> Any:
            format_query(params.get("query") or "")      # bad PromQL is 400, as in Prometheus
            return []
        return await answer(request, work, slot=False)

    async def format_(request: Request) -> Response:
        return await answer(request, lambda _s, p: format_query(p.get("query") or ""),
                            slot=False)

    async def runtimeinfo(request: Request) -> Response:
        return await answer(request, lambda s, _p: runtime_info(s, scrape_bindings(s)),
                            slot=False)

    async def config(request: Request) -> Response:
        return await answer(request, lambda s, _p: {"yaml": config_yaml(
            scrape_bindings(s), lookback_s=s.config.promql_lookback_s)}, slot=False)

    async def flags_(request: Request) -> Response:
        return await answer(request, lambda s, _p: flags(s), slot=False)

    async def tsdb(request: Request) -> Response:
        def work(_state: ServerState, _params: Any) -> Any:
            hi = int(time.time() * 1000)
            lo = hi - HEAD_WINDOW_MS
            return tsdb_status(storage(request).series([], lo, hi).values(), lo, hi)
        return await answer(request, work)      # reads series: under a query slot

    routes: list[tuple[str, Any, str, tuple[str, ...]]] = [
        ("targets", targets, "Scrape targets", ("GET",)),
        ("query_exemplars", exemplars, "Exemplars (none are stored)", ("GET", "POST")),
        ("rules", constant({"groups": []}), "Rules (none)", ("GET",)),
        ("alerts", constant({"alerts": []}), "Alerts (none)", ("GET",)),
        ("format_query", format_, "Format a PromQL expression", ("GET", "POST")),
        ("status/runtimeinfo", runtimeinfo, "Runtime information", ("GET",)),
        ("status/config", config, "Configuration as YAML", ("GET",)),
        ("status/flags", flags_, "Flag values", ("GET",)),
        ("status/tsdb", tsdb, "Cardinality of the last two hours", ("GET",)),
    ]
    for path, endpoint, summary, methods in routes:
        for method in methods:
            name = path.replace("/", "_")
            router.add_api_route(f"/api/v1/{path}", endpoint, methods=[method],
                                 dependencies=_QUERY, summary=summary,
                                 operation_id=f"prom_{name}_{method.lower()}")

    async def unknown(request: Request, path: str) -> Response:
        # this router's own routes, then the app's (another router's PARTIAL is its route's)
        for route in [*router.routes, *request.app.router.routes]:
            if (getattr(route, "path", None) != CATCH_ALL
                    and route.matches(request.scope)[0] == Match.PARTIAL):
                return json_response({"status": "error", "errorType": "bad_data",
                                      "error": f"method {request.method} not allowed for "
                                               f"/api/v1/{path}"}, 405)
        return json_response({"status": "error", "errorType": "not_found",
                              "error": f"no API endpoint /api/v1/{path}"}, 404)

    router.add_api_route(CATCH_ALL, unknown, include_in_schema=False,
                         methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
