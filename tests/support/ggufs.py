# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Small GGUF files for the tests: a real header (GGUF v3, typed key/value pairs), no tensors."""

from __future__ import annotations

import struct
from pathlib import Path


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _value(value) -> tuple[int, bytes]:
    if isinstance(value, bool):
        return 7, struct.pack("<?", value)
    if isinstance(value, int):
        return 4, struct.pack("<I", value)
    if isinstance(value, float):
        return 6, struct.pack("<f", value)
    if isinstance(value, str):
        return 8, _string(value)
    if isinstance(value, list):
        kind = _value(value[0])[0] if value else 8
        return 9, struct.pack("<IQ", kind, len(value)) + b"".join(_value(v)[1] for v in value)
    raise TypeError(value)


def gguf_bytes(metadata: dict, version: int = 3, tail: bytes = b"") -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", version, 0, len(metadata))
    for key, value in metadata.items():
        kind, data = _value(value)
        out += _string(key) + struct.pack("<I", kind) + data
    return out + tail


def write_gguf(path: Path, metadata: dict, **kwargs) -> Path:
    path.write_bytes(gguf_bytes(metadata, **kwargs))
    return path


QWEN_LIKE = {
    "general.architecture": "qwen2",
    "general.name": "Tiny Test",
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.tokens": [f"t{i}" for i in range(20)],
    "tokenizer.ggml.scores": [0.5] * 20,
    "tokenizer.ggml.eos_token_id": 7,
    "tokenizer.chat_template": "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}<tool_call>",
}
