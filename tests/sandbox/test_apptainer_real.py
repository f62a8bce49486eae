# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Validate a site: the apptainer backend against a real Apptainer, on an HPC node.

    make validate-apptainer PRORL_APPTAINER_TEST_IMAGE=/scratch/$USER/sif/python_3.12.sif \
        [PRORL_APPTAINER_SWE_ROW=swe_row.jsonl]

Skipped where Apptainer is absent (this repository's CI). The test image needs bash and
python3; the sandbox venv is bound in for the kernel (see docs/hpc.md for a venv that does
not depend on the host's /usr). Each containment property the bubblewrap suite
(tests/security) checks is checked here for instances, from the host side where it can
be: the file system, the network, processes and signals, the environment, limits, and
that closing leaves nothing. PRORL_APPTAINER_SWE_ROW (a SWE-bench-style row with an image,
e.g. one of SWE-bench Verified's) adds a SWE rollout: INIT stages the image's repository,
the agent applies the gold patch, the verifier scores it 1.0, and an unfixed or tampering
patch 0.0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.apptainer.cli import instance_name
from prorl_gym.sandbox.backends.apptainer.options import ApptainerOptions, config_dir_of
from prorl_gym.sandbox.backends.local.processes import processes_naming
from prorl_gym.sandbox.spec import ResourceLimits

IMAGE = os.environ.get("PRORL_APPTAINER_TEST_IMAGE")
SWE_ROW = os.environ.get("PRORL_APPTAINER_SWE_ROW")
BINARY = os.environ.get("PRORL_APPTAINER_BINARY", "apptainer")
MiB = 1 << 20
pytestmark = pytest.mark.skipif(
    shutil.which(BINARY) is None or not IMAGE,
    reason="needs Apptainer on PATH and PRORL_APPTAINER_TEST_IMAGE=<sif or docker:// URI> (an HPC node)",
)
LIMITS = ResourceLimits(processes=128, memory_bytes=1024 * MiB, file_size_bytes=16 * MiB, cpu_time_s=60)


@pytest.fixture
def root():
    path = tempfile.mkdtemp(prefix="prorl-app-", dir="/tmp")  # node-local, short (socket paths)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def spec(root: str, **kw) -> SandboxSpec:
    fields = dict(
        backend=ApptainerOptions(binary=BINARY),
        image=IMAGE,
        root_dir=root,
        limits=LIMITS,
        command_timeout_s=30,
        python_timeout_s=60,
        start_timeout_s=300,
    )
    return SandboxSpec(**(fields | kw))


def listed(root: str) -> str:
    env = {**os.environ, "APPTAINER_CONFIGDIR": str(Path(root) / ".apptainer")}
    return subprocess.run([BINARY, "instance", "list"], capture_output=True, text=True, env=env).stdout


async def test_runtime_works_across_joins(root):
    async with await create_sandbox(spec(root)) as sb:
        await sb.bash("mkdir -p sub && cd sub && export X=41")
        result = await sb.bash('echo "$((X + 1)) $PWD $HOME"')
        assert result.output == "42 /workspace/sub /workspace\n" and result.exit_code == 0
        assert (await sb.bash("false")).exit_code == 1
        assert (await sb.python("import os; x = 6 * 7; print(x, os.getcwd())")).output == "42 /workspace\n"
        assert (await sb.python("print(x + 1)")).output == "43\n"
        await sb.write_file("notes/a.txt", "hello\n")
        assert (await sb.bash("cat /workspace/notes/a.txt")).output == "hello\n"
        assert await sb.read_file("notes/a.txt") == "hello\n"


async def test_file_system_is_the_image_and_the_workspace_only(root):
    canary = Path(__file__).resolve().parents[2] / "pyproject.toml"  # this repository, on the host
    async with await create_sandbox(spec(root)) as sb:
        private = sb.placement.private_dir
        probe = (
            f"test -e {canary} && echo SEES_REPO; test -e {private}/env && echo SEES_ENV_FILE; "
            f"ls /home 2>/dev/null | head -3; touch /etc/prorl-canary && echo WROTE_ETC; echo done"
        )
        out = (await sb.bash(probe)).output
        assert "SEES_REPO" not in out and "SEES_ENV_FILE" not in out and out.strip().endswith("done"), out
        assert not Path("/etc/prorl-canary").exists()  # an image write goes to the sandbox's overlay only
        big = await sb.bash("head -c 20000000 /dev/zero > /tmp/big; echo rc=$?")
        assert "rc=0" not in big.output  # the file-size limit
    other_sandboxes = [spec(root), spec(root)]
    a, b = [await create_sandbox(s) for s in other_sandboxes]
    try:
        await a.write_file("secret.txt", "a's\n")
        out = (await b.bash(f"cat {a.placement.private_dir}/workspace/secret.txt 2>&1; ls /workspace")).output
        assert "a's" not in out
    finally:
        await a.close()
        await b.close()


async def test_no_network_no_host_processes_no_host_environment(root, monkeypatch):
    monkeypatch.setenv("PRORL_HOST_SECRET", "s3cret")
    async with await create_sandbox(spec(root)) as sb:
        interfaces = await sb.bash("tail -n +3 /proc/net/dev | cut -d: -f1")
        assert interfaces.output.split() == ["lo"]
        assert "s3cret" not in (await sb.bash("env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'")).output
        pids = (await sb.bash("ls /proc | grep -E '^[0-9]+$' | wc -l")).output
        assert int(pids) < 30, "the sandbox sees the host's processes"
        me = os.getpid()
        out = (await sb.bash(f"kill -0 {me} 2>&1 && cat /proc/{me}/cmdline; echo end")).output
        assert "pytest" not in out
        assert (await sb.bash("id -u")).output.strip() != "0"  # never host root without fakeroot


async def test_limits_hold_inside(root):
    async with await create_sandbox(spec(root)) as sb:
        out = (await sb.bash("ulimit -t; ulimit -f; ulimit -v")).output.split()
        assert out == ["60", str(16 * 1024), str(1024 * 1024)]
        if sb.placement.limits.processes:  # set only where it counts per sandbox (see the backend)
            assert (await sb.bash("ulimit -u")).output.strip() == str(LIMITS.processes)


async def test_closing_leaves_no_instance_process_file_or_log(root):
    sb = await create_sandbox(spec(root))
    name = instance_name(sb.id)
    await sb.python("print(1)")
    assert name in listed(root)
    await sb.close()
    assert name not in listed(root)
    assert not processes_naming(name), "a process of the instance survived"
    assert not (Path(root) / sb.id).exists()
    config_dir = config_dir_of(sb.spec.backend, root)
    assert not list(config_dir.glob(f"instances/**/{name}*")), "instance state or logs left"


@pytest.mark.skipif(not SWE_ROW, reason="PRORL_APPTAINER_SWE_ROW=<jsonl with one SWE-bench-style image row>")
async def test_swe_image_rollout(root):
    from resources_servers.swe.evaluate import evaluate_patch
    from resources_servers.swe.repos import stage_repo, task_spec

    row = json.loads(Path(SWE_ROW).read_text().splitlines()[0])
    base = spec(root, image=None, limits=ResourceLimits())
    agent_spec = task_spec(base, row, None)
    async with await create_sandbox(agent_spec) as sb:  # INIT, then the agent's edits
        repo = await stage_repo(sb, row)
        await sb.write_file("/tmp/gold.patch", row["patch"])
        applied = await sb.bash(f"cd {repo} && git apply /tmp/gold.patch && git diff")
        assert applied.exit_code == 0, applied.output
        patch = applied.output
    result = await evaluate_patch(row, patch, base, None, timeout_s=1800)
    assert result["reward"] == 1.0, result
    new_file = "diff --git a/{0} b/{0}\nnew file mode 100644\n--- /dev/null\n+++ b/{0}\n@@ -0,0 +1 @@\n+{1}\n"
    unfixed = await evaluate_patch(row, new_file.format("NOTES.txt", "no fix"), base, None, timeout_s=1800)
    assert unfixed["reward"] == 0.0 and unfixed["patch_applied"], unfixed
    exits = new_file.format("conftest.py", "import os; os._exit(0)")  # the runner ends "green", nothing ran
    assert (await evaluate_patch(row, exits, base, None, timeout_s=1800))["reward"] == 0.0
