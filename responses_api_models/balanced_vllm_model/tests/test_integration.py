# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The balanced model server against real scripted policy processes (see harness.py).

Health settings are fast here (checks every 0.2 s, 0.5 s limit, dead after 2 failures).
"""

import asyncio
import time
from collections import Counter

import httpx
import pytest

from prorl_gym.stack import free_port
from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.wire.failures import NO_ENDPOINT_ERROR
from responses_api_models.balanced_vllm_model.tests.harness import ROWS, Policies, Rollout, serve_model


@pytest.fixture
def policies(tmp_path):
    started = Policies(tmp_path)
    yield started
    started.stop_all()


def in_flight(*counts: int):
    return lambda endpoints: [e["in_flight"] for e in endpoints.values()] == list(counts)


def healthy(url: str, value: bool = True):
    return lambda endpoints: endpoints[url]["healthy"] is value


async def test_concurrent_sessions_spread_and_stick_across_turns(policies):
    urls = [p.url for p in await policies.start(3, latency_ms=300)]
    async with serve_model(urls) as server:
        rollouts = [Rollout(server, row=ROWS[i % len(ROWS)]) for i in range(6)]
        first = asyncio.gather(*(r.turn() for r in rollouts))
        await server.wait_for(in_flight(2, 2, 2))  # least in flight: 6 concurrent sessions, 2 per endpoint
        first = await first
        assert [t.status for t in first] == [200] * 6
        assert Counter(t.endpoint for t in first) == dict.fromkeys(urls, 2)
        second = await asyncio.gather(*(r.turn() for r in rollouts))
        assert [t.status for t in second] == [200] * 6
        assert [t.endpoint for t in second] == [t.endpoint for t in first]  # sticky
        for turn in first + second:  # token ids: the endpoint's logprobs and its own /tokenize
            generated = [o for o in turn.body["output"] if "generation_token_ids" in o]
            assert generated and all(o["prompt_token_ids"] and o["generation_log_probs"] for o in generated)
        answer = second[0].body["output"][-1]["content"][0]["text"]
        assert answer.endswith(f"\\boxed{{{rollouts[0].row['expected_answer']}}}.")  # a real 2-turn rollout
        assert [e["sessions"] for e in (await server.endpoints()).values()] == [2, 2, 2]


async def test_prompt_token_ids_come_with_the_completion_so_no_turn_calls_tokenize(policies):
    (policy,) = await policies.start(1)
    async with serve_model([policy.url]) as server:
        rollout = Rollout(server, row=ROWS[0])
        turns = [await rollout.turn(), await rollout.turn()]
        assert [t.status for t in turns] == [200, 200]
        generated = [o for t in turns for o in t.body["output"] if "generation_token_ids" in o]
        assert len(generated) == 2 and all(o["prompt_token_ids"] and o["generation_log_probs"] for o in generated)
        items = [{k: [int(i) for i in o[k]] for k in ("prompt_token_ids", "generation_token_ids")} for o in generated]
        assert token_ids_contiguous(items) is True  # the second prompt extends the first turn's tokens
        async with server.http.get(policy.url.removesuffix("/v1") + "/stats") as r:
            paths = (await r.json())["paths"]
        assert paths.get("/v1/chat/completions") == 2 and "/tokenize" not in paths


async def test_least_in_flight_beats_round_robin(policies):
    (slow,) = await policies.start(1, latency_ms=1500)
    (fast,) = await policies.start(1, latency_ms=20)
    async with serve_model([slow.url, fast.url]) as server:
        busy = asyncio.ensure_future(Rollout(server).turn())  # first of a tie: the slow one
        await server.wait_for(in_flight(1, 0))
        quick = [await Rollout(server).turn() for _ in range(4)]  # one after the other
        assert [t.endpoint for t in quick] == [fast.url] * 4
        assert (await busy).endpoint == slow.url


async def test_a_killed_endpoint_fails_its_in_flight_fast_and_new_sessions_go_elsewhere(policies):
    # The doomed endpoint would answer after 30 s: an answer before that is the kill's, however busy
    # the machine (no threshold of seconds here that a slow machine could miss).
    (doomed,), (survivor,) = await policies.start(1, latency_ms=30_000), await policies.start(1, latency_ms=2000)
    async with serve_model([doomed.url, survivor.url]) as server:
        rollouts = [Rollout(server) for _ in range(4)]
        turns = [asyncio.ensure_future(r.turn()) for r in rollouts]
        await server.wait_for(in_flight(2, 2))
        killed_at = time.monotonic()
        doomed.kill()
        done = await asyncio.gather(*turns)
        failed = [t for t in done if t.endpoint == doomed.url]
        assert len(failed) == 2 and all(t.status == 503 and doomed.url in t.body["detail"] for t in failed)
        failed_within_s = max(t.finished_at for t in failed) - killed_at
        assert failed_within_s < 30.0, failed_within_s  # not its latency, nor any policy timeout
        assert [t.status for t in done if t.endpoint == survivor.url] == [200, 200]
        endpoints = await server.endpoints()
        assert endpoints[doomed.url]["healthy"] is False and endpoints[doomed.url]["in_flight"] == 0
        fresh = await Rollout(server).turn()
        assert (fresh.status, fresh.endpoint) == (200, survivor.url)
        stale = next(r for r in rollouts if r.endpoint == doomed.url)
        answered = await requests_served(survivor)
        again = await stale.turn()  # pinned to the dead endpoint: refused, not moved (never stitched)
        assert again.status == 503 and "died during this session" in again.body["detail"]
        assert await requests_served(survivor) == answered
        print(f"\nkilled endpoint: its in-flight requests answered 503 within {failed_within_s:.2f}s")


async def requests_served(policy) -> int:
    """Generation requests the policy answered (not its health checks)."""
    async with httpx.AsyncClient() as client:
        paths = (await client.get(policy.url.removesuffix("/v1") + "/stats")).json()["paths"]
    return sum(n for path, n in paths.items() if path not in ("/health", "/v1/models"))


async def test_a_hung_endpoint_is_declared_dead_by_health_checks_then_recovers(policies):
    hung, other = await policies.start(2, latency_ms=2000)
    async with serve_model([hung.url, other.url]) as server:
        pinned, elsewhere = Rollout(server), Rollout(server)
        turns = asyncio.gather(pinned.turn(), elsewhere.turn())
        await server.wait_for(in_flight(1, 1))
        paused_at = time.monotonic()
        hung.pause()  # connections stay open, nothing answers: only health checks can tell
        try:
            failed, ok = await turns
            assert failed.status == 503 and "timed out" in failed.body["detail"], failed.body
            detected_s = failed.finished_at - paused_at
            assert detected_s < 4.0, detected_s
            assert (ok.status, ok.endpoint) == (200, other.url)
            assert (await Rollout(server).turn()).endpoint == other.url
        finally:
            hung.resume()
            resumed_at = time.monotonic()
        recovered = await server.wait_for(healthy(hung.url), timeout_s=5)
        recovered_s = time.monotonic() - resumed_at
        assert recovered[hung.url]["failures"] == 0
        revived = await Rollout(server).turn()  # new sessions may use it again: it has the fewest sessions
        assert (revived.status, revived.endpoint) == (200, hung.url)
        assert (await pinned.turn()).status == 503  # its session was on the dead incarnation
        print(f"\nhung endpoint: declared dead in {detected_s:.2f}s; healthy {recovered_s:.2f}s after resuming")


async def test_endpoints_are_added_and_removed_at_run_time(policies):
    first, second = await policies.start(2, latency_ms=800)
    async with serve_model([first.url]) as server:
        status, added = await server.admin("POST", second.url + "/")
        assert status == 200 and added["url"] == second.url and added["healthy"] is True
        assert (await server.admin("POST", second.url))[0] == 409
        assert (await server.admin("POST", "not-a-url"))[0] == 422
        nobody = f"http://127.0.0.1:{free_port()}/v1"
        status, dead = await server.admin("POST", nobody)  # added, but not given sessions until it answers
        assert status == 200 and dead["healthy"] is False and "health check" in dead["last_error"]
        on_first, on_second = Rollout(server), Rollout(server)
        turns = asyncio.gather(on_first.turn(), on_second.turn())
        await server.wait_for(in_flight(1, 1, 0))
        status, removed = await server.admin("DELETE", first.url)  # default: its in-flight requests finish
        assert status == 200 and removed["removed"] is True and first.url not in await server.endpoints()
        finished = await turns
        assert [(t.status, t.endpoint) for t in finished] == [(200, first.url), (200, second.url)]
        again = await on_first.turn()
        assert again.status == 503 and "was removed" in again.body["detail"]
        assert (await on_second.turn()).endpoint == second.url
        assert (await Rollout(server).turn()).endpoint == second.url  # not the removed one, not the dead one
        assert (await server.admin("DELETE", first.url))[0] == 404


async def test_removing_with_cancel_answers_its_in_flight_at_once(policies):
    (policy,) = await policies.start(1, latency_ms=3000)
    async with serve_model([policy.url]) as server:
        turn = asyncio.ensure_future(Rollout(server).turn())
        await server.wait_for(in_flight(1))
        removed_at = time.monotonic()
        assert (await server.admin("DELETE", policy.url, cancel_in_flight=True))[0] == 200
        cancelled = await turn
        assert cancelled.status == 503 and "was removed" in cancelled.body["detail"]
        assert cancelled.finished_at - removed_at < 0.5
        empty = await Rollout(server).turn()
        assert empty.status == 503 and "no healthy policy endpoint" in empty.body["detail"]["message"]
        assert empty.body["detail"]["type"] == NO_ENDPOINT_ERROR  # the agent's cue: nothing ran, no attempt used


async def test_an_unreachable_endpoint_cannot_hang_a_request():
    """NeMo Gym's own client would retry the refused connection forever."""
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    async with serve_model([nobody], health_interval_s=60) as server:  # only the request itself notices
        turn = await Rollout(server).turn()
        assert turn.status == 503 and "cannot connect" in turn.body["detail"] and turn.elapsed_s < 2.0
        assert (await server.endpoints())[nobody]["healthy"] is False


async def test_every_policy_call_is_bounded_by_request_timeout(policies):
    (slow,) = await policies.start(1, latency_ms=3000)
    async with serve_model([slow.url], request_timeout_s=0.5) as server:
        turn = await Rollout(server).turn()
        assert turn.status == 504 and "request_timeout_s=0.5" in turn.body["detail"] and turn.elapsed_s < 1.5
        assert (await server.endpoints())[slow.url]["healthy"] is True  # slow is not dead
