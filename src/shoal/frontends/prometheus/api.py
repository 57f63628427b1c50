"""The Prometheus HTTP API over shoal: PromQL for Grafana and Prometheus clients.

Routes (GET, or POST with an `application/x-www-form-urlencoded` body; both forms' fields
are merged): `/api/v1/query` (`query`, `time`, `timeout`), `/api/v1/query_range` (`query`,
`start`, `end`, `step`, `timeout`), `/api/v1/series` (`match[]`, `start`, `end`, `limit`),
`/api/v1/labels` and `/api/v1/label/{name}/values` (optional `match[]`, `start`, `end`,
`limit`), `/api/v1/metadata` (`metric`, `limit`; the newest row per metric of
`config.prometheus_metadata_table`) and `/api/v1/status/buildinfo`; `status.py` adds the
rest of what Grafana calls (targets, rules, alerts, exemplars, format_query, status/*) and
answers any other path under `/api/v1/` with Prometheus's 404 document. Times are RFC 3339 or
unix seconds, `step`/`timeout` seconds or a Prometheus duration (`30s`, `1m30s`).

Answers are Prometheus's documents: `{"status": "success", "data": ...}`, or
`{"status": "error", "errorType": ..., "error": ...}` with Prometheus's statuses: 400
`bad_data` (parse errors, bad parameters), 422 `execution` (e.g. many-to-many matching,
too many samples), 503 `timeout` / `unavailable` (every query slot taken), 500 `internal`.

Auth: the `query` scope, as `/v1/query`. Bounded cost, as `/v1/query`: a query slot
(`query_concurrency`), the timeout (`query_timeout_s`, or the request's `timeout` when
smaller), plus Prometheus's limits: at most 11,000 points per series in a range query and
at most `promql_max_samples` samples loaded by one query.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import anyio
import msgspec
import promql_parser as pp
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from shoal.errors import (QueryTimeoutError, RequestError, ShoalError, TableNotFoundError,
                          UnavailableError)
from shoal.format.base import Equals
from shoal.frontends.prometheus.promql import (PromQL, PromQLBadDataError, PromQLExecutionError,
                                               PromQLParseError, promql_for)
from shoal.frontends.prometheus.promql.bounds import check_bounds
from shoal.frontends.prometheus.promql.evaluator import selector_matchers
from shoal.frontends.prometheus.status import install_status_routes
from shoal.frontends.prometheus.promql.params import (MAX_TIME_MS, MIN_TIME_MS, parse_duration_ms,
                                                      parse_time)
from shoal.http.auth import require_scope
from shoal.http.body import read_body
from shoal.http.errors import UnsupportedMediaTypeError, status_for
from shoal.http.state import ServerState, request_client, server_state

log = logging.getLogger("shoal.server.prometheus")

router = APIRouter(tags=["prometheus"])
MAX_POINTS = 11_000
MAX_FORM_BYTES = 1 << 20
FORM = "application/x-www-form-urlencoded"
BUILD_VERSION = "2.42.0"     # the Prometheus API level this mirrors (Grafana reads it)
_encode = msgspec.json.Encoder().encode


class _Params:
    """The request's fields: the URL's query string and a form body, merged."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self.items = items

    def get(self, name: str) -> str | None:
        for k, v in self.items:
            if k == name:
                return v
        return None

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.items if k == name]


async def _params(request: Request) -> _Params:
    items = list(request.query_params.multi_items())
    if request.method == "POST":
        body = await read_body(request, limit=MAX_FORM_BYTES)
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if body and media != FORM:
            raise UnsupportedMediaTypeError(
                f"{request.url.path} takes Content-Type: {FORM}, got {media[:100] or '(none)'!r}")
        if body:
            try:
                items += parse_qsl(body.decode("utf-8"), keep_blank_values=True,
                                   strict_parsing=False)
            except UnicodeDecodeError:
                raise PromQLBadDataError("the form body is not UTF-8") from None
    return _Params(items)


def _json(doc: Any, status: int = 200) -> Response:
    return Response(_encode(doc), status_code=status, media_type="application/json")


