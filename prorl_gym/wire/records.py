# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The rollout record: what /run and the job API return for one rollout.

NeMo Gym's fields stay exactly as trainers read them (`response` with its token ids,
`reward`, the row's own fields; `_ng_failure_class` routes a failed rollout to
ng_collect_rollouts' failures sidecar). The environment's verify fields (e.g.
`extracted_answer`, `resolved`: see each environment's `*VerifyResponse`) and the row's
fields are extra fields of the record.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from prorl_gym.config import StrictConfig
from prorl_gym.wire.failures import Failure

# A record's `timings`, in the order reports list them: each stage's queue wait and its time, the
# whole rollout, then RUN's split into policy calls and tool calls (tool_exec_s: inside the sandbox), and
# the time spent waiting for a failed part to recover between attempts.
TIMING_KEYS = (
    "init_queue_s",
    "init_s",
    "run_queue_s",
    "run_s",
    "eval_queue_s",
    "eval_s",
    "total_s",
    "policy_s",
    "tools_s",
    "tool_exec_s",
    "retry_wait_s",
)
NG_FAILURE_CLASS_KEY = "_ng_failure_class"  # read by ng_collect_rollouts
# Row keys of ours (set by the job API, or by a caller of /run): take snapshots, branch from one.
SNAPSHOTS_KEY = "prorl_snapshots"  # "every_turn" | "none" (default: the agent's config)
BRANCH_KEY = "prorl_branch"  # {job_id, turn, snapshot_id, output: the transcript's items up to that turn}
JobStatus = Literal["running", "completed", "failed", "cancelled"]


class TurnSnapshot(BaseModel):
    """The sandbox as it was after a turn (taken with snapshots: every_turn), to branch from."""

    turn: int = Field(description="policy calls before it (1: after the first turn's tool results)")
    snapshot_id: str
    output_items: int = Field(description="how many items of response.output the turns up to it produced")


class StragglerNote(BaseModel):
    """A sample its batch's straggler control acted on (prorl_gym/jobs/stragglers.py)."""

    # replaced: this record is the fresh sample that replaced it; evicted: cancelled, its group admitted
    # without it; waited: the batch waited for it
    action: Literal["replaced", "evicted", "waited"]
    after_s: float = Field(description="its RUN seconds when it was found a straggler")
    threshold_s: float = Field(description="the batch's k x p50 of RUN seconds then")
    replacements: int = Field(0, description="fresh samples started in its place so far")


class BranchedFrom(BaseModel):
    job_id: str
    turn: int


class RolloutRecord(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    response: dict[str, Any] | None = Field(
        None, description="the whole transcript as one NeMo Gym response, token ids included; null if none"
    )
    reward: float = Field(0.0, description="the verifier's reward; 0.0 with a failure, which trainers must drop")
    failure: Failure | None = Field(None, description="why the rollout failed ({stage, type, message}), or null")
    stop_reason: str | None = Field(
        None,
        description="how RUN ended: answered, finish_tool, max_turns, max_output_tokens (a generation or the "
        "rollout's tokens cut at their limit), context_length (the conversation outgrew the model's context), "
        "max_run_time",
    )
    timings: dict[str, float] = Field(
        default_factory=dict, description="seconds: <stage>_queue_s and <stage>_s per stage, total_s, policy_s, ..."
    )
    num_turns: int = Field(0, description="policy calls")
    num_tool_calls: int = 0
    malformed_tool_calls: int = Field(0, description="tool calls returned to the policy as errors")
    repeated_tool_calls: int = Field(0, description="tool calls identical (name, arguments) to an earlier one")
    tool_call_paths: list[str] = Field(
        default_factory=list,
        description="how the model server read each tool call, in order: tagged (the model's own format), "
        "constrained (under a grammar from the tool schemas), lenient_fenced / lenient_bare / lenient_unbraced "
        "(JSON written without its tags); empty where the server does not say",
    )
    token_ids_contiguous: bool | None = Field(
        None, description="every turn's prompt ids extend the tokens before (NeMo RL's rule); null without ids"
    )
    token_ids: bool | None = Field(
        None, description="whether the transcript carries the policy's token ids (false: evaluation only)"
    )
    token_prompts: dict[str, int] = Field(
        default_factory=dict,
        description="turns by how the model server made their prompt ids: rendered (a first turn), extended "
        "(the turn before's ids, exactly), drifted (chat mode: the endpoint's re-rendering did not extend "
        "them), rerendered (token-in/token-out: a conversation without ids, rendered whole)",
    )
    policy_versions: list[int] = Field(
        default_factory=list,
        description="the policy version that generated each turn, in order (as the trainer set it: POST "
        "/policy/version, /policy/resume); several: the rollout spans a weight update",
    )
    oldest_policy_version: int | None = Field(None, description="the oldest of policy_versions")
    newest_policy_version: int | None = Field(None, description="the newest of policy_versions")
    staleness: int | None = Field(
        None,
        description="with a batch's max_staleness: versions its oldest turn was behind the current one at its end",
    )
    stale: bool = Field(False, description="staleness beyond the batch's max_staleness (returned as it was asked)")
    host: str | None = Field(None, description="where the rollout's sandbox ran (host or node)")
    snapshots: list[TurnSnapshot] = Field(default_factory=list, description="with snapshots: every_turn")
    capture: dict[str, Any] | None = Field(
        None, description="with a harness: every policy call it made, as sent, and the token tree of them all (ids)"
    )
    branched_from: BranchedFrom | None = Field(None, description="a branch: the rollout and turn it continues")
    straggler: StragglerNote | None = Field(None, description="what its batch's straggler control did with it")
    attempts: int = Field(1, description="how many times the rollout was run (infrastructure failures are retried)")
    attempt_failures: list[Failure] = Field(
        default_factory=list, description="the infrastructure failure of each earlier attempt, oldest first"
    )
    ng_failure_class: str | None = Field(
        None, alias=NG_FAILURE_CLASS_KEY, description="the failure type, for NeMo Gym"
    )
    # Set in the job API's streams and polls only:
    job_id: str | None = None
    batch_id: str | None = None
    status: JobStatus | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict: NeMo Gym's names; the failure class and the stream fields only when set
        (ng_collect_rollouts files a row with any `_ng_failure_class` key as a failure); a failure also in
        NeMo Gym 0.7's vocabulary (Failure.nemo_gym_fields)."""
        data = self.model_dump(mode="json", by_alias=True, exclude=_unset_optional_fields(self))
        if self.failure is not None:
            data |= self.failure.nemo_gym_fields()
        return data

    @property
    def usable(self) -> bool:
        """Finished without a failure: fit for training."""
        return self.failure is None


def _unset_optional_fields(record: RolloutRecord) -> set[str]:
    names = ("ng_failure_class", "job_id", "batch_id", "status", "straggler")
    return {name for name in names if getattr(record, name) is None}


def failed_record(row: dict | None, failure: Failure, timings: dict[str, float] | None = None) -> RolloutRecord:
    """The record of a rollout that ended before it had one of its own (cancelled, interrupted)."""
    fields = (row or {}) | {"response": None, "failure": failure, NG_FAILURE_CLASS_KEY: failure.type.value}
    return RolloutRecord.model_validate(fields | {"timings": timings or {}})


class ReportFields(StrictConfig):
    """Which of an environment's record fields (its verify fields, its rows' own) the evaluation
    report summarises: declared in the environment's config (`report:` in its resources server's
    block), so the report knows no environment by name."""

    numeric: list[str] = Field(default_factory=list)  # mean, percentiles over valid rollouts
    boolean: list[str] = Field(default_factory=list)  # the fraction that is true
    present: list[str] = Field(default_factory=list)  # the fraction where it is set (e.g. an answer parsed)
    categorical: list[str] = Field(default_factory=list)  # mean reward per value (up to 20 values)

    def merged(self, other: ReportFields) -> ReportFields:
        return ReportFields(**{k: list(dict.fromkeys(v + getattr(other, k))) for k, v in self})
