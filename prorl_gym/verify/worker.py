# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A verifier worker: a long-lived process that runs checks named `module:function`.

    python -m prorl_gym.verify.worker [module:function ...]   the checks to import (and warm) at start

Protocol: one JSON request per line on stdin {"id", "check", "kwargs"}; one JSON reply per
line on the original stdout {"id", "ok", "result" | "error"}. Anything the checkers print
goes to stderr, so it cannot corrupt the protocol. A check's module may define `warm_up()`
(heavy imports, caches), called when the check is loaded, not on a rollout's clock.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from functools import cache
from typing import Any


@cache
def load_check(name: str) -> Callable[..., Any]:
    """The function a `module:function` name stands for; its module's warm_up() runs once."""
    module_name, sep, function = name.partition(":")
    if not sep or not module_name or not function:
        raise ValueError(f"a check is named `module:function`, got {name!r}")
    module = importlib.import_module(module_name)
    if callable(warm_up := getattr(module, "warm_up", None)):
        warm_up()
    return getattr(module, function)


def main(preload: list[str]) -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for name in preload:
        load_check(name)
    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = load_check(request["check"])(**request["kwargs"])
            reply = {"id": request["id"], "ok": True, "result": result}
        except Exception as exc:  # noqa: BLE001 - reported to the caller as an eval error
            reply = {
                "id": request["id"],
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-2000:],
            }
        protocol.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
