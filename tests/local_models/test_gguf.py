# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A GGUF header read without loading the model: values, long arrays skipped, refusals."""

from __future__ import annotations

import pytest

from prorl_gym.local_models.gguf import MAX_KEPT, GGUFError, read_metadata
from tests.support.ggufs import QWEN_LIKE, gguf_bytes, write_gguf


def test_the_header_values_and_long_arrays_as_their_length(tmp_path):
    found = read_metadata(write_gguf(tmp_path / "m.gguf", QWEN_LIKE, tail=b"\0" * 64))
    assert found["gguf.version"] == 3 and found["gguf.tensor_count"] == 0
    assert found["general.architecture"] == "qwen2" and found["tokenizer.ggml.eos_token_id"] == 7
    tokens = found["tokenizer.ggml.tokens"]
    assert tokens.length == 20 and list(tokens) == [f"t{i}" for i in range(MAX_KEPT)]
    assert found["tokenizer.ggml.scores"].length == 20
    assert found["tokenizer.chat_template"] == QWEN_LIKE["tokenizer.chat_template"]  # read past both arrays


@pytest.mark.parametrize(
    "data, said",
    [
        (b"PK\x03\x04" + b"\0" * 40, "no GGUF magic"),
        (gguf_bytes({"a": "b"}, version=1), "version 1"),
        (gguf_bytes({"general.name": "x"})[:-1], "ends early"),
        (
            b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little") + b"\x05",
            "ends early",
        ),
    ],
)
def test_what_is_not_a_gguf_header_is_refused_with_the_reason(tmp_path, data, said):
    (tmp_path / "x.gguf").write_bytes(data)
    with pytest.raises(GGUFError, match=said):
        read_metadata(tmp_path / "x.gguf")
