# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Real models that run here on the CPU: their pinned weights (catalog.py), fetched once and verified
(fetch.py), their GGUF metadata (gguf.py). The server that runs one is
responses_api_models/llamacpp_policy."""

from prorl_gym.local_models.catalog import MODELS, LocalModel, UnknownModel, is_local_model, local_model
from prorl_gym.local_models.fetch import WeightsMissing, WeightsRejected, cache_dir, fetch, verified

__all__ = [
    "MODELS",
    "LocalModel",
    "UnknownModel",
    "WeightsMissing",
    "WeightsRejected",
    "cache_dir",
    "fetch",
    "is_local_model",
    "local_model",
    "verified",
]
