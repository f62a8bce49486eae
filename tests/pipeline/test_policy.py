# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""PolicyGate: the trainer's weight updates as the agent's policy calls see them (versions, pause,
abort and re-issue), journaled across a restart."""

from __future__ import annotations

import asyncio

import pytest

from prorl_gym.jobs.journal import Journal
from prorl_gym.pipeline.policy import PolicyGate


class Policy:
    """A policy call that answers when the test says, with the version of the weights it ran on."""

    def __init__(self, gate: PolicyGate):
        self.gate, self.sent, self.pending = gate, 0, []

    async def send(self) -> str:
        self.sent += 1
        future = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return await future

    def answer(self, text: str) -> None:
        self.pending.pop(0).set_result(text)


async def until(predicate) -> None:
    for _ in range(200):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("timed out")


async def test_a_call_carries_the_version_it_was_sent_under_and_pause_holds_new_ones():
    gate = PolicyGate()
    policy = Policy(gate)
    await gate.set_version(3)
    first = asyncio.ensure_future(gate.call(policy.send))
    await until(lambda: policy.sent == 1)
    await gate.pause()  # no abort: the call in flight finishes under the version it was sent with
    held = asyncio.ensure_future(gate.call(policy.send))
    await asyncio.sleep(0.05)
    assert policy.sent == 1 and gate.state().held == 1  # the new call waits, not sent
    policy.answer("old weights")
    assert await first == ("old weights", 3)
    state = await gate.resume(version=4)
    assert not state.paused and state.paused_s > 0
    await until(lambda: policy.sent == 2)
    policy.answer("new weights")
    assert await held == ("new weights", 4)


async def test_a_pause_that_aborts_issues_the_call_again_after_resume_and_drops_the_first():
    gate = PolicyGate()
    policy = Policy(gate)
    call = asyncio.ensure_future(gate.call(policy.send))
    await until(lambda: policy.sent == 1)
    aborted = policy.pending[0]
    await gate.pause(abort_in_flight=True)
    await until(lambda: aborted.cancelled())
    policy.pending.clear()
    assert not call.done() and policy.sent == 1  # not sent again while paused
    await gate.resume(version=1)
    await until(lambda: policy.sent == 2)
    policy.answer("from version 1")
    assert await call == ("from version 1", 1) and gate.state().aborted == 1


async def test_a_rollout_cancelled_while_its_call_is_held_or_in_flight_is_cancelled():
    gate = PolicyGate()
    policy = Policy(gate)
    in_flight = asyncio.ensure_future(gate.call(policy.send))
    await until(lambda: policy.sent == 1)
    in_flight.cancel()
    with pytest.raises(asyncio.CancelledError):
        await in_flight
    await gate.pause(abort_in_flight=True)
    held = asyncio.ensure_future(gate.call(policy.send))
    await until(lambda: gate.state().held == 1)
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    assert gate.state().held == 0 and gate.state().in_flight == 0


async def test_the_version_and_a_pause_survive_an_agent_restart(tmp_path):
    journal = Journal(tmp_path / "agent.sqlite")
    await journal.open()
    gate = PolicyGate(journal)
    await gate.set_version(7)
    await gate.pause()
    await journal.close()

    journal = Journal(tmp_path / "agent.sqlite")
    await journal.open()
    again = PolicyGate(journal)
    await again.restore()
    assert (again.version, again.paused) == (7, True)
    held = asyncio.ensure_future(again.call(lambda: asyncio.sleep(0, "sent")))
    await asyncio.sleep(0.02)
    assert not held.done()
    await again.resume()
    assert await held == ("sent", 7)
    await journal.close()
