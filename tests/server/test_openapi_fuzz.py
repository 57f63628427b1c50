"""Schemathesis against a live server: `/openapi.json` tells the truth.

The document is loaded from the server itself (real uvicorn over a socket, `open_server`
without tokens and `auth_server` with the admin token sent on every request), and every
operation is fuzzed with a bounded number of generated requests, both fitting the document
(positive) and breaking it (negative), plus the document's own examples. Each answer must
pass: no 5xx (`not_a_server_error`), a documented status (`status_code_conformance`), a
documented media type (`content_type_conformance`), a body that fits the documented schema
(`response_schema_conformance`) and the documented headers (`response_headers_conformance`:
`Retry-After`, `WWW-Authenticate`). Operations with a `{table}` path are fuzzed on random
names and on an existing table, so success answers are checked too.

Deterministic: Hypothesis runs derandomized, with no example database and without the
constants it would harvest from whatever modules are imported, so every run (alone or in
the whole suite) sends the same requests. /v1/query runs a handful of generated cases
(its examples include one SELECT through Spark). Every failure is collected and reported
together, with a curl line to reproduce it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance,
                                               response_headers_conformance,
                                               response_schema_conformance,
                                               status_code_conformance)

from tests.server.conftest import ADMIN, INGEST, QUERY, Live

pytestmark = pytest.mark.slow

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, response_headers_conformance]
EXAMPLES = 20           # generated requests per operation and generation mode
QUERY_EXAMPLES = 4      # /v1/query: a few only (a statement may reach Spark)
ARROW = "application/vnd.apache.arrow.stream"
FUZZ_TABLE = "fuzz_target"


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_ctx: Any, value: Any) -> bytes:
    """The document's NDJSON body is an array of objects: one line per item."""
    if isinstance(value, bytes):
        return value
    items = value if isinstance(value, list) else [value]
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


schemathesis.serializer.alias("application/x-protobuf", "application/octet-stream")
schemathesis.serializer.alias("application/x-sentry-envelope", "application/octet-stream")


@dataclass
class Findings:
    """Failures by (operation, kind), each with the first request that showed it; and the
    statuses each operation answered, to show that the fuzzing reached it."""

    seen: dict[tuple[str, str], str] = field(default_factory=dict)
    statuses: dict[str, dict[int, int]] = field(default_factory=dict)

    def add(self, label: str, kind: str, detail: str) -> None:
        self.seen.setdefault((label, kind), detail)

    def answered(self, label: str, status: int) -> None:
        tally = self.statuses.setdefault(label, {})
        tally[status] = tally.get(status, 0) + 1

    def report(self) -> str:
        calls = sum(n for tally in self.statuses.values() for n in tally.values())
        return f"{len(self.seen)} kinds of failure in {calls} requests:\n\n" + "\n\n".join(
            f"== {label}: {kind}\n{detail}" for (label, kind), detail in sorted(self.seen.items()))


def _call(case: Any, base_url: str, headers: dict[str, str], findings: Findings) -> Any:
    """Send `case`, check the answer, record what fails; the response (None if none came)."""
    try:
        response = case.call(base_url=base_url, headers=headers, timeout=120)
        findings.answered(case.operation.label, response.status_code)
        case.validate_response(response, checks=CHECKS, headers=headers)
    except schemathesis.errors.FailureGroup as group:
        for failure in group.exceptions:
            findings.add(case.operation.label, f"{failure.title} ({failure.code})",
                         f"{failure.message}\n{case.as_curl_command(headers=headers)}")
    except Exception as e:  # noqa: BLE001 - a dead connection is a finding, not a crash
        findings.add(case.operation.label, type(e).__name__,
                     f"{e}\n{case.as_curl_command(headers=headers)}")
        return None
    return response


def _fuzz(label: str, mode: GenerationMode, strategy: Any, n: int, base_url: str,
          headers: dict[str, str], findings: Findings) -> None:
    @hypothesis.settings(max_examples=n, derandomize=True, database=None, deadline=None,
                         phases=[Phase.generate], suppress_health_check=list(HealthCheck),
                         print_blob=False)
    @given(strategy)
    def run(case: Any) -> None:
        _call(case, base_url, headers, findings)

    try:
        run()
    except hypothesis.errors.Unsatisfiable as e:
        findings.add(label, f"cannot generate {mode.value} cases", str(e))


def _fuzz_all(live: Live, headers: dict[str, str]) -> Findings:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    findings = Findings()
    for result in schema.get_all_operations():
        op = result.ok()
        n = QUERY_EXAMPLES if op.path == "/v1/query" else EXAMPLES
        for path in ([{}, {"table": FUZZ_TABLE}] if "{table}" in op.path else [{}]):
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                if mode == GenerationMode.NEGATIVE and not _breakable(op, path):
                    continue
                strategy = op.as_strategy(generation_mode=mode, path_parameters=path or None)
                _fuzz(op.label, mode, strategy, n, live.url, headers, findings)
        for case in _examples(op):
            _call(case, live.url, headers, findings)
    return findings