def error_document(e: ShoalError) -> tuple[int, dict[str, Any]]:
    """Prometheus's (status, error document) for a shoal error."""
    if isinstance(e, PromQLExecutionError):
        status, kind = 422, "execution"
    elif isinstance(e, QueryTimeoutError):
        status, kind = 503, "timeout"
    elif isinstance(e, UnavailableError):
        status, kind = status_for(e), "unavailable"      # 503, or 429 for a full slot table
    elif isinstance(e, RequestError):
        status, kind = status_for(e), "bad_data"         # 400 (408/413/415 for the body)
    else:
        status, kind = 500, "internal"
    text = str(e)
    if isinstance(e, PromQLParseError):         # as Prometheus words it: the parameter named
        text = f'invalid parameter "query": {text}'
    return status, {"status": "error", "errorType": kind, "error": text}


def _promql(request: Request, state: ServerState) -> PromQL:
    engine = getattr(request.app.state, "promql", None)
    if engine is None:
        config = state.db.config
        engine = promql_for(state.db.query_engine, config,
                            lookback_ms=int(config.promql_lookback_s * 1000),
                            max_samples=config.promql_max_samples)
        request.app.state.promql = engine
    return engine


async def _answer(request: Request, work: Callable[[ServerState, _Params], Any],
                  *, slot: bool = True) -> Response:
    """Run `work(state, params)` in a worker thread (under a query slot) and answer with
    Prometheus's success or error document."""
    state = server_state(request)
    try:
        state.check_accepting()
        params = await _params(request)
        client = request_client(request)
        if slot:
            state.query_slots.acquire(client)
        try:
            data = await anyio.to_thread.run_sync(lambda: work(state, params))
        finally:
            if slot:
                state.query_slots.release(client)
    except ShoalError as e:
        status, doc = error_document(e)
        if status >= 500 and status != 503:
            log.exception("prometheus API %s failed", request.url.path)
        return _json(doc, status)
    except Exception as e:
        log.exception("prometheus API %s failed", request.url.path)
        return _json({"status": "error", "errorType": "internal",
                      "error": f"internal error: {type(e).__name__}"}, 500)
    return _json({"status": "success", "data": data})


def _timeout_s(state: ServerState, params: _Params) -> float:
    limit = float(state.config.query_timeout_s)
    raw = params.get("timeout")
    if raw:
        limit = min(limit, parse_duration_ms(raw, "timeout") / 1000)
    return limit


def _query_text(params: _Params) -> str:
    return params.get("query") or ""


def _instant(state: ServerState, params: _Params, request: Request) -> Any:
    raw = params.get("time")
    at = parse_time(raw, "time") if raw else int(time.time() * 1000)
    engine = _promql(request, state)
    return engine.instant(_query_text(params), at, timeout_s=_timeout_s(state, params)).data()


def _range(state: ServerState, params: _Params, request: Request) -> Any:
    values = {}
    for name in ("start", "end", "step"):
        raw = params.get(name)
        if not raw:
            raise PromQLBadDataError(f'invalid parameter "{name}": cannot parse "" to a valid '
                                     + ("duration" if name == "step" else "timestamp"))
        values[name] = raw
    start = parse_time(values["start"], "start")
    end = parse_time(values["end"], "end")
    step = parse_duration_ms(values["step"], "step")
    if end < start:
        raise PromQLBadDataError('invalid parameter "end": end timestamp must not be before '
                                 "start time")
    if step <= 0:
        raise PromQLBadDataError('invalid parameter "step": zero or negative query resolution '
                                 "step widths are not accepted. Try a positive integer")
    if (end - start) // step > MAX_POINTS:
        raise PromQLBadDataError("exceeded maximum resolution of 11,000 points per timeseries."
                                 " Try decreasing the query resolution (?step=XX)")
    engine = _promql(request, state)
    return engine.range(_query_text(params), start, end, step,
                        timeout_s=_timeout_s(state, params)).data()


def _bounds(params: _Params) -> tuple[int, int]:
    start = params.get("start")
    end = params.get("end")
    return (parse_time(start, "start") if start else MIN_TIME_MS,
            parse_time(end, "end") if end else MAX_TIME_MS)


def _limit(params: _Params) -> int | None:
    raw = params.get("limit")
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise PromQLBadDataError(f'invalid parameter "limit": cannot parse "{raw}" to a '
                                 "valid limit") from None
    return n if n > 0 else None


