# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Where the checkout is: configs, environments, the sandbox venv and results are found from it."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
