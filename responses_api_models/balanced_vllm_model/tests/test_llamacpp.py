# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""completion_api: llamacpp, the request and the answer (the real server: tests/test_real_model.py, tests/test_real_model_full.py)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from responses_api_models.balanced_vllm_model.llamacpp import UnsupportedSampling, completion_body, read_completion
from responses_api_models.balanced_vllm_model.tito import TokenModeSettings


def test_the_sampler_is_the_policys_unless_the_request_sets_it():
    body = completion_body([1, 2], {"max_tokens": 5}, "model", None)
    assert body | {"prompt": None} == {
        "prompt": None,
        "n_predict": 5,
        "temperature": 1.0,  # llama.cpp's server: 0.8, top_k 40, top_p 0.95, min_p 0.05 (truncated log-probs)
        "top_k": 0,
        "top_p": 1.0,
        "min_p": 0.0,
        "return_tokens": True,
        "n_probs": 1,
        "cache_prompt": True,
    }
    asked = completion_body(
        [1], {"temperature": 0.6, "top_k": -1, "repetition_penalty": 1.1, "seed": 3}, "sampled", "g"
    )
    assert (asked["temperature"], asked["top_k"], asked["repeat_penalty"], asked["seed"]) == (0.6, 0, 1.1, 3)
    assert asked["post_sampling_probs"] is True and asked["grammar"] == "g"


def test_what_llamacpp_cannot_honour_is_refused_not_dropped():
    with pytest.raises(UnsupportedSampling, match="min_tokens"):
        completion_body([1], {"min_tokens": 3}, "model", None)


def entry(token: int, logprob: float) -> dict:
    return {"id": token, "token": "x", "logprob": logprob, "prob": math.exp(logprob)}


def test_the_answer_read_ids_log_probs_and_why_it_stopped():
    answer = {"tokens": [5, 6, 151645], "content": "hi", "stop_type": "eos"}
    answer["completion_probabilities"] = [entry(5, -0.1), entry(6, -2.0), entry(151645, -0.01)]
    assert read_completion(answer, "model") == ([5, 6, 151645], [-0.1, -2.0, -0.01], "hi", "stop")
    ids, sampled, _, _ = read_completion(answer | {"stop_type": "limit"}, "sampled")
    assert (
        sampled == pytest.approx([-0.1, -2.0, -0.01])
        and read_completion(answer | {"stop_type": "limit"}, "model")[3] == "length"
    )


def test_log_probs_that_do_not_match_the_ids_are_an_error_never_a_record():
    answer = {"tokens": [5, 6], "content": "hi", "completion_probabilities": [entry(5, -0.1)]}
    with pytest.raises(ValueError, match="1 log-probs for 2 generated ids"):
        read_completion(answer, "model")
    answer["completion_probabilities"].append(entry(7, -0.1))
    with pytest.raises(ValueError, match="other ids"):
        read_completion(answer, "model")


def test_a_grammar_needs_llamacpp():
    assert TokenModeSettings(completion_api="llamacpp", tool_call_grammar="request").tool_call_grammar == "request"
    with pytest.raises(ValidationError, match="needs completion_api: llamacpp"):
        TokenModeSettings(completion_api="vllm", tool_call_grammar="always")
