# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Build SWE tasks offline from real PyPI projects by injecting realistic bugs (SWE-smith style).

    python resources_servers/swe/data/prepare.py [--per-project 12] [--seed 0] [--workers 2] [--out DIR]

For each project (a pure-Python sdist whose own pytest suite passes with nothing but
pytest): download the sdist (sha256-pinned, cached), run its suite twice in our sandbox
(the sandbox's Python and the evaluator's pytest flags; tests passing both times are
"stable"), then try small mutations of function bodies (flipped comparison, and/or swap,
dropped `not`, off-by-one constant, +/- swap, swapped call arguments, changed default,
dropped statement or branch), in a seeded order. A mutation becomes a task when it breaks
1-20 stable tests and nothing else: FAIL_TO_PASS = those tests, PASS_TO_PASS = up to 50
stable tests of the same files, gold `patch` = the reverse diff, `test_patch` = "" (the
tests are in the repo), problem statement written from the first failure. Every task is
then checked through the real evaluator: the gold patch scores 1.0, and a no-op patch
leaves every FAIL_TO_PASS test failing and every PASS_TO_PASS test passing.
Writes <out>/tasks.jsonl and <out>/example.jsonl (5 rows, at least 2 projects).
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import Bind
from resources_servers.swe.data.issue_text import problem_statement
from resources_servers.swe.data.mutations import Mutation, mutations, ordered
from resources_servers.swe.evaluate import evaluate_patch, is_protected
from resources_servers.swe.prompts import build_row
from resources_servers.swe.repos import REPO_MOUNT, RepoCache, extract_sdist, make_readable, run_command
from resources_servers.swe.runners import PYTEST_ARGS, parse_pytest

OUT = Path(__file__).resolve().parent
PYTEST = f"python -m pytest {PYTEST_ARGS}"  # exactly the evaluator's flags
NOOP = "diff --git a/.prorl-noop b/.prorl-noop\nnew file mode 100644\n--- /dev/null\n+++ b/.prorl-noop\n@@ -0,0 +1 @@\n+noop\n"


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    repo: str  # on GitHub, as SWE-bench's `repo`
    sha256: str
    pythonpath: str
    tests: str  # what the suite runs


PROJECTS = [
    Project(
        "toolz",
        "1.2.0",
        "pytoolz/toolz",
        "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        ".",
        "toolz",
    ),
    Project(
        "sqlparse",
        "0.6.1",
        "andialbrecht/sqlparse",
        "ca722573f848ff2d30e40ea30f53a104b7dea7635ea9285891263eb2c58fb6e7",
        ".",
        "tests",
    ),
    Project(
        "cachetools",
        "8.0.1",
        "tkem/cachetools",
        "deb1d376d4d28c2f33f3e3058043b005e0af75c35c094bd54053e27d2906ad95",
        "src",
        "tests",
    ),
]


