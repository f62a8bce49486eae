# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The job API's requests and answers (docs/job_api.md): what the agent's routes take and return
and what ProRLClient sends and reads; both import these models, so they cannot drift apart."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from prorl_gym.config import StrictConfig
from prorl_gym.wire.records import JobStatus, RolloutRecord

BATCH_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"  # no '/': a batch id is one URL path segment


class JobLimits(StrictConfig):
    """The server's bounds: the agent's `jobs:` config block, reported by /status."""

    max_active_jobs: int = Field(10_000, ge=1)  # accepted and unfinished, over all batches -> 429
    max_batch_rows: int = Field(4096, ge=1)  # -> 413
    max_batch_jobs: int = Field(16_384, ge=1)  # rows x samples_per_row -> 413
    max_request_bytes: int = Field(64 << 20, ge=1)  # a /jobs request -> 413
    max_row_bytes: int = Field(8 << 20, ge=1)  # one row: a /run body, or a row of a batch -> 413
    max_stale_reruns: int = Field(3, ge=0)  # a job too stale this many times more is returned flagged
    retain_jobs: int = Field(50_000, ge=0)  # finished jobs kept for polling; oldest finished batches go first
    retain_s: float = Field(3600.0, ge=0)  # ... and for at most this long after their batch finished
    timing_window: int = Field(2000, ge=1)  # recent records behind the status percentiles
    heartbeat_s: float = Field(15.0, gt=0)  # an empty line this often keeps an idle stream alive
    cancel_wait_s: float = Field(10.0, ge=0)  # a cancel call waits this long for sandboxes to be released


class Sampling(BaseModel):
    """Overrides of every row's responses_create_params; other fields (seed, ...) pass through."""

    model_config = ConfigDict(extra="allow")
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1)


class ForkFrom(StrictConfig):
    """Start from turn `turn` of a finished job that ran with snapshots: its sandbox as it was then, its
    transcript up to then (token ids included); only the turns after are sampled. `rows` stays empty."""

    job_id: str
    turn: int = Field(ge=1)


class Stragglers(StrictConfig):
    """A batch's per-sample straggler control (prorl_gym/jobs/stragglers.py, docs/job_api.md)."""

    # wait: the batch waits for it (its cost measured); backfill: cancelled, a fresh sample of the same prompt
    # started (the group keeps its size); evict: cancelled, its group admitted without it (partial)
    policy: Literal["wait", "backfill", "evict"] = "wait"
    # a running sample is a straggler once its RUN has gone on more than k x the p50 of its batch's samples'
    # RUN times (those still running counted as longer: known once half the batch's started samples finished usable)
    k: float = Field(3.0, gt=1)
    max_replacements: int = Field(2, ge=1)  # backfill: fresh samples per sample; a straggler beyond is waited for


class StragglerProgress(BaseModel):
    """What a batch's stragglers cost and what was done about them (BatchProgress.stragglers)."""

    policy: str
    k: float
    threshold_s: float | None  # k x p50_s: RUN seconds past which a running sample is a straggler
    p50_s: float | None  # of the RUN times of the batch's started samples (known once half finished usable)
    replaced: int  # stragglers cancelled and started afresh (backfill)
    evicted: int  # stragglers cancelled, their groups admitted without them (evict)
    waited: int  # stragglers waited for (wait; backfill past max_replacements)
    stragglers_running: int  # waited-for stragglers still running
    wait_s: float  # how long the batch went on once it had a straggler (first detection to its end)
    policy_idle_s: float  # the policy's capacity unused meanwhile: with one endpoint, GPU-seconds lost to stragglers
    time_saved_s: float  # estimate (conservative) of how much sooner the batch ended than had it waited for them


class SubmitRequest(StrictConfig):
    rows: list[Any]
    environment: str | None = None  # checked against what the agent serves
    batch_id: str | None = Field(None, pattern=BATCH_ID_PATTERN)
    job_ids: list[str] | None = None  # one per row sample, row-major: (row 0, sample 0), (row 0, sample 1), ...
    sampling: Sampling = Field(default_factory=Sampling)
    samples_per_row: int = Field(1, ge=1)
    stop_after: int | None = Field(None, ge=1)  # cancel the rest once this many usable results exist
    snapshots: Literal["none", "every_turn"] | None = None  # every_turn: its jobs can be branched from
    fork_from: ForkFrom | None = None  # branch: `samples_per_row` jobs go on from a turn of a finished job
    # Seconds from acceptance: then the batch's unfinished jobs are cancelled (records typed `cancelled`,
    # never a failure of the task) and its stream ends with what is in; kept across agent restarts.
    deadline_s: float | None = Field(None, gt=0)
    # With samples_per_row: a row's group counts as usable only with at least this many usable samples
    # (BatchProgress: usable_groups, small_groups); at most samples_per_row.
    min_group_size: int | None = Field(None, ge=1)
    # Versions (POST /policy/version) a finished rollout's oldest turn may be behind the current one;
    # beyond: run again from INIT (`on_stale: rerun`, at most JobLimits.max_stale_reruns times, then
    # flagged) or returned with `stale: true` (`flag`). Within it, a rollout may span versions.
    max_staleness: int | None = Field(None, ge=0)
    on_stale: Literal["rerun", "flag"] = "rerun"
    # Dynamic sampling (DAPO): K groups with a learning signal are wanted (at least min_group_size usable
    # samples whose rewards are not all equal). The rows are a queue: groups are started for the first K,
    # then one more each time a group ends without a signal (dropped), until K informative groups exist
    # (the rest cancelled) or the rows run out. Needs samples_per_row >= 2; not with stop_after.
    target_groups: int | None = Field(None, ge=1)
    # Per-sample straggler control: {"policy": "wait" | "backfill" | "evict", "k": 3.0, ...} (Stragglers).
    stragglers: Stragglers | None = None


