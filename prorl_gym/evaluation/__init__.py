# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Per-environment evaluation: run an environment over a dataset split and write a report.

    python -m prorl_gym.evaluation --env math --split validation [--repeats 4]   (or `make eval`)

metrics.py computes (pure), plots.py draws, report.py writes report.md/metrics.json/PNGs,
run.py drives the stack and ng_collect_rollouts, __main__.py is the command line.
"""
