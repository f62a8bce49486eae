# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What a harness is given as its task, from each shape of a row's input."""

from __future__ import annotations

import pytest
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

from prorl_gym.pipeline.rollout import _task_text
from prorl_gym.wire.failures import FailureType, RolloutFailure


def params(input_) -> NeMoGymResponseCreateParamsNonStreaming:
    return NeMoGymResponseCreateParamsNonStreaming.model_validate({"input": input_})


def test_a_string_input_is_the_task():
    assert _task_text(params("Fix the failing test in parser.py.")) == "Fix the failing test in parser.py."


def test_the_last_user_message_of_a_list_is_the_task():
    items = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
    ]
    assert _task_text(params(items)) == "second"


def test_a_row_without_a_user_message_is_an_init_error():
    with pytest.raises(RolloutFailure) as failed:
        _task_text(params([{"role": "system", "content": "nothing to do"}]))
    assert failed.value.failure.type == FailureType.INIT_ERROR
