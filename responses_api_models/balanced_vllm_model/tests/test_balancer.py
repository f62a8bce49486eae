# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The balancing and health rules alone (balancer.py: pure, no I/O)."""

import pytest

from responses_api_models.balanced_vllm_model.balancer import Balancer, Unavailable, normalize_url

A, B, C = "http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"


def pool(*urls: str, **kwargs) -> Balancer:
    balancer = Balancer(**kwargs)
    for url in urls:
        balancer.add(url)
    return balancer


def test_new_sessions_go_to_the_fewest_in_flight_then_fewest_sessions():
    b = pool(A, B, C)
    assert [b.acquire(f"s{i}", 0).url for i in range(3)] == [A, B, C]  # all idle: fewest sessions, in order
    b.release(b.get(B))  # B finished its request: now the least loaded, although it has a session
    assert b.route("s3", 0).url == B
    b.release(b.get(A))
    b.release(b.get(C))
    # In flight: none anywhere; sessions A=1, B=2, C=1 -> A (first of the tie)
    assert b.route("s4", 0).url == A


def test_in_flight_outranks_sessions():
    b = pool(A, B)
    b.acquire("busy", 0)  # A: 1 in flight, 1 session
    for i in range(4):  # each finishes before the next starts
        endpoint = b.acquire(f"quick{i}", 0)
        assert endpoint.url == B
        b.release(endpoint)
    assert (b.get(A).sessions, b.get(B).sessions) == (1, 4)


def test_a_session_sticks_to_its_endpoint():
    b = pool(A, B)
    first = b.route("s", 0)
    for _ in range(3):
        b.acquire("other", 0)  # load the other endpoint
    assert all(b.route("s", t).url == first.url for t in range(5))


def test_death_needs_consecutive_failures_and_fails_its_sessions_fast():
    b = pool(A, B, unhealthy_after=3)
    a = b.route("s", 0)
    assert not b.record_failure(a, "x") and not b.record_failure(a, "y")
    b.record_success(a)  # resets the count
    assert not b.record_failure(a, "x") and not b.record_failure(a, "y")
    assert b.record_failure(a, "refused") and not a.healthy and a.sessions == 0
    assert not b.record_failure(a, "refused")  # declared once
    with pytest.raises(Unavailable, match="died during this session.*refused") as e:
        b.route("s", 1)
    assert e.value.status == 503
    assert b.route("new", 1).url == B


def test_recovery_serves_new_sessions_only():
    b = pool(A, unhealthy_after=1)
    a = b.route("old", 0)
    b.record_failure(a, "down")
    with pytest.raises(Unavailable, match="no healthy policy endpoint.*down"):
        b.route("new", 0)
    assert b.record_success(a) and a.healthy and not b.record_success(a)
    assert b.route("new", 1) is a
    with pytest.raises(Unavailable, match="died during this session"):
        b.route("old", 1)


def test_removed_endpoint_fails_its_sessions_and_takes_no_new_ones():
    b = pool(A, B)
    b.route("on-a", 0)
    removed = b.remove(A)
    assert removed.removed and b.get(A) is None and not b.record_failure(removed, "x")
    with pytest.raises(Unavailable, match="was removed"):
        b.route("on-a", 0)
    assert b.route("new", 0).url == B
    again = b.add(A)  # re-added: a new endpoint; old sessions stay failed
    assert again is not removed
    with pytest.raises(Unavailable, match="was removed"):
        b.route("on-a", 0)
    with pytest.raises(KeyError):
        b.remove("http://nope:1/v1")
    with pytest.raises(ValueError, match="already"):
        b.add(A + "/")


def test_session_bindings_are_bounded_lru_and_idle():
    b = pool(A, B, max_sessions=3, session_idle_s=10)
    for i in range(3):
        b.route(f"s{i}", i)
    b.route("s0", 3)  # s0 is now the most recently used
    b.route("s3", 4)  # over the bound: s1 (least recently used) goes
    assert b.num_sessions == 3 and sum(e.sessions for e in b.endpoints) == 3
    assert b.prune(now=12.5) == 1  # s2 (last used at 2) is idle > 10 s; s0 (at 3) is not
    assert b.num_sessions == 2 and sum(e.sessions for e in b.endpoints) == 2
    assert b.prune(now=100) == 2 and b.num_sessions == 0 and sum(e.sessions for e in b.endpoints) == 0


def test_pruning_a_dead_endpoints_sessions_leaves_the_new_incarnations_count():
    b = pool(A, unhealthy_after=1)
    a = b.route("old", 0)
    b.record_failure(a, "down")
    b.record_success(a)
    b.route("new", 50)
    assert b.prune(now=3601) == 1  # "old" expires; it belonged to the dead incarnation
    assert a.sessions == 1


@pytest.mark.parametrize("raw, url", [(" http://h:1/v1/ ", "http://h:1/v1"), ("https://h/v1", "https://h/v1")])
def test_urls_are_normalized(raw, url):
    assert normalize_url(raw) == url


@pytest.mark.parametrize("raw", ["h:8000/v1", "ftp://h", "http://", ""])
def test_bad_urls_are_rejected(raw):
    with pytest.raises(ValueError):
        normalize_url(raw)
