# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A GGUF file's own metadata (its header's key/value pairs), read without loading the model.

GGUF (llama.cpp's format): magic `GGUF`, version (2 or 3), tensor count, key/value count, then the
key/value pairs (string keys; typed values: integers, floats, bools, strings, arrays of them). Only
the header is read; arrays of more than `MAX_KEPT` items (a tokenizer's 150k tokens) are skipped
over and kept as their length and the first few items, so reading costs milliseconds.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

from prorl_gym.errors import ProrlError

MAGIC = b"GGUF"
MAX_KEPT = 8  # items kept of a long array (tokenizer.ggml.tokens: its length and its first items)
# value type -> struct format (little-endian), GGUF's numbering
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
MAX_STRING = 16 << 20  # a chat template is a few KB; a longer string means a corrupt header


class GGUFError(ProrlError, ValueError):
    """Not a GGUF file, or a header that does not parse."""


class LongArray(list):
    """An array too long to keep: its first items, and its real length in `length`."""

    length: int = 0


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The header's key/value pairs, plus `gguf.version` and `gguf.tensor_count`."""
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise GGUFError(f"{path} is not a GGUF file (no GGUF magic)")
        version = _unpack(f, "<I")
        if version not in (2, 3):
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 or 3)")
        tensors, count = _unpack(f, "<Q"), _unpack(f, "<Q")
        found: dict[str, Any] = {"gguf.version": version, "gguf.tensor_count": tensors}
        for _ in range(count):
            key = _string(f)
            found[key] = _value(f, _unpack(f, "<I"))
        return found


def _unpack(f: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise GGUFError("the GGUF header ends early")
    return struct.unpack(fmt, data)[0]


def _string(f: BinaryIO) -> str:
    size = _unpack(f, "<Q")
    if size > MAX_STRING:
        raise GGUFError(f"a GGUF string of {size} bytes: corrupt header")
    data = f.read(size)
    if len(data) != size:
        raise GGUFError("the GGUF header ends early")
    return data.decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind in SCALARS:
        return _unpack(f, SCALARS[kind])
    if kind == STRING:
        return _string(f)
    if kind == ARRAY:
        item, length = _unpack(f, "<I"), _unpack(f, "<Q")
        if length <= MAX_KEPT:
            return [_value(f, item) for _ in range(length)]
        kept = LongArray(_value(f, item) for _ in range(MAX_KEPT))
        kept.length = length
        if item in SCALARS:  # fixed size: skip at once
            f.seek(struct.calcsize(SCALARS[item]) * (length - MAX_KEPT), 1)
        elif item == STRING:  # skipped unread: a tokenizer's 150k tokens
            for _ in range(length - MAX_KEPT):
                f.seek(_unpack(f, "<Q"), 1)
        else:
            for _ in range(length - MAX_KEPT):
                _value(f, item)
        return kept
    raise GGUFError(f"unknown GGUF value type {kind}")
