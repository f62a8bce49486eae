# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The math resources server with every EVAL made `eval_delay_s` slower: a slow verifier for
benchmarks/pipeline_overlap, which runs it as the math server's entrypoint:

    +math.resources_servers.math.entrypoint=../../benchmarks/slow_verify_math.py
    +math.resources_servers.math.eval_delay_s=2
"""

import asyncio
from typing import Any

from prorl_gym.sandbox import SandboxAPI
from resources_servers.math.app import MathResourcesServer, MathResourcesServerConfig, MathVerifyRequest


class SlowVerifyMathConfig(MathResourcesServerConfig):
    eval_delay_s: float = 2.0


class SlowVerifyMathServer(MathResourcesServer):
    config: SlowVerifyMathConfig

    async def evaluate(self, body: MathVerifyRequest, sandbox: SandboxAPI | None) -> dict[str, Any]:
        await asyncio.sleep(self.config.eval_delay_s)  # a verifier that takes this long, without using a CPU
        return await super().evaluate(body, sandbox)


if __name__ == "__main__":
    SlowVerifyMathServer.run_webserver()
