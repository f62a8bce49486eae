# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Build SWE tasks offline from real PyPI projects by injecting realistic bugs (SWE-smith style).

    python resources_servers/swe/data/prepare.py [--per-project 24] [--seed 0] [--workers 2] [--out DIR]
    python resources_servers/swe/data/prepare.py --verify     # re-check the shipped tasks through the evaluator
    python resources_servers/swe/data/prepare.py --projects django,sympy --per-project 12 --merge  # add/replace some

For each project (data/projects.py: a pure-Python sdist whose own suite passes in our sandbox
with its pinned test requirements; pytest or unittest): download the sdist (sha256-pinned,
cached), build its test environment, run its suite twice in our sandbox (the sandbox's Python,
the runner as the evaluator runs it; tests passing both times are "stable"), the first time
under coverage with one context per test, so each function's covering tests are known. Then try
small mutations of function bodies (flipped comparison, and/or swap, dropped `not`, off-by-one
constant, +/- swap, swapped call arguments, changed default, dropped statement or branch), in a
seeded order, one task per function at most. A mutation runs only the stable tests that cover
its function (a function no test reaches is skipped without a run: no test could tell); it
becomes a task when it breaks 1-20 of them: FAIL_TO_PASS = those, PASS_TO_PASS = up to 50
stable tests of the same files, gold `patch` = the reverse diff, problem statement written from
the first failure. Every task is then checked through the real evaluator, in parallel: the gold
patch scores 1.0, and a no-op patch leaves every FAIL_TO_PASS test failing and every PASS_TO_PASS
test passing. Writes <out>/tasks.jsonl and <out>/example.jsonl (5 rows, 5 projects).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import difflib
import hashlib
import json
import os
import random
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import Bind
from resources_servers.swe.data.issue_text import problem_statement
from resources_servers.swe.data.mutations import Mutation, functions, mutations, ordered
from resources_servers.swe.data.projects import PROJECTS, Project
from resources_servers.swe.data.suites import COVER, LIST_UNITTEST, Suite
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.patches import is_protected
from resources_servers.swe.prompts import build_row
from resources_servers.swe.repos import ENV_MOUNT, REPO_MOUNT, RepoCache, extract_sdist, make_readable, run_command

OUT = Path(__file__).resolve().parent
COVERAGE = "coverage==7.13.5"  # in the preparation's environment only, never in a task's
COVERAGE_RC = "[run]\nsource = {source}\nrelative_files = True\n"
BASELINE_TIMEOUT_S = 300.0
MAX_LOG = 16 << 20  # a run's log past this is a broken run (a mutant printing without end)
MAX_COVERING = 300  # a function more tests reach than this is left out (its bugs would break too many)
NOOP = "diff --git a/.prorl-noop b/.prorl-noop\nnew file mode 100644\n--- /dev/null\n+++ b/.prorl-noop\n@@ -0,0 +1 @@\n+noop\n"


