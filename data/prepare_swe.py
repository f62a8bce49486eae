"""Build SWE tasks offline from real PyPI projects by injecting realistic bugs (SWE-smith style).

    python data/prepare_swe.py [--per-project 12] [--seed 0] [--workers 2] [--out DIR]

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
import ast
import asyncio
import difflib
import hashlib
import json
import os
import random
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from prorl_gym.sandbox.spec import Bind
from resources_servers.swe.evaluate import PYTEST_ARGS, evaluate_patch, is_protected, parse_pytest
from resources_servers.swe.prompts import build_row
from resources_servers.swe.repos import REPO_MOUNT, RepoCache, extract_sdist, make_readable, run_command

OUT = Path(__file__).resolve().parents[1] / "resources_servers" / "swe" / "data"
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
    Project("toolz", "1.2.0", "pytoolz/toolz", "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490", ".", "toolz"),
    Project("sqlparse", "0.6.1", "andialbrecht/sqlparse", "ca722573f848ff2d30e40ea30f53a104b7dea7635ea9285891263eb2c58fb6e7", ".", "tests"),
    Project("cachetools", "8.0.1", "tkem/cachetools", "deb1d376d4d28c2f33f3e3058043b005e0af75c35c094bd54053e27d2906ad95", "src", "tests"),
]


def unified(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


# ---------------------------------------------------------------------- mutations

FLIPS = {
    ast.Lt: (r"<(?!=)", "<="), ast.LtE: (r"<=", "<"), ast.Gt: (r">(?!=)", ">="), ast.GtE: (r">=", ">"),
    ast.Eq: (r"==", "!="), ast.NotEq: (r"!=", "=="), ast.In: (r"\bin\b", "not in"), ast.NotIn: (r"\bnot\s+in\b", "in"),
    ast.Is: (r"\bis\b", "is not"), ast.IsNot: (r"\bis\s+not\b", "is"),
}  # fmt: skip
NOT_SWAPPED = {"isinstance", "issubclass", "getattr", "setattr", "hasattr", "print", "super", "type", "range", "zip", "map"}
REMOVABLE = {ast.Assign: "remove_assign", ast.AugAssign: "remove_assign", ast.Expr: "remove_call", ast.If: "remove_branch"}


@dataclass(frozen=True)
class Mutation:
    path: str
    function: str  # qualified name inside its module
    kind: str
    line: int
    text: str  # the whole mutated file


def functions(tree: ast.AST, prefix: str = ""):
    """(qualname, node) of every function, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not isinstance(node, ast.ClassDef):
                yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")


def own_nodes(func: ast.AST):
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack = list(func.body)
    while stack:
        node = stack.pop()
        yield node
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def mutations(path: str, text: str) -> list[Mutation]:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode(errors="ignore"))

    def span(n: ast.AST) -> tuple[int, int]:
        return at(n.lineno, n.col_offset), at(n.end_lineno, n.end_col_offset)

    out: dict[str, Mutation] = {}

    def emit(kind: str, qual: str, node: ast.AST, edits: list[tuple[int, int, str]]) -> None:
        new = text
        for start, end, repl in sorted(edits, reverse=True):
            new = new[:start] + repl + new[end:]
        try:
            compile(new, path, "exec")
        except SyntaxError:
            return
        if new != text:
            out.setdefault(new, Mutation(path, qual, kind, node.lineno, new))

    def swap_op(kind: str, qual: str, node: ast.AST, a: ast.AST, b: ast.AST, pattern: str, repl: str) -> None:
        start, end = span(a)[1], span(b)[0]
        found = re.search(pattern, text[start:end])
        if found:
            emit(kind, qual, node, [(start + found.start(), start + found.end(), repl)])

    for qual, func in functions(ast.parse(text)):
        for default in func.args.defaults + [d for d in func.args.kw_defaults if d]:
            if isinstance(default, ast.Constant) and type(default.value) in (bool, int):
                emit("change_default", qual, default, [(*span(default), repr(not default.value if type(default.value) is bool else default.value + 1))])
        for node in own_nodes(func):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPS:
                swap_op("flip_comparison", qual, node, node.left, node.comparators[0], *FLIPS[type(node.ops[0])])
            elif isinstance(node, ast.BoolOp):
                old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
                swap_op("swap_bool_op", qual, node, node.values[0], node.values[1], rf"\b{old}\b", new)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                start, end = span(node)
                emit("remove_not", qual, node, [(start, end, re.sub(r"^not\s*", "", text[start:end]))])
            elif isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub):
                if not any(isinstance(o, (ast.JoinedStr, ast.Constant)) and not isinstance(getattr(o, "value", 0), int) for o in (node.left, node.right)):
                    old, new = (r"\+", "-") if isinstance(node.op, ast.Add) else (r"-", "+")
                    swap_op("swap_arith", qual, node, node.left, node.right, old, new)
            elif isinstance(node, (ast.Slice, ast.Subscript, ast.Compare, ast.BinOp)):
                for c in ast.iter_child_nodes(node):
                    if isinstance(c, ast.Constant) and type(c.value) is int and 0 <= c.value <= 16:
                        for value in {c.value + 1, abs(c.value - 1)} - {c.value}:
                            emit("off_by_one", qual, c, [(*span(c), str(value))])
            elif isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                (s0, e0), (s1, e1) = span(node.args[0]), span(node.args[1])
                if name not in NOT_SWAPPED and text[s0:e0] != text[s1:e1]:
                    emit("swap_args", qual, node, [(s0, e0, text[s1:e1]), (s1, e1, text[s0:e0])])
            for body in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
                if not isinstance(body, list) or len(body) < 2:
                    continue
                for stmt in body:
                    kind = REMOVABLE.get(type(stmt))
                    if kind is None or (isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Call)) or (isinstance(stmt, ast.If) and stmt.orelse):
                        continue
                    start, end = span(stmt)
                    tail = text[end : starts[stmt.end_lineno]].strip()
                    if not text[starts[stmt.lineno - 1] : start].strip() and (not tail or tail.startswith("#")):  # whole lines
                        emit(kind, qual, stmt, [(starts[stmt.lineno - 1], starts[stmt.end_lineno], "")])
    return list(out.values())


