"""The query slot table's fairness rule (`shoal.http.state.QuerySlots`): at most `limit`
statements at once, and one client at most `per_client` of them (all but one by default);
how callers are told apart (`ServerState.client_key`, the Flight peer's address). The rule
over a real server, on every surface, is in test_flight_security.py."""

from __future__ import annotations

import pytest

from shoal.http.errors import TooManyQueriesError
from shoal.frontends.flightsql.server import _peer_host
from shoal.http.state import QuerySlots, _canonical_host


def test_one_client_gets_all_but_one_slot_and_others_the_rest():
    slots = QuerySlots(4)
    assert slots.per_client == 3
    for _ in range(3):
        slots.acquire("host:a")
    with pytest.raises(TooManyQueriesError) as e:
        slots.acquire("host:a")
    assert e.value.per_client == 3 and "query_concurrency_per_client" in str(e.value)
    slots.acquire("host:b")                     # the slot left is another client's
    with pytest.raises(TooManyQueriesError) as e:
        slots.acquire("host:c")                 # every slot taken: the total bound
    assert e.value.per_client is None and "query_concurrency)" in str(e.value)
    slots.release("host:a")
    assert slots.held_by("host:a") == 2 and slots.running == 3
    slots.acquire("host:c")
    for client in ("host:a", "host:a", "host:b", "host:c"):
        slots.release(client)
    assert slots.running == 0 and slots.held_by("host:a") == 0


def test_a_single_slot_and_an_explicit_share():
    one = QuerySlots(1)
    assert one.per_client == 1
    one.acquire("host:a")
    with pytest.raises(TooManyQueriesError):
        one.acquire("host:b")
    assert QuerySlots(8, per_client=2).per_client == 2
    assert QuerySlots(2, per_client=5).per_client == 2      # never more than the total
    with pytest.raises(ValueError):
        QuerySlots(4, per_client=0)


def test_work_for_no_client_counts_only_towards_the_total():
    slots = QuerySlots(2)
    slots.acquire()
    slots.acquire("host:a")
    with pytest.raises(TooManyQueriesError):
        slots.acquire("host:b")
    slots.release()
    slots.release("host:a")
    assert slots.running == 0


@pytest.mark.parametrize(("peer", "host"), [
    ("ipv4:127.0.0.1:43210", "127.0.0.1"),
    ("ipv6:[::1]:43210", "::1"),
    ("ipv6:[fe80::1%eth0]:5000", "fe80::1"),
    ("unix:/tmp/flight.sock", "unix:/tmp/flight.sock"),
])
def test_a_flight_peer_is_its_address_without_the_port(peer, host):
    assert _peer_host(peer) == host


def test_an_ipv4_address_mapped_into_ipv6_is_the_same_client():
    assert _canonical_host("::ffff:10.0.0.1") == "10.0.0.1"
    assert _canonical_host("10.0.0.1") == "10.0.0.1"
    assert _canonical_host(None) == "unknown"
