"""Scrape targets cannot lead shoal to a host the location policy refuses (`shoal.outbound`).

Real HTTP servers on loopback addresses play an allowed target (which answers redirects) and
a host outside `SHOAL_ALLOWED_HOSTS` that records whether anything reached it. What a user
would see: the target is `up` 0 with the refusal as its error (the scrape status, the server
log), the refused host got no request, and nothing it serves lands in the table; a redirect
to an allowed host and port still works, within the hop limit.

Addresses: a name allowed by name may not lead to a loopback address unless the address is
allowed too; `localhost` may lead only to loopback; another name for an allowed address is
another host. The cases that need a resolver answer this machine cannot give (a `localhost`
that resolves elsewhere, a name whose answer changes between two lookups) inject a resolver
into `OutboundClient`, said so there; everything else uses the system resolver.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

import shoal
from shoal.client import Shoal
from shoal.config import Config
from shoal.errors import OutboundFetchError, OutboundRefusedError
from shoal.frontends.prometheus.kind import ScrapeKind, resolve_scrape_binding
from shoal.frontends.prometheus.scrape import Scraper, TargetScrape
from shoal.frontends.supervisor import BindingState
from shoal.locations import LocationPolicy
from shoal.outbound import MAX_REDIRECTS, HostRules, OutboundClient, system_resolver
from tests.support.clock import ManualClock
from tests.support.server import start_server
from tests.support.waiting import eventually

T0 = 1_790_000_000.0
SECRET = "# TYPE internal_secret gauge\ninternal_secret 42\n"
EXPOSITION = "# TYPE hits_total counter\nhits_total 7\n"


@dataclass
class Site:
    """A loopback HTTP server answering `routes[path] = (status, headers, body)` (404 else),
    recording each request's path and Host header."""

    host: str
    port: int = 0
    routes: dict[str, tuple[int, dict[str, str], str]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.routes[path] = (status, {"Location": location}, "")

    def serve(self, path: str, body: str) -> None:
        self.routes[path] = (200, {"Content-Type": "text/plain; version=0.0.4"}, body)

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]


@contextmanager
def site(host: str = "127.0.0.1", port: int = 0) -> Iterator[Site]:
    s = Site(host)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            s.requests.append((self.path, self.headers.get("Host", "")))
            status, headers, body = s.routes.get(self.path, (404, {}, "not found\n"))
            data = body.encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    s.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield s
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def database(tmp_path, allowed_hosts: str) -> Iterator[Shoal]:
    db = shoal.connect(data_dir=str(tmp_path / "data"), allowed_hosts=allowed_hosts)
    try:
        yield db
    finally:
        db.close()


def scrape_once(db: Shoal, target: str, path: str = "/metrics",
                table: str = "m") -> tuple[TargetScrape, BindingState]:
    """One round of the table's scrape job as the supervisor runs it."""
    db.sql(f"CREATE TABLE {table} WITH (scrape_targets = '{target}', scrape_path = '{path}', "
           "scrape_interval = '5s', scrape_timeout = '5s')")
    binding = resolve_scrape_binding(db, table)
    assert binding is not None
    kind = ScrapeKind(db, clock=ManualClock(T0))
    state = BindingState("scrape", table, counters={n: 0 for n, _ in kind.counters},
                         gauges={n: None for n, _ in kind.gauges})
    with Scraper(db, binding, clock=ManualClock(T0)) as scraper:
        [result] = kind.round(scraper, state)
    return result, state


def metrics_in(db: Shoal, table: str = "m") -> dict[str, list[float]]:
    data, _ = db.read(table)
    out: dict[str, list[float]] = {}
    for r in data.to_pylist():
        out.setdefault(r["metric"], []).append(r["value"])
    return out


# ---- redirects ------------------------------------------------------------------------------
def test_a_redirect_to_a_refused_port_fetches_nothing_from_it(tmp_path):
    with site() as target, site() as secret:
        secret.serve("/internal-secret", SECRET)
        target.redirect("/metrics", f"http://127.0.0.1:{secret.port}/internal-secret")
        with database(tmp_path, target.address) as db:
            result, state = scrape_once(db, target.address)
            stored = metrics_in(db)
    assert secret.requests == []
    assert target.paths() == ["/metrics"]
    assert not result.up
    assert result.error == (
        f"refused to fetch http://127.0.0.1:{secret.port}/internal-secret (redirect 1 from "
        f"http://{target.address}/metrics): 127.0.0.1:{secret.port} is not in "
        "SHOAL_ALLOWED_HOSTS")
    assert not state.up and f"127.0.0.1:{secret.port} is not in" in (state.error or "")
    assert "internal_secret" not in stored and stored["up"] == [0.0]


