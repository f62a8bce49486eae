# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The live rollout dashboard the agent server serves at /dashboard (server.py; the page is static/,
plain HTML/JS/CSS, no build step), and the same charts exported into reports (export.py)."""
