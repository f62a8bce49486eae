# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Typed rollout failures. A failed rollout is marked, never silently scored 0.

NeMo Gym's ng_collect_rollouts routes rows carrying `_ng_failure_class` to a
`*_failures.jsonl` sidecar; trainers drop rows whose `failure` is set.

Every failure says whether it is the infrastructure's (`infra`: a sandbox that would not
start or was lost, a server or verifier that died, a policy endpoint gone before it produced
anything) or the task's (a malformed row, a policy that produced a partial trajectory and
then failed, a stage the rollout itself ran out of time in). Infrastructure failures are
retried by the agent within its budget; task outcomes never are. The same split NeMo RL
makes on its side. An infrastructure failure that was `refused` (the part turned the rollout
away before it did anything: no policy endpoint could take a new session, the resources server
refused the connection at INIT) cost nothing and cannot be the rollout's doing: it is retried
without using up an attempt.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from prorl_gym.errors import ProrlError

# The detail.type of a model server's 503 when no endpoint can take a new session (nothing was sent).
NO_ENDPOINT_ERROR = "no_healthy_endpoint"


class Stage(StrEnum):
    INIT = "init"
    RUN = "run"
    EVAL = "eval"


class FailureType(StrEnum):
    INIT_ERROR = "init_error"  # the sandbox could not be created or the task staged, or the row is malformed
    POLICY_ERROR = "policy_error"  # the policy endpoint failed, died or answered garbage
    # the endpoint cannot serve these calls at all (a route it lacks, no token ids): never retried
    POLICY_INCOMPATIBLE = "policy_incompatible"
    TOOL_ERROR = "tool_error"  # a tool could not run (its server unreachable or silent), not a bad tool call
    SANDBOX_LOST = "sandbox_lost"  # the rollout's sandbox died or was lost with its server or node
    SERVER_DOWN = "server_down"  # a server the rollout needs is down for good (its supervisor gave up)
    # no policy endpoint was healthy for the agent's policy_health.grace_s: told, not waited on
    POLICY_DOWN = "policy_down"
    TIMEOUT = "timeout"  # a stage exceeded its time limit
    EVAL_ERROR = "eval_error"  # the verifier crashed or could not judge
    CANCELLED = "cancelled"  # by the caller (cancel, stop_after)
    SHUTDOWN = "shutdown"  # the agent stopped while the rollout ran (its sandbox was released)
    AGENT_RESTARTED = "agent_restarted"  # the agent died while the job ran, and the config says not to run it again
    AGENT_ERROR = "agent_error"  # a bug in the agent itself
    HARNESS_ERROR = "harness_error"  # an agent harness run as the RUN stage raised (its traceback in the message)


class Failure(BaseModel):
    stage: Stage | None  # None: not known where it ended (a job cancelled from outside)
    type: FailureType
    message: str
    infra: bool = False  # the infrastructure's fault, not the task's: retried within the budget
    refused: bool = False  # infra, and turned away before any work: not counted in retry.max_attempts


class RolloutFailure(ProrlError):
    """Raised inside a stage to end the rollout with a typed failure."""

    def __init__(self, stage: Stage, type: FailureType, message: str, infra: bool = False, refused: bool = False):
        super().__init__(f"{stage}/{type}: {message}")
        self.failure = Failure(stage=stage, type=type, message=message[:2000], infra=infra or refused, refused=refused)