@pytest.mark.parametrize("how", ["relative, same target", "absolute, another allowed port"])
def test_a_redirect_to_an_allowed_host_and_port_is_followed(tmp_path, how):
    with site() as target, site() as other:
        if how.startswith("relative"):
            target.redirect("/metrics", "/metrics/", status=301)
            target.serve("/metrics/", EXPOSITION)
        else:
            target.redirect("/metrics", f"http://127.0.0.1:{other.port}/m", status=307)
            other.serve("/m", EXPOSITION)
        allowed = f"{target.address},127.0.0.1:{other.port}"
        with database(tmp_path, allowed) as db:
            result, state = scrape_once(db, target.address)
            stored = metrics_in(db)
    assert result.up and state.up, result.error
    assert stored["hits_total"] == [7.0] and stored["up"] == [1.0]


@pytest.mark.parametrize("redirects", [MAX_REDIRECTS, MAX_REDIRECTS + 1])
def test_a_redirect_chain_over_the_hop_limit_is_refused(tmp_path, redirects):
    with site() as target:
        for n in range(1, MAX_REDIRECTS + 2):
            target.redirect(f"/r/{n}", f"/r/{n - 1}")
        target.serve("/r/0", EXPOSITION)
        with database(tmp_path, target.address) as db:
            result, _ = scrape_once(db, target.address, path=f"/r/{redirects}")
            stored = metrics_in(db)
    if redirects <= MAX_REDIRECTS:
        assert result.up and stored["hits_total"] == [7.0]
        assert target.paths() == [f"/r/{n}" for n in range(redirects, -1, -1)]
    else:
        assert not result.up and "hits_total" not in stored
        assert result.error is not None and result.error.endswith(
            f"more than {MAX_REDIRECTS} redirects")
        assert "/r/0" not in target.paths()          # the last hop was never sent
        assert len(target.requests) == MAX_REDIRECTS + 1


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1:{port}/metrics",
                                      "gopher://127.0.0.1:{port}/_GET"])
def test_a_redirect_to_another_scheme_is_refused(tmp_path, location):
    with site() as target:
        target.redirect("/metrics", location.format(port=target.port))
        with database(tmp_path, target.address) as db:
            result, _ = scrape_once(db, target.address)
    scheme = location.split(":", 1)[0]
    assert not result.up
    assert result.error is not None and result.error.endswith(
        f"scheme {scheme!r} is not http or https")
    assert target.paths() == ["/metrics"]


def test_another_name_for_an_allowed_address_is_another_host(tmp_path):
    """`127.0.0.1:P` allowed does not allow `localhost:P`, nor the reverse, though both
    reach the same socket: the policy names hosts as written."""
    with site() as target:
        target.serve("/secret", SECRET)
        target.redirect("/metrics", f"http://localhost:{target.port}/secret")
        with database(tmp_path, target.address) as db:
            by_address, _ = scrape_once(db, target.address)
        assert not by_address.up and (by_address.error or "").endswith(
            f"localhost:{target.port} is not in SHOAL_ALLOWED_HOSTS")
        target.redirect("/metrics", f"http://127.0.0.1:{target.port}/secret")
        with database(tmp_path / "b", f"localhost:{target.port}") as db:
            by_name, _ = scrape_once(db, f"localhost:{target.port}")
            stored = metrics_in(db)
    assert not by_name.up and (by_name.error or "").endswith(
        f"127.0.0.1:{target.port} is not in SHOAL_ALLOWED_HOSTS")
    assert "/secret" not in target.paths() and "internal_secret" not in stored


# ---- addresses, with the system resolver --------------------------------------------------
def _loopback_name() -> tuple[str, str] | None:
    """A name of this machine (not `localhost`) that the system resolves to a 127/8 address
    only, with that address; None when there is none."""
    for name in (socket.gethostname(), socket.getfqdn()):
        if not name or name == "localhost" or name.endswith(".localhost"):
            continue
        try:
            infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
        except OSError:
            continue
        addrs = {i[4][0] for i in infos}
        if addrs and all(a.startswith("127.") for a in addrs) and len(addrs) == 1:
            return name, addrs.pop()
    return None


