# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Run the whole stack as child processes: a policy (optional: the scripted policy, or a real model on the
CPU served by llama.cpp) and `ng_run`.

Used by the demo, the end-to-end tests and the benchmarks. Everything it starts runs in
sessions it owns and is stopped on exit, also on error and on Ctrl-C, SIGTERM or SIGHUP (handled as
Ctrl-C while the stack runs: prorl_gym/interrupts.py), so nothing is left behind.

    with Stack(["configs/math.yaml"], policy_data=["resources_servers/math/data/example.jsonl"]) as stack:
        stack.collect("math_agent", "resources_servers/math/data/example.jsonl", "results/out.jsonl")
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from prorl_gym.errors import ProrlError
from prorl_gym.interrupts import StopSignals, follow_make, say_stopped, stop_signals
from prorl_gym.jsonl import read_jsonl
from prorl_gym.local_models import local_model, verified
from prorl_gym.paths import REPO_ROOT
from prorl_gym.preflight import PolicyCheck, PolicyCheckError, check_policy
from prorl_gym.runtime.process import kill_session, session_members

BIN = Path(sys.executable).parent


class StackError(ProrlError):
    pass


# What ng_run's log says when the Ray cluster it starts failed to come up (worth another attempt).
RAY_START_FAILURES = (
    "The current node timed out during startup",
    "Failed to connect to GCS",
    "Timed out while waiting for GCS to become available",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_session(proc: subprocess.Popen, grace_s: float = 15.0, sig: int = signal.SIGINT) -> None:
    """Signal a child started with start_new_session, give its whole session `grace_s` to exit (servers
    outlive ng_run while they close their sandboxes), then SIGKILL whatever of it remains."""
    deadline = time.monotonic() + grace_s
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=grace_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    while session_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    kill_session(proc.pid)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class RayCluster:
    """A running Ray cluster a stack joins instead of starting its own: its address, and the environment a
    process joining it needs (prorl_gym/ray_head.py writes both)."""

    address: str
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Stack:
    config_paths: list[str]
    overrides: list[str] = field(default_factory=list)
    policy_data: list[str] | None = None  # start the scripted policy on these rows
    policy_args: list[str] = field(default_factory=list)  # more arguments for the policy's server
    # Or serve this local model (prorl_gym/local_models: fetched by make setup) as the policy, through
    # llama.cpp (responses_api_models/llamacpp_policy), with the model server set up for it.
    local_model: str | None = None
    log_dir: Path = REPO_ROOT / "results" / "logs"
    # How long ng_run may take to have every server up ($PRORL_STACK_READY_TIMEOUT_S: a busy machine).
    ready_timeout_s: float = field(default_factory=lambda: float(os.environ.get("PRORL_STACK_READY_TIMEOUT_S", 300)))
    # ng_run starts a Ray cluster, whose node must register within Ray's own 30 s (not configurable in
    # Ray 2.60); on a busy machine it sometimes does not. Such a start is tried again, this many times in all.
    start_attempts: int = 3
    # NeMo Gym's CLIs. nemo-gym (0.4.0 on) spells them `gym env start` and `gym eval run --no-serve` too (and
    # calls ng_run / ng_collect_rollouts deprecated aliases of those): same Hydra overrides either way.
    start_command: list[str] = field(default_factory=lambda: [str(BIN / "ng_run")])
    collect_command: list[str] = field(default_factory=lambda: [str(BIN / "ng_collect_rollouts")])
    head_host: str = "127.0.0.1"
    head_port: int = field(default_factory=free_port)
    policy_port: int = field(default_factory=free_port)
    root: Path = REPO_ROOT  # where ng_run runs (config and server paths are relative to it)
    env: dict[str, str] = field(default_factory=dict)  # more environment for every process it starts
    # Start the stack's Ray cluster lean (prorl_gym/ray_head.py: no Ray web dashboard, no idle workers
    # ahead of use; ~300 MiB less) and hand it to ng_run, instead of ng_run starting Ray's defaults.
    # Not where an override names a cluster already (+ray_head_node_address=...).
    lean_ray: bool = True
    # A lean cluster already running (lean_ray_cluster()) that this stack joins, and leaves running: stacks that
    # run one after the other (the tests') start Ray once between them instead of once each.
    ray: RayCluster | None = None
    _procs: list[subprocess.Popen] = field(default_factory=list)

    _ray_address: str | None = None
    _signals: StopSignals | None = None  # while used as a context manager: the stop signals' handling
    _handlers: ExitStack = field(default_factory=ExitStack)

    @property
    def common_overrides(self) -> list[str]:
        """What every NeMo Gym CLI of this stack needs: the same configs, head server and Ray cluster."""
        return [
            f"+config_paths=[{','.join(self.config_paths)}]",
            f"+head_server.host={self.head_host}",
            f"+head_server.port={self.head_port}",
            *([f"+ray_head_node_address={self._ray_address}"] if self._ray_address else []),
        ]

    def __enter__(self) -> Stack:
        # SIGTERM and SIGHUP stop the stack as Ctrl-C does, and a second signal never aborts the teardown.
        self._signals = self._handlers.enter_context(stop_signals())
        try:
            self.start()
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if exc and isinstance(exc[1], KeyboardInterrupt):
            print("[stack] stopping everything it started (it takes a few seconds) ...", file=sys.stderr, flush=True)
        try:
            self.stop()
        finally:
            self._signals = None
            self._handlers.close()

    def _spawn(self, argv: list[str], log_name: str) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / log_name, "w") as log:
            proc = subprocess.Popen(
                argv,
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.environment(),
            )
        self._procs.append(proc)
        return proc

    @property
    def pids(self) -> list[int]:
        """The processes this stack started (the policy, ng_run): every server descends from them."""
        return [proc.pid for proc in self._procs]

    @property
    def session(self) -> int:
        """The process session of ng_run and every server it started (ng_run's pid)."""
        return self._procs[-1].pid

    def environment(self) -> dict[str, str]:
        """Of the processes it starts: its own job journal (under its logs) unless one is chosen."""
        journal = os.environ.get("PRORL_JOURNAL_DIR") or str(self.log_dir / "journal")
        ours = {"PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0", "PRORL_JOURNAL_DIR": journal}
        return os.environ | ours | self.env

    def start(self) -> None:
        overrides = list(self.overrides)
        if self.local_model is not None:
            self._start_policy()
            overrides = local_model_overrides(self.local_model, self.policy_port) + overrides
        elif self.policy_data is not None:
            self._start_policy()
            overrides.append(f"+policy_base_url=http://127.0.0.1:{self.policy_port}/v1")
        if self.ray is not None:
            self._ray_address, self.env = self.ray.address, self.env | self.ray.env
        elif self.lean_ray and not any("ray_head_node_address=" in o for o in overrides):
            self._start_ray()
        self._start_ng_run([*self.start_command, *self.common_overrides, *overrides])

    def _start_ray(self) -> None:
        address_file = self.log_dir / "ray_address"
        address_file.unlink(missing_ok=True)
        argv = [str(BIN / "python"), "-m", "prorl_gym.ray_head", "--address-file", str(address_file)]
        for attempt in range(1, self.start_attempts + 1):  # a busy machine may miss Ray's own 30 s start limit
            head = self._spawn(argv, "ray_head.log")
            deadline = time.monotonic() + self.ready_timeout_s
            while not address_file.exists() and head.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if address_file.exists():
                joining = json.loads(address_file.read_text())
                self._ray_address = joining["address"]
                self.env = self.env | joining["env"]  # for ng_run and every CLI after it
                return
            stop_session(head)
            self._procs.remove(head)
            said = (self.log_dir / "ray_head.log").read_text(errors="replace")[-3000:]
            if attempt == self.start_attempts:
                raise StackError(f"the stack's Ray cluster did not start in {attempt} attempts; its log:\n{said}")

    def _start_ng_run(self, argv: list[str]) -> None:
        log = self.log_dir / "ng_run.log"
        for attempt in range(1, self.start_attempts + 1):
            ng_run = self._spawn(argv, "ng_run.log")
            try:
                return self._wait_log(ng_run, log, "servers ready!")
            except StackError as exc:
                said = log.read_text(errors="replace")
                if not any(marker in said for marker in RAY_START_FAILURES):
                    raise
                stop_session(ng_run)
                self._procs.remove(ng_run)
                kept = log.rename(log.with_name(f"ng_run.attempt{attempt}.log"))
                if attempt == self.start_attempts:
                    raise StackError(
                        f"ng_run's Ray cluster did not start in {self.start_attempts} attempts (Ray's node must "
                        f"register within 30 s; is the machine overloaded?); the last attempt's log: {kept}"
                    ) from exc
                print(
                    f"[stack] ng_run's Ray cluster did not start (attempt {attempt} of {self.start_attempts}; "
                    f"log: {kept}): starting ng_run again",
                    file=sys.stderr,
                    flush=True,
                )

    def _start_policy(self) -> subprocess.Popen:
        if self.local_model is not None:
            try:  # said here, at once, rather than by a server that exits
                verified(local_model(self.local_model))
            except ProrlError as exc:
                raise StackError(str(exc)) from exc
            argv = [str(BIN / "python"), "-m", "responses_api_models.llamacpp_policy", "--model", self.local_model]
            what, log = f"llama.cpp serving {self.local_model}", "llamacpp_policy.log"
        else:
            data = [arg for path in self.policy_data for arg in ("--data", path)]
            argv = [str(BIN / "python"), "-m", "responses_api_models.scripted_policy", *data]
            what, log = "scripted policy", "scripted_policy.log"
        policy = self._spawn([*argv, "--port", str(self.policy_port), *self.policy_args], log)
        self._wait_http(f"http://127.0.0.1:{self.policy_port}/health", what, policy)  # llama.cpp: 503 until loaded
        if self.local_model is not None:  # loaded: asked as the model server will ask it (preflight.py)
            check = PolicyCheck(
                [f"http://127.0.0.1:{self.policy_port}/v1"], self.local_model, completion_api="llamacpp"
            )
            try:
                for line in asyncio.run(check_policy(check)):
                    print(f"[stack] policy check: {line}", file=sys.stderr, flush=True)
            except PolicyCheckError as exc:
                raise StackError(f"{what} started but cannot serve rollouts ({self.log_dir / log}): {exc}") from exc
        return policy

    def restart_policy(self, down_s: float = 0.0) -> None:
        """Kill the policy (as a dead GPU server), and after `down_s` start it again on its port."""
        self.kill_policy()
        time.sleep(down_s)
        self.start_policy_again()

    def kill_policy(self) -> None:
        """SIGKILL the policy (scripted or llama.cpp), as a GPU server that dies."""
        policy = self._procs[0]  # started first; ng_run stays last (see `session`)
        with suppress(ProcessLookupError):  # already dead, its whole group with it (a test before killed it)
            os.killpg(policy.pid, signal.SIGKILL)
        policy.wait()
        self._procs.remove(policy)

    def start_policy_again(self) -> None:
        """The policy again, on the same port, after kill_policy()."""
        restarted = self._start_policy()
        self._procs.remove(restarted)
        self._procs.insert(0, restarted)

    def _wait_http(self, url: str, what: str, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StackError(f"{what} exited with {proc.returncode}; see {self.log_dir}")
            try:
                with urllib.request.urlopen(url, timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise StackError(f"{what} not up within {self.ready_timeout_s}s")

    def _wait_log(self, proc: subprocess.Popen, log: Path, marker: str) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if marker in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                raise StackError(f"ng_run exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        raise StackError(f"ng_run not ready within {self.ready_timeout_s}s; see {log}")

    def server_urls(self) -> dict[str, str]:
        """Every server ng_run started, by name (the head server's /server_instances)."""
        url = f"http://{self.head_host}:{self.head_port}/server_instances"
        with urllib.request.urlopen(url, timeout=10) as response:
            return {s["process_name"]: s["url"] for s in json.load(response)}

    def collect_argv(
        self,
        agent: str,
        input_jsonl: str | Path,
        output_jsonl: str | Path,
        num_repeats: int = 1,
        extra: list[str] | None = None,
    ) -> list[str]:
        """The ng_collect_rollouts command line for this stack."""
        return [
            *self.collect_command,
            *self.common_overrides,
            f"+agent_name={agent}",
            f"+input_jsonl_fpath={input_jsonl}",
            f"+output_jsonl_fpath={output_jsonl}",
            f"+num_repeats={num_repeats}",
            *(extra or []),
        ]

    def collect(
        self,
        agent: str,
        input_jsonl: str | Path,
        output_jsonl: str | Path,
        num_repeats: int = 1,
        extra: list[str] | None = None,
        timeout_s: float = 1800,
    ) -> subprocess.CompletedProcess:
        """Run NeMo Gym's ng_collect_rollouts against this stack."""
        argv = self.collect_argv(agent, input_jsonl, output_jsonl, num_repeats, extra)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / "collect.log", "a") as log:
            run = subprocess.run(argv, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s)
        if run.returncode != 0 and not only_failures_collected(output_jsonl):
            raise StackError(f"ng_collect_rollouts failed ({run.returncode}); see {self.log_dir / 'collect.log'}")
        return run

    def stop(self) -> None:
        # A second Ctrl-C (or SIGTERM) must not abort the teardown half way and leave servers running.
        with ExitStack() as hold:
            if self._signals is not None:
                hold.enter_context(self._signals.holding())
            else:  # started without `with`: the signals are held for the teardown alone
                hold.enter_context(stop_signals()).stopping = True
            for proc in reversed(self._procs):
                stop_session(proc)
            self._procs.clear()


def local_model_overrides(name: str, port: int) -> list[str]:
    """ng_run overrides for a local model served on `port`: the policy endpoint, and the model server's
    settings for it (the catalog's: token-in/token-out on llama.cpp, its tool-call parsing)."""
    server = "+policy_model.responses_api_models.balanced_vllm_model"
    settings = [f"{server}.{key}={json.dumps(value)}" for key, value in local_model(name).model_server.items()]
    return [f"+policy_base_url=http://127.0.0.1:{port}/v1", f"+policy_model_name={name}", *settings]


# A real model on the CPU generates tens of tokens a second: each rollout's turns and generated tokens are
# capped so that one that goes round in circles ends (typed: max_turns, max_output_tokens) in minutes.
CPU_ROLLOUT_LIMITS = {"max_turns": 8, "max_output_tokens": 2048}


def cpu_rollout_limits(agent: str, **limits: int) -> list[str]:
    """ng_run overrides of an agent's limits for rollouts of a model on the CPU (CPU_ROLLOUT_LIMITS, or these)."""
    chosen = CPU_ROLLOUT_LIMITS | limits
    return [f"+{agent}.responses_api_agents.prorl_agent.limits.{key}={value}" for key, value in chosen.items()]


@contextmanager
def lean_ray_cluster(log_dir: Path) -> Iterator[RayCluster]:
    """A lean Ray cluster (prorl_gym/ray_head.py, started as a Stack starts its own) for several stacks to join
    in turn (Stack(ray=...)); it stops when the block ends."""
    head = Stack([], log_dir=log_dir)
    try:
        head._start_ray()
        yield RayCluster(head._ray_address, dict(head.env))
    finally:
        head.stop()


def run_cli(main: Callable[[], int | None]) -> NoReturn:
    """Exit with main()'s code; a StackError is said on one line (exit 1, no traceback: it says what
    to do); a PolicyCheckError too (exit 2: nothing was started); Ctrl-C, SIGTERM and SIGHUP are an orderly stop (what main started stops in its `finally`
    and `with` blocks: Stack's, a benchmark's own processes), exit 128 + the signal's number."""
    follow_make()  # make does not pass its SIGTERM on
    try:
        with stop_signals():
            code = main()
        sys.exit(code)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except PolicyCheckError as exc:
        print(f"error: {exc}\nnothing was started", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:
        sys.exit(say_stopped(exc))


def failures_path(output: str | Path) -> Path:
    """Where ng_collect_rollouts writes the failed rollouts of a collection into `output`."""
    output = Path(output)
    return output.with_name(f"{output.stem}_failures.jsonl")


def only_failures_collected(output: str | Path) -> bool:
    """Whether a collection's failing exit is NeMo Gym 0.7 saying every rollout failed ("None of the N
    dispatched rollouts produced a result"): each is a typed record in the failures sidecar, which the
    caller reads as any other failed rollout, so the collection itself did its work."""
    failures = failures_path(output)
    output = Path(output)
    return failures.exists() and failures.stat().st_size > 0 and not (output.exists() and output.stat().st_size)


def collected_records(output: str | Path) -> list[dict]:
    """Every record of one ng_collect_rollouts run: its successes, then its failures."""
    return read_jsonl(output, missing_ok=True) + read_jsonl(failures_path(output), missing_ok=True)
