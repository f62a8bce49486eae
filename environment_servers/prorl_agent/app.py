# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The environment server of a prorl_agent (NeMo Gym 0.7 reaches every agent through one).

Its address is served by the agent's own process (responses_api_agents/prorl_agent/front_door.py):
`/run` there is the agent's `/run`, so a rollout pays no relay hop and no second copy of its record,
and ng_run's readiness poll of this server is answered once the agent is up. This process only holds
the server's place in ng_run, which starts one process per server: a bare interpreter that imports
nothing else, waits to be stopped and ends with its parent.
"""

import ctypes
import signal

PR_SET_PDEATHSIG = 1

if __name__ == "__main__":
    stop = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # taken by sigwait below, not by their default actions
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # ng_run gone (even by SIGKILL): end too
    signal.sigwait(stop)
