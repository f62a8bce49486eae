# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Where the checkout is: configs, environments, the sandbox venv and results are found from it."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Model families' real tokenizers and chat templates, as `make setup` lays them out (prorl_gym/tokens/families.py).
TOKEN_CACHE = REPO_ROOT / ".venvs" / "tokens"
