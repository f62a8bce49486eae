# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The job service: batches of rollouts submitted, journaled, streamed and queried (docs/job_api.md).

manager.py       JobManager: the service's front (start, close) over its parts below
state.py         the batches and jobs held in memory (JobBook), their state types, totals since start
submission.py    a submission checked, claimed and journaled, its jobs launched
runner.py        a job's run through the pipeline, its record journaled and delivered to its streams
batch_policy.py  cancels (caller, stop_after, target_groups, deadline) and straggler actions
streams.py       a batch's records as a stream from any offset; queries.py: job, progress, /status
retention.py     finished batches forgotten (acknowledged, or past the retention bounds)
admission.py     what a submission may ask (bounds, listed rows, limits)
journal.py       the durable record of batches and results (SQLite), replayed after a restart
groups.py        a batch's rows grouped (GRPO groups); branch.py: a row forked from a snapshot
stragglers.py    per-sample straggler control of a running batch
aggregate.py     metrics over a batch's records

Each rollout runs through the pipeline (prorl_gym/pipeline/), which the job service sits above.
"""