def _breakable(op: Any, fixed: dict[str, str]) -> bool:
    """Whether a negative case exists: a body or a parameter that is not fixed."""
    raw = op.definition.raw
    free = [p for p in raw.get("parameters", []) if p["name"] not in fixed]
    return bool(free or raw.get("requestBody"))


def _examples(op: Any) -> Iterator[Any]:
    """The document's request examples, on the existing table where there is one: its
    bodies' examples, and one request of every parameter's example (the Prometheus API's
    PromQL expressions and times, which random text would never hit)."""
    path = {"table": FUZZ_TABLE} if "{table}" in op.path else None
    params = [p for p in op.definition.raw.get("parameters", []) if "example" in p]
    paths = {p["name"]: p["example"] for p in params if p["in"] == "path"}
    body = op.definition.raw.get("requestBody", {}).get("content", {})
    for media_type, content in body.items():
        for example in content.get("examples", {}).values():
            yield op.Case(body=example["value"], media_type=media_type,
                          path_parameters={**(path or {}), **paths} or None)
    if params:
        query = {p["name"]: p["example"] for p in params if p["in"] == "query"}
        yield op.Case(query=query or None, path_parameters={**(path or {}), **paths} or None)


@pytest.fixture(scope="module", autouse=True)
def same_cases_whatever_ran_before() -> Iterator[None]:
    """Hypothesis mixes in constants harvested from the local modules imported so far, so
    what it generates would depend on which tests ran first (and on the server's lazy
    imports mid-run). Without them, a given document always gives the same requests."""
    from hypothesis.internal.conjecture import providers

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(providers, "_get_local_constants", providers.Constants)
        yield


@pytest.fixture(scope="module")
def fuzz_table(open_server: Live, auth_server: Live) -> str:
    for live, token in ((open_server, None), (auth_server, ADMIN)):
        with live.client(token) as c:
            r = c.post("/v1/tables", json={"name": FUZZ_TABLE, "columns": [
                {"name": "service", "type": "string"}, {"name": "status", "type": "int"}]})
            assert r.status_code == 201, r.text
            r = c.post(f"/v1/ingest/{FUZZ_TABLE}", content=b'{"service": "api", "status": 1}\n')
            assert r.status_code == 200, r.text
    return FUZZ_TABLE


def _assert_holds(findings: Findings) -> None:
    assert not findings.seen, findings.report()
    # The fuzzing reached every operation's success answer (so its schema was checked),
    # and every operation that takes input was refused some of it.
    for label, tally in findings.statuses.items():
        assert any(200 <= s < 300 for s in tally), (label, tally)
        if label.startswith("POST") or "{table}" in label or "maintenance" in label:
            assert any(400 <= s < 500 for s in tally), (label, tally)
    assert len(findings.statuses) == 43     # all but GET /openapi.json, which schemathesis
                                            # leaves out when it loads the document from it
                                            # (22 of them the Prometheus API, 2 the Sentry SDK
                                            # endpoints)


def test_the_document_holds_without_tokens(open_server, fuzz_table):
    _assert_holds(_fuzz_all(open_server, {}))


def test_the_document_holds_with_an_admin_token(auth_server, fuzz_table):
    _assert_holds(_fuzz_all(auth_server, {"Authorization": f"Bearer {ADMIN}"}))


@pytest.mark.parametrize("token", [None, "not-a-token", INGEST, QUERY],
                         ids=["none", "unknown", "ingest", "query"])
def test_refusals_match_the_document(auth_server, fuzz_table, token):
    """Each operation's 401/403 (with WWW-Authenticate) are documented as sent."""
    schema = schemathesis.openapi.from_url(f"{auth_server.url}/openapi.json")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    findings = Findings()
    statuses: dict[str, int] = {}
    for result in schema.get_all_operations():
        op = result.ok()
        cases = list(_examples(op)) or [op.Case(
            path_parameters={"table": FUZZ_TABLE} if "{table}" in op.path else None)]
        r = _call(cases[0], auth_server.url, headers, findings)
        statuses[op.label] = r.status_code if r is not None else 0
    assert not findings.seen, findings.report()
    if token in (None, "not-a-token"):
        assert statuses["POST /v1/query"] == 401 and statuses["GET /healthz"] == 200
    else:
        assert statuses["GET /v1/maintenance"] == 403


def test_arrow_answers_match_the_document(open_server, fuzz_table):
    schema = schemathesis.openapi.from_url(f"{open_server.url}/openapi.json")
    op = schema["/v1/query"]["POST"]
    findings = Findings()
    case = op.Case(body={"sql": "SHOW TABLES"}, media_type="application/json")
    r = _call(case, open_server.url, {"Accept": ARROW}, findings)
    assert not findings.seen, findings.report()
    assert r.headers["content-type"] == [ARROW] and "x-shoal-stats" in r.headers
