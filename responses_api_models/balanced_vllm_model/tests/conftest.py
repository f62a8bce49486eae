# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""pytest's importlib mode creates the `responses_api_models` namespace from this repo's folder
alone; NeMo Gym's built-in model servers (vllm_model, our base class) live in the same
namespace in site-packages. ng_run (plain imports) sees both; make pytest see both too."""

from nemo_gym import PARENT_DIR

import responses_api_models

_BUILTIN = str(PARENT_DIR / "responses_api_models")
if _BUILTIN not in list(responses_api_models.__path__):
    responses_api_models.__path__.append(_BUILTIN)
