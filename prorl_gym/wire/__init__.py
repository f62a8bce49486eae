# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What the servers and clients say to each other, in one home: failures, rollout records, the
job API's requests and answers, and the resources servers' answers beyond NeMo Gym's own models.
Light on purpose (pydantic only): the agent, the resources servers and the client import it
without each other's machinery."""
