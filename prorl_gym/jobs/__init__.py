# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The job service: batches of rollouts submitted, journaled, streamed and queried (docs/job_api.md).

manager.py      JobManager: a batch's lifecycle, its rows' rollouts through the pipeline, results
admission.py    what a submission may ask (bounds, listed rows, limits)
journal.py      the durable record of batches and results (SQLite), replayed after a restart
groups.py       a batch's rows grouped (GRPO groups); branch.py: a row forked from a snapshot
stragglers.py   per-sample straggler control of a running batch
aggregate.py    metrics over a batch's records

Each rollout runs through the pipeline (prorl_gym/pipeline/), which the job service sits above.
"""
