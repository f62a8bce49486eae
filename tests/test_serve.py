# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`python -m prorl_gym.serve`'s command line: what it asks of ng_run, and its start check (it
runs end to end under Slurm in tests/deploy/test_slurm_launcher.py; a cluster without sandbox
hosts is refused in tests/sandbox/ray/test_rollouts_on_ray.py)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from prorl_gym.environments import environment
from prorl_gym.paths import REPO_ROOT
from prorl_gym.serve import overrides_for, parse_args


def test_every_chosen_environment_gets_its_sandboxes_on_ray_hosts():
    args = parse_args(
        ["--envs", "math,swe", "--ray-address", "10.0.0.1:6379", "--inner-backend", "apptainer"]
        + ["--sandbox-root", "/tmp/p", "--host", "10.0.0.1", "--policy-base-url", "http://g:8000/v1"]
        + ["--policy-model", "m", "--", "+x=1"]
    )
    overrides = overrides_for(args)
    for name in ("math", "swe"):
        key = environment(name).server_key
        assert f"+{key}.sandbox.backend.kind=ray" in overrides
        assert f"+{key}.sandbox.backend.inner.kind=apptainer" in overrides
        assert f"+{key}.sandbox.root_dir=/tmp/p" in overrides
    assert not any(environment("code").server_key in o for o in overrides)
    assert overrides[:2] == ["+ray_head_node_address=10.0.0.1:6379", "+default_host=10.0.0.1"]
    assert "+policy_base_url=http://g:8000/v1" in overrides and overrides[-1] == "+x=1"


def test_without_a_ray_cluster_the_sandboxes_run_on_this_machine(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    args = parse_args(["--envs", "math,code", "--scripted-policy"])
    assert args.ray_address is None
    assert not any("ray" in override for override in overrides_for(args))
    args = parse_args(["--envs", "math", "--scripted-policy", "--inner-backend", "apptainer"])
    assert overrides_for(args) == [f"+{environment('math').server_key}.sandbox.backend.kind=apptainer"]


def test_ray_address_comes_from_the_environment_too(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    args = parse_args(["--envs", "math", "--scripted-policy"])
    assert overrides_for(args)[0] == "+ray_head_node_address=10.0.0.1:6379"


def serve(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "prorl_gym.serve", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        env=env,
    )


def test_a_ray_head_that_does_not_answer_is_refused_at_once_saying_what_to_do():
    with socket.socket() as unused:
        unused.bind(("127.0.0.2", 0))
        address = f"127.0.0.2:{unused.getsockname()[1]}"
    run = serve("--envs", "math", "--scripted-policy", "--ray-address", address)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: no Ray head answers at {address}") and "leave out --ray-address" in last
    assert "Traceback" not in run.stderr and "up:" not in run.stderr


def test_help_says_the_whole_description_and_when_a_cluster_is_needed():
    out = serve("--help").stdout
    assert "dataset with ng_collect_rollouts and stop." in out  # the first paragraph, not cut off
    assert "on this machine" in out and "prorl_sandbox_host" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--envs", "math"],  # no policy
        ["--envs", "math", "--scripted-policy", "--wait-hosts", "2"],  # hosts without a cluster
        ["--envs", "math", "--scripted-policy", "--policy-base-url", "http://g/v1", "--policy-model", "m"],
        ["--envs", "nope", "--scripted-policy"],
        ["--envs", "math,code", "--scripted-policy", "--collect", "rows.jsonl", "--output", "o.jsonl"],
        ["--envs", "math", "--policy-base-url", "http://g/v1"],  # no model
    ],
)
def test_a_bad_command_line_is_refused(argv, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
