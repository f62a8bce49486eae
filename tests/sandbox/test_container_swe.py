# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A SWE task graded end to end in a container image built here from the task's repository (a
SWE-bench-style row: the repository at /testbed of its image): INIT stages it in the agent's
container, the agent applies the gold patch, EVAL grades the diff in a fresh container: 1.0; an
unfixed patch 0.0. The image is the base image with the prepared repository committed in (through
the Engine API), cached in the engine's store under a tag hashing its inputs.

Skipped, with the reason, where no engine can be run (tests/support/container_engine.py)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.backends.container.engine import Engine
from prorl_gym.sandbox.backends.container.options import ContainerOptions
from prorl_gym.sandbox.backends.instances import Backends
from prorl_gym.sandbox.spec import ResourceLimits
from prorl_gym.testing import transcript
from resources_servers.swe.app import SweResourcesServer
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.prompts import build_row
from resources_servers.swe.repos import prepare_repo, stage_repo, task_spec
from tests.support.container_engine import engine_or_skip

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


def future_repo(path: Path) -> tuple[str, str]:
    """A repository whose object store holds the fix in a later commit (tagged, branched, stashed, noted,
    in ORIG_HEAD), HEAD reset to the buggy base: as image repositories have been seen to be. (base, fix blob)."""
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}
    script = """set -e
    git init -q . && printf 'def add(a, b):\\n    return a - b\\n' > calc.py
    printf 'from calc import add\\n\\n\\ndef test_add():\\n    assert add(2, 3) == 5\\n' > test_calc.py
    git add -A && git commit -q -m base && base=$(git rev-parse HEAD)
    sed -i 's/a - b/a + b/' calc.py && git commit -q -am fix && fix=$(git rev-parse HEAD)
    git tag v2 && git branch later && git notes add -m fixed && echo s > x && git add x && git stash -q
    git reset -q --hard $base && git update-ref ORIG_HEAD $fix && chmod -R a+rX . && echo "$base $(git rev-parse $fix:calc.py)"
    """
    run = subprocess.run(["bash", "-c", script], cwd=path, env=os.environ | env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    base, blob = run.stdout.split()
    return base, blob


def test_an_image_repository_shows_the_agent_nothing_after_its_base(root, serve):
    """Issue 37, class H, through /verify: the agent looks for the fix in the image repository's history
    (every object of the store, unreachable ones, tags, stash, notes, ORIG_HEAD) and finds nothing past the
    base; what it submits is graded 0."""
    socket_path, base_image = engine_or_skip()
    repo = Path(tempfile.mkdtemp(prefix="prorl-future-", dir="/tmp"))
    repo.chmod(0o755)
    try:
        base, blob = future_repo(repo)

        async def build() -> str:
            engine = Engine(socket_path)
            try:
                return await swe_image(engine, base_image, repo)
            finally:
                await engine.close()

        image = asyncio.run(build())
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    row = build_row(
        {
            "instance_id": "calc-image",
            "base_commit": base,
            "problem_statement": "add(2, 3) is -1.",
            "FAIL_TO_PASS": ["test_calc.py::test_add"],
            "environment": {"image": image, "repo_path": "/testbed", "pythonpath": "."},
        }
    )
    client = serve(
        SweResourcesServer,
        "swe",
        domain="coding",
        sandbox={"backend": {"kind": "container", "socket": socket_path}, "root_dir": root},
    )
    seeded = client.post("/seed_session", json=row)
    assert seeded.status_code == 200, seeded.text
    look = (
        f"cd /testbed; git cat-file -e {blob} 2>/dev/null && echo FOUND_FIX; git log --all --oneline | wc -l; "
        "git fsck --unreachable --no-reflogs 2>/dev/null | wc -l; git stash list; git tag; git notes list; "
        "ls .git | grep _HEAD; for o in $(git cat-file --batch-all-objects --batch-check='%(objectname)'); do "
        "git cat-file -p $o 2>/dev/null | grep -q 'a + b' && echo FOUND_IN_STORE; done; "
        "git checkout -q later -- . 2>/dev/null; git checkout -q v2 -- . 2>/dev/null; true"
    )
    seen = client.post("/bash", json={"command": look}).json()["content"]
    assert "FOUND" not in seen and seen.split()[:2] == ["1", "0"], seen
    result = client.post("/verify", json=row | {"response": transcript("done", [("submit", "{}")])}).json()
    assert result["reward"] == 0.0 and result["failure"] is None and result["reason"] == "empty patch", result