def unified(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


class Workspace:
    """One sandbox with the pristine tree in its workspace, running the suite as evaluation does."""

    def __init__(self, project: Project, tree: Path, env: Path, root: str):
        pythonpath = os.path.normpath(f"/workspace/{project.pythonpath}")
        self.spec = SandboxSpec(
            root_dir=root,
            binds=[Bind(src=str(tree), dst=REPO_MOUNT), Bind(src=str(env), dst=ENV_MOUNT)],
            command_timeout_s=600,
            env={
                "PYTHONPATH": f"{pythonpath}:{ENV_MOUNT}/site-packages",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONHASHSEED": "0",
            },
        )
        self.project = project
        self.suite = Suite(project.runner, project.tests)
        self.names: dict[str, list[str]] = {}  # test id -> the runner's own names of its tests (Django, SymPy)
        self.timeout_s = BASELINE_TIMEOUT_S  # a mutant's run: a few times the baseline (an infinite loop ends early)
        # what coverage measures: the top-level packages and modules of the code bugs go into
        base = Path(project.pythonpath)
        self.packages = sorted({str(base / Path(p).relative_to(base).parts[0]) for p in sources(tree, project)})

    async def __aenter__(self) -> Workspace:
        self.sb = await create_sandbox(self.spec)
        await self.sb.bash(f"cp -a {REPO_MOUNT}/. /workspace/")
        await self.sb.write_file("/tmp/coverage.rc", COVERAGE_RC.format(source=",".join(self.packages)))
        await self.sb.write_file("/tmp/cover.py", COVER)
        await self.sb.write_file("/tmp/list_tests.py", LIST_UNITTEST)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.sb.close()

    async def collect(self) -> list[str]:
        """The suite's ids ([] for Django and SymPy: their ids come from the first run's log)."""
        command = self.suite.collect()
        if command is None:
            return []
        await self.sb.bash(f"cd /workspace && {command} > /tmp/ids 2>&1")
        return self.suite.ids_from_collect((await self.sb.read_bytes("/tmp/ids")).decode())

    async def run(
        self, ids: list[str], only: list[str] | None = None, mutated: Mutation | None = None, coverage: bool = False
    ) -> tuple[dict[str, str], str]:
        """Statuses of `ids` and the log: the whole suite, or `only` those tests; with a mutation in place."""
        original = await self.sb.read_file(f"/workspace/{mutated.path}") if mutated else None
        if mutated:
            await self.sb.write_file(f"/workspace/{mutated.path}", mutated.text)
        command = self.suite.command(only, self.names, coverage)
        try:
            r = await self.sb.bash(
                f"cd /workspace && timeout -k 5 {self.timeout_s:.0f} {command} > /tmp/log 2>&1; echo RC=$?; "
                f"[ $(stat -c %s /tmp/log) -le {MAX_LOG} ] || {{ echo TOO_LONG; : > /tmp/log; }}",
                self.timeout_s + 60,
            )
            log = (await self.sb.read_bytes("/tmp/log")).decode(errors="replace")
        finally:
            if mutated:
                await self.sb.write_file(f"/workspace/{mutated.path}", original)
        broken = "RC=124" in r.output or "TOO_LONG" in r.output  # a mutant that hangs or floods its log
        return ({} if broken else self.suite.parse(log, only or ids)), log

    async def test_names(self) -> dict[str, list[str]]:
        """id -> the runner's names of the tests it names, written by the coverage run (Django, SymPy)."""
        if self.suite.official is None:
            return {}
        return json.loads(await self.sb.read_bytes("/tmp/keys.json"))

    async def coverage(self) -> dict[str, dict[int, list[str]]]:
        """file -> line -> the tests that ran it: coverage's data file (SQLite) read here, on the host."""
        data = await self.sb.read_bytes("/workspace/.coverage")
        return await asyncio.to_thread(lines_by_test, data)


def lines_by_test(data: bytes) -> dict[str, dict[int, list[str]]]:
    """Coverage's SQLite data (numbits per file and context, coverage 7) as file -> line -> contexts."""
    with tempfile.NamedTemporaryFile(suffix=".coverage") as f:
        f.write(data)
        f.flush()
        db = sqlite3.connect(f.name)
        try:
            files = dict(db.execute("SELECT id, path FROM file"))
            contexts = dict(db.execute("SELECT id, context FROM context"))
            found: dict[str, dict[int, list[str]]] = {}
            for file_id, context_id, numbits in db.execute("SELECT file_id, context_id, numbits FROM line_bits"):
                if not contexts[context_id]:
                    continue  # import time, not a test
                lines = found.setdefault(files[file_id], {})
                for byte_index, byte in enumerate(numbits):
                    for bit in range(8):
                        if byte >> bit & 1:
                            lines.setdefault(byte_index * 8 + bit, []).append(contexts[context_id])
            return found
        finally:
            db.close()


class Coverage:
    """Which stable tests reach which function (a context per test, named by the runner's name of it;
    `names`: test id -> those names, where they differ)."""

    def __init__(
        self, tree: Path, contexts: dict[str, dict[int, list[str]]], stable: list[str], names: dict[str, list[str]]
    ):
        self.tree, self.stable = tree, set(stable)
        test_of = {name: test for test, runner_names in names.items() for name in runner_names}
        self.contexts = {
            path: {line: [test_of.get(c, c) for c in tests] for line, tests in lines.items()}
            for path, lines in contexts.items()
        }
        self._spans: dict[str, dict[str, tuple[int, int]]] = {}

    def tests(self, m: Mutation) -> list[str]:
        spans = self._spans.get(m.path)
        if spans is None:
            module = ast.parse((self.tree / m.path).read_text())
            spans = self._spans[m.path] = {q: (n.lineno, n.end_lineno) for q, n in functions(module)}
        first, last = spans.get(m.function, (m.line, m.line))
        lines = self.contexts.get(m.path, {})
        return sorted({t for line in range(first, last + 1) for t in lines.get(line, []) if t in self.stable})


async def build_project(project: Project, cache: RepoCache, args, root: str) -> list[dict]:
    started = time.monotonic()
    python = SandboxSpec().kernel_python
    work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".pristine-", dir=cache.cache_dir))
    tree = work / "tree"
    try:
        archive = await cache.sdist(f"{project.name}=={project.version}", project.sha256)
        await asyncio.to_thread(extract_sdist, archive, tree)
        await asyncio.to_thread(make_readable, tree, cache.cache_dir)
        env = await cache.test_env([*project.test_requires, COVERAGE], python)
        workspaces = [Workspace(project, tree, env, root) for _ in range(args.workers)]
        await asyncio.gather(*(w.__aenter__() for w in workspaces))
        try:
            ids = await workspaces[0].collect()
            baseline_started = time.monotonic()
            runs = await asyncio.gather(workspaces[0].run(ids, coverage=True), workspaces[-1].run(ids))
            for w in workspaces:  # the whole suite, under coverage, bounds any run of a subset of it
                w.timeout_s = min(BASELINE_TIMEOUT_S, max(30.0, 3 * (time.monotonic() - baseline_started)))
            names = await workspaces[0].test_names()
            if not ids:  # Django, SymPy: the tests their runner's log names, each naming exactly one test
                ids = sorted(t for t in workspaces[0].suite.ids_from_log(runs[0][1]) if len(names.get(t, [])) == 1)
                runs = [(w.suite.parse(log, ids), log) for w, (_, log) in zip(workspaces, runs)]
            for w in workspaces:
                w.names = names
            stable = sorted(t for t in ids if all(run[0].get(t) == "passed" for run in runs))
            reach = Coverage(tree, await workspaces[0].coverage(), stable, names)
            print(
                f"[{project.name}] {len(ids)} tests, {len(stable)} stable ({time.monotonic() - started:.1f}s)",
                flush=True,
            )
            rng = random.Random(f"{args.seed}/{project.name}")
            candidates = await asyncio.to_thread(
                lambda: ordered([m for p in sources(tree, project) for m in mutations(p, (tree / p).read_text())], rng)
            )
            accepted, tried, functions_done = [], 0, set()
            while len(accepted) < args.per_project and candidates and tried < args.per_project * args.max_tries:
                batch = []
                while candidates and len(batch) < len(workspaces):
                    m = candidates.pop(0)
                    covering = reach.tests(m) if (m.path, m.function) not in functions_done else []
                    if 1 <= len(covering) <= MAX_COVERING:
                        batch.append((m, covering))
                if not batch:
                    continue
                tried += len(batch)
                results = await asyncio.gather(
                    *(w.run(ids, only=covering, mutated=m) for w, (m, covering) in zip(workspaces, batch))
                )
                for (m, covering), (status, log) in zip(batch, results):
                    broken = [t for t in covering if status.get(t) != "passed"]
                    if (
                        status
                        and 1 <= len(broken) <= 20
                        and (m.path, m.function) not in functions_done
                        and len(accepted) < args.per_project
                    ):
                        functions_done.add((m.path, m.function))
                        task = await asyncio.to_thread(describe, project, tree, m, broken, stable, log, rng, names)
                        repo = await cache.prepare(task)  # builds the base repository exactly as INIT will
                        accepted.append(
                            task | {"base_commit": (await run_command(["git", "rev-parse", "HEAD"], repo)).strip()}
                        )
        finally:
            await asyncio.gather(*(w.__aexit__() for w in workspaces))
    finally:
        await asyncio.to_thread(shutil.rmtree, work, True)
    print(
        f"[{project.name}] {len(accepted)} tasks from {tried} mutations run ({time.monotonic() - started:.1f}s)",
        flush=True,
    )
    return accepted


