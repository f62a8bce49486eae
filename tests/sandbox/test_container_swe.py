# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A SWE task graded end to end in a container image built here from the task's repository (a
SWE-bench-style row: the repository at /testbed of its image): INIT stages it in the agent's
container, the agent applies the gold patch, EVAL grades the diff in a fresh container: 1.0; an
unfixed patch 0.0. The image is the base image with the prepared repository committed in (through
the Engine API), cached in the engine's store under a tag hashing its inputs.

Skipped, with the reason, where no engine can be run (tests/sandbox/container_engine.py)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.container.engine import Engine
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.registry import Backends
from prorl_gym.sandbox.spec import ResourceLimits
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.repos import prepare_repo, stage_repo, task_spec
from tests.sandbox.container_engine import engine_or_skip

EXAMPLE = Path(__file__).resolve().parents[2] / "resources_servers/swe/data/example.jsonl"
SWE_IMAGE = "localhost/prorl-gym-swe-test"


def repo_tar(repo: Path) -> bytes:
    """The repository as /testbed, owned by root (as in SWE-bench images)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:

        def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            return info

        tar.add(repo, arcname="testbed", filter=as_root)
    return buffer.getvalue()


async def swe_image(engine: Engine, base: str, repo: Path) -> str:
    """base + the repository at /testbed, committed as an image (built once per repository and base)."""
    tar = repo_tar(repo)
    tag = hashlib.sha256(base.encode() + tar).hexdigest()[:16]
    image = f"{SWE_IMAGE}:{tag}"
    if await engine.has_image(image):
        return image
    name = f"prorl-swe-build-{tag}"
    await engine.create(name, {"Image": base, "Cmd": ["true"], "HostConfig": {"NetworkMode": "none"}})
    try:
        await engine.call("PUT", f"/containers/{name}/archive", params={"path": "/"}, data=tar)
        await engine.call("POST", "/commit", params={"container": name, "repo": SWE_IMAGE, "tag": tag}, body={})
    finally:
        await engine.remove(name)
    if not await engine.has_image(image):  # Podman's compat commit may ignore `tag`
        await engine.call("POST", f"/images/{SWE_IMAGE}/tag", params={"repo": SWE_IMAGE, "tag": tag})
    return image


@pytest.fixture
def root():
    path = tempfile.mkdtemp(prefix="prorl-swe-ct-", dir="/tmp")
    Path(path).chmod(0o711)
    yield path
    left = [p.name for p in Path(path).iterdir() if p.name != ".leases"]
    assert not left, f"left under the sandbox root: {left}"


async def test_swe_task_graded_end_to_end_in_a_locally_built_image(root):
    socket_path, base_image = engine_or_skip()
    row = json.loads(EXAMPLE.read_text().splitlines()[0])
    repo = await prepare_repo(row)
    engine = Engine(socket_path)
    try:
        image = await swe_image(engine, base_image, repo)
    finally:
        await engine.close()
    row = row | {"environment": {"image": image, "repo_path": "/testbed", "pythonpath": "."}}
    base = SandboxSpec(backend=ContainerOptions(socket=socket_path), root_dir=root, limits=ResourceLimits())
    backends = Backends()
    try:
        async with await create_sandbox(task_spec(base, row, None), backends=backends) as sb:  # INIT, RUN
            assert await stage_repo(sb, row) == "/testbed"
            await sb.write_file("/tmp/gold.patch", row["patch"])
            applied = await sb.bash("cd /testbed && git apply /tmp/gold.patch && git diff")
            assert applied.exit_code == 0 and applied.output.startswith("diff --git"), applied.output
            patch = applied.output
        graded = await evaluate_patch(row, patch, base, None, timeout_s=300, backends=backends)  # EVAL, fresh
        assert graded["reward"] == 1.0, json.dumps(graded)[:3000]
        new_file = "diff --git a/NOTES.txt b/NOTES.txt\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.txt\n@@ -0,0 +1 @@\n+no fix\n"
        unfixed = await evaluate_patch(row, new_file, base, None, timeout_s=300, backends=backends)
        assert unfixed["reward"] == 0.0 and unfixed["patch_applied"], unfixed
    finally:
        await backends.close()
