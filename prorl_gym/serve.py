# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The rollout service: ng_run over the chosen environments, with their sandboxes on the sandbox
hosts of a Ray cluster (--ray-address) or, with no cluster named, on this machine; then either
serve (a trainer posts to the agents' /run) until SIGTERM/SIGINT, or collect rollouts over a
dataset with ng_collect_rollouts and stop.

    python -m prorl_gym.serve --envs math,code [--ray-address HEAD:6379]
        [--wait-hosts N]                 wait until N nodes offer the sandbox-host resource
        [--inner-backend local|apptainer] what sandboxes run with (default: local = bubblewrap)
        [--sandbox-root DIR]             node-local, same path on every node (default: the config's)
        [--policy-base-url URL --policy-model NAME | --scripted-policy]
        [--host ADDR --head-port PORT]   where the head server listens (the trainer's entry point)
        [--collect ROWS.jsonl --output OUT.jsonl --repeats N]
        [--logs DIR] [-- extra ng_run overrides ...]

With --ray-address (or $RAY_ADDRESS) the cluster must have sandbox hosts: nodes started with
`ray start --address HEAD:6379 --resources '{"prorl_sandbox_host": 1}'`. serve checks that at
least one (or --wait-hosts N) is up before it starts anything, and refuses, saying so, otherwise.

The Slurm launcher (deploy/slurm/prorl_gym.sbatch) runs this on the job's first node. Stopping
(SIGTERM, as `scancel` sends, SIGHUP or SIGINT) stops ng_run and every server: they release their
sandboxes on the hosts before they exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import time
from pathlib import Path

from prorl_gym.environments import all_config_paths, discover
from prorl_gym.paths import REPO_ROOT
from prorl_gym.preflight import PolicyCheck, check_policy
from prorl_gym.sandbox.backends.ray.options import RayOptions
from prorl_gym.stack import Stack, StackError, run_cli


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    names = [env.name for env in discover()]
    parser = argparse.ArgumentParser(
        prog="python -m prorl_gym.serve",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--envs", default="all", help=f"comma-separated, of {names} (default: all)")
    parser.add_argument(
        "--ray-address",
        default=os.environ.get("RAY_ADDRESS") or None,
        help="HOST:PORT of a Ray head with sandbox hosts (default: $RAY_ADDRESS; neither: sandboxes on this machine)",
    )
    parser.add_argument("--wait-hosts", type=int, default=0, help="sandbox-host nodes to wait for (default: 1, now)")
    parser.add_argument("--host-resource", default=RayOptions().host_resource, help="the Ray resource of host nodes")
    parser.add_argument("--wait-timeout", type=float, default=300.0, help="seconds to wait for --wait-hosts")
    parser.add_argument("--inner-backend", default=None, help="what sandboxes run with (default: the config's)")
    parser.add_argument("--sandbox-root", default=None, help="sandbox root on every node (node-local)")
    parser.add_argument("--policy-base-url", default=None, help="OpenAI-compatible endpoint (key: $POLICY_API_KEY)")
    parser.add_argument("--policy-model", default=None)
    parser.add_argument("--scripted-policy", action="store_true", help="the offline stand-in, on the rows' data")
    parser.add_argument(
        "--no-policy-check", action="store_true", help="start without first asking the policy endpoint"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address the servers listen on")
    parser.add_argument("--head-port", type=int, default=None, help="the head server's port (default: a free one)")
    parser.add_argument("--collect", type=Path, default=None, help="collect rollouts over these rows, then stop")
    parser.add_argument("--output", type=Path, default=None, help="where --collect writes its records")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--logs", type=Path, default=REPO_ROOT / "results" / "serve" / "logs")
    parser.add_argument("overrides", nargs="*", help="extra ng_run overrides (after --)")
    args = parser.parse_args(argv)
    chosen = names if args.envs == "all" else args.envs.split(",")
    if unknown := sorted(set(chosen) - set(names)):
        parser.error(f"unknown environments {unknown}; known: {names}")
    args.envs = [env for env in discover() if env.name in chosen]
    if bool(args.policy_base_url) == args.scripted_policy:
        parser.error("give exactly one of --policy-base-url (with --policy-model) or --scripted-policy")
    if args.policy_base_url and not args.policy_model:
        parser.error("--policy-model is required with --policy-base-url")
    if args.collect and (len(args.envs) != 1 or not args.output):
        parser.error("--collect needs exactly one environment in --envs and --output")
    if args.wait_hosts and not args.ray_address:
        parser.error("--wait-hosts needs a Ray cluster: --ray-address HOST:PORT (or $RAY_ADDRESS)")
    return args


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A Ray head that does not answer makes ray.init retry for minutes: refuse in seconds instead."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise StackError(f"--ray-address {address!r} is not HOST:PORT of a Ray head")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise StackError(
            f"no Ray head answers at {address} ({exc}); start one (`ray start --head --port {port}`) "
            "or leave out --ray-address and $RAY_ADDRESS to run sandboxes on this machine"
        ) from None


def wait_for_host_nodes(address: str, resource: str, count: int, timeout_s: float) -> int:
    """Block until `count` alive Ray nodes offer `resource` (timeout 0: look once); how many do."""
    check_reachable(address)
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            alive = sum(1 for node in ray.nodes() if node["Alive"] and node["Resources"].get(resource, 0) > 0)
            if alive >= count:
                return alive
            if time.monotonic() >= deadline:
                raise StackError(
                    f"{alive} of the {count} Ray node(s) with the resource {resource!r} needed are up at {address}"
                    + (f" after {timeout_s:.0f}s" if timeout_s else "")
                    + f"; start sandbox hosts with `ray start --address {address} --resources "
                    + f"'{{\"{resource}\": 1}}'` (deploy/slurm/prorl_gym.sbatch does), --wait-hosts N to wait "
                    + "for them, or leave out --ray-address and $RAY_ADDRESS to run sandboxes on this machine"
                )
            time.sleep(0.5)
    finally:
        ray.shutdown()


def overrides_for(args: argparse.Namespace) -> list[str]:
    overrides = [f"+ray_head_node_address={args.ray_address}"] if args.ray_address else []
    if args.host != "127.0.0.1":
        overrides.append(f"+default_host={args.host}")
    if args.policy_base_url:
        overrides += [f"+policy_base_url={args.policy_base_url}", f"+policy_model_name={args.policy_model}"]
    for env in args.envs:
        if not args.ray_address:  # sandboxes on this machine, with the config's backend or --inner-backend
            if args.inner_backend:
                overrides.append(f"+{env.server_key}.sandbox.backend.kind={args.inner_backend}")
        else:
            overrides.append(f"+{env.server_key}.sandbox.backend.kind=ray")
            if args.inner_backend:
                overrides.append(f"+{env.server_key}.sandbox.backend.inner.kind={args.inner_backend}")
        if args.sandbox_root:
            overrides.append(f"+{env.server_key}.sandbox.root_dir={args.sandbox_root}")
    return overrides + list(args.overrides)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.policy_base_url and not args.no_policy_check:  # in seconds, before anything starts (preflight.py)
        urls = [url.strip() for url in args.policy_base_url.split(",") if url.strip()]
        token_ids = not any("return_token_id_information=false" in o.lower() for o in args.overrides)
        for line in asyncio.run(check_policy(PolicyCheck(urls, args.policy_model, token_ids=token_ids))):
            print(f"[serve] policy check: {line}", file=sys.stderr, flush=True)
    if args.ray_address:
        count, timeout_s = (args.wait_hosts, args.wait_timeout) if args.wait_hosts else (1, 0.0)
        found = wait_for_host_nodes(args.ray_address, args.host_resource, count, timeout_s)
        print(f"[serve] {found} sandbox-host node(s) up at {args.ray_address}", file=sys.stderr, flush=True)
    else:
        print(
            "[serve] no Ray cluster named (--ray-address, $RAY_ADDRESS): sandboxes run on this machine",
            file=sys.stderr,
            flush=True,
        )
    # The stack handles SIGTERM, SIGHUP and SIGINT (prorl_gym/interrupts.py) from its start on: after
    # ray.init above, which installs a SIGTERM handler of its own that exits without our teardown.
    stack = Stack(
        all_config_paths(args.envs),
        overrides=overrides_for(args),
        policy_data=[str(env.example) for env in args.envs] if args.scripted_policy else None,
        log_dir=args.logs,
        head_host=args.host,
    )
    if args.head_port:
        stack.head_port = args.head_port
    with stack:
        agents = ", ".join(env.agent for env in args.envs)
        print(f"[serve] up: head server http://{args.host}:{stack.head_port} ({agents})", file=sys.stderr, flush=True)
        if args.collect:
            stack.collect(args.envs[0].agent, args.collect, args.output, num_repeats=args.repeats)
            print(f"[serve] collected into {args.output}", file=sys.stderr, flush=True)
            return 0
        try:
            signal.pause()  # until SIGTERM, SIGHUP or SIGINT (interrupts.Stopped)
        finally:
            print(
                "[serve] stopping: ng_run and every server (they release their sandboxes)", file=sys.stderr, flush=True
            )
    return 0


if __name__ == "__main__":
    run_cli(main)