def test_a_name_allowed_by_name_reaches_loopback_only_when_the_address_is_allowed(tmp_path):
    found = _loopback_name()
    if found is None:
        pytest.skip("this machine's name does not resolve to a loopback address only")
    name, address = found
    with site(address) as target:
        target.serve("/metrics", EXPOSITION)
        with database(tmp_path, f"{name}:{target.port}") as db:
            refused, state = scrape_once(db, f"{name}:{target.port}")
        assert target.requests == []
        assert not refused.up and (refused.error or "").endswith(
            f"{name.lower()} resolves to {address}, a loopback address that SHOAL_ALLOWED_HOSTS "
            f"allows through a name only when it lists the address too "
            f"({address}:{target.port})")
        assert state.error is not None and "a loopback address" in state.error
        allowed = f"{name}:{target.port},{address}:{target.port}"
        with database(tmp_path / "b", allowed) as db:
            up, _ = scrape_once(db, f"{name}:{target.port}")
            stored = metrics_in(db)
    assert up.up and stored["hits_total"] == [7.0]
    assert target.requests == [("/metrics", f"{name}:{target.port}")]   # the name as Host


def test_localhost_reaches_loopback(tmp_path):
    with site() as target:
        target.serve("/metrics", EXPOSITION)
        with database(tmp_path, f"localhost:{target.port}") as db:
            result, _ = scrape_once(db, f"localhost:{target.port}")
    assert result.up, result.error
    assert target.requests == [("/metrics", f"localhost:{target.port}")]


# ---- addresses, with an injected resolver ---------------------------------------------------
# A fake resolver here: this machine's DNS cannot be made to answer these for real (and a
# test must not change /etc/hosts). Answers other than 127/8 addresses are only given to
# `HostRules` (which decides and connects nowhere), so no test can reach another address even
# if the rules regressed; the client connects to loopback servers only.
class Answers:
    """A resolver answering `answers[i]` to the i-th lookup (the last one after that)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = answers
        self.lookups: list[tuple[str, int]] = []

    def __call__(self, name: str, port: int) -> list[str]:
        self.lookups.append((name, port))
        return self.answers[min(len(self.lookups), len(self.answers)) - 1]


def rules(allowed: str, *answers: list[str]) -> HostRules:
    return HostRules.from_policy(LocationPolicy.from_config(Config(allowed_hosts=allowed)),
                                 resolver=Answers(*answers))


def fetch(allowed: str, url: str, resolver: Callable[[str, int], list[str]]) -> bytes:
    policy = LocationPolicy.from_config(Config(allowed_hosts=allowed))
    with OutboundClient(policy, resolver=resolver) as client, client.open(
            url, timeout=10) as fetched:
        assert fetched.response.status_code == 200
        return fetched.read(1 << 20)


def test_localhost_resolving_elsewhere_is_refused():
    with pytest.raises(OutboundRefusedError,
                       match="localhost resolves to 169.254.169.254, which is not a loopback"):
        rules("localhost:9100", ["127.0.0.1", "169.254.169.254"]).addresses("localhost", 9100)
    assert rules("localhost", ["127.0.0.1", "::1"]).addresses("localhost", 80) == [
        "127.0.0.1", "::1"]


@pytest.mark.parametrize(("answer", "kind"), [
    (["169.254.169.254"], "link-local"), (["fe80::1"], "link-local"),
    (["0.0.0.0"], "unspecified"), (["::"], "unspecified"), (["224.0.0.1"], "multicast"),
    (["255.255.255.255"], "reserved"), (["::ffff:169.254.169.254"], "link-local"),
    (["10.0.0.5", "127.0.0.1"], "loopback")])
def test_a_name_may_not_lead_to_a_special_address(answer, kind):
    with pytest.raises(OutboundRefusedError, match=f"a {kind} address that SHOAL_ALLOWED"):
        rules("metrics.test:9100", answer).addresses("metrics.test", 9100)


@pytest.mark.parametrize("answer", [["127.0.0.1"], ["::ffff:127.0.0.1"],
                                    ["127.0.0.1", "127.0.0.2"]])
def test_a_name_leading_to_loopback_fetches_nothing(answer):
    with site() as target:
        target.serve("/metrics", EXPOSITION)
        # 127.0.0.1 is allowed by address, 127.0.0.2 is not: every address must pass
        extra = f",127.0.0.1:{target.port}" if len(answer) > 1 else ""
        with pytest.raises(OutboundRefusedError,
                           match="a loopback address that SHOAL_ALLOWED_HOSTS"):
            fetch(f"metrics.test:{target.port}{extra}",
                  f"http://metrics.test:{target.port}/metrics", Answers(answer))
    assert target.requests == []


def test_the_checked_address_is_the_one_connected_to():
    """One lookup per connection: a name whose answer changes after the check (DNS
    rebinding) is still fetched from the address that was checked, with its own name as
    Host."""
    with site() as target:
        target.serve("/metrics", EXPOSITION)
        resolver = Answers(["127.0.0.1"], ["127.0.0.9"])   # 127.0.0.9: nobody listens
        body = fetch(f"metrics.test:{target.port},127.0.0.1:{target.port}",
                     f"http://metrics.test:{target.port}/metrics", resolver)
    assert body == EXPOSITION.encode()
    assert resolver.lookups == [("metrics.test", target.port)]
    assert target.requests == [("/metrics", f"metrics.test:{target.port}")]


def test_https_keeps_the_name_for_tls():
    """The connection goes to the checked address, but TLS is asked for the name (SNI, and
    so the certificate check). The loopback TLS server has no certificate: it records the
    name the client asked for, then the handshake fails, which is the fetch's error."""
    names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(ssl.SSLError):
            context.wrap_socket(conn, server_side=True)

    server = threading.Thread(target=accept, daemon=True)
    server.start()
    try:
        with pytest.raises(OutboundFetchError, match="SSL"):
            fetch(f"localhost:{port}", f"https://localhost:{port}/metrics", system_resolver)
        server.join(timeout=60)
    finally:
        listener.close()
    assert names == ["localhost"]


