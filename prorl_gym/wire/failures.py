# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Typed rollout failures. A failed rollout is marked, never silently scored 0.

NeMo Gym's ng_collect_rollouts routes rows carrying `_ng_failure_class` to a
`*_failures.jsonl` sidecar; trainers drop rows whose `failure` is set. Each failed record also
speaks NeMo Gym 0.7's failure vocabulary (`nemo_gym_fields`): `failure_kind` (its shared names,
nemo_gym/failure_kinds.py, or `prorl:<type>` where none says what happened), `failure_reason`,
`mask_sample` (a failed rollout's reward is no measurement) and `_ng_failure_terminal`, which
ng_collect_rollouts' resume reads: a terminal failure is never run again, any other is (up to
NEMO_GYM_MAX_ROLLOUT_ATTEMPTS), so a resume runs again the infrastructure's failures only.

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


# NeMo Gym 0.7's failure_kind of each type (registered names: nemo_gym.failure_kinds); a type whose kind
# depends on whose fault it was maps (infrastructure's, task's). Types with no shared name: `prorl:<type>`.
NEMO_GYM_KINDS: dict[FailureType, str | tuple[str, str]] = {
    FailureType.INIT_ERROR: ("provider_unavailable", "prorl:init_error"),  # no sandbox / a malformed row
    FailureType.POLICY_ERROR: "transport_peer_drop",
    FailureType.POLICY_INCOMPATIBLE: "prorl:policy_incompatible",
    FailureType.TOOL_ERROR: ("transport_unreachable", "prorl:tool_error"),  # its server / a route it lacks
    FailureType.SANDBOX_LOST: "session_lost",
    FailureType.SERVER_DOWN: "transport_unreachable",
    FailureType.POLICY_DOWN: "transport_unreachable",  # no policy endpoint healthy for its grace period
    FailureType.TIMEOUT: "agent_timeout",
    FailureType.EVAL_ERROR: "verifier_error",
    FailureType.CANCELLED: "cancelled",
    FailureType.SHUTDOWN: "shutdown",
    FailureType.AGENT_RESTARTED: "kill_shaped",
    FailureType.AGENT_ERROR: "agent_run_error",
    FailureType.HARNESS_ERROR: "agent_run_error",
}
NG_TERMINAL_KEY = "_ng_failure_terminal"  # read by ng_collect_rollouts' resume


class Failure(BaseModel):
    stage: Stage | None  # None: not known where it ended (a job cancelled from outside)
    type: FailureType
    message: str
    infra: bool = False  # the infrastructure's fault, not the task's: retried within the budget
    refused: bool = False  # infra, and turned away before any work: not counted in retry.max_attempts

    @property
    def kind(self) -> str:
        """Its NeMo Gym 0.7 failure_kind."""
        kind = NEMO_GYM_KINDS[self.type]
        return kind if isinstance(kind, str) else kind[0 if self.infra else 1]

    def nemo_gym_fields(self) -> dict:
        """A failed record's fields in NeMo Gym 0.7's vocabulary: the task's failures are terminal (a resume
        does not run them again: the same row fails the same way), the infrastructure's are not."""
        return {
            "failure_kind": self.kind,
            "failure_reason": self.message,
            "mask_sample": True,
            NG_TERMINAL_KEY: not self.infra,
        }


class RolloutFailure(ProrlError):
    """Raised inside a stage to end the rollout with a typed failure."""

    def __init__(self, stage: Stage, type: FailureType, message: str, infra: bool = False, refused: bool = False):
        super().__init__(f"{stage}/{type}: {message}")
        self.failure = Failure(stage=stage, type=type, message=message[:2000], infra=infra or refused, refused=refused)
