# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The container backend (a real engine: Docker's socket, or a private `podman system service`)
beside bubblewrap (the local backend), in one run:

  start   a sandbox until its shell answered a first `echo` (create, container start, the spawner,
          a pty bash), one at a time (concurrency 1) and --burst at once (concurrency 32), p50/p99
  echo    a bash `echo` through a started sandbox, p50 (no engine call per command: the pty is ours)
  bwrap   the same start, one at a time, with the local backend

    python -m benchmarks.container [--socket PATH] [--starts 20] [--burst 32] [--calls 300]

Prints readable lines, then one JSON object as the last line (results/bench/container.json).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time

from benchmarks.common import emit, ms, percentile, raise_fd_limit, sandbox_root
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.container.engine import Engine, default_socket
from prorl_gym.sandbox.backends.container.image import ensure_base_image
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.container.podman_service import PodmanService
from prorl_gym.sandbox.backends.instances import Backends


def p50(samples: list[float]) -> float:
    return round(percentile(samples, 50), 3)


def p99(samples: list[float]) -> float:
    return round(percentile(samples, 99), 3)


async def started(spec: SandboxSpec, backends: Backends) -> float:
    """ms until a new sandbox's shell answered; the sandbox is closed afterwards (not timed)."""
    began = time.perf_counter()
    sb = await create_sandbox(spec, backends=backends)
    try:
        assert (await sb.bash("echo up")).output == "up\n"
        return ms(time.perf_counter() - began)
    finally:
        await sb.close()


async def sequential_starts(spec: SandboxSpec, backends: Backends, starts: int) -> list[float]:
    await started(spec, backends)  # warm: the image, the engine's caches
    return [await started(spec, backends) for _ in range(starts)]


async def echo_latency(spec: SandboxSpec, backends: Backends, calls: int, warmup: int = 30) -> list[float]:
    async with await create_sandbox(spec, backends=backends) as sb:
        for _ in range(warmup):
            await sb.bash("echo hi")
        samples = []
        for _ in range(calls):
            began = time.perf_counter()
            assert (await sb.bash("echo hi")).output == "hi\n"
            samples.append(ms(time.perf_counter() - began))
        return samples


async def measure(args: argparse.Namespace, socket_path: str, root: str) -> dict:
    engine = Engine(socket_path)
    try:
        image = await ensure_base_image(engine)
    finally:
        await engine.close()
    backends = Backends()
    container = SandboxSpec(backend=ContainerOptions(socket=socket_path, image=image), root_dir=root)
    bwrap = SandboxSpec(root_dir=root)
    try:
        bwrap_starts = await sequential_starts(bwrap, backends, args.starts)
        print(f"bwrap start, one at a time: p50 {p50(bwrap_starts)} ms")
        one = await sequential_starts(container, backends, args.starts)
        print(f"container start, one at a time: p50 {p50(one)} ms, p99 {p99(one)} ms")
        burst = await asyncio.gather(*(started(container, backends) for _ in range(args.burst)))
        print(f"container start, {args.burst} at once: p50 {p50(burst)} ms, p99 {p99(burst)} ms")
        echo = await echo_latency(container, backends, args.calls)
        bwrap_echo = await echo_latency(bwrap, backends, args.calls)
        print(f"bash echo: container p50 {p50(echo)} ms, bwrap p50 {p50(bwrap_echo)} ms")
    finally:
        await backends.close()
    return {
        "container_start_p50_ms": p50(one),
        "container_start_p99_ms": p99(one),
        f"container_start_c{args.burst}_p50_ms": p50(burst),
        f"container_start_c{args.burst}_p99_ms": p99(burst),
        "container_bash_echo_p50_ms": p50(echo),
        "bwrap_start_p50_ms": p50(bwrap_starts),
        "bwrap_bash_echo_p50_ms": p50(bwrap_echo),
        "container_over_bwrap_start": round(p50(one) / p50(bwrap_starts), 2),
        "container_over_bwrap_echo": round(p50(echo) / p50(bwrap_echo), 2),
        "starts": args.starts,
        "burst": args.burst,
        "calls": args.calls,
    }


async def main_async(args: argparse.Namespace) -> dict:
    raise_fd_limit()
    with sandbox_root() as root:
        socket_path = args.socket or default_socket()
        if socket_path is not None:
            results = await measure(args, socket_path, root)
            return results | {"engine": socket_path}
        if shutil.which("podman") is None:  # reported, not failed: `make bench` runs where there is no engine
            return {"skipped": "no container engine: set --socket / DOCKER_HOST, or `make container-deps`"}
        async with PodmanService() as socket_path:
            return await measure(args, socket_path, root) | {"engine": "podman system service (private)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--socket",
        help="an Engine API socket (default: $DOCKER_HOST, podman's, docker's, else a private podman service)",
    )
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--burst", type=int, default=32)
    parser.add_argument("--calls", type=int, default=300)
    emit("container", asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
