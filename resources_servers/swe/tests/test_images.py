# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SWE-bench-layout images end to end on the container backend: real ng_run + ng_collect_rollouts.

Images built here (data/images.py, no registry): the task's repository at /testbed without its failing
tests, a `testbed` environment activated as SWE-bench's images are (`source /opt/miniconda3/bin/activate`,
`conda activate testbed`), rows in SWE-bench's schema named by SWE-bench's and SWE-Gym's conventions,
with the failing tests in `test_patch` (applied by the grader, never in the agent's repository) and no
`environment` or `test_runner`: the grader takes both from the row as SWE-bench's harness does. The
scripted policy applies the gold patch (1.0) or a patch that changes nothing the tests see (0.0).

Skipped, with the reason, where no engine can be run (tests/support/container_engine.py). `make test` builds
the toolz image (SWE-Gym's naming); `make test-swe-full` adds a Django one (SWE-bench's naming, Django's runner).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

from prorl_gym.environments import environment
from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.container.engine import Engine
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.instances import Backends
from prorl_gym.stack import Stack, collected_records
from resources_servers.swe.data.images import image_name, task_image
from resources_servers.swe.prompts import build_row
from resources_servers.swe.repos import DEFAULT_ACTIVATE, stage_repo, task_spec
from resources_servers.swe.runners import django_dotted, runner_for
from tests.support.container_engine import engine_or_skip

SWE = environment("swe")
TASKS = [json.loads(line) for line in (SWE.folder / "data" / "tasks.jsonl").read_text().splitlines()]
# (instance id of the local task, naming convention, number in the new instance id)
DJANGO = next(
    t["instance_id"] for t in TASKS if t["repo"] == "django/django" and all("(" in i for i in t["FAIL_TO_PASS"])
)
IMAGES = [("toolz__1.2.0.diff.remove_assign_7dc2c3", "swe-gym", 90001)]
# Django's image (~6,000 files at /testbed, each handed to the sandbox uid at start): `make test-swe-full`.
if os.environ.get("PRORL_SWE_FULL") == "1":
    IMAGES.append((DJANGO, "swebench", 90002))
START_S = 300
NOOP = "diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n@@ -0,0 +1 @@\n+no fix\n"


def failing_defs(task: dict) -> dict[str, set[tuple[tuple[str, ...], str]]]:
    """The failing tests' defs: file -> (classes, name)."""
    runner = runner_for(task.get("test_runner"))
    found: dict[str, set] = {}
    for test in task["FAIL_TO_PASS"]:
        test_id = runner.parse_id(django_dotted(test) or test)
        found.setdefault(test_id.file, set()).add((test_id.owners, test_id.name))
    return found


async def build_rows(socket_path: str) -> list[dict]:
    engine = Engine(socket_path)
    try:
        rows = []
        for instance_id, convention, number in IMAGES:
            task = next(t for t in TASKS if t["instance_id"] == instance_id)
            rows.append(build_row(await task_image(engine, task, convention, failing_defs(task), number), "/testbed"))
        return rows
    finally:
        await engine.close()


@pytest.fixture(scope="module")
def images():
    socket_path, _ = engine_or_skip()
    return socket_path, asyncio.run(build_rows(socket_path))


def test_image_names_are_swebench_and_swe_gym_ones():
    # as the published images are named (swebench/sweb.eval.x86_64.*, xingyaoww/sweb.eval.x86_64.*)
    assert (
        image_name("django__django-11099", "swebench") == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    )
    assert image_name("sympy__sympy-20590", "swe-gym") == "xingyaoww/sweb.eval.x86_64.sympy_s_sympy-20590:latest"
    with pytest.raises(ValueError, match="swebench or swe-gym"):
        image_name("a__b-1", "r2e")


def test_rows_follow_swebench_and_swe_gym_conventions(images):
    _, rows = images
    for row, (_, convention, number) in zip(rows, IMAGES):
        owner, name = row["repo"].split("/")
        assert row["instance_id"] == f"{owner}__{name}-{number}"
        assert row["image_name"] == image_name(row["instance_id"], convention)
        assert "environment" not in row and "test_runner" not in row
        assert row["test_patch"].startswith("diff --git a/") and row["FAIL_TO_PASS"]


async def test_the_agent_never_sees_the_test_patch_and_the_testbed_is_activated(images, sandbox_root):
    socket_path, rows = images
    # The container's spawner hands /testbed to the sandbox uid before it says it is ready: a copy of every file
    # of the image's repository (Django's: ~6,000) on the engine's disk.
    spec = SandboxSpec(backend=ContainerOptions(socket=socket_path), root_dir=sandbox_root, start_timeout_s=START_S)
    backends = Backends()
    try:
        for row in rows:
            async with await create_sandbox(task_spec(spec, row, None), backends=backends) as sb:
                assert await stage_repo(sb, row) == "/testbed"
                removed = [line[1:] for line in row["test_patch"].splitlines() if line[1:].lstrip().startswith("def ")]
                assert removed
                grep = await sb.bash(
                    f"cd /testbed && {{ git grep -q -F {shlex.quote(removed[0].strip())} && echo FOUND; }}; "
                    "git log --oneline | wc -l"
                )
                assert grep.output.split() == ["1"], grep.output  # one commit, and no failing test in it
                which = await sb.bash(
                    f"{DEFAULT_ACTIVATE} && echo $CONDA_DEFAULT_ENV $(command -v python) && "
                    "source /opt/miniconda3/bin/activate && conda activate testbed && python -c 'import sys; print(sys.prefix)'"
                )
                assert which.output.split() == [
                    "testbed",
                    "/opt/miniconda3/envs/testbed/bin/python",
                    "/opt/miniconda3/envs/testbed",
                ], which.output
    finally:
        await backends.close()


def test_images_graded_through_ng_run_gold_one_noop_zero(images, tmp_path):
    socket_path, rows = images
    noop = [row | {"patch": NOOP, "problem_statement": row["problem_statement"] + "\n(no-op)"} for row in rows]
    noop = [build_row(row, "/testbed") for row in noop]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows + noop))
    root = Path(tempfile.mkdtemp(prefix="prorl-swe-img-", dir="/tmp"))
    root.chmod(0o711)
    overrides = [
        f"+{SWE.server_key}.sandbox.root_dir={root}",
        f"++{SWE.server_key}.sandbox.backend={{kind:container,socket:'{socket_path}'}}",
        f"++{SWE.server_key}.sandbox.start_timeout_s={START_S}",
    ]
    try:
        with Stack(
            SWE.config_paths(), overrides=overrides, policy_data=[str(data)], log_dir=tmp_path / "logs"
        ) as stack:
            output = tmp_path / "out.jsonl"
            stack.collect(SWE.agent, data, output)
            records = {
                r["instance_id"] + ("/noop" if "(no-op)" in r["problem_statement"] else ""): r
                for r in collected_records(output)
            }
    finally:
        left = [p.name for p in root.iterdir() if not p.name.startswith(".")]
        shutil.rmtree(root, ignore_errors=True)
    assert not left, f"sandbox directories left: {left}"
    for row in rows:
        gold, nothing = records[row["instance_id"]], records[row["instance_id"] + "/noop"]
        assert gold["reward"] == 1.0, json.dumps(
            gold.get("failure") or {k: gold.get(k) for k in ("reason", "log_tail", "tamper_evidence")}
        )[:3000]
        assert nothing["reward"] == 0.0 and nothing["patch_applied"], {
            k: nothing.get(k) for k in ("reason", "failure")
        }
        assert nothing["fail_to_pass_passed"] == 0 and nothing["pass_to_pass_passed"] == nothing["pass_to_pass_total"]