def unified(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


class Runner:
    """One sandbox with the pristine tree in its workspace, running the suite as evaluation does."""

    def __init__(self, project: Project, tree: Path, root: str):
        pp = os.path.normpath(f"/workspace/{project.pythonpath}")
        self.spec = SandboxSpec(
            root_dir=root,
            binds=[Bind(src=str(tree), dst=REPO_MOUNT)],
            command_timeout_s=300,
            env={"PYTHONPATH": pp, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        self.project = project

    async def __aenter__(self) -> Runner:
        self.sb = await create_sandbox(self.spec)
        await self.sb.bash(f"cp -a {REPO_MOUNT}/. /workspace/")
        return self

    async def __aexit__(self, *exc) -> None:
        await self.sb.close()

    async def collect(self) -> list[str]:
        await self.sb.bash(f"cd /workspace && {PYTEST} --collect-only -q {self.project.tests} > /tmp/ids 2>&1")
        text = (await self.sb.read_bytes("/tmp/ids")).decode()
        return [line for line in text.splitlines() if "::" in line and not line.startswith(("=", " "))]

    async def suite(
        self, ids: list[str], path: str | None = None, text: str | None = None
    ) -> tuple[dict[str, str], str]:
        """Statuses of all ids and the log, with `path` replaced by `text` for the run."""
        original = await self.sb.read_file(f"/workspace/{path}") if path else None
        if path:
            await self.sb.write_file(f"/workspace/{path}", text)
        try:
            r = await self.sb.bash(
                f"cd /workspace && timeout -k 5 30 {PYTEST} {self.project.tests} > /tmp/log 2>&1; echo RC=$?", 120
            )
            log = (await self.sb.read_bytes("/tmp/log")).decode(errors="replace")
        finally:
            if path:
                await self.sb.write_file(f"/workspace/{path}", original)
        return ({} if "RC=124" in r.output else parse_pytest(log, ids)), log


async def build_project(project: Project, cache: RepoCache, args, root: str) -> list[dict]:
    started = time.monotonic()
    work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".pristine-", dir=cache.cache_dir))
    tree = work / "tree"
    try:
        await asyncio.to_thread(
            extract_sdist, await cache.sdist(f"{project.name}=={project.version}", project.sha256), tree
        )
        await asyncio.to_thread(make_readable, tree, cache.cache_dir)
        runners = [Runner(project, tree, root) for _ in range(args.workers)]
        await asyncio.gather(*(r.__aenter__() for r in runners))
        try:
            ids = await runners[0].collect()
            runs = [await runners[0].suite(ids), await runners[-1].suite(ids)]  # twice: flaky tests are not "stable"
            stable = sorted(t for t in ids if all(run[0].get(t) == "passed" for run in runs))
            print(
                f"[{project.name}] {len(ids)} tests, {len(stable)} stable ({time.monotonic() - started:.1f}s)",
                flush=True,
            )
            rng = random.Random(f"{args.seed}/{project.name}")
            candidates = await asyncio.to_thread(
                lambda: ordered([m for p in sources(tree) for m in mutations(p, (tree / p).read_text())], rng)
            )
            accepted, tried, functions = [], 0, set()
            while len(accepted) < args.per_project and candidates and tried < args.per_project * args.max_tries:
                batch = [candidates.pop(0) for _ in range(min(len(runners), len(candidates)))]
                tried += len(batch)
                results = await asyncio.gather(*(r.suite(ids, m.path, m.text) for r, m in zip(runners, batch)))
                for m, (status, log) in zip(batch, results):
                    broken = [t for t in stable if status.get(t) != "passed"]
                    if (
                        status
                        and 1 <= len(broken) <= 20
                        and (m.path, m.function) not in functions
                        and len(accepted) < args.per_project
                    ):
                        functions.add((m.path, m.function))
                        task = await asyncio.to_thread(describe, project, tree, m, broken, stable, log, rng)
                        repo = await cache.prepare(task)  # builds the base repository exactly as INIT will
                        accepted.append(
                            task | {"base_commit": (await run_command(["git", "rev-parse", "HEAD"], repo)).strip()}
                        )
        finally:
            await asyncio.gather(*(r.__aexit__() for r in runners))
    finally:
        await asyncio.to_thread(shutil.rmtree, work, True)
    print(
        f"[{project.name}] {len(accepted)} tasks from {tried} mutations ({time.monotonic() - started:.1f}s)",
        flush=True,
    )
    return accepted


def sources(tree: Path) -> list[str]:
    files = (str(p.relative_to(tree)) for p in tree.rglob("*.py"))
    return sorted(p for p in files if not is_protected(p, set()) and not p.endswith("__main__.py"))


def describe(
    project: Project, tree: Path, m: Mutation, broken: list[str], stable: list[str], log: str, rng: random.Random
) -> dict:
    """The task in the SWE-bench schema (base_commit comes from building it)."""
    pristine = (tree / m.path).read_text()
    files = {t.split("::")[0] for t in broken}
    same_files = [t for t in stable if t.split("::")[0] in files and t not in broken]
    digest = hashlib.sha256(m.text.encode()).hexdigest()[:6]
    return {
        "instance_id": f"{project.name}__{project.version}.{m.function}.{m.kind}_{digest}",  # SWE-smith-like
        "repo": project.repo,
        "version": project.version,
        "base_commit": "",
        "problem_statement": problem_statement(project, m, broken, log, tree, rng),
        "hints_text": "",
        "FAIL_TO_PASS": broken,
        "PASS_TO_PASS": sorted(rng.sample(same_files, min(50, len(same_files)))),
        "patch": unified(m.path, m.text, pristine),
        "test_patch": "",
        "environment": {
            "sdist": f"{project.name}=={project.version}",
            "sha256": project.sha256,
            "bug_patch": unified(m.path, pristine, m.text),
            "pythonpath": project.pythonpath,
        },
        "mutation": {"kind": m.kind, "file": m.path, "function": m.function, "line": m.line},
    }


async def validate(tasks: list[dict], cache: RepoCache, root: str, workers: int) -> list[dict]:
    """Keep the tasks the evaluator agrees with: gold -> 1.0; no-op -> F2P all fail, P2P all pass."""
    gate, spec = asyncio.Semaphore(workers), SandboxSpec(root_dir=root)

    async def check(task: dict) -> bool:
        async with gate:
            repo = await cache.prepare(task)
            gold = await evaluate_patch(task, task["patch"], spec, repo, 120)
            noop = await evaluate_patch(task, NOOP, spec, repo, 120)
        ok = (
            gold["reward"] == 1.0
            and noop["fail_to_pass_passed"] == 0
            and noop["pass_to_pass_passed"] == len(task["PASS_TO_PASS"])
        )
        if not ok:
            print(
                f"dropped {task['instance_id']}: gold {gold.get('reason')}, no-op {noop.get('failed_tests')}",
                flush=True,
            )
        return ok

    keep = await asyncio.gather(*(check(t) for t in tasks))
    return [t for t, ok in zip(tasks, keep) if ok]


async def generate(args, root: str) -> list[dict]:
    cache = RepoCache()
    await asyncio.to_thread(cache.cache_dir.mkdir, parents=True, exist_ok=True)
    tasks = [t for p in PROJECTS for t in await build_project(p, cache, args, root)]
    return await validate(tasks, cache, root, args.workers)


def pick_examples(tasks: list[dict]) -> list[dict]:
    """5 rows: 2 + 2 + 1 over the projects, preferring new mutation kinds and some PASS_TO_PASS."""
    chosen: list[dict] = []
    for quota, project in zip((2, 2, 1), PROJECTS):
        kinds = {t["mutation"]["kind"] for t in chosen}
        own = sorted(
            (t for t in tasks if t["repo"] == project.repo),
            key=lambda t: (
                t["mutation"]["kind"] in kinds,
                len(t["PASS_TO_PASS"]) < 5,
                len(t["FAIL_TO_PASS"]) + len(t["PASS_TO_PASS"]),
            ),
        )
        chosen += own[:quota]
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-project", type=int, default=12)
    parser.add_argument("--max-tries", type=int, default=8, help="mutations tried per wanted task, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="sandboxes running suites in parallel")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="prorl-swe-", dir="/tmp")
    os.chmod(root, 0o711)  # the sandbox uid must reach it (see conftest.py)
    try:
        tasks = asyncio.run(generate(args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, subset in (("tasks.jsonl", tasks), ("example.jsonl", pick_examples(tasks))):
        (args.out / name).write_text("".join(json.dumps(build_row(t)) + "\n" for t in subset))
    counts = {p.name: sum(t["repo"] == p.repo for t in tasks) for p in PROJECTS}
    print(f"wrote {len(tasks)} tasks {counts} to {args.out} in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
