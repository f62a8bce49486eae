# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A verifier worker: a long-lived process with the checkers pre-imported.

Protocol: one JSON request per line on stdin {"id", "check", "kwargs"}; one JSON reply per
line on the original stdout {"id", "ok", "result" | "error"}. Anything the checkers print
goes to stderr, so it cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from prorl_gym.verify.math_check import check_math

CHECKS = {"math": check_math}


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Warm the heavy imports now, not on the first rollout's clock.
    import math_verify  # noqa: F401
    import reasoning_gym  # noqa: F401

    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = CHECKS[request["check"]](**request["kwargs"])
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
    main()