class StopAfter(BaseModel):
    k: int = Field(ge=1)


class Batch(BaseModel):
    """What a submission returns."""

    batch_id: str
    job_ids: list[str]
    created: bool  # False: the batch existed already (an idempotent resubmission)
    new_jobs: int  # rollouts this call started; job ids that existed start none


class Job(BaseModel):
    job_id: str
    batch_ids: list[str]
    status: JobStatus
    cancel_requested: bool
    record: RolloutRecord | None = None  # once finished


class BatchProgress(BaseModel):
    batch_id: str
    total: int
    finished: int
    usable: int  # finished without a failure
    done: bool
    stop_after: int | None
    deadline: float | None = None  # wall clock (Unix seconds) when its unfinished jobs are cancelled
    expired: bool = False  # its deadline passed before all its jobs finished
    groups: int = 0  # rows (a row's samples_per_row jobs are its group)
    # groups with at least min_group_size (default: all samples_per_row) usable samples
    usable_groups: int = 0
    small_groups: list[int] = Field(default_factory=list)  # rows of the finished groups that have fewer
    target_groups: int | None = None  # dynamic sampling: informative groups wanted
    informative_groups: int = 0  # usable groups whose rewards differ
    dropped_groups: int = 0  # with target_groups: finished groups without a signal (a new row started for each)
    waiting_groups: int = 0  # with target_groups: rows not started (yet)
    # usable samples of each group, by row (a partial group, one with evictions, has fewer than samples_per_row):
    # what a trainer's per-group advantage estimate is over
    group_sizes: list[int] = Field(default_factory=list)
    stragglers: StragglerProgress | None = None  # with the batch's `stragglers` setting


class CancelResult(BaseModel):
    cancelled: list[str]  # jobs this call cancelled; finished ones stay as they are
    settled: bool  # all of them have ended (their sandboxes released)


# A stream line that is an event, not a record: a PolicyHealthView with `event` set (its first field).
STREAM_EVENT_PREFIX = b'{"event":'


class PolicyHealthView(BaseModel):
    """Whether the policy is there (prorl_gym/pipeline/policy_health.py): /status's `policy_health`, and
    with `event` set a line of a batch's stream (`policy_down` when declared down, `policy_up` after)."""

    event: Literal["policy_down", "policy_up"] | None = None  # stream lines only
    down: bool  # declared down: no endpoint healthy for grace_s; rollouts waiting for it end typed policy_down
    healthy: bool  # an endpoint is healthy now (its last request or health check succeeded)
    unhealthy_s: float  # how long no endpoint has been healthy (0 while one is)
    since: float | None = None  # wall clock (Unix seconds) when the last healthy endpoint went
    grace_s: float | None  # the agent's policy_health.grace_s (null: never declared down)
    endpoints: list[dict[str, Any]] = Field(default_factory=list)  # url, healthy, last_error, as the model server says
    message: str = ""  # one line for people


class Status(BaseModel):
    stages: dict[str, dict[str, int]]  # init/run/eval -> workers, waiting, in_flight
    active_jobs: int
    retained_jobs: int
    active_batches: int
    retained_batches: int
    completed: int  # since the server started: usable results
    failed: int  # ... failures other than cancellation
    cancelled: int
    failed_by_type: dict[str, int]  # failure type (cancelled included) -> count
    timings: dict[str, dict[str, float | int | None]]  # init_s, run_queue_s, ... -> p50/p90/p99/n, recent records
    limits: JobLimits
    journal: dict[str, Any] = Field(default_factory=dict)  # path and size on disk (bytes)
    policy_health: PolicyHealthView | None = None  # None: the agent does not watch its policy


def row_problem(row: Any) -> str | None:
    """Why a row cannot be a rollout, or None."""
    if not isinstance(row, dict):
        return "a row must be a JSON object"
    params = row.get("responses_create_params")
    if not isinstance(params, dict):
        return "responses_create_params (an object) is missing"
    if not params.get("input") or not isinstance(params["input"], (str, list)):
        return "responses_create_params.input must be a non-empty string or list"
    return None


class PolicyState(BaseModel):
    """GET /policy: the policy's weights as the trainer said (prorl_gym/pipeline/policy.py)."""

    version: int  # the version new policy calls are sent under
    paused: bool
    paused_s: float  # time paused since the agent started (the current pause included)
    in_flight: int  # policy calls being answered
    held: int  # policy calls waiting for resume
    aborted: int  # calls aborted by a pause and issued again, since the agent started


class PolicyVersion(StrictConfig):
    version: int = Field(ge=0)


class PolicyPause(StrictConfig):
    # True: the calls in flight are cancelled and issued again after resume (their partial output
    # discarded); False: they finish (under the version they were sent with)
    abort_in_flight: bool = False


class PolicyResume(StrictConfig):
    version: int | None = Field(None, ge=0)  # the weights now loaded, if they changed