def ordered(candidates: list[Mutation], rng: random.Random) -> list[Mutation]:
    """Seeded order, kinds interleaved round-robin so every kind of bug is represented."""
    kinds: dict[str, list[Mutation]] = {}
    for m in sorted(candidates, key=lambda m: (m.path, m.line, m.kind, m.text)):
        kinds.setdefault(m.kind, []).append(m)
    for group in kinds.values():
        rng.shuffle(group)
    queues = [kinds[k] for k in sorted(kinds)]
    rng.shuffle(queues)
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


# ---------------------------------------------------------------------- the issue text

TITLES = ["`{name}` {symptom}", "Unexpected behaviour of `{qual}`", "Bug in `{qual}`: it {symptom}", "{name}() {symptom} in {project} {version}"]
INTROS = [
    "After upgrading to {project} {version}, `{qual}` {symptom}. A minimal example, adapted from the project's tests:",
    "`{qual}` (in `{path}`) {symptom}. Here is how to reproduce it:",
    "I think there is a regression in `{qual}`: it {symptom}. This snippet (from `{test_file}`) shows it:",
]
OUTCOMES = ["Running it gives:", "Actual result:", "It fails with:"]


def failure_block(log: str, test_id: str) -> str:
    """The --tb=short traceback of one test from a pytest log (pytest heads it with Class.test)."""
    blocks = re.split(r"^_{3,} (.+?) _{3,}$", log.split("short test summary info")[0], flags=re.M)
    head = ".".join(test_id.split("::")[1:])
    pairs = list(zip(blocks[1::2], blocks[2::2]))
    return next((b for h, b in pairs if h == head or h.startswith(head + " ")), pairs[0][1] if pairs else "")


def reproduction(tree: Path, test_file: str, line: int) -> str | None:
    """The failing test function (if long: the failing statement and up to 8 before it), marked where it fails."""
    try:
        source = (tree / test_file).read_text()
        module = ast.parse(source)
    except (OSError, SyntaxError):
        return None
    funcs = [n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= n.end_lineno]
    if not funcs:
        return None
    first, last = funcs[-1].lineno, funcs[-1].end_lineno
    if last - first >= 25:
        blocks = [(body, i) for n in ast.walk(funcs[-1]) for f in ("body", "orelse", "finalbody")
                  if isinstance(body := getattr(n, f, None), list)
                  for i, st in enumerate(body) if isinstance(st, ast.stmt) and st.lineno <= line <= st.end_lineno]  # fmt: skip
        if not blocks:
            return None
        body, i = min(blocks, key=lambda b: b[0][b[1]].end_lineno - b[0][b[1]].lineno)  # the innermost statement
        first, last = body[max(0, i - 8)].lineno, body[i].end_lineno
    lines = source.splitlines()[first - 1 : last]
    lines[line - first] += "  # <- fails here"
    indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
    return "\n".join(x[indent:] for x in lines)


