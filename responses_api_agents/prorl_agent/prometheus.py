# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The agent's Prometheus metrics (GET /metrics): stage times and queue waits, rollouts and their
attempts by outcome, the job service's load and journal size, the policy's version and pauses, whether
the policy is down, what stragglers cost (prorl_gym/jobs/stragglers.py)."""

from __future__ import annotations

from prorl_gym.jobs.manager import JobManager
from prorl_gym.pipeline.policy import PolicyGate
from prorl_gym.pipeline.policy_health import PolicyHealth
from prorl_gym.prometheus import ServerMetrics
from prorl_gym.wire.failures import Stage
from prorl_gym.wire.records import RolloutRecord


def outcome(record: RolloutRecord) -> str:
    return "ok" if record.failure is None else record.failure.type.value


class AgentMetrics(ServerMetrics):
    def __init__(self, jobs: JobManager, gate: PolicyGate, health: PolicyHealth):
        super().__init__()
        self.stage = self.histogram("prorl_stage_duration_seconds", "Time in a stage's worker slot", ("stage",))
        self.queue = self.histogram("prorl_stage_queue_seconds", "Wait for a stage's worker slot", ("stage",))
        self.rollout = self.histogram("prorl_rollout_duration_seconds", "Whole rollouts, attempts included")
        self.attempts = self.counter(
            "prorl_rollout_attempts_total", "Runs of the pipeline by outcome: ok, or the failure type", ("outcome",)
        )
        self.rollouts = self.counter(
            "prorl_rollouts_total", "Finished rollouts by outcome: ok, or the failure type", ("outcome",)
        )
        self.retried = self.counter("prorl_rollouts_retried_total", "Rollouts run more than once")
        self.retry_wait = self.histogram(
            "prorl_retry_wait_seconds", "Waits for a failed part to be healthy before a rollout runs again", ("part",)
        )
        jobs_active = self.gauge("prorl_jobs_active", "Jobs accepted and not finished")
        jobs_active.set_function(lambda: jobs.active)
        journal = self.gauge("prorl_journal_bytes", "Size of the job journal on disk")
        journal.set_function(jobs.journal.size_on_disk)
        version = self.gauge("prorl_policy_version", "The policy version new calls are sent under")
        version.set_function(lambda: gate.version)
        paused = self.gauge("prorl_policy_paused", "1 while the trainer has generation paused")
        paused.set_function(lambda: float(gate.paused))
        paused_s = self.gauge("prorl_policy_paused_seconds", "Time paused since the agent started")
        paused_s.set_function(lambda: gate.paused_s)
        down = self.gauge("prorl_policy_down", "1 while the policy is declared down (no endpoint healthy for grace_s)")
        down.set_function(lambda: float(health.down))
        unhealthy = self.gauge("prorl_policy_unhealthy_seconds", "How long no policy endpoint has been healthy")
        unhealthy.set_function(lambda: health.unhealthy_s)
        self.counter_function(
            "prorl_policy_declared_down_total",
            "Times the policy was declared down since the agent started",
            lambda: health.downs,
        )
        totals = jobs.stragglers.totals
        for action in ("replaced", "evicted", "waited"):
            doc = f"Stragglers {action} by their batch's straggler control"
            self.counter_function(f"prorl_stragglers_{action}_total", doc, lambda a=action: getattr(totals, a))
        for name, key, doc in (
            ("wait", "wait_s", "Time batches went on once they had a straggler (first detection to their end)"),
            ("policy_idle", "policy_idle_s", "The policy's capacity unused meanwhile: GPU-seconds lost to stragglers"),
            ("time_saved", "time_saved_s", "Estimated time batches saved by replacing or evicting stragglers"),
        ):
            self.counter_function(f"prorl_straggler_{name}_seconds_total", doc, lambda k=key: getattr(totals, k))

    def attempt(self, record: RolloutRecord) -> None:
        """One run of the pipeline (the RolloutPipeline's on_attempt hook)."""
        self.attempts.labels(outcome(record)).inc()
        for stage in Stage:
            if (seconds := record.timings.get(f"{stage}_s")) is not None:
                self.stage.labels(stage.value).observe(seconds)
            if (waited := record.timings.get(f"{stage}_queue_s")) is not None:
                self.queue.labels(stage.value).observe(waited)

    def waited(self, part: str, seconds: float) -> None:
        """A wait for recovery before another attempt (the RolloutPipeline's on_wait hook)."""
        self.retry_wait.labels(str(part)).observe(seconds)

    def finished(self, record: RolloutRecord) -> None:
        self.rollouts.labels(outcome(record)).inc()
        self.rollout.observe(record.timings.get("total_s", 0.0))
        if record.attempts > 1:
            self.retried.inc()
