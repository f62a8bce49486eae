# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The scripted policy: a STAND-IN for a GPU-served model (vLLM), for demos, tests and benchmarks."""
