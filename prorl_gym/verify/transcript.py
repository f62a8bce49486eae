# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Reading a NeMo Gym response (the rollout transcript) the way verifiers need it."""

from __future__ import annotations

from nemo_gym.openai_utils import NeMoGymResponse


def final_assistant_text(response: NeMoGymResponse) -> str:
    """Text of the last assistant message, or "" if the rollout ended on a tool call."""
    for item in reversed(response.output):
        if item.type == "function_call":
            return ""
        if item.type == "message" and getattr(item, "role", None) == "assistant":
            content = item.content
            if isinstance(content, str):
                return content
            return "".join(getattr(part, "text", "") or "" for part in content)
    return ""


def count_tool_calls(response: NeMoGymResponse) -> int:
    return sum(1 for item in response.output if item.type == "function_call")
