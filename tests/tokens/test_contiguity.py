# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
from prorl_gym.tokens.contiguity import token_ids_contiguous


def item(prompt, generation):
    return {
        "prompt_token_ids": prompt,
        "generation_token_ids": generation,
        "generation_log_probs": [0.0] * len(generation),
    }


def test_each_prompt_must_extend_everything_seen():
    assert token_ids_contiguous([item([1, 2], [3]), {"type": "function_call_output"}, item([1, 2, 3, 9], [4])])
    assert not token_ids_contiguous([item([1, 2], [3]), item([1, 2, 4], [5])])


def test_no_token_ids_means_unknown():
    assert token_ids_contiguous([{"type": "message"}]) is None
