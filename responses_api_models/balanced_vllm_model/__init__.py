# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym vllm_model over several policy endpoints: least-in-flight, sticky sessions, health checks."""
