# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A lean Ray cluster for one stack: what `ng_run` would start, without what nothing of ours uses.

    python -m prorl_gym.ray_head --address-file PATH   # then: ng_run ... +ray_head_node_address=<its address>

ng_run starts Ray with its defaults: the web dashboard (a head process and nine module processes), two
idle workers started ahead for the first driver, the autoscaler's monitor and the log monitor, ~650 MiB
of the stack's ~2 GiB. Nothing of a
prorl-gym stack uses them (our own dashboard is the agent's /dashboard; sandbox hosts start their
workers when placed). This process starts the cluster without them (~290 MiB), writes its address
(and the environment a process joining it needs) to PATH once it is up, holds it while it lives, and
takes it down when it ends (SIGINT/SIGTERM, or its parent's death: Ray's processes die with the
driver that started them). prorl_gym.stack.Stack runs one per stack (`lean_ray`); a Ray you start
yourself can be passed to ng_run the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

# Read by Ray's processes at their start: no workers started ahead of use, no usage reports.
LEAN_ENV = {"RAY_prestart_worker_first_driver": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address-file", required=True, help="where to write the cluster's address once it is up")
    args = parser.parse_args()
    os.environ.update(LEAN_ENV)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # an orderly ray.shutdown below, as on Ctrl-C

    import ray  # after the environment above: Ray reads it at import and passes it to its processes

    ray.init(include_dashboard=False, log_to_driver=False)
    # Nor the autoscaler's monitor (a local cluster of fixed size) or the log monitor (no driver of a
    # stack reads its workers' logs: ours join with log_to_driver off): ~95 MiB more. What `ray start
    # --no-monitor --include-log-monitor=false` leaves out; ray.init cannot say it, its node can.
    node = ray._private.worker._global_node
    node.kill_monitor()
    node.kill_log_monitor()
    try:
        # Who joins needs the address and, where Ray turned token authentication on for this cluster (its
        # default: the token is in ~/.ray/auth_token), to be told so: a joining process assumes it off.
        joining_env = {name: os.environ[name] for name in ("RAY_AUTH_MODE",) if name in os.environ}
        staging = f"{args.address_file}.tmp"
        with open(staging, "w") as f:
            json.dump({"address": ray.get_runtime_context().gcs_address, "env": joining_env}, f)
        os.replace(staging, args.address_file)
        while True:
            signal.pause()
    except KeyboardInterrupt:
        return 0
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
