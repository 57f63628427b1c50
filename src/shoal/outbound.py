"""Every outbound HTTP fetch a user can configure (scrape targets now, connectors later) goes
through here, so that the location policy (`shoal.locations`, `SHOAL_ALLOWED_HOSTS`) holds
for what is actually connected to, not only for what a table property says.

    with OutboundClient(policy, headers={...}) as client:
        with client.open("http://metrics.internal:9100/metrics", timeout=10) as fetched:
            fetched.response.status_code, fetched.read(max_bytes=64 << 20)

Each hop of a fetch (the first request and every redirect) must pass, in this order:

- scheme: `http` or `https` (a redirect to `file:`, `ftp:` or anything else is refused);
- name and port: the URL's host must be an entry of `SHOAL_ALLOWED_HOSTS` as written
  (`host` allows every port, `host:port` that one; names case-insensitive, a trailing dot
  ignored, IP literals compared as addresses). Another name for the same machine is another
  host: `localhost` does not allow `127.0.0.1`, nor the reverse;
- addresses: the client resolves the name itself, checks every address of the answer and
  connects to a checked one; there is no second lookup between the check and the connect
  (a name that changes its answer in between, DNS rebinding, gets nowhere). The request keeps
  the name in its Host header, TLS SNI and certificate check. An IP-literal URL host is its
  own address. A name may resolve to ordinary addresses (public or private networks), but
  not to a special one (loopback, link-local such as the cloud metadata service at
  169.254.169.254, unspecified, multicast, reserved, and IPv4-mapped forms of those) unless
  an IP-literal entry allows that address and port too: with `SHOAL_ALLOWED_HOSTS=
  metrics.internal:9100`, shoal scrapes metrics.internal wherever its DNS puts it on the
  network, but never the server's own loopback services through it. `localhost` (and names
  under `.localhost`) is the exception the other way: it may resolve to loopback addresses
  only. One refused address refuses the whole answer;
- redirects: followed by this client (never by httpx), at most `max_redirects` (5) hops
  after the first request, each checked as above; one more is refused.

A refused hop raises `OutboundRefusedError` (a `LocationNotAllowedError`) naming the URL,
the hop and the rule, before a single byte is sent to the refused host. A fetch that fails
on the way (unknown name, refused connection, timeout, a body over its bound, a protocol
error) raises `OutboundFetchError`. The whole fetch (every hop and the body) ends within the
`timeout` given to `open`; `read(max_bytes)` stops at `max_bytes` decoded bytes. No proxy and
no environment settings are used (httpx's `trust_env` is off), so what is checked is what is
connected to.

Connections are pooled by (scheme, name, port) as httpx pools them; the check runs when a
connection is made, and a kept-alive connection stays on the address checked then.

Not HTTP, so not here: the Kafka bootstrap is a broker list that librdkafka connects to; its
hosts are checked by name when the binding starts (`shoal.locations`).
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from shoal.errors import OutboundFetchError, OutboundRefusedError
from shoal.locations import LocationPolicy

MAX_REDIRECTS = 5
SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[str]]
"""`(name, port) -> addresses` as text, in the order to try them; `OSError` when the name
does not resolve."""

# Addresses a name in the policy may not lead to unless an IP-literal entry allows them.
_SPECIAL: tuple[tuple[str, tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]], ...] = (
    ("loopback", (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))),
    ("link-local", (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"),
                    ipaddress.ip_network("fec0::/10"))),
    ("unspecified", (ipaddress.ip_network("0.0.0.0/8"), ipaddress.ip_network("::/128"))),
    ("multicast", (ipaddress.ip_network("224.0.0.0/4"), ipaddress.ip_network("ff00::/8"))),
    ("reserved", (ipaddress.ip_network("240.0.0.0/4"),)),
)


def system_resolver(name: str, port: int) -> list[str]:
    """The addresses the system resolver gives for `name` (IPv4 and IPv6, its order)."""
    out: list[str] = []
    for family, _, _, _, sockaddr in socket.getaddrinfo(name, port, type=socket.SOCK_STREAM):
        if family in (socket.AF_INET, socket.AF_INET6) and sockaddr[0] not in out:
            out.append(str(sockaddr[0]))
    return out


def _address(text: str) -> IPAddress | None:
    """`text` as an address (IPv4-mapped IPv6 as the IPv4 it maps); None for a name."""
    try:
        addr = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _host_key(host: str) -> str:
    """How a host is compared: an address in its canonical text, a name lower-case without a
    trailing dot."""
    addr = _address(host)
    return str(addr) if addr is not None else host.lower().rstrip(".")


def _special(addr: IPAddress) -> str | None:
    for kind, networks in _SPECIAL:
        if any(addr.version == n.version and addr in n for n in networks):
            return kind
    return None


def _is_localhost(name: str) -> bool:
    return name == "localhost" or name.endswith(".localhost")


def _show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class HostRules:
    """The host part of the location policy as applied on the wire (see the module
    docstring): `check_name` for a URL's host and port, `addresses` for what to connect to."""

    entries: tuple[tuple[str, int | None], ...]
    resolver: Resolver = system_resolver

    @classmethod
    def from_policy(cls, policy: LocationPolicy, resolver: Resolver = system_resolver
                    ) -> HostRules:
        return cls(tuple((_host_key(h), p) for h, p in policy.hosts), resolver)

    def _allows(self, key: str, port: int) -> bool:
        return any(h == key and (p is None or p == port) for h, p in self.entries)

    def check_name(self, host: str, port: int) -> None:
        """Raise `OutboundRefusedError` unless the policy lists `host` (and `port`)."""
        if not self._allows(_host_key(host), port):
            raise OutboundRefusedError(_show(host, port),
                                       f"{_show(host, port)} is not in SHOAL_ALLOWED_HOSTS")

    def addresses(self, host: str, port: int) -> list[str]:
        """The checked addresses to connect to for `host:port`, in order. Raises
        `OutboundRefusedError` when the name, the port or any address is refused, `OSError`
        when the name does not resolve."""
        self.check_name(host, port)
        key = _host_key(host)
        literal = _address(key)
        if literal is not None:
            return [str(literal)]
        found: list[IPAddress] = []
        for text in self.resolver(key, port):
            addr = _address(text)
            if addr is None:
                raise OSError(f"the resolver answered {text!r} for {key}, not an address")
            if addr not in found:
                found.append(addr)
        if not found:
            raise OSError(f"{key} resolves to no address")
        where = _show(host, port)
        for addr in found:
            kind = _special(addr)
            if _is_localhost(key):
                if kind != "loopback":
                    raise OutboundRefusedError(
                        where, f"{key} resolves to {addr}, which is not a loopback address")
            elif kind is not None and not self._allows(str(addr), port):
                raise OutboundRefusedError(
                    where, f"{key} resolves to {addr}, a {kind} address that "
                           f"SHOAL_ALLOWED_HOSTS allows through a name only when it lists "
                           f"the address too ({_show(str(addr), port)})")
        return [str(a) for a in found]


