# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SWE EVAL, SWE-bench style, in a fresh sandbox (never the agent's, which the agent controlled).

The policy controls its patch: every file of the repository, configuration included, and the patch's
text itself. The grader therefore runs nothing the patch can configure until the tests themselves,
decides what the patch changed from the files (not from git, not from the patch's headers), keeps the
run from touching the grader, and decides the grade outside the process that runs the tests (README:
"What a policy can do, and what the grader guarantees").

1. An empty patch scores 0 at once: no sandbox, no test run.
2. A fresh sandbox gets the base repository (a local row's as an archive: no pristine copy stays in
   the sandbox; an image's in place); test_patch is applied (if it does not apply, the task is broken:
   VerifierError); the repository's .git goes; that tree, fingerprinted (tree.py), is the graded base.
   The probe (steps.py) says, from the sandbox's Python alone: whether the run can be sealed
   (Landlock), what is importable, whether something installed shadows the tests' package (the task's
   problem: VerifierError, decided here, never by a message from the run).
3. The patch is read as patches.py does (git's quoted names decoded): sections that would touch the
   tests, pytest's configuration, start-up hooks, .git, links, binaries, compiled code or shadowing
   names are dropped (`dropped`); the rest goes through `git apply` alone. A patch that does not apply
   scores 0.
4. The tree is fingerprinted again: every protected path that differs from the graded base (and any
   link, or new module shadowing a name) is put back as the graded base had it (`test_files_reset`).
5. screen.py reads the code the patch changed: what a fix never needs and tampering does (the runner's
   internals, frames, gc, sys.modules surgery, ioctls, comparisons that ignore their operand, ...)
   scores 0 with the reason (`screened`).
6. Canaries go into the graded test files (canaries.py, controls.py), planned from the graded base's
   test files alone; a planner that fails scores 0 (never a 500).
7. The tests run sealed (steps.run_sealed, guard/prorl_seal.py: no controlling terminal, the repository
   and everything outside the scratch space read-only, no signal or ptrace out of the run) under their
   runner's guard (guard/, runners.py); events stream out as they happen. Every process the run left
   is killed, scratch freed, and the tree fingerprinted again: any file written during the run is
   evidence. Anything of the grader's that fails after the run started is evidence too (the run's
   doing, not the infrastructure's: never a dropped row).
8. monitor.py decides.

Not using the swebench package: it pulls in docker, datasets, modal and pre-commit.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import shlex
import tarfile
import time
from pathlib import Path
from typing import Any

from prorl_gym.sandbox import Backends, SandboxAPI, SandboxError, SandboxSpec, create_sandbox
from prorl_gym.verify.pool import VerifierError
from resources_servers.swe.canaries import CanaryPlan, plan_canaries
from resources_servers.swe.grading import Grading, plan_grading
from resources_servers.swe.monitor import Verdict, judge, score
from resources_servers.swe.patches import ImportNames, plan_patch, split_patch
from resources_servers.swe.repos import ENV_MOUNT, REPO_MOUNT, RepoEnv, field, repo_env, stage_repo, task_spec
from resources_servers.swe.runners import GUARD_SOURCES
from resources_servers.swe.screen import screen
from resources_servers.swe.steps import (
    GIT,
    GUARD_DIR,
    HOME,
    LOG_TAIL,
    SEAL,
    WORK,
    job,
    run_sealed,
    sh,
)
from resources_servers.swe.tree import differences

MAX_LOG = 4 << 20
CHANNEL_LIMIT = 8 << 20  # the test run's events, on the grader's terminal
MAX_SOURCES = 200  # test modules read for the canaries (the graded files and their directories)
KEPT = ".git/kept"  # the graded base, hard-linked: in the repository's file system, where no patch writes
APPLY = [*shlex.split(GIT), "apply", "--whitespace=nowarn", "-"]  # git alone: no GNU patch for what git refuses
log = logging.getLogger(__name__)


async def evaluate_patch(
    row: Any,
    patch: str,
    spec: SandboxSpec,
    repo_dir: Path | None,
    timeout_s: float = 300.0,
    test_env: Path | None = None,
    backends: Backends | None = None,
    require_sealed: bool = False,
    screen_code: bool = True,
) -> dict:
    """Grade `patch` for `row` in a fresh sandbox (see the module docstring), started through `backends`
    (a server's own; default: the process's). require_sealed: refuse to grade (VerifierError, before the
    run) where the kernel cannot seal the run with signal scoping (Landlock ABI 6). screen_code=False
    (tests only; the server always screens) lets a patch past the screen, to try the layers behind it."""
    env = repo_env(row, spec.workspace)
    grading = plan_grading(row, env)
    fields: dict[str, Any] = {
        "patch_bytes": len(patch.encode()),
        "fail_to_pass_total": len(grading.fail_to_pass),
        "pass_to_pass_total": len(grading.pass_to_pass),
    }
    if not patch.strip():
        return fields | {"reward": 0.0, "patch_applied": False, "reason": "empty patch"}
    if not grading.test_ids:
        raise VerifierError(f"task {field(row, 'instance_id')}: no FAIL_TO_PASS or PASS_TO_PASS tests")
    first = plan_patch(patch, grading.task_files, ImportNames(grading.roots))
    if not first.kept.strip():
        return fields | _dropped(first) | {"reward": 0.0, "patch_applied": False, "reason": KEPT_NOTHING}
    eval_spec = task_spec(spec, row, repo_dir, test_env)
    eval_spec = eval_spec.model_copy(
        update={
            "network": False,
            "binds": [b for b in eval_spec.binds if b.dst != REPO_MOUNT],  # the pristine tree stays outside
            "env": eval_spec.env | {"PYTHONDONTWRITEBYTECODE": "1"},
            "output_limit_bytes": CHANNEL_LIMIT,
        }
    )
    started = time.monotonic()
    async with await create_sandbox(eval_spec, backends=backends) as sb:
        repo = await _stage(sb, row, env, repo_dir, grading.test_patch)
        act, env_path = env.activate, f"{ENV_MOUNT}/site-packages" if test_env is not None else ""
        # One process for all of it: new modules' names are judged from the tree afterwards (step 5).
        kept = plan_patch(patch, grading.task_files, ImportNames(grading.roots, existing=None)).kept
        touched = sorted({p for s in split_patch(kept) for p in s.paths if p.endswith(".py")})
        done = await job(sb, act, "applied", _first_job(repo, grading, env_path, touched, kept))
        if "failed" in done and "after" not in done and "apply" not in done:  # before the patch: the machine's
            raise SandboxError(f"the grader's first step failed in the sandbox: {done['failed']}")
        base, found = done["base"], _probed(done["probe"], require_sealed)
        fields["sealed"] = found["abi"]
        tests = frozenset(found["tests"])
        names = ImportNames(grading.roots, frozenset(found["installed"]), tests, _top_entries(base, grading.roots))
        plan = plan_patch(patch, grading.task_files, names)
        fields |= _dropped(plan)
        if not plan.kept.strip():
            return fields | {"reward": 0.0, "patch_applied": False, "reason": KEPT_NOTHING}
        if "failed" in done:  # the patched tree could not be read: the patch's doing, scored
            return fields | {"reward": 0.0, "reason": f"the grader could not read the patched tree: {done['failed']}"}
        if done["apply"]["rc"] != 0:
            return fields | {
                "reward": 0.0,
                "patch_applied": False,
                "reason": NOT_APPLIED,
                "apply_output": done["apply"]["output"],
            }
        fields |= {"patch_applied": True, "apply_method": "git apply"}
        patched, reset_paths = await _put_back(sb, repo, act, grading, names, base, done["after"])
        fields["test_files_reset"] = reset_paths
        if patched is None:
            return fields | {"reward": 0.0, "reason": "the patch's changes to protected files could not be undone"}
        code = {
            p: (done["before"].get(p), text)
            for p, text in done["dump"].items()
            if _screened(p, grading, base, patched)
        }
        if screen_code and (findings := await asyncio.to_thread(screen, code)):
            return fields | {"reward": 0.0, "reason": f"refused: {findings[0]}", "screened": findings[:20]}
        try:
            canaries = await asyncio.to_thread(_plan_canaries, grading, patched, done["sources"])
        except Exception as exc:  # noqa: BLE001 - whatever the planner hit, the patch scores 0, never a 500
            log.warning("canary planner failed on %s: %r", field(row, "instance_id"), exc)
            return fields | {"reward": 0.0, "reason": f"the grader could not place its controls: {exc!r}"}
        ready = dict(patched)
        for path, text in canaries.sources.items():
            data = text.encode(errors="surrogateescape")
            await sb.write_file(f"{repo}/{path}", data)
            ready[path] = patched[path][:2] + hashlib.sha256(data).hexdigest()
        fields["canaries"] = {
            "renamed": len(canaries.renamed),
            "controls": len(canaries.controls),
            "uncovered": canaries.uncovered[:20],
        }
        changed = sorted(p for p in code if p in patched)
        verdict, log_text, timed_out = await _run_tests(
            sb, repo, grading, canaries, env, timeout_s, env_path, [f"{repo}/{p}" for p in changed]
        )
        await _after_run(sb, act, repo, ready, verdict, found["abi"])
    return fields | {"test_runner": grading.runner.name} | score(grading, verdict, log_text, timed_out, started)


def _probed(found: dict, require_sealed: bool) -> dict:
    """The probe's answer, or why the task cannot be graded here (decided before any code of the patch runs)."""
    if found["shadowed"]:
        raise VerifierError(f"the tests' package is also installed: {', '.join(found['shadowed'])}")
    if require_sealed and found["abi"] < 6:
        raise VerifierError(f"this kernel cannot seal a test run (Landlock ABI {found['abi']}, 6 needed)")
    return found


async def _after_run(sb: SandboxAPI, act: str, repo: str, ready: dict[str, str], verdict: Verdict, abi: int) -> None:
    """A run sealed otherwise than the probe said is the machine's doing (said before any code of the patch
    ran); an unsealed run's tree is compared with what it was given (sealed, it was read-only throughout)."""
    if verdict.sealed != abi:
        raise SandboxError(f"the run was sealed with Landlock ABI {verdict.sealed}; the probe said {abi}")
    if abi:
        return
    try:
        ended = await job(sb, act, "ended", [{"do": "tree", "root": repo, "skip_git": False, "as": "tree"}])
        written = differences(ready, ended["tree"])
        verdict.evidence += [f"{p} was written while the tests ran" for p in written[:20]]
    except SandboxError as exc:
        verdict.evidence.append(f"the repository could not be read after the run: {exc}")


KEPT_NOTHING = "the patch only changes files the grader keeps"
NOT_APPLIED = "the patch does not apply"


def _dropped(plan) -> dict[str, Any]:
    return {"dropped": plan.dropped, "test_files_dropped": sorted(plan.dropped), "tool_config": plan.tool_config}


GUARDS = (
    "prorl_seal.py",
    "prorl_pytest_guard.py",
    "prorl_unittest_guard.py",
    "prorl_django_guard.py",
    "prorl_sympy_guard.py",
)


def bundle(repo_dir: Path | None, test_patch: str) -> bytes:
    """What the grader brings into the sandbox, as one gzipped tar: guard/ (the seal and the guards),
    repo/ (a local row's repository, without its .git: the graded base is its files), test.diff."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for name in GUARDS:
            tar.add(GUARD_SOURCES / name, arcname=f"guard/{name}")
        if repo_dir is not None:
            tar.add(repo_dir, arcname="repo", filter=lambda info: None if info.name == "repo/.git" else info)
        if test_patch:
            info, data = tarfile.TarInfo("test.diff"), test_patch.encode()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def _stage(sb: SandboxAPI, row: Any, env: RepoEnv, repo_dir: Path | None, test_patch: str) -> str:
    """The graded base in the sandbox, without .git; returns the repository's path."""
    local = env.kind == "local"
    data = await asyncio.to_thread(bundle, repo_dir if local else None, test_patch)
    repo = env.repo_path if local else await stage_repo(sb, row, scrub=False)
    quoted, unpack = shlex.quote(repo), f"tar -xzf {WORK}/bundle.tgz"
    steps = [f"mkdir -p {HOME} {quoted} && chmod 700 {HOME}", f"{unpack} -C {WORK} guard"]
    if local:
        steps.append(f"{unpack} -C {quoted} --strip-components=1 repo")
    if test_patch:
        steps.append(
            f"{unpack} -C {WORK} test.diff && cd {quoted} && {GIT} apply --whitespace=nowarn {WORK}/test.diff"
        )
    await sb.write_file(f"{WORK}/bundle.tgz", data)
    rc, out = await sh(sb, " && ".join(steps) + " && echo STAGED")
    if "STAGED" not in out and "test.diff" in out and test_patch:  # the task is broken, not the agent's patch
        raise VerifierError(f"test_patch does not apply to the base commit: {out[-500:]}")
    if rc != 0:
        raise SandboxError(f"staging the graded base failed: {out[-500:]}")
    await sh(sb, f"cd {quoted} && rm -rf .git {WORK}/bundle.tgz {WORK}/test.diff")
    return repo


def _first_job(repo: str, grading: Grading, env_path: str, touched: list[str], patch: str) -> list[dict]:
    """The graded base fingerprinted, the probe, the test sources, the base kept (hard links under .git/:
    where no patch can write), the code the patch touches as it was, the patch applied, the tree again,
    the code it changed as it is now."""
    return [
        {"do": "tree", "root": repo, "as": "base"},
        {
            "do": "probe",
            "seal": SEAL,
            "root": repo,
            "env_paths": [env_path] if env_path else [],
            "tests": grading.test_files,
        },
        {"do": "dump", "root": repo, "paths": grading.test_files, "dirs": _test_dirs(grading), "as": "sources"},
        {"do": "keep", "root": repo, "tree": "base", "into": f"{repo}/{KEPT}"},
        {"do": "dump", "root": repo, "paths": touched, "as": "before"},
        {"do": "apply", "root": repo, "patch": patch, "argv": APPLY},
        {"do": "tree", "root": repo, "as": "after"},
        {"do": "dump", "root": repo, "changed": ["base", "after"], "suffix": ".py"},
    ]


def _must_reset(path: str, base: dict[str, str], now: dict[str, str], grading: Grading, names: ImportNames) -> bool:
    if grading.protected(path):
        return True
    if base.get(path, "").startswith("l:") or now.get(path, "").startswith(("l:", "o:", "e:")):
        return True
    return path not in base and names.shadowed(path) is not None


async def _put_back(
    sb: SandboxAPI,
    repo: str,
    activate: str,
    grading: Grading,
    names: ImportNames,
    base: dict[str, str],
    now: dict[str, str],
) -> tuple[dict[str, str] | None, list[str]]:
    """Every path the patch changed that it may not change, as the graded base had it (decided from the
    files themselves). Returns (the tree's fingerprint now, or None if it could not be done; those paths)."""
    wrong = [p for p in differences(base, now) if _must_reset(p, base, now, grading, names)]
    if not wrong:
        return now, []
    steps = [
        {"do": "reset", "root": repo, "paths": wrong, "kept": f"{repo}/{KEPT}"},
        {"do": "tree", "root": repo, "as": "now"},
    ]
    try:
        now = (await job(sb, activate, "reset", steps))["now"]
    except SandboxError:
        return None, wrong
    still = [p for p in differences(base, now) if _must_reset(p, base, now, grading, names)]
    return (None if still else now), wrong


def _screened(path: str, grading: Grading, base: dict[str, str], patched: dict[str, str]) -> bool:
    """Code the patch changed and the run will see: changed, still there, not put back."""
    return path in patched and patched[path] != base.get(path) and not grading.protected(path)


def _test_dirs(grading: Grading) -> list[str]:
    return sorted({f.rsplit("/", 1)[0] if "/" in f else "" for f in grading.test_files})


def _plan_canaries(grading: Grading, tree: dict[str, str], dumped: dict[str, str]) -> CanaryPlan:
    """The canaries, planned from the graded base's test modules and the protected modules beside them (for
    mixins), as the graded base has them (dumped before the patch was applied): never a file the patch
    could write."""
    wanted = [p for p in [*grading.test_files, *sorted(dumped)] if p in dumped and grading.protected(p)]
    sources = {p: dumped[p] for p in list(dict.fromkeys(wanted))[:MAX_SOURCES]}
    runner = grading.runner
    grading.resolve({p: dumped[p] for p in grading.test_files if p in dumped})  # before the patch: the base's
    return plan_canaries(grading.fail_to_pass, grading.pass_to_pass, sources, runner.parse_id, runner.format_id)


def _top_entries(files: dict[str, str], roots: tuple[str, ...]) -> frozenset[str]:
    out = set()
    for root in roots:
        prefix = f"{root}/" if root else ""
        out |= {prefix + p[len(prefix) :].split("/")[0] for p in files if p.startswith(prefix)}
    return frozenset(out)


async def _run_tests(
    sb: SandboxAPI,
    repo: str,
    grading: Grading,
    canaries: CanaryPlan,
    env: RepoEnv,
    timeout_s: float,
    env_path: str,
    changed: list[str],
):
    """Run the graded ids and the controls sealed, under the runner's guard; the verdict from its events."""
    runner = grading.runner
    roots = [f"{repo}/{r}".rstrip("/") if r else repo for r in grading.roots[::-1]]
    env_paths = [env_path] if env_path else []
    # an order that says nothing (names are random); a runner of test modules runs them whole, controls in them
    ids = grading.directives or sorted(dict.fromkeys(canaries.run_ids(grading.test_ids)))
    command = runner.command(f"{GUARD_DIR}/{runner.guard}", ids, roots, env_paths, changed)
    channel, rc, trouble = await run_sealed(
        sb, repo, env.activate, command, ":".join([*roots, *env_paths]), timeout_s, MAX_LOG
    )
    log_text, problems = "", [trouble] if trouble else []
    try:
        log_text = (await sb.read_bytes(LOG_TAIL)).decode(errors="replace")
    except (SandboxError, OSError) as exc:
        problems.append(f"the grader could not read the run's log: {exc}")
    verdict = judge(runner, grading.test_ids, canaries, channel, log_text, repo, grading.protected)
    if verdict.sealed is None:  # the seal speaks before anything of the patch runs: not the agent's doing
        if trouble:
            raise SandboxError(f"the test run never started: {trouble}")
        raise VerifierError(f"the test run never started (nothing of the patch ran yet): {channel[-500:]}")
    verdict.evidence += problems
    return verdict, log_text, rc in (124, 137)
