# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SWE-bench-layout images of our tasks, built here on a container engine (no registry), with their rows.

    python resources_servers/swe/data/images.py <instance_id> [--convention swebench|swe-gym] [--socket PATH]

An image is the container backend's base image plus what a SWE-bench instance image has:
- `/testbed`: the repository at its base commit, root's, a git repository whose HEAD is base_commit;
- `/opt/miniconda3/bin/activate` and `conda activate`: `source /opt/miniconda3/bin/activate` then
  `conda activate testbed` (what SWE-bench's eval scripts run; `activate testbed` at once works too)
  put the `testbed` environment first on PATH;
- `/opt/miniconda3/envs/testbed`: a virtual environment of the image's Python with the task's test
  requirements (and the runner, for pytest tasks) and the repository installed in development mode
  (a .pth naming /testbed, as `pip install -e .` leaves it).
No conda: the layout, not the package manager, is what graders and agents meet.

Its row follows SWE-bench's schema, from one of our local tasks: the failing tests are taken out of
the image's repository and come back as `test_patch` (applied by the grader, never seen by the agent:
a SWE-bench instance's tests arrive with its pull request); `instance_id` is `<owner>__<name>-<number>`
and `image_name` is SWE-bench's (`swebench/sweb.eval.x86_64.<id, __ as _1776_>:latest`) or SWE-Gym's
(`xingyaoww/sweb.eval.x86_64.<id, __ as _s_>:latest`); `version` is the major.minor SWE-bench's specs
know; no `environment` and no `test_runner`: the grader finds both from the row as SWE-bench's harness
does (official.py). The image is tagged with that name in the engine's own store.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import difflib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from prorl_gym.sandbox import SandboxSpec
from prorl_gym.sandbox.backends.container.engine import Engine, default_socket
from prorl_gym.sandbox.backends.container.image import ensure_base_image
from resources_servers.swe.repos import GIT_OPTS, RepoCache, environment_of, run_command

DATA = Path(__file__).resolve().parent
CONDA = "opt/miniconda3"
CONDA_SH = """# conda as SWE-bench's images are used: `conda activate <env>`, `conda deactivate`
_prorl_conda_activate() {
    _prorl_prefix=/opt/miniconda3
    [ "${1:-base}" = base ] || _prorl_prefix=/opt/miniconda3/envs/$1
    [ -d "$_prorl_prefix/bin" ] || { echo "conda: no environment ${1:-base}" >&2; return 1; }
    [ -n "${CONDA_PREFIX:-}" ] && PATH=$(printf %s "$PATH" | sed "s|$CONDA_PREFIX/bin:||")
    export CONDA_PREFIX="$_prorl_prefix" CONDA_DEFAULT_ENV="${1:-base}" CONDA_SHLVL=1
    export PATH="$_prorl_prefix/bin:$PATH"
}
conda() {
    case "$1" in
        activate) _prorl_conda_activate "${2:-base}" ;;
        deactivate) [ -n "${CONDA_PREFIX:-}" ] && PATH=$(printf %s "$PATH" | sed "s|$CONDA_PREFIX/bin:||"); unset CONDA_PREFIX CONDA_DEFAULT_ENV ;;
        *) echo "conda: only activate and deactivate here" >&2; return 1 ;;
    esac
}
"""
ACTIVATE = """# source /opt/miniconda3/bin/activate [env]
. /opt/miniconda3/etc/profile.d/conda.sh
_prorl_conda_activate "${1:-base}"
"""
SWEBENCH_IMAGE = "swebench/sweb.eval.x86_64.{key}:latest"  # swebench 5.x task.checks.expected_image
SWE_GYM_IMAGE = "xingyaoww/sweb.eval.x86_64.{key}:latest"  # OpenHands' SWE-Gym images


def image_name(instance_id: str, convention: str) -> str:
    if convention == "swebench":
        return SWEBENCH_IMAGE.format(key=instance_id.lower().replace("__", "_1776_"))
    if convention == "swe-gym":
        return SWE_GYM_IMAGE.format(key=instance_id.replace("__", "_s_"))
    raise ValueError(f"unknown image naming convention {convention!r}: swebench or swe-gym")


def test_defs(source: str, names: set[tuple[tuple[str, ...], str]]) -> list[tuple[int, int]]:
    """(first line, last line) of each def (decorators included) named by (enclosing classes, name)."""
    spans = []

    def walk(body: list[ast.stmt], owners: tuple[str, ...]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, (*owners, node.name))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (owners, node.name) in names:
                spans.append((min([d.lineno for d in node.decorator_list] + [node.lineno]), node.end_lineno))

    walk(ast.parse(source).body, ())
    return spans


def without_tests(source: str, names: set[tuple[tuple[str, ...], str]]) -> str:
    """The module without those defs (a class left empty gets `pass`)."""
    lines = source.splitlines(keepends=True)
    for first, last in sorted(test_defs(source, names), reverse=True):
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        del lines[first - 1 : last]
        try:
            ast.parse("".join(lines))
        except SyntaxError:
            lines.insert(first - 1, f"{indent}pass\n")
    return "".join(lines)


def split_off_tests(repo: Path, locations: dict[str, set[tuple[tuple[str, ...], str]]]) -> str:
    """Take the tests out of `repo`'s files (file -> (classes, name)); the diff that puts them back."""
    patch = []
    for path, names in sorted(locations.items()):
        original = (repo / path).read_text()
        stripped = without_tests(original, names)
        (repo / path).write_text(stripped)
        lines = difflib.unified_diff(stripped.splitlines(True), original.splitlines(True), f"a/{path}", f"b/{path}")
        patch.append(f"diff --git a/{path} b/{path}\n" + "".join(lines))
    return "".join(patch)


async def image_repo(
    task: dict, work: Path, locations: dict[str, set[tuple[tuple[str, ...], str]]]
) -> tuple[Path, str]:
    """The task's repository as the image holds it (its failing tests out, one commit) and its test_patch."""
    prepared = await RepoCache().prepare(task)
    repo = work / "testbed"
    await asyncio.to_thread(shutil.copytree, prepared, repo, symlinks=True)
    await asyncio.to_thread(shutil.rmtree, repo / ".git")
    test_patch = await asyncio.to_thread(split_off_tests, repo, locations)
    await run_command(["git", *GIT_OPTS, "init", "-q"], repo)
    await run_command(["git", *GIT_OPTS, "add", "-A"], repo)
    await run_command(["git", *GIT_OPTS, "commit", "-q", "-m", f"{task['instance_id']} (base)"], repo)
    return repo, test_patch


def testbed_env(requirements: list[str], target: Path, python: str) -> None:
    """A virtual environment of the image's Python (the sandbox's, the same Debian build) at target, with
    `requirements` installed and /testbed on its path."""
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site = target / "lib" / f"python{'.'.join(version.split('.')[:2])}" / "site-packages"
    site.mkdir(parents=True)
    (target / "bin").mkdir()
    (target / "pyvenv.cfg").write_text(f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {version}\n")
    for name in ("python", "python3"):
        os.symlink(f"/usr/bin/python{'.'.join(version.split('.')[:2])}", target / "bin" / name)
    if requirements:
        pip = [python, "-m", "pip", "install", "-q", "--no-input", "--disable-pip-version-check", "--no-compile"]
        subprocess.run([*pip, "--target", str(site), *requirements], check=True, capture_output=True)
    (site / "testbed.pth").write_text("/testbed\n")  # `pip install -e .` of the repository


def layout_tar(repo: Path, env: Path) -> bytes:
    """/testbed and /opt/miniconda3 (activate, conda.sh, envs/testbed), root's."""
    buffer = io.BytesIO()

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(repo, arcname="testbed", filter=as_root)
        tar.add(env, arcname=f"{CONDA}/envs/testbed", filter=as_root)
        for name, text, mode in (("bin/activate", ACTIVATE, 0o755), ("etc/profile.d/conda.sh", CONDA_SH, 0o644)):
            info = as_root(tarfile.TarInfo(f"{CONDA}/{name}"))
            info.size, info.mode = len(text.encode()), mode
            tar.addfile(info, io.BytesIO(text.encode()))
    return buffer.getvalue()


async def build_image(engine: Engine, name: str, repo: Path, requirements: list[str]) -> str:
    """`name` in the engine's store: the base image plus the layout. Rebuilt only when its inputs changed
    (their hash is the image's commit comment)."""
    base = await ensure_base_image(engine)
    digest = hashlib.sha256(base.encode() + json.dumps(requirements).encode() + await _tree_key(repo)).hexdigest()
    if await engine.has_image(name) and (await engine.call("GET", f"/images/{name}/json")).get("Comment") == digest:
        return name
    with tempfile.TemporaryDirectory(prefix="prorl-swe-image-") as tmp:
        env = Path(tmp) / "testbed"
        await asyncio.to_thread(testbed_env, requirements, env, SandboxSpec().kernel_python)
        tar = await asyncio.to_thread(layout_tar, repo, env)
    builder = f"prorl-swe-image-{digest[:16]}"
    await engine.create(builder, {"Image": base, "Cmd": ["true"], "HostConfig": {"NetworkMode": "none"}})
    try:
        await engine.call("PUT", f"/containers/{builder}/archive", params={"path": "/"}, data=tar)
        repository, _, tag = name.rpartition(":")
        params = {"container": builder, "repo": repository, "tag": tag, "comment": digest}
        await engine.call("POST", "/commit", params=params, body={})
    finally:
        await engine.remove(builder)
    return name


async def _tree_key(repo: Path) -> bytes:
    return (await run_command(["git", "rev-parse", "HEAD"], repo)).encode()  # the tree, fixed identity and date


def swebench_version(version: str) -> str:
    return ".".join(version.split(".")[:2])


async def task_image(
    engine: Engine, task: dict, convention: str, locations: dict[str, set[tuple[tuple[str, ...], str]]], number: int
) -> dict:
    """A SWE-bench-style row of `task` and its image, built (see the module docstring). `locations`: the
    failing tests' defs (file -> (classes, name)), taken out into test_patch."""
    owner, name = task["repo"].split("/")
    instance_id = f"{owner}__{name}-{number}"
    with tempfile.TemporaryDirectory(prefix="prorl-swe-repo-") as tmp:
        repo, test_patch = await image_repo(task, Path(tmp), locations)
        base_commit = (await run_command(["git", "rev-parse", "HEAD"], repo)).strip()
        env = environment_of(task)
        requirements = list(env.get("test_requires", []))
        if task.get("test_runner", "pytest") == "pytest":
            requirements.append(f"pytest=={_installed('pytest')}")
        image = await build_image(engine, image_name(instance_id, convention), repo, requirements)
    keep = ("repo", "problem_statement", "hints_text", "FAIL_TO_PASS", "PASS_TO_PASS", "patch", "license")
    return {key: task[key] for key in keep if key in task} | {
        "instance_id": instance_id,
        "version": swebench_version(task["version"]),
        "base_commit": base_commit,
        "environment_setup_commit": base_commit,
        "test_patch": test_patch,
        "image_name": image,
        "created_at": "2000-01-01T00:00:00Z",
    }


def _installed(distribution: str) -> str:
    python = SandboxSpec().kernel_python
    code = f"import importlib.metadata as m; print(m.version({distribution!r}))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


async def _main(args: argparse.Namespace) -> None:
    from resources_servers.swe.prompts import build_row
    from resources_servers.swe.runners import runner_for

    rows = [json.loads(line) for line in (DATA / "tasks.jsonl").read_text().splitlines()]
    task = next(r for r in rows if r["instance_id"] == args.instance_id)
    runner = runner_for(task.get("test_runner"))
    locations: dict[str, set] = {}
    for test in task["FAIL_TO_PASS"]:
        found = runner.parse_id(test)
        if found is None:
            raise SystemExit(f"{test}: not a test function this script can take out")
        locations.setdefault(found.file, set()).add((found.owners, found.name))
    engine = Engine(args.socket or default_socket() or sys.exit("no container engine socket: --socket"))
    try:
        number = int(hashlib.sha256(task["instance_id"].encode()).hexdigest()[:5], 16)
        row = await task_image(engine, task, args.convention, locations, number)
    finally:
        await engine.close()
    print(json.dumps(build_row(row, repo_path="/testbed")))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("instance_id", help="a task of data/tasks.jsonl")
    parser.add_argument("--convention", default="swebench", choices=("swebench", "swe-gym"))
    parser.add_argument("--socket", help="the Engine API socket (default: $DOCKER_HOST, podman's, docker's)")
    asyncio.run(_main(parser.parse_args()))