class _PinnedBackend(httpcore.NetworkBackend):
    """Makes every TCP connection of the pool: checks the name, resolves it once, checks the
    addresses and connects to them (in order, within the one connect timeout)."""

    def __init__(self, rules: HostRules) -> None:
        self._rules = rules
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = self._rules.addresses(host, port)
        except OSError as e:
            raise httpcore.ConnectError(f"cannot resolve {host}: {e}") from None
        deadline = None if timeout is None else time.monotonic() + timeout
        failure: Exception | None = None
        for address in addresses:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            try:
                return self._inner.connect_tcp(address, port, left, local_address,
                                               socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                failure = e             # the next address, as a dual-stack client would
        assert failure is not None
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        raise OutboundRefusedError(path, "outbound fetches do not use unix sockets")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose every connection is made by
    `_PinnedBackend`. httpx takes no network backend, so the pool is built here (the one
    attribute `HTTPTransport`'s methods use); no proxy, no unix socket."""

    def __init__(self, rules: HostRules) -> None:  # no super().__init__: it builds a pool
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0,
            network_backend=_PinnedBackend(rules))


class Fetched:
    """The final answer of `OutboundClient.open`: headers read, body still to read."""

    def __init__(self, url: str, response: httpx.Response, deadline: float,
                 timeout: float, hops: int) -> None:
        self.url = url
        self.response = response
        self.hops = hops                # redirects followed
        self._deadline = deadline
        self._timeout = timeout

    def read(self, max_bytes: int) -> bytes:
        """The (decoded) body; `OutboundFetchError` past `max_bytes` or the deadline."""
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in self.response.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise OutboundFetchError(self.url, f"body exceeds {max_bytes} bytes")
                if time.monotonic() > self._deadline:
                    raise OutboundFetchError(self.url, f"timed out after {self._timeout:g}s")
                chunks.append(chunk)
        except httpx.TimeoutException:
            raise OutboundFetchError(self.url, f"timed out after {self._timeout:g}s") from None
        except httpx.HTTPError as e:
            raise OutboundFetchError(self.url, f"{type(e).__name__}: {e}") from None
        return b"".join(chunks)


class OutboundClient:
    """Fetches user-configured URLs under the location policy (see the module docstring).
    Thread-safe as an `httpx.Client` is; close it (or use it as a context manager)."""

    def __init__(self, policy: LocationPolicy, *, headers: Mapping[str, str] | None = None,
                 max_redirects: int = MAX_REDIRECTS,
                 resolver: Resolver = system_resolver) -> None:
        self.rules = HostRules.from_policy(policy, resolver)
        self.max_redirects = max_redirects
        self._client = httpx.Client(transport=_PinnedTransport(self.rules),
                                    follow_redirects=False, trust_env=False,
                                    headers=dict(headers or {}))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OutboundClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, url: httpx.URL, where: str) -> None:
        if url.scheme not in SCHEMES:
            raise OutboundRefusedError(where, f"scheme {url.scheme!r} is not http or https")
        port = url.port or DEFAULT_PORTS[url.scheme]
        try:
            self.rules.check_name(url.host, port)
        except OutboundRefusedError as e:
            raise OutboundRefusedError(where, e.reason) from None

    @contextmanager
    def open(self, url: str, *, timeout: float, method: str = "GET") -> Iterator[Fetched]:
        """Send `method url`, following allowed redirects; yield the final answer (any
        status). The whole fetch, `Fetched.read` included, ends within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        request = self._client.build_request(method, url)
        first = str(request.url)
        hops = 0
        while True:
            where = str(request.url) if hops == 0 else (
                f"{request.url} (redirect {hops} from {first})")
            self._check(request.url, where)
            left = deadline - time.monotonic()
            if left <= 0:
                raise OutboundFetchError(first, f"timed out after {timeout:g}s")
            request.extensions = {**request.extensions,
                                  "timeout": httpx.Timeout(left).as_dict()}
            try:
                response = self._client.send(request, stream=True)
            except OutboundRefusedError as e:       # an address, checked at connect
                raise OutboundRefusedError(where, e.reason) from None
            except httpx.TimeoutException:
                raise OutboundFetchError(first, f"timed out after {timeout:g}s") from None
            except httpx.HTTPError as e:
                raise OutboundFetchError(first, f"{type(e).__name__}: {e}") from None
            following = response.next_request
            if following is None:
                break
            response.close()
            hops += 1
            if hops > self.max_redirects:
                raise OutboundRefusedError(
                    f"{following.url} (redirect {hops} from {first})",
                    f"more than {self.max_redirects} redirects")
            request = following
        try:
            yield Fetched(first, response, deadline, timeout, hops)
        finally:
            response.close()
