# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What the agent and a resources server say to each other beyond NeMo Gym's own models
(light on purpose: the agent imports it without the sandbox machinery)."""

from typing import Any

from nemo_gym.base_resources_server import BaseSeedSessionResponse
from pydantic import BaseModel, Field

from prorl_gym.config import StrictConfig

# In a tool's answer: the shell or kernel died during the call and a fresh one was started (its
# state, and possibly the call's effect, is gone). The scripted policy does such a step again.
ENVIRONMENT_RESTARTED = "the environment was restarted; earlier state is gone"

# The `error.type` of a 503 whose sandbox is gone with its host or node (not one that failed to start).
SANDBOX_LOST_ERROR = "sandbox_lost"
SANDBOX_ERROR = "sandbox_error"


class SeedSessionResponse(BaseSeedSessionResponse):
    sandbox_id: str
    host: str  # where the sandbox runs (this host, or a sandbox host's node)


class ToolsResponse(BaseModel):
    tools: list[dict[str, Any]]  # Responses-API function tools
    ends_rollout: list[str]  # names of the tools after whose call the rollout ends (e.g. submit)


# A seed row with this field starts its sandbox from that snapshot instead of staging the task (a branch).
SNAPSHOT_KEY = "prorl_snapshot_id"


class SnapshotResponse(BaseModel):
    snapshot_id: str  # of the session's sandbox as it is now: seed with SNAPSHOT_KEY to branch from it


class ReleaseSnapshotsRequest(StrictConfig):
    snapshot_ids: list[str]


class CheckRowsRequest(StrictConfig):
    rows: list[Any]


class RowProblem(BaseModel):
    index: int
    error: str


class CheckRowsResponse(BaseModel):
    """The rows the environment's row model (its /seed_session body) refuses; the job API checks a
    batch with it before accepting it."""

    problems: list[RowProblem]


# The capture endpoint's protocols, by their path under its base URL (prorl_gym/capture/protocols.py):
# also all that an in-sandbox harness's model socket passes on (prorl_gym/resources/harness.py).
CHAT_COMPLETIONS_PATH, RESPONSES_PATH, MESSAGES_PATH = "chat/completions", "responses", "messages"
MODEL_PATHS = frozenset({CHAT_COMPLETIONS_PATH, RESPONSES_PATH, MESSAGES_PATH})


class HarnessRunRequest(StrictConfig):
    """Run an agent harness inside the session's sandbox (POST /harness): a program of a prepared
    environment bound read-only into every sandbox of the server (its `harness_envs`), pointed at the
    rollout's capture endpoint through a Unix socket bound into the sandbox (it keeps no network)."""

    harness_env: str  # one of the server's harness_envs
    # A shell command, run from `cwd` in a subshell of the sandbox's shell. It finds: $PRORL_HARNESS_ENV
    # (the environment's directory), $PRORL_MODEL_URL (an OpenAI-compatible base URL on the sandbox's
    # loopback: the capture endpoint), $PRORL_TASK_FILE (the task's text).
    command: str = Field(min_length=1)
    task: str
    model_base_url: str = Field(pattern=r"^https?://")  # the rollout's capture endpoint, as the server reaches it
    cwd: str | None = None  # default: the sandbox's workspace
    timeout_s: float = Field(gt=0, le=7 * 24 * 3600)


class HarnessRunResponse(BaseModel):
    exit_code: int | None  # when it ran past timeout_s (timed_out): what the interrupt left, or None
    timed_out: bool
    output: str  # what it printed, stdout and stderr merged (head and tail, when long)
    duration_s: float
