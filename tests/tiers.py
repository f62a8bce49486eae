# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The two tiers of the suite, in one place. `make test` runs every test not listed here (`-m "not slow"`:
each package's unit tests and one real ng_run stack end to end, a few minutes); `make test-slow` runs the ones
listed (`-m slow`: what starts many stacks, clusters or real projects' test suites); `.ci/run` runs both.
The root conftest marks a collected test `slow` when its node id starts with an entry below (a folder, a file,
or a file::test), so the two tiers are the whole collection by construction; an entry that matches no test is
an error when the whole suite is collected (a renamed file cannot move its tests into the fast tier unseen).
Each entry says why it is slow; the seconds are pytest's durations (2 shared cores, load 2-19, session 3-4)."""

from __future__ import annotations

SLOW: dict[str, str] = {
    # Stacks: one ng_run (+ Ray) each, 60-300 s to start and run at load.
    "tests/test_end_to_end.py": "every environment under one ng_run, 60+ collections (module set-up > 300 s at load 15)",
    "tests/test_job_api.py": "the job API on a math stack, 15 tests of batches, cancels and drains (set-up 77 s)",
    "tests/test_fault_tolerance.py": "kills each part of a running stack (resources-server kill 121 s)",
    "tests/test_policy_down.py": "a stack whose only policy endpoint dies (set-up 109 s)",
    "tests/test_nemo_gym_interop.py": "NeMo Gym's own servers and ours under one ng_run (set-up 99 s)",
    "tests/test_container_end_to_end.py": "a stack on the container backend (set-up 60 s)",
    "tests/test_stragglers.py": "a stack with a scripted straggler (set-up 110 s)",
    "tests/test_real_model.py": "Qwen2.5-Coder-0.5B on llama.cpp through a math stack (~2.5 min)",
    "tests/dashboard/test_browser.py": "headless Chromium on a running stack (set-up 61 s)",
    "tests/evaluation/test_end_to_end.py": "make eval's CLI starts its own stack",
    "tests/evaluation/test_signals.py": "make eval's CLI stopped by signals mid-run (its own stack)",
    "tests/evaluation/test_policy_down.py": "make eval's CLI with its own stack, its policy killed mid-run",
    "tests/evaluation/test_endpoints_without_token_ids.py::test_no_token_ids_evaluates_and_says_so": (
        "make eval's CLI with its own stack against an endpoint without token ids"
    ),
    "tests/evaluation/test_endpoints_without_token_ids.py::test_token_ids_from_such_an_endpoint_fail_once_typed_and_the_command_says_so": (
        "make eval's CLI with its own stack, every rollout failing typed"
    ),
    "tests/test_soak.py": "the fault-injection soak on a stack",
    "responses_api_agents/prorl_agent/tests/test_harness.py": "5 agent harnesses in sandboxes on one stack (~8 min)",
    "responses_api_models/balanced_vllm_model/tests/test_ng_run.py": "two endpoints under ng_run, one dies (235 s)",
    # Clusters.
    "tests/test_slurm_cluster.py": "a local 3-node Slurm cluster",
    "tests/deploy/test_slurm_launcher.py": "the Slurm launcher on a local Slurm cluster with Ray",
    "tests/sandbox/ray/test_hosts.py": "a multi-node Ray cluster",
    "tests/sandbox/ray/test_rollouts_on_ray.py": "rollouts on a multi-node Ray cluster whose nodes it kills",
    # Real projects' test suites inside sandboxes.
    "resources_servers/swe/tests/test_images.py": "SWE-bench-layout images graded through ng_run (320-420 s)",
    "resources_servers/swe/tests/test_project_runners.py": "Django's and SymPy's runners (35-120 s a test)",
    "resources_servers/swe/tests/test_tasks.py": "gold patches of every SWE project resolve (130-300 s)",
    "resources_servers/swe/tests/test_official.py": "real Django/SymPy logs read as SWE-bench reads them (140-200 s)",
    "resources_servers/swe/tests/test_tampering.py": "tampering attempts, each a real test run (18-110 s)",
    "resources_servers/swe/tests/test_screen.py": "every gold fix of the dataset through the screen (25-93 s)",
    "resources_servers/swe/tests/test_verify_tampering.py": "verify-time tampering, real test runs (8-23 s each)",
    "resources_servers/swe/tests/test_test_env.py": "a task graded with its prepared test environment (13 s+)",
    # Real servers under load.
    "responses_api_models/balanced_vllm_model/tests/test_integration.py": "endpoints killed, hung, added (22-50 s each)",
    "responses_api_models/balanced_vllm_model/tests/test_nemo_gym_capture.py": "NeMo Gym's token capture (22-47 s)",
    "responses_api_models/balanced_vllm_model/tests/test_llamacpp.py": "a real llama.cpp server",
    # The heaviest of the former fast tier (durations of the whole suite on 0.7, load 3-10, session 4), moved
    # so that `make test` stays near 10 minutes on 2 idle cores (it took 13.2 min of pytest with them).
    "tests/test_nemo_gym_capture.py": "a math stack under ng_run with NeMo Gym's token capture (set-up 96 s)",
    "resources_servers/code/tests/test_humaneval.py::test_every_canonical_solution_scores_one_and_a_stub_scores_zero": (
        "every HumanEval canonical solution and a stub, run (49 s)"
    ),
    "tests/test_stack.py::test_a_stack_hands_ng_run_a_lean_ray_that_goes_with_it": "a real Ray head (16 s)",
    "tests/test_stack.py::test_stacks_in_turn_join_one_lean_ray_that_outlives_them": "a real Ray head (24 s)",
    "tests/sandbox/test_container.py": "the container backend (podman) over the local backend's cases (38 s)",
    "tests/sandbox/test_container_swe.py": "a SWE task graded in a locally built image (7 s + build)",
    "tests/security/test_container.py": "the container backend's containment cases (43 s)",
    "tests/sandbox/test_apptainer.py": "the Apptainer backend against the fake apptainer (39 s)",
}


def in_slow_tier(nodeid: str, entry: str) -> bool:
    """Whether a test's node id falls under a SLOW entry (a folder, a file, or a file::test)."""
    return nodeid == entry or nodeid.startswith((entry.rstrip("/") + "/", entry + "::", entry + "["))
