# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Typed rollout failures. A failed rollout is marked, never silently scored 0.

NeMo Gym's ng_collect_rollouts routes rows carrying `_ng_failure_class` to a
`*_failures.jsonl` sidecar; trainers drop rows whose `failure` is set.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from prorl_gym.errors import ProrlError


class Stage(StrEnum):
    INIT = "init"
    RUN = "run"
    EVAL = "eval"


class FailureType(StrEnum):
    INIT_ERROR = "init_error"  # sandbox could not be created, or the row is malformed
    POLICY_ERROR = "policy_error"  # the policy endpoint failed, died or answered garbage
    TOOL_ERROR = "tool_error"  # a tool could not run (sandbox lost), not a bad tool call
    TIMEOUT = "timeout"  # a stage exceeded its time limit
    EVAL_ERROR = "eval_error"  # the verifier crashed or could not judge
    CANCELLED = "cancelled"
    AGENT_ERROR = "agent_error"  # a bug in the agent itself


class Failure(BaseModel):
    stage: Stage | None  # None: not known where it ended (a job cancelled from outside)
    type: FailureType
    message: str


class RolloutFailure(ProrlError):
    """Raised inside a stage to end the rollout with a typed failure."""

    def __init__(self, stage: Stage, type: FailureType, message: str):
        super().__init__(f"{stage}/{type}: {message}")
        self.failure = Failure(stage=stage, type=type, message=message[:2000])