def problem_statement(project: Project, m: Mutation, broken: list[str], log: str, tree: Path, rng: random.Random) -> str:
    test = broken[0]
    block = failure_block(log, test)
    errors = [re.sub(r"0x[0-9a-fA-F]{6,}", "0x...", re.sub(r"^E {0,3}", "", x))[:200] for x in block.splitlines() if x.startswith("E ")]
    errors = [e for n, e in enumerate(errors) if e.strip() and e not in errors[:n] and not e.lstrip().startswith(("Use -v", "Full diff"))][:8]
    frame = next((f for f in re.finditer(r"^(\S+\.py):(\d+): in \S+$", block, re.M) if is_protected(f[1], set())), None)
    repro = reproduction(tree, frame[1], int(frame[2])) if frame else None
    first = errors[0] if errors else ""
    exc = first.split(":")[0].strip()
    symptom = ("returns a wrong result" if first.startswith(("assert", "AssertionError")) or not first
               else f"raises `{exc}`" if re.fullmatch(r"[A-Za-z_][\w.]*", exc) else "does not behave as documented")  # fmt: skip
    module = m.path.removeprefix("src/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    fields = {"name": m.function.split(".")[-1], "qual": f"{module}.{m.function}", "symptom": symptom, "path": m.path,
              "project": project.name, "version": project.version, "test_file": test.split("::")[0]}  # fmt: skip
    parts = [rng.choice(TITLES).format(**fields), ""]
    if repro:
        parts += [rng.choice(INTROS).format(**fields), "", "```python", repro, "```", ""]
    else:
        parts += [f"`{fields['qual']}` {symptom}: the check `{test}` of the test suite fails.", ""]
    if errors:
        parts += [rng.choice(OUTCOMES), "", "```", *errors, "```", ""]
    others = sorted({t.split("::")[-1].split("[")[0] for t in broken[1:]} - {test.split("::")[-1].split("[")[0]})
    if others:
        parts.append(f"Other tests fail the same way: {', '.join(f'`{o}`' for o in others[:4])}{' and more' if len(others) > 4 else ''}.")
    parts.append("The function should behave as its documentation and the rest of the test suite describe.")
    return "\n".join(parts).strip() + "\n"