NOT_SOURCE = {"docs", "doc", "examples", "benchmarks", "scripts", "setup.py", "conftest.py", "__main__.py"}


def sources(tree: Path, project: Project) -> list[str]:
    """The package's own modules (under its import root), where bugs go."""
    files = (p.relative_to(tree) for p in (tree / project.pythonpath).rglob("*.py"))
    return sorted(
        str(p)
        for p in files
        if not NOT_SOURCE & set(p.parts)
        and not is_protected(str(p), set())
        and str(p) not in project.skip_sources
        and (not project.bug_sources or str(p) in project.bug_sources)
    )


def describe(
    project: Project,
    tree: Path,
    m: Mutation,
    broken: list[str],
    stable: list[str],
    log: str,
    rng: random.Random,
    names: dict[str, list[str]],
) -> dict:
    """The task in the SWE-bench schema (base_commit comes from building it). `names`: a Django or SymPy
    id -> the runner's own name of its test (a unittest id, `file::function`)."""
    pristine = (tree / m.path).read_text()
    if project.runner == "pytest":
        file_of = lambda t: t.split("::")[0]  # noqa: E731
    elif project.runner == "unittest":
        file_of = lambda t: t.rsplit(".", 2)[0]  # noqa: E731
    elif project.runner == "django":
        file_of = lambda t: names[t][0].rsplit(".", 2)[0]  # noqa: E731 - the test module's label
    else:
        file_of = lambda t: names[t][0].split("::")[0]  # noqa: E731
    files = {file_of(t) for t in broken}
    same_files = [t for t in stable if file_of(t) in files and t not in broken]
    pass_to_pass = sorted(rng.sample(same_files, min(50, len(same_files))))
    # What SWE-bench's harness would take from test_patch: the modules (Django) or files (SymPy) to run.
    directives = {"test_directives": sorted(files)} if project.runner in ("django", "sympy") else {}
    digest = hashlib.sha256(m.text.encode()).hexdigest()[:6]
    return {
        "instance_id": f"{project.name}__{project.version}.{m.function}.{m.kind}_{digest}",  # SWE-smith-like
        "repo": project.repo,
        "version": project.version,
        "base_commit": "",
        "problem_statement": problem_statement(project, m, [names.get(t, [t])[0] for t in broken], log, tree, rng),
        "hints_text": "",
        "FAIL_TO_PASS": broken,
        "PASS_TO_PASS": pass_to_pass,
        "patch": unified(m.path, m.text, pristine),
        "test_patch": "",
        "environment": {
            "sdist": f"{project.name}=={project.version}",
            "sha256": project.sha256,
            "bug_patch": unified(m.path, pristine, m.text),
            "pythonpath": project.pythonpath,
        }
        | ({"test_requires": list(project.test_requires)} if project.test_requires else {}),
        "test_runner": project.runner,
        **directives,
        "license": project.license,
        "mutation": {"kind": m.kind, "file": m.path, "function": m.function, "line": m.line},
    }


