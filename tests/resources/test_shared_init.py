# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The template cache of shared INIT: one staging per task, also under concurrency; expiry and eviction."""

from __future__ import annotations

import asyncio

import pytest

from prorl_gym.resources.shared_init import SharedInit, default_init_key
from prorl_gym.sandbox import create_sandbox
from prorl_gym.sandbox.errors import SandboxForkError


@pytest.fixture
def staged(sandbox_spec):
    """make(key) -> a maker that stages a real sandbox (a file naming the task) and freezes it."""
    made = []

    def make(key: str):
        async def make_template():
            async with await create_sandbox(sandbox_spec) as staging:
                await asyncio.sleep(0.05)  # staging takes a while: the group's other samples wait
                await staging.bash(f"echo {key} > task")
                made.append(key)
                return await staging.freeze()

        return make_template

    make.made = made
    return make


async def test_concurrent_samples_of_a_task_stage_it_once_and_each_get_their_own_fork(staged):
    shared = SharedInit()
    forks = await asyncio.gather(*(shared.fork("a", staged("a")) for _ in range(4)))
    try:
        assert staged.made == ["a"] and len({f.id for f in forks}) == 4
        assert [(await f.bash("cat task")).output.strip() for f in forks] == ["a"] * 4
        assert shared.counts == {"templates": 1, "forks": 4}
    finally:
        await shared.close()
        await asyncio.gather(*(f.close() for f in forks))


async def test_a_failed_staging_reaches_its_caller_and_the_next_sample_stages_again(staged):
    shared = SharedInit()

    async def broken():
        raise RuntimeError("staging failed")

    with pytest.raises(RuntimeError, match="staging failed"):
        await shared.fork("a", broken)
    fork = await shared.fork("a", staged("a"))
    await fork.close()
    await shared.close()
    assert staged.made == ["a"]


async def test_idle_templates_expire_and_the_least_recently_used_is_evicted(staged):
    shared = SharedInit(ttl_s=3600, max_templates=2)
    for key in ("a", "b", "c"):
        await (await shared.fork(key, staged(key))).close()
    assert len(shared) == 2 and staged.made == ["a", "b", "c"]
    await (await shared.fork("a", staged("a"))).close()  # "a" was evicted: staged again
    assert staged.made == ["a", "b", "c", "a"]
    shared.ttl_s = 0
    await shared.sweep()
    assert len(shared) == 0


def test_samples_of_one_task_share_a_key_and_other_tasks_do_not():
    row = {"instance_id": "x-1", "responses_create_params": {"input": "hi"}, "_ng_rollout_index": 0}
    sample = row | {"responses_create_params": {"input": "hi", "temperature": 1.0}, "_ng_rollout_index": 3}
    assert default_init_key(row) == default_init_key(sample)
    assert default_init_key(row) != default_init_key(row | {"instance_id": "x-2"})


async def test_a_template_that_cannot_fork_any_more_is_staged_anew(staged):
    shared = SharedInit()
    await (await shared.fork("a", staged("a"))).close()
    (template,) = [entry.template for entry in shared._entries.values()]
    await template.close()  # as if its host had gone: spawning from it fails from now on
    with pytest.raises(SandboxForkError):
        await shared.fork("a", staged("a"))
    await (await shared.fork("a", staged("a"))).close()  # the next sample stages the task again
    assert staged.made == ["a", "a"]
    await shared.close()
