# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The rollout pipeline, INIT -> RUN -> EVAL, one rollout at a time.

rollout.py      the three stages of one rollout, its retries and its record
loop.py         RUN's agent loop: policy call, tool calls, limits
recovery.py     a part that went away mid-rollout (policy, resources server): wait, give up, type it
stages.py       each stage's own worker pool and the RUN clock
policy.py       the gate every policy call passes (version, pause for a weight update)
policy_health.py  whether the policy is there at all, as its model server says
peers.py        HTTP to the other servers of the same ng_run, failing fast

The job service above it (prorl_gym/jobs/) runs batches of rollouts through it.
"""