async def validate(tasks: list[dict], cache: RepoCache, root: str, workers: int) -> list[dict]:
    """Keep the tasks the evaluator agrees with: gold -> 1.0; no-op -> F2P all fail, P2P all pass."""
    gate, spec = asyncio.Semaphore(workers), SandboxSpec(root_dir=root)

    async def check(task: dict) -> bool:
        async with gate:
            repo = await cache.prepare(task)
            requires = task["environment"].get("test_requires")
            env = await cache.test_env(requires, spec.kernel_python) if requires else None
            try:
                gold = await evaluate_patch(task, task["patch"], spec, repo, 120, test_env=env)
                noop = await evaluate_patch(task, NOOP, spec, repo, 120, test_env=env)
                if task.get("test_runner") == "sympy":  # its runs hash with a random seed each: a second look
                    again = await evaluate_patch(task, NOOP, spec, repo, 120, test_env=env)
                    if (again["fail_to_pass_passed"], again["pass_to_pass_passed"]) != (
                        noop["fail_to_pass_passed"],
                        noop["pass_to_pass_passed"],
                    ):
                        noop = again | {"fail_to_pass_passed": -1}  # not the same twice: dropped
            except Exception as exc:  # noqa: BLE001 - the evaluator could not judge this task: it is dropped, said why
                print(f"dropped {task['instance_id']}: the evaluator failed: {exc!r}", flush=True)
                return False
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


