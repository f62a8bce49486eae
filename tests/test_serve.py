# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""`python -m prorl_gym.serve`'s command line: what it asks of ng_run (it runs end to end under
Slurm in tests/deploy/test_slurm_launcher.py)."""

from __future__ import annotations

import pytest

from prorl_gym.environments import environment
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


@pytest.mark.parametrize(
    "argv",
    [
        ["--envs", "math"],  # no policy
        ["--envs", "math", "--scripted-policy", "--policy-base-url", "http://g/v1", "--policy-model", "m"],
        ["--envs", "nope", "--scripted-policy"],
        ["--envs", "math,code", "--scripted-policy", "--collect", "rows.jsonl", "--output", "o.jsonl"],
        ["--envs", "math", "--policy-base-url", "http://g/v1"],  # no model
    ],
)
def test_a_bad_command_line_is_refused(argv):
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