def test_the_rules_of_names_ports_and_addresses():
    r = rules("metrics.internal:9100, Node.Example, 127.0.0.1:9100, [::1]:9101",
              ["10.1.2.3", "2001:db8::5"])
    assert r.addresses("metrics.internal", 9100) == ["10.1.2.3", "2001:db8::5"]
    assert r.addresses("METRICS.internal.", 9100) == ["10.1.2.3", "2001:db8::5"]
    assert r.addresses("node.example", 1234) == ["10.1.2.3", "2001:db8::5"]   # any port
    assert r.addresses("127.0.0.1", 9100) == ["127.0.0.1"]       # a literal: no lookup
    assert r.addresses("::ffff:127.0.0.1", 9100) == ["127.0.0.1"]
    assert r.addresses("0:0::1", 9101) == ["::1"]
    for host, port in (("metrics.internal", 9101), ("127.0.0.1", 9101), ("127.0.0.2", 9100),
                       ("::1", 9100), ("internal", 9100), ("localhost", 9100)):
        with pytest.raises(OutboundRefusedError, match="is not in SHOAL_ALLOWED_HOSTS"):
            r.addresses(host, port)
    loop = rules("a.test, 127.0.0.1:9100", ["127.0.0.1"])
    assert loop.addresses("a.test", 9100) == ["127.0.0.1"]           # the address is listed
    with pytest.raises(OutboundRefusedError, match=r"a loopback address .*\(127.0.0.1:9200\)"):
        loop.addresses("a.test", 9200)                               # not on this port


# ---- through a real `shoal serve` -----------------------------------------------------------
@pytest.mark.services
def test_shoal_serve_scrapes_the_target_but_never_the_host_it_redirects_to(tmp_path):
    with site() as target, site() as secret:
        secret.serve("/internal-secret", SECRET)
        target.redirect("/metrics", f"http://127.0.0.1:{secret.port}/internal-secret")
        with start_server(tmp_path / "data", env={
                "SHOAL_PIPELINES": "true", "SHOAL_ALLOWED_HOSTS": target.address}) as server:

            def sql(statement: str) -> Any:
                r = httpx.post(f"{server.url}/v1/query", json={"sql": statement}, timeout=120)
                assert r.status_code == 200, r.text
                return r.json()["rows"]

            sql(f"CREATE TABLE m WITH (scrape_targets = '{target.address}', "
                "scrape_interval = '1s', scrape_timeout = '1s')")
            eventually(lambda: sql("SELECT count(*) FROM m WHERE metric = 'up'"),
                       "two scrape rounds committed", until=lambda r: r[0][0] >= 2)
            assert sql("SELECT count(*) FROM m WHERE metric = 'internal_secret'") == [[0]]
            assert sql("SELECT count(*) FROM m WHERE metric = 'up' AND value = 1") == [[0]]
            metrics = httpx.get(f"{server.url}/metrics", timeout=60).text
            log = server.log()
    assert secret.requests == []
    assert len(target.requests) >= 2
    assert 'shoal_scrape_pipeline_up{table="m"} 0.0' in metrics
    assert (f"refused to fetch http://127.0.0.1:{secret.port}/internal-secret (redirect 1 "
            f"from http://{target.address}/metrics): 127.0.0.1:{secret.port} is not in "
            "SHOAL_ALLOWED_HOSTS") in log
    assert "internal_secret" not in log