async def generate(args, root: str, projects: list[Project]) -> list[dict]:
    cache = RepoCache()
    await asyncio.to_thread(cache.cache_dir.mkdir, parents=True, exist_ok=True)
    tasks = [t for p in projects for t in await build_project(p, cache, args, root)]
    started = time.monotonic()
    kept = await validate(tasks, cache, root, args.workers)
    print(f"validated {len(kept)} of {len(tasks)} tasks through the evaluator ({time.monotonic() - started:.0f}s)")
    return kept


def verify(path: Path, root: str, workers: int, started: float) -> int:
    """The dataset's own check, again, with the evaluator as it is now; non-zero if any task fails it."""
    tasks = [json.loads(line) for line in path.read_text().splitlines()]
    try:
        kept = asyncio.run(validate(tasks, RepoCache(), root, workers))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"verified {len(kept)} of {len(tasks)} tasks in {time.monotonic() - started:.0f}s")
    return 0 if len(kept) == len(tasks) else 1


EXAMPLE_PROJECTS = ("toolz", "sqlparse", "more-itertools", "humanize", "cachetools")  # pytest, unittest, a test env


def pick_examples(tasks: list[dict]) -> list[dict]:
    """5 rows, one per project of EXAMPLE_PROJECTS (those built), new mutation kinds first."""
    chosen: list[dict] = []
    for project in (p for p in PROJECTS if p.name in EXAMPLE_PROJECTS):
        kinds = {t["mutation"]["kind"] for t in chosen}
        own = sorted(
            (t for t in tasks if t["repo"] == project.repo),
            key=lambda t: (
                t["mutation"]["kind"] in kinds,
                len(t["PASS_TO_PASS"]) < 5,
                len(t["FAIL_TO_PASS"]) + len(t["PASS_TO_PASS"]),
            ),
        )
        chosen += own[:1]
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-project", type=int, default=24)
    parser.add_argument("--max-tries", type=int, default=6, help="mutations run per wanted task, at most")
    parser.add_argument("--projects", default=None, help="comma-separated names (default: all of data/projects.py)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="sandboxes running suites in parallel")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--verify", action="store_true", help="re-check <out>/tasks.jsonl through the evaluator (gold 1.0, no-op 0.0)"
    )
    parser.add_argument(
        "--merge", action="store_true", help="keep <out>/tasks.jsonl's tasks of the other projects, replace these"
    )
    args = parser.parse_args()
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="prorl-swe-", dir="/tmp")
    os.chmod(root, 0o711)  # the sandbox uid must reach it (see conftest.py)
    if args.verify:
        raise SystemExit(verify(args.out / "tasks.jsonl", root, args.workers, started))
    projects = [p for p in PROJECTS if args.projects is None or p.name in args.projects.split(",")]
    try:
        tasks = asyncio.run(generate(args, root, projects))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge and (args.out / "tasks.jsonl").exists():
        rebuilt = {p.repo for p in projects}
        kept = [json.loads(line) for line in (args.out / "tasks.jsonl").read_text().splitlines()]
        order = {p.repo: i for i, p in enumerate(PROJECTS)}
        tasks = sorted([t for t in kept if t["repo"] not in rebuilt] + tasks, key=lambda t: order.get(t["repo"], -1))
    for name, subset in (("tasks.jsonl", tasks), ("example.jsonl", pick_examples(tasks))):
        (args.out / name).write_text("".join(json.dumps(build_row(t)) + "\n" for t in subset))
    counts = {
        p.name: sum(t["repo"] == p.repo for t in tasks) for p in PROJECTS if any(t["repo"] == p.repo for t in tasks)
    }
    print(f"wrote {len(tasks)} tasks {counts} to {args.out} in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