class Runner:
    """One sandbox with the pristine tree in its workspace, running the suite as evaluation does."""

    def __init__(self, project: Project, tree: Path, root: str):
        pp = os.path.normpath(f"/workspace/{project.pythonpath}")
        self.spec = SandboxSpec(root_dir=root, binds=[Bind(src=str(tree), dst=REPO_MOUNT)], command_timeout_s=300,
                                env={"PYTHONPATH": pp, "PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip
        self.project = project

    async def __aenter__(self) -> "Runner":
        self.sb = await create_sandbox(self.spec)
        await self.sb.bash(f"cp -a {REPO_MOUNT}/. /workspace/")
        return self

    async def __aexit__(self, *exc) -> None:
        await self.sb.close()

    async def collect(self) -> list[str]:
        await self.sb.bash(f"cd /workspace && {PYTEST} --collect-only -q {self.project.tests} > /tmp/ids 2>&1")
        text = (await self.sb.read_bytes("/tmp/ids")).decode()
        return [line for line in text.splitlines() if "::" in line and not line.startswith(("=", " "))]

    async def suite(self, ids: list[str], path: str | None = None, text: str | None = None) -> tuple[dict[str, str], str]:
        """Statuses of all ids and the log, with `path` replaced by `text` for the run."""
        original = await self.sb.read_file(f"/workspace/{path}") if path else None
        if path:
            await self.sb.write_file(f"/workspace/{path}", text)
        try:
            r = await self.sb.bash(f"cd /workspace && timeout -k 5 30 {PYTEST} {self.project.tests} > /tmp/log 2>&1; echo RC=$?", 120)
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
        await asyncio.to_thread(extract_sdist, await cache.sdist(f"{project.name}=={project.version}", project.sha256), tree)
        await asyncio.to_thread(make_readable, tree, cache.cache_dir)
        runners = [Runner(project, tree, root) for _ in range(args.workers)]
        await asyncio.gather(*(r.__aenter__() for r in runners))
        try:
            ids = await runners[0].collect()
            runs = [await runners[0].suite(ids), await runners[-1].suite(ids)]  # twice: flaky tests are not "stable"
            stable = sorted(t for t in ids if all(run[0].get(t) == "passed" for run in runs))
            print(f"[{project.name}] {len(ids)} tests, {len(stable)} stable ({time.monotonic() - started:.1f}s)", flush=True)
            rng = random.Random(f"{args.seed}/{project.name}")
            candidates = await asyncio.to_thread(lambda: ordered([m for p in sources(tree) for m in mutations(p, (tree / p).read_text())], rng))
            accepted, tried, functions = [], 0, set()
            while len(accepted) < args.per_project and candidates and tried < args.per_project * args.max_tries:
                batch = [candidates.pop(0) for _ in range(min(len(runners), len(candidates)))]
                tried += len(batch)
                results = await asyncio.gather(*(r.suite(ids, m.path, m.text) for r, m in zip(runners, batch)))
                for m, (status, log) in zip(batch, results):
                    broken = [t for t in stable if status.get(t) != "passed"]
                    if status and 1 <= len(broken) <= 20 and (m.path, m.function) not in functions and len(accepted) < args.per_project:
                        functions.add((m.path, m.function))
                        task = await asyncio.to_thread(describe, project, tree, m, broken, stable, log, rng)
                        repo = await cache.prepare(task)  # builds the base repository exactly as INIT will
                        accepted.append(task | {"base_commit": (await run_command(["git", "rev-parse", "HEAD"], repo)).strip()})
        finally:
            await asyncio.gather(*(r.__aexit__() for r in runners))
    finally:
        await asyncio.to_thread(shutil.rmtree, work, True)
    print(f"[{project.name}] {len(accepted)} tasks from {tried} mutations ({time.monotonic() - started:.1f}s)", flush=True)
    return accepted


def sources(tree: Path) -> list[str]:
    files = (str(p.relative_to(tree)) for p in tree.rglob("*.py"))
    return sorted(p for p in files if not is_protected(p, set()) and not p.endswith("__main__.py"))


def describe(project: Project, tree: Path, m: Mutation, broken: list[str], stable: list[str], log: str, rng: random.Random) -> dict:
    """The task in the SWE-bench schema (base_commit comes from building it)."""
    pristine = (tree / m.path).read_text()
    files = {t.split("::")[0] for t in broken}
    same_files = [t for t in stable if t.split("::")[0] in files and t not in broken]
    digest = hashlib.sha256(m.text.encode()).hexdigest()[:6]
    return {
        "instance_id": f"{project.name}__{project.version}.{m.function}.{m.kind}_{digest}",  # SWE-smith-like
        "repo": project.repo, "version": project.version, "base_commit": "",
        "problem_statement": problem_statement(project, m, broken, log, tree, rng), "hints_text": "",
        "FAIL_TO_PASS": broken, "PASS_TO_PASS": sorted(rng.sample(same_files, min(50, len(same_files)))),
        "patch": unified(m.path, m.text, pristine), "test_patch": "",
        "environment": {"sdist": f"{project.name}=={project.version}", "sha256": project.sha256,
                        "bug_patch": unified(m.path, pristine, m.text), "pythonpath": project.pythonpath},
        "mutation": {"kind": m.kind, "file": m.path, "function": m.function, "line": m.line},
    }  # fmt: skip


async def validate(tasks: list[dict], cache: RepoCache, root: str, workers: int) -> list[dict]:
    """Keep the tasks the evaluator agrees with: gold -> 1.0; no-op -> F2P all fail, P2P all pass."""
    gate, spec = asyncio.Semaphore(workers), SandboxSpec(root_dir=root)

    async def check(task: dict) -> bool:
        async with gate:
            repo = await cache.prepare(task)
            gold = await evaluate_patch(task, task["patch"], spec, repo, 120)
            noop = await evaluate_patch(task, NOOP, spec, repo, 120)
        ok = gold["reward"] == 1.0 and noop["fail_to_pass_passed"] == 0 and noop["pass_to_pass_passed"] == len(task["PASS_TO_PASS"])
        if not ok:
            print(f"dropped {task['instance_id']}: gold {gold.get('reason')}, no-op {noop.get('failed_tests')}", flush=True)
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
        own = sorted((t for t in tasks if t["repo"] == project.repo), key=lambda t: (
            t["mutation"]["kind"] in kinds, len(t["PASS_TO_PASS"]) < 5, len(t["FAIL_TO_PASS"]) + len(t["PASS_TO_PASS"])))  # fmt: skip
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
