# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A trainer feeding prorl-gym continuously over the job API (docs/job_api.md).

Each step hands the service a batch: `prompts_per_step` prompts x `group_size` samples, with
`stop_after=K`, so the service cancels the rest of the batch as soon as K usable rollouts
exist (DAPO-style dynamic sampling: over-provision, stop early, as ProRL Agent's trainer
does). The next step's batch is submitted before this step's stream is consumed, so the
service never idles between steps. From the records it forms groups (the samples of one
prompt), leaves out failed and cancelled rollouts (never scored 0), keeps the groups whose
rewards differ (DAPO's filter: a uniform group has no learning signal) and computes
group-normalised advantages (GRPO), the input of a policy update. With --train-s and
--weight-updates it trains for that long and tells the service each new policy version: in
async mode (the default) the next step generates while this one trains and generation is paused
around the weight update (a rollout may then span two versions: --max-staleness bounds it); in
sync mode it generates, then trains. --deadline-s ends a step's batch then, stragglers cancelled;
--stragglers backfill (or evict) replaces (or drops) a sample whose RUN goes past --straggler-k times the
p50 of its step's samples (docs/job_api.md, "Stragglers"), instead of the step waiting for it.
A policy the service declares down (no endpoint healthy for its grace period) ends the loop: said on
the terminal, exit 1. Ctrl-C, SIGTERM and SIGHUP stop it and the stack it started (exit 128 + signal).

    # a stack of its own (the scripted policy stands in for a GPU model; 47 to 284 s to start on a 2-core machine):
    python examples/training_loop.py --start-stack --steps 3
    # a running stack: by NeMo Gym's head server and the agent's name, or the agent's URL
    python examples/training_loop.py --head-url http://127.0.0.1:11000 --agent math_agent
    python examples/training_loop.py --agent-url http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from prorl_gym.client import JobAPIError, PolicyDown, ProRLClient, agent_url, policy_down_raises
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
from prorl_gym.stack import Stack, run_cli
from prorl_gym.wire.jobs import Batch
from prorl_gym.wire.records import RolloutRecord

EXAMPLE_ROWS = "resources_servers/math/data/example.jsonl"


@dataclass
class Group:
    """The usable samples of one prompt, with their group-normalised advantages."""

    prompt: int
    rewards: list[float]
    advantages: list[float]

    @property
    def informative(self) -> bool:  # DAPO keeps a group only if its rewards differ
        return len(set(self.rewards)) > 1


@dataclass
class StepReport:
    step: int
    batch_id: str
    submitted: int
    received: int
    usable: int
    failures: dict[str, int]  # failure type -> count (cancelled included)
    groups: list[Group]
    seconds: float  # from its submission to the end of its stream
    kept: list[Group] = field(default_factory=list)
    read_at: float = 0.0  # seconds from its submission to when the trainer began reading its stream
    stale: int = 0  # records flagged stale (beyond max_staleness, after their reruns)
    versions: list[int] = field(default_factory=list)  # policy versions its rollouts' turns came from

    @property
    def mean_reward(self) -> float | None:
        rewards = [r for g in self.groups for r in g.rewards]
        return statistics.fmean(rewards) if rewards else None

    def line(self) -> str:
        mean = f"{self.mean_reward:.3f}" if self.mean_reward is not None else "-"
        return (
            f"step {self.step}: {self.received}/{self.submitted} rollouts in {self.seconds:.1f}s, {self.usable} usable, "
            f"failures {self.failures or '{}'}, mean reward {mean}, groups kept {len(self.kept)}/{len(self.groups)}"
        )


def group_statistics(records: list[RolloutRecord], prompt_of: dict[str, int]) -> list[Group]:
    """Groups of usable samples by prompt; advantage = (reward - group mean) / (group std + eps)."""
    rewards: dict[int, list[float]] = {}
    for record in records:
        if record.usable:  # failed or cancelled: not a sample of the policy's quality
            rewards.setdefault(prompt_of[record.job_id], []).append(record.reward)
    groups = []
    for prompt, values in sorted(rewards.items()):
        mean, std = statistics.fmean(values), statistics.pstdev(values)
        groups.append(Group(prompt, values, [(v - mean) / (std + 1e-6) for v in values]))
    return groups


async def submit_with_backoff(client: ProRLClient, rows: list[dict], **kwargs) -> Batch:
    """Submit; while the service is full (429) or starting (503), wait and retry the same (idempotent) batch."""
    for attempt in itertools.count():
        try:
            return await client.submit(rows, **kwargs)
        except JobAPIError as exc:
            if not exc.retryable or attempt >= 30:
                raise
            await asyncio.sleep(min(5.0, 0.2 * 2**attempt))
    raise AssertionError("unreachable")


async def training_loop(
    client: ProRLClient,
    rows: list[dict],
    *,
    steps: int,
    prompts_per_step: int,
    group_size: int,
    stop_after: int | None = None,
    sampling: dict | None = None,
    run_id: str = "run",
    update: Callable[[list[Group]], None] = lambda groups: None,
    mode: Literal["async", "sync"] = "async",
    train_s: float = 0.0,
    weight_updates: bool = False,
    max_staleness: int | None = None,
    deadline_s: float | None = None,
    on_event: Callable = policy_down_raises,
    stragglers: dict | None = None,
) -> list[StepReport]:
    """Run `steps` training steps; `update` stands for the policy update on the kept groups, `train_s`
    for the time it takes. async: step n+1's batch is generated while step n trains (the service never
    idles between steps); sync: generate, then train. weight_updates: the service is told the version
    the policy is at (step n's update makes version n+1): in async mode generation is paused around the
    update (calls in flight aborted and issued again under the new weights), so a rollout may span two
    versions (max_staleness bounds it). deadline_s: a step's batch ends then, its stragglers cancelled.
    on_event: each event of the streams (by default a policy declared down raises PolicyDown).
    stragglers: each batch's straggler control ({"policy": "backfill", "k": 3.0}, docs/job_api.md)."""
    prompts = itertools.cycle(range(len(rows)))

    async def submit(step: int) -> tuple[Batch, dict[str, int], float]:
        chosen = [next(prompts) for _ in range(prompts_per_step)]
        batch = await submit_with_backoff(
            client,
            [rows[i] for i in chosen],
            samples_per_row=group_size,
            sampling=sampling,
            batch_id=f"{run_id}-step{step}",
            stop_after=stop_after,  # a restarted trainer gets the same batch back
            max_staleness=max_staleness,
            deadline_s=deadline_s,
            stragglers=stragglers,
        )
        prompt_of = {job_id: chosen[k // group_size] for k, job_id in enumerate(batch.job_ids)}
        return batch, prompt_of, time.perf_counter()

    if weight_updates:
        await client.set_policy_version(0)
    reports, pending = [], await submit(0)
    for step in range(steps):
        batch, prompt_of, started = pending
        if mode == "async" and step + 1 < steps:  # the service starts on the next step while this one trains
            pending = await submit(step + 1)
        reading = time.perf_counter() - started  # an async step may be done before the trainer reads it
        records = [record async for record in client.stream(batch.batch_id, on_event=on_event)]
        groups = group_statistics(records, prompt_of)
        report = StepReport(
            step=step,
            batch_id=batch.batch_id,
            submitted=len(batch.job_ids),
            received=len(records),
            usable=sum(r.usable for r in records),
            seconds=time.perf_counter() - started,
            failures=dict(Counter(r.failure.type.value for r in records if r.failure)),
            groups=groups,
            kept=[g for g in groups if g.informative],
            stale=sum(r.stale for r in records),
            versions=sorted({v for r in records for v in r.policy_versions}),
            read_at=reading,
        )
        update(report.kept)
        await asyncio.sleep(train_s)  # the policy-gradient step on the kept groups' token ids
        if weight_updates:  # the new weights, loaded into the inference engines between pause and resume
            if mode == "async":
                await client.pause(abort_in_flight=True)
                await client.resume(version=step + 1)
            else:
                await client.set_policy_version(step + 1)
        reports.append(report)
        if mode == "sync" and step + 1 < steps:
            pending = await submit(step + 1)
    return reports


async def run(args: argparse.Namespace, head_url: str | None = None) -> None:
    rows, url = read_jsonl(args.data), args.agent_url or await agent_url(head_url or args.head_url, args.agent)
    async with ProRLClient(url) as client:
        reports = await training_loop(
            client,
            rows,
            steps=args.steps,
            prompts_per_step=args.prompts,
            group_size=args.group_size,
            stop_after=args.stop_after,
            sampling={"temperature": args.temperature},
            run_id=f"run-{int(time.time())}",
            update=lambda kept: None,  # a real trainer: a policy-gradient step on the kept groups' token ids
            mode=args.mode,
            train_s=args.train_s,
            weight_updates=args.weight_updates,
            max_staleness=args.max_staleness,
            deadline_s=args.deadline_s,
            stragglers={"policy": args.stragglers, "k": args.straggler_k} if args.stragglers else None,
        )
        for report in reports:
            print(report.line(), flush=True)
        status = await client.status()
        print("service:", json.dumps(status.model_dump(exclude={"limits"})), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--agent-url", help="the agent server's URL")
    where.add_argument("--head-url", help="NeMo Gym's head server (with --agent)")
    where.add_argument(
        "--start-stack", action="store_true", help="start the scripted policy and ng_run (configs/math.yaml)"
    )
    parser.add_argument("--agent", default="math_agent")
    parser.add_argument("--data", default=EXAMPLE_ROWS)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--group-size", type=int, default=4, help="samples per prompt")
    parser.add_argument(
        "--stop-after", type=int, default=12, help="stop a step's batch after this many usable rollouts"
    )
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--mode", choices=("async", "sync"), default="async")
    parser.add_argument("--train-s", type=float, default=0.0, help="a simulated training step's seconds")
    parser.add_argument("--weight-updates", action="store_true", help="tell the service each new policy version")
    parser.add_argument("--max-staleness", type=int, default=None, help="versions a rollout may lag (async)")
    parser.add_argument("--deadline-s", type=float, default=None, help="a step's batch ends then")
    parser.add_argument("--stragglers", choices=("wait", "backfill", "evict"), default=None, help="per-sample control")
    parser.add_argument("--straggler-k", type=float, default=3.0, help="a straggler runs past k x its step's p50")
    args = parser.parse_args()
    try:
        if args.start_stack:
            with Stack(
                environment("math").config_paths(), policy_data=[args.data], policy_args=["--latency-ms", "200"]
            ) as stack:
                asyncio.run(run(args, head_url=f"http://127.0.0.1:{stack.head_port}"))
        else:
            asyncio.run(run(args))
    except PolicyDown as exc:
        print(f"FAILED: the policy is down: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run_cli(main)
