# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Run an environment's agent over a dataset file: the stack (scripted or real policy) plus
ng_collect_rollouts, whose progress bar is shown on this terminal and kept in the log, with a policy
that goes down said there too (prorl_gym/watch.py)."""

from __future__ import annotations

import codecs
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from prorl_gym.dashboard.export import DASHBOARD_HTML, find_agent, save_snapshot
from prorl_gym.environments import environment as find_environment
from prorl_gym.stack import Stack, StackError, cpu_rollout_limits, only_failures_collected, stop_session
from prorl_gym.watch import PolicyWatch
from prorl_gym.wire.jobs import PolicyHealthView

SCRIPTED_MODES = ("gold", "wrong", "malformed")
POLICY_MODEL = "policy_model.responses_api_models.balanced_vllm_model"


@dataclass
class Collected:
    output: Path  # rollouts.jsonl (+ rollouts_failures.jsonl beside it)
    policy_down: PolicyHealthView | None  # what the agent said when it declared the policy down, if it did


@dataclass
class Policy:
    """The scripted policy (offline; replays recorded actions), a real endpoint, or a real model on the CPU."""

    base_url: str | None = None  # OpenAI-compatible, e.g. vLLM: http://host:8000/v1 (key: $POLICY_API_KEY)
    model: str | None = None
    scripted_mode: str = "gold"
    # Off: evaluation only, for endpoints that give no token ids (a hosted API, Ollama).
    token_ids: bool = True
    scripted_latency_ms: float = 0.0  # the scripted policy's time per answer (a slow policy)
    # no policy endpoint healthy this long: the agent declares the policy down and the rollouts waiting
    # for it end typed policy_down (None: the agent's config, 60 s)
    grace_s: float | None = None
    local_model: str | None = None  # served here by llama.cpp (prorl_gym/local_models), token-in/token-out

    @property
    def label(self) -> str:
        if self.local_model:
            return f"{self.local_model} on the CPU (llama.cpp)"
        return f"{self.model} at {self.base_url}" if self.base_url else f"scripted policy ({self.scripted_mode})"


def _tee(stream: IO[bytes], log: IO[bytes]) -> None:
    # Raw chunks, not lines: tqdm redraws its bar with \r.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := os.read(stream.fileno(), 4096):
        log.write(chunk)
        sys.stderr.write(decoder.decode(chunk))
        sys.stderr.flush()


def collect_with_progress(
    stack: Stack,
    agent: str,
    input_jsonl: Path,
    output_jsonl: Path,
    num_repeats: int,
    extra: list[str],
    timeout_s: float | None,
    log: Path,
) -> None:
    """Stack.collect, but with ng_collect_rollouts' stderr (its tqdm bar) teed to our stderr."""
    argv = stack.collect_argv(agent, input_jsonl, output_jsonl, num_repeats, extra)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, cwd=stack.root, stdout=out, stderr=subprocess.PIPE, start_new_session=True)
        tee = threading.Thread(target=_tee, args=(proc.stderr, out), daemon=True)
        tee.start()
        try:
            proc.wait(timeout=timeout_s)
        except BaseException:  # timeout or Ctrl-C: the child runs in its own session, stop all of it
            stop_session(proc)
            raise
        finally:
            tee.join(timeout=5)
            proc.stderr.close()
    sys.stderr.write("\n")
    if proc.returncode != 0 and not only_failures_collected(output_jsonl):
        raise StackError(f"ng_collect_rollouts failed ({proc.returncode}); see {log}")


def run(
    env: str,
    dataset: Path,
    out_dir: Path,
    policy: Policy,
    repeats: int,
    limit: int | None = None,
    sandbox_root: str | None = None,
    parallel: int | None = None,
    timeout_s: float | None = None,
) -> Collected:
    """Collect `repeats` rollouts per row into out_dir/rollouts.jsonl (+ _failures.jsonl)."""
    environment = find_environment(env)
    overrides = [f"+{environment.server_key}.sandbox.root_dir={sandbox_root}"] if sandbox_root else []
    if policy.grace_s is not None:
        overrides.append(
            f"+{environment.agent}.responses_api_agents.prorl_agent.policy_health.grace_s={policy.grace_s}"
        )
    if policy.local_model:
        overrides += cpu_rollout_limits(environment.agent)
        policy_data, policy_args = None, []
    elif policy.base_url:
        overrides += [f"+policy_base_url={policy.base_url}", f"+policy_model_name={policy.model}"]
        policy_data, policy_args = None, []
    else:
        # The scripted policy takes its mode from a "scripted-<mode>" model name before --mode.
        overrides.append(f"+policy_model_name=scripted-{policy.scripted_mode}")
        policy_data, policy_args = [str(dataset)], ["--mode", policy.scripted_mode]
        policy_args += ["--latency-ms", str(policy.scripted_latency_ms)] if policy.scripted_latency_ms else []
    if not policy.token_ids:
        overrides.append(f"+{POLICY_MODEL}.return_token_id_information=false")
    extra = [f"+limit={limit}"] if limit else []
    extra += [f"+num_samples_in_parallel={parallel}"] if parallel else []
    output = out_dir / "rollouts.jsonl"
    logs = out_dir / "logs"
    print(f"[eval] starting {policy.label} and ng_run ({env}); logs in {logs}", file=sys.stderr, flush=True)
    with Stack(
        environment.config_paths(),
        overrides=overrides,
        policy_data=policy_data,
        policy_args=policy_args,
        local_model=policy.local_model,
        log_dir=logs,
    ) as stack:
        print(
            f"[eval] collecting {repeats} rollout(s) per row of {dataset.name} with ng_collect_rollouts",
            file=sys.stderr,
            flush=True,
        )
        agent = find_agent(f"http://{stack.head_host}:{stack.head_port}", environment.agent)
        if agent:
            print(f"[eval] live dashboard: {agent}/dashboard", file=sys.stderr, flush=True)
        with PolicyWatch(agent, "[eval]") as watch:
            collect_with_progress(
                stack, environment.agent, dataset, output, repeats, extra, timeout_s, logs / "collect.log"
            )
        if agent:  # the same charts in the report, as they stood when collection ended
            save_snapshot(agent, out_dir / DASHBOARD_HTML)
    return Collected(output, watch.down)
