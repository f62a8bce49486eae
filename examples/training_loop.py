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
group-normalised advantages (GRPO), the input of a policy update.

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
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from prorl_gym.client import JobAPIError, ProRLClient, agent_url
from prorl_gym.environments import environment
from prorl_gym.jsonl import read_jsonl
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
    seconds: float
    kept: list[Group] = field(default_factory=list)

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
) -> list[StepReport]:
    """Run `steps` training steps; `update` stands for the policy update on the kept groups."""
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
        )
        prompt_of = {job_id: chosen[k // group_size] for k, job_id in enumerate(batch.job_ids)}
        return batch, prompt_of, time.perf_counter()

    reports, pending = [], await submit(0)
    for step in range(steps):
        batch, prompt_of, started = pending
        if step + 1 < steps:  # the service starts on the next step while this one is consumed
            pending = await submit(step + 1)
        records = [record async for record in client.stream(batch.batch_id)]
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
        )
        update(report.kept)
        reports.append(report)
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
        )
        for report in reports:
            print(report.line(), flush=True)
        status = await client.status()
        print("service:", json.dumps(status.model_dump(exclude={"limits"})), flush=True)


def main() -> None:
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
    args = parser.parse_args()
    if args.start_stack:
        from prorl_gym.stack import Stack

        with Stack(
            environment("math").config_paths(), policy_data=[args.data], policy_args=["--latency-ms", "200"]
        ) as stack:
            asyncio.run(run(args, head_url=f"http://127.0.0.1:{stack.head_port}"))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
