# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Branching: a new rollout that goes on from turn k of a finished one.

The finished rollout ran with snapshots (its record lists one per turn). The branch's row is
the original row plus BRANCH_KEY: the snapshot to fork its sandbox from and the transcript's
items up to turn k, token ids included, so the policy sees exactly the same prefix and NeMo
RL's contiguity holds; only the turns after k are sampled.
"""

from __future__ import annotations

from typing import Any

from prorl_gym.errors import ProrlError
from prorl_gym.wire.records import BRANCH_KEY, RolloutRecord


class BranchError(ProrlError):
    """The rollout cannot be branched from that turn (not finished, no snapshot there)."""


def branch_row(job_id: str, turn: int, row: dict[str, Any] | None, record: RolloutRecord | None) -> dict[str, Any]:
    if row is None or record is None or record.response is None:
        raise BranchError(f"job {job_id!r} has no finished rollout to branch from")
    snapshot = next((s for s in record.snapshots if s.turn == turn), None)
    if snapshot is None:
        turns = [s.turn for s in record.snapshots]
        hint = f"it has snapshots after turns {turns}" if turns else "it ran without snapshots (snapshots: every_turn)"
        raise BranchError(f"job {job_id!r} has no snapshot after turn {turn}: {hint}")
    prefix = record.response.get("output", [])[: snapshot.output_items]
    branch = {"job_id": job_id, "turn": turn, "snapshot_id": snapshot.snapshot_id, "output": prefix}
    return row | {BRANCH_KEY: branch}
