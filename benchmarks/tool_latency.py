# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Per-call latency of sandbox tools, measured three ways in one run:

  runtime     straight into the Sandbox API (sb.bash / sb.python)
  tool_route  through the math resources server's HTTP tool routes, called the way the
              agent calls them (one keep-alive aiohttp session, the session cookie re-sent)
  tmux        the design ProRL Agent replaced: tmux send-keys, then capture-pane polled
              every 0.5 s until the output shows up

    python -m benchmarks.tool_latency [--calls 300] [--warmup 30] [--tmux-calls 10]

Prints readable lines, then one JSON object as the last line of stdout (also written to
results/bench/tool_latency.json). Sandboxes use the default backend (bubblewrap). Targets are reported, never asserted.
"""

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from benchmarks.common import emit, percentile, sandbox_root
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.stack import free_port
from prorl_gym.testing import build_server

TARGETS = {"tool_route_bash_echo_p50_ms": 3.0, "speedup_vs_tmux": 100}
SEED_ROW = {"responses_create_params": {"input": [{"role": "user", "content": "x"}]}, "expected_answer": "1"}
TMUX_POLL_S = 0.5

# (series name, tool, arguments, check on the output the policy would read)
CASES = [
    ("bash_echo", "bash", {"command": "echo hi"}, lambda out: out == "hi\n"),
    ("bash_ls", "bash", {"command": "ls /usr/bin | wc -l"}, lambda out: out.strip().isdigit()),
    ("python", "python", {"code": "1+1"}, lambda out: out == "2\n"),
]


def check(what: str, ok: bool, detail) -> None:
    if not ok:
        raise RuntimeError(f"{what}: unexpected result {detail!r}")


def ms(x: float) -> float:
    return round(x, 3)


def summarize(results: dict, prefix: str, samples: list[float]) -> None:
    stats = {"p50": percentile(samples, 50), "p95": percentile(samples, 95), "mean": statistics.fmean(samples)}
    results.update({f"{prefix}_{k}_ms": ms(v) for k, v in stats.items()})
    print(f"{prefix:<34} n={len(samples):<4} " + "  ".join(f"{k} {v:8.3f} ms" for k, v in stats.items()), flush=True)


async def series(call, calls: int, warmup: int) -> list[float]:
    """Time `calls` awaits of call() after `warmup` untimed ones; milliseconds."""
    for _ in range(warmup):
        await call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


# ---------------------------------------------------------------- (a) the Sandbox API


async def bench_runtime(results: dict, root: str, calls: int, warmup: int) -> None:
    sb = await create_sandbox(SandboxSpec(root_dir=root))
    try:
        for name, tool, args, ok in CASES:

            async def call(tool=tool, args=args, ok=ok, name=name):
                result = await getattr(sb, tool)(**args)
                check(f"runtime {name}", ok(result.output), result)

            # The python warm-up also starts the kernel, which is lazy.
            summarize(results, f"runtime_{name}", await series(call, calls, warmup))
    finally:
        await sb.close()


# ---------------------------------------------------------------- (b) the HTTP tool routes


def serve(port: int, root: str) -> None:
    """--serve mode: the math resources server alone, no ng_run and no head server."""
    import uvicorn

    from resources_servers.math.app import MathResourcesServer

    # verifier_workers=0: tool calls never need the verifier pool.
    server = build_server(
        MathResourcesServer, "math", port=port, domain="math", verifier_workers=0, sandbox={"root_dir": root}
    )
    uvicorn.run(server.setup_webserver(), host="127.0.0.1", port=port, log_level="warning")


async def wait_until_up(
    http: aiohttp.ClientSession, server: asyncio.subprocess.Process, timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.returncode is not None:
            raise RuntimeError(f"the math server exited with code {server.returncode}")
        try:
            async with http.get("/tools") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the math server did not answer GET /tools within {timeout_s:g}s")


async def stop(proc: asyncio.subprocess.Process, grace_s: float = 5) -> None:
    if proc.returncode is None:
        proc.terminate()  # uvicorn's shutdown closes every sandbox still open
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def bench_tool_routes(results: dict, root: str, calls: int, warmup: int) -> None:
    port = free_port()
    # A separate process, so client and server do not share an event loop (as in a real run);
    # its stdout goes to our stderr to keep our stdout's last line the JSON.
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.tool_latency", "--serve", str(port), root, stdout=sys.stderr.fileno()
    )
    try:
        # Like the agent: one keep-alive session; cookies passed by hand (the jar skips IP hosts).
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", cookie_jar=aiohttp.DummyCookieJar()) as http:
            await wait_until_up(http, server)
            cookies: dict[str, str] = {}

            async def post(path: str, body: dict) -> dict:
                async with http.post(path, json=body, cookies=cookies) as resp:
                    payload = await resp.read()
                    cookies.update({k: m.value for k, m in resp.cookies.items()})
                    check(f"POST {path}", resp.status == 200, (resp.status, payload[:500]))
                    return json.loads(payload)

            await post("/seed_session", SEED_ROW)
            check("session cookie", bool(cookies), cookies)
            try:
                for name, tool, args, ok in CASES:
                    sandbox_ms: list[float] = []  # time inside the sandbox, as the tool reports it

                    async def call(tool=tool, args=args, ok=ok, name=name, sandbox_ms=sandbox_ms):
                        reply = await post(f"/{tool}", args)
                        check(f"tool route {name}", ok(reply.get("content", "")), reply)
                        sandbox_ms.append(reply["metadata"]["duration_s"] * 1000)

                    summarize(results, f"tool_route_{name}", await series(call, calls, warmup))
                    results[f"tool_route_{name}_in_sandbox_p50_ms"] = ms(percentile(sandbox_ms[warmup:], 50))
            finally:
                await post("/release", {})
    finally:
        await stop(server)


# ---------------------------------------------------------------- the tmux polling baseline


def tmux_baseline(calls: int, warmup: int = 1) -> list[float]:
    """Blocking (run it in a thread): each action is send-keys, then capture-pane every 0.5 s."""
    tmux = ["tmux", "-L", f"prorl-bench-{os.getpid()}-{secrets.token_hex(3)}"]  # private server

    def run(*args: str) -> str:
        return subprocess.run([*tmux, *args], check=True, capture_output=True, text=True).stdout

    def count_hi() -> int:  # whole history, so earlier actions' output scrolled off still counts
        return sum(line == "hi" for line in run("capture-pane", "-p", "-S", "-", "-t", "S").splitlines())

    socket_path = None
    try:
        run("new-session", "-d", "-s", "S", "-x", "200", "-y", "50", "bash --noprofile --norc")
        socket_path = run("display-message", "-p", "#{socket_path}").strip()
        samples = []
        for i in range(warmup + calls):
            before = count_hi()
            started = time.perf_counter()
            run("send-keys", "-t", "S", "echo hi", "Enter")
            # No completion signal in this design: wait a poll interval, look, repeat.
            while True:
                time.sleep(TMUX_POLL_S)
                if count_hi() > before:
                    break
            if i >= warmup:
                samples.append((time.perf_counter() - started) * 1000)
        return samples
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        if socket_path:  # kill-server leaves the socket file behind
            Path(socket_path).unlink(missing_ok=True)


# ---------------------------------------------------------------- main


async def run(args: argparse.Namespace, root: str) -> dict:
    results: dict = {"calls": args.calls, "warmup": args.warmup}
    print(f"tool latency: {args.calls} calls per series after {args.warmup} warm-up calls", flush=True)
    await bench_runtime(results, root, args.calls, args.warmup)
    await bench_tool_routes(results, root, args.calls, args.warmup)
    results |= {"tmux_calls": args.tmux_calls, "tmux_poll_interval_s": TMUX_POLL_S}
    summarize(results, "tmux_baseline_bash_echo", await asyncio.to_thread(tmux_baseline, args.tmux_calls))
    results["speedup_vs_tmux"] = round(
        results["tmux_baseline_bash_echo_p50_ms"] / results["tool_route_bash_echo_p50_ms"], 3
    )
    results["targets"] = TARGETS
    results["meets_targets"] = {
        "tool_route_bash_echo_p50_ms": results["tool_route_bash_echo_p50_ms"]
        <= TARGETS["tool_route_bash_echo_p50_ms"],
        "speedup_vs_tmux": results["speedup_vs_tmux"] >= TARGETS["speedup_vs_tmux"],
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="timed calls per series")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls before each series")
    parser.add_argument("--tmux-calls", type=int, default=10, help="timed actions for the tmux baseline")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "ROOT_DIR"), help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    if args.serve:
        return serve(int(args.serve[0]), args.serve[1])
    if args.calls < 1 or args.tmux_calls < 1 or args.warmup < 0:
        parser.error("--calls and --tmux-calls must be >= 1, --warmup >= 0")
    with sandbox_root() as root:  # short (socket paths < 108 bytes) and reachable by the sandbox uid
        emit("tool_latency", asyncio.run(run(args, root)))


if __name__ == "__main__":
    main()