def _matched_series(state: ServerState, request: Request, params: _Params,
                    *, required: bool) -> list[dict[str, str]] | None:
    matches = params.all("match[]")
    if not matches:
        if required:
            raise PromQLBadDataError("no match[] parameter provided")
        return None
    lo, hi = _bounds(params)
    storage = _promql(request, state).storage
    seen: dict[tuple[tuple[str, str], ...], None] = {}
    for text in matches:
        try:
            check_bounds(text)
            node = pp.parse(text)
        except PromQLParseError as e:
            raise PromQLBadDataError(f"invalid parameter \"match[]\": {e}") from None
        except ValueError as e:
            raise PromQLBadDataError(f"invalid parameter \"match[]\": parse error: {e}"
                                     ) from None
        if not isinstance(node, pp.VectorSelector):
            raise PromQLBadDataError('invalid parameter "match[]": expected a series '
                                     f"selector, got {text!r}")
        for matchers in selector_matchers(node):
            for labels in storage.series(matchers, lo, hi).values():
                seen.setdefault(labels)
    return [dict(k) for k in sorted(seen)]


def _series(state: ServerState, params: _Params, request: Request) -> Any:
    out = _matched_series(state, request, params, required=True) or []
    limit = _limit(params)
    return out[:limit] if limit else out


def _all_series(state: ServerState, request: Request, params: _Params
                ) -> list[dict[str, str]]:
    matched = _matched_series(state, request, params, required=False)
    if matched is not None:
        return matched
    lo, hi = _bounds(params)
    storage = _promql(request, state).storage
    return [dict(k) for k in storage.series([], lo, hi).values()]


def _labels(state: ServerState, params: _Params, request: Request) -> Any:
    names = sorted({k for s in _all_series(state, request, params) for k in s})
    limit = _limit(params)
    return names[:limit] if limit else names


def _label_values(name: str) -> Callable[[ServerState, _Params, Request], Any]:
    def work(state: ServerState, params: _Params, request: Request) -> Any:
        if name == "__name__" and not params.all("match[]"):
            lo, hi = _bounds(params)
            values = _promql(request, state).storage.metric_names(lo, hi)
        else:
            values = sorted({s[name] for s in _all_series(state, request, params)
                             if name in s})
        limit = _limit(params)
        return values[:limit] if limit else values
    return work


def _metadata(state: ServerState, params: _Params, _request: Request) -> Any:
    table = state.config.prometheus_metadata_table
    metric = params.get("metric")
    predicate = Equals("metric", metric) if metric else None
    try:
        t, _ = state.db.read(table, predicate, columns=["_timestamp", "metric", "type",
                                                         "help", "unit"])
    except TableNotFoundError:
        return {}
    rows = sorted(t.to_pylist(), key=lambda r: r["_timestamp"])
    newest: dict[str, dict[str, str]] = {}
    for r in rows:
        if r["metric"] and (not metric or r["metric"] == metric):
            newest[r["metric"]] = {"type": r["type"] or "unknown", "help": r["help"] or "",
                                   "unit": r["unit"] or ""}
    limit = _limit(params)
    names = sorted(newest)[:limit] if limit else sorted(newest)
    return {n: [newest[n]] for n in names}


def _route(work: Callable[[ServerState, _Params, Request], Any], *, slot: bool = True
           ) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        return await _answer(request, lambda s, p: work(s, p, request), slot=slot)
    endpoint.__name__ = f"prometheus{work.__name__}"
    return endpoint


_QUERY = [Depends(require_scope("query"))]
for _path, _work, _summary in (("query", _instant, "PromQL instant query"),
                               ("query_range", _range, "PromQL range query"),
                               ("series", _series, "Series matching selectors"),
                               ("labels", _labels, "Label names")):
    for _method in ("GET", "POST"):
        router.add_api_route(f"/api/v1/{_path}", _route(_work), methods=[_method],
                             dependencies=_QUERY, summary=_summary,
                             operation_id=f"prom_{_path}_{_method.lower()}")
router.add_api_route("/api/v1/metadata", _route(_metadata), methods=["GET"],
                     dependencies=_QUERY, summary="Metric metadata",
                     operation_id="prom_metadata")


@router.get("/api/v1/label/{name}/values", dependencies=_QUERY, summary="Label values")
async def label_values(request: Request, name: str) -> Response:
    return await _answer(request, lambda s, p: _label_values(name)(s, p, request))


@router.get("/api/v1/status/buildinfo", dependencies=_QUERY, summary="Build information")
async def buildinfo() -> Response:
    return _json({"status": "success", "data": {
        "version": BUILD_VERSION, "revision": "shoal", "branch": "shoal", "buildUser": "shoal",
        "buildDate": "", "goVersion": "none"}})


# targets, rules, alerts, exemplars, format_query, status/*, then the catch-all: last
install_status_routes(router, _answer, _json,
                      lambda request: _promql(request, server_state(request)).storage)
