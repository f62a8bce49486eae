# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""NeMo RL's contiguity rule for multi-turn token ids."""

from __future__ import annotations

from typing import Any


def token_ids_contiguous(output_items: list[Any]) -> bool | None:
    """True if each generation's prompt ids extend every token seen before it.

    `seen` is the previous prompt plus its generation; None when no item carries ids.
    """
    seen: list[int] = []
    found = False
    for item in output_items:
        item = item if isinstance(item, dict) else item.model_dump()
        prompt = item.get("prompt_token_ids")
        if prompt is None:
            continue
        found = True
        if prompt[: len(seen)] != seen:
            return False
        seen = list(prompt) + list(item["generation_token_ids"])
    return True if found else None
