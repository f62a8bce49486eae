# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""prorl-gym: rollout-as-a-service for multi-turn LLM agents on NeMo Gym."""
