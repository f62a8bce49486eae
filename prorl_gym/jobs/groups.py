# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A batch's groups, as GRPO has them (a row's `samples_per_row` jobs; jobs are row-major), and where
each stands: what the batch's progress reports and dynamic sampling (jobs.py) acts on. A group whose
stragglers were evicted (stragglers.py) is admitted partial: it needs the samples it has left. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

GroupState = Literal["informative", "dropped", "cancelled", "running", "waiting"]


@dataclass(frozen=True)
class Group:
    row: int
    job_ids: list[str]
    usable: bool  # at least min_group_size (default: all those not evicted) of its samples finished usable
    size: int  # usable samples
    finished: bool  # every sample ended
    # informative: usable, rewards not all equal (a learning signal); dropped: ended without one;
    # cancelled: ended before any sample ran; waiting: not started (dynamic sampling's queue); running
    state: GroupState


def groups_of(
    job_ids: list[str],
    size: int,
    min_group_size: int | None,
    status_of: dict[str, str],
    reward_of: Callable[[str], float | None],
    waiting: Callable[[str], bool],
    evicted: frozenset[str] = frozenset(),
) -> list[Group]:
    """`status_of`: the final status of each job that ended; `reward_of`: a usable job's reward;
    `waiting`: whether a job is queued, not started; `evicted`: stragglers taken out of their groups."""
    groups = []
    for row in range(len(job_ids) // size):
        ids = job_ids[row * size : (row + 1) * size]
        enough = min_group_size or size - len(evicted.intersection(ids))
        completed = [i for i in ids if status_of.get(i) == "completed"]
        finished = all(i in status_of for i in ids)
        state: GroupState
        if len(completed) >= max(enough, 1) and len({reward_of(i) for i in completed}) > 1:
            state = "informative"
        elif finished:  # never run (all cancelled): not a group without a signal
            state = "dropped" if any(status_of[i] != "cancelled" for i in ids) else "cancelled"
        elif any(waiting(i) for i in ids):
            state = "waiting"
        else:
            state = "running"
        groups.append(Group(row, ids, len(completed) >= max(enough, 1), len(completed), finished, state))
    return groups
