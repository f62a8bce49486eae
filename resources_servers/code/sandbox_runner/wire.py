# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Values between the trusted tests and the solution's process: plain data as tagged JSON.

Only exact builtin types cross (bool, int, float, str, bytes, complex, None, list, tuple,
dict, set, frozenset; numpy scalars as their Python value). A subclass is refused, so a
solution cannot return an object whose __eq__ always says True. Decoding is strict: the
runner reads the solution's replies with it, and untrusted bytes must never become code.
"""

from __future__ import annotations

import base64
import json
import math

MAX_DEPTH = 200


class Unsupported(TypeError):
    pass


def encode(value, depth: int = 0):
    if depth > MAX_DEPTH:
        raise Unsupported("value nested too deeply")
    t = type(value)
    if value is None or t in (bool, int, str):
        return value
    if t is float:
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if t is list:
        return [encode(v, depth + 1) for v in value]
    if t in (tuple, set, frozenset):
        return {"t": t.__name__, "v": [encode(v, depth + 1) for v in value]}
    if t is dict:
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if t is bytes:
        return {"t": "bytes", "v": base64.b64encode(value).decode()}
    if t is complex:
        return {"t": "complex", "v": [encode(value.real), encode(value.imag)]}
    if t.__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return encode(value.item(), depth + 1)  # np.int64(3) is the 3 the tests expect
    raise Unsupported(f"unsupported value of type {t.__name__}")


_BUILD = {"tuple": tuple, "set": set, "frozenset": frozenset}


def decode(data, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(data)
    if data is None or t in (bool, int, float, str):
        return data
    if t is list:
        return [decode(v, depth + 1) for v in data]
    if t is not dict or set(data) != {"t", "v"}:
        raise ValueError("malformed value")
    tag, v = data["t"], data["v"]
    if tag in _BUILD and type(v) is list:
        return _BUILD[tag](decode(x, depth + 1) for x in v)
    if tag == "dict" and type(v) is list:
        return {decode(k, depth + 1): decode(x, depth + 1) for k, x in v}
    if tag == "float" and v in ("nan", "inf", "-inf"):
        return float(v)
    if tag == "bytes" and type(v) is str:
        return base64.b64decode(v, validate=True)
    if tag == "complex" and type(v) is list and len(v) == 2:
        return complex(float(v[0]), float(v[1]))
    raise ValueError(f"malformed value (tag {tag!r})")


def dumps(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"
