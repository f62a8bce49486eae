# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SWE EVAL, SWE-bench style, in a fresh sandbox (never the agent's, which the agent controlled).

The policy controls its patch: every file of the repository, configuration included. The grader
therefore runs nothing the patch can configure until the tests themselves, and decides the grade
outside the process that runs them (README: "What a policy can do, and what the grader guarantees").

1. An empty patch scores 0 at once: no sandbox, no test run.
2. A fresh sandbox stages the base repository; test_patch is applied to the pristine tree, and that
   tree is the graded base (a task whose test_patch does not apply is broken: VerifierError).
3. The agent's patch is read as patches.py does: sections that would touch the tests, pytest's
   configuration, start-up hooks, .git, symbolic links or new modules shadowing what the runner,
   the standard library, the installed packages or the tests import are dropped (`dropped`, with
   the reason); the rest is applied (`git apply`, else `patch --fuzz=3` after a dry run). A patch
   that does not apply scores 0.
4. Every protected path that now differs from the graded base is reset to it, from git's raw blobs
   (no checkout: no filter, attribute or hook is involved).
5. Canaries go into the graded test files (canaries.py); the files the run reads are hashed.
6. The tests run under their runner's guard (guard/, runners.py) in an isolated interpreter, with
   HOME outside the repository; events stream to the grader on the shell's terminal as they happen.
   Afterwards every process the run left is killed and the hashes are taken again.
7. monitor.py decides: reward 1.0 iff every FAIL_TO_PASS and PASS_TO_PASS test passed by the
   guard's events and the runner's own output alike, the run ended, and nothing says it was
   tampered with (canaries, files changed during the run, the runner's functions replaced, ...).

Every git, patch and shell step of the grader runs under CLEAN: an empty environment, a HOME of its
own, no global or system git config, git's hooks, fsmonitor and attributes file off. Not using
the swebench package: it pulls in docker, datasets, modal and pre-commit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prorl_gym.sandbox import Backends, SandboxAPI, SandboxError, SandboxSpec, create_sandbox
from prorl_gym.verify.pool import VerifierError
from resources_servers.swe.canaries import CanaryPlan, plan_canaries
from resources_servers.swe.monitor import Verdict, judge
from resources_servers.swe.patches import (
    ImportNames,
    is_protected,
    patch_files,
    plan_patch,
    split_patch,
    top_level_names,
)
from resources_servers.swe.repos import ENV_MOUNT, REPO_MOUNT, RepoEnv, field, repo_env, stage_repo, task_spec
from resources_servers.swe.runners import GUARD_SOURCES, TestRunner, runner_for

WORK = "/tmp/prorl-eval"
HOME = f"{WORK}/home"
GUARD_DIR = f"{WORK}/guard"
# The grader's own steps: nothing of the sandbox's environment, nothing the repository can configure.
CLEAN = (
    f"env -i PATH={{path}} HOME={HOME} LANG=C.UTF-8 TMPDIR=/tmp GIT_CONFIG_NOSYSTEM=1 "
    "GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0"
)
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
GIT = (
    "git -c safe.directory=* -c core.quotepath=false -c core.fsmonitor=false -c core.hooksPath=/dev/null "
    "-c core.attributesFile=/dev/null -c core.untrackedCache=false -c core.autocrlf=false"
)
IDENTITY = "GIT_AUTHOR_NAME=grader GIT_AUTHOR_EMAIL=grader@invalid GIT_COMMITTER_NAME=grader GIT_COMMITTER_EMAIL=grader@invalid"
DIFF_OPTS = "--no-color --no-ext-diff --no-textconv --no-renames --src-prefix=a/ --dst-prefix=b/"
# Every process of the sandbox but its pid 1 and the shells joined from outside (their parent is outside the
# pid namespace: PPid 0), which is everything the test run started, however it detached; again until none is left.
END_STRAYS = (
    'for round in 1 2 3 4 5 6 7 8; do left=0; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; '
    'while read -r k v; do if [ "$k" = PPid: ]; then [ "$v" = 0 ] || { kill -9 "$p" 2>/dev/null; left=1; }; break; fi; '
    'done < "$d/status" 2>/dev/null; done; [ $left = 0 ] && break; done; true'
)
# The scratch space the run filled (a full /tmp would fail the grader's next steps: an infrastructure failure,
# retried, instead of the run's 0): everything in /tmp and /dev/shm but the grader's own directory and log.
FREE_SCRATCH = (
    f"find /tmp /dev/shm -mindepth 1 -maxdepth 1 ! -path {WORK} -exec rm -rf {{}} + 2>/dev/null; "
    f"find {WORK} -mindepth 1 -maxdepth 1 ! -name tests.log ! -name home -exec rm -rf {{}} + 2>/dev/null; true"
)
MAX_LOG = 4 << 20
CHANNEL_LIMIT = 8 << 20  # the test run's events, on the shell's terminal
MAX_SOURCES = 200  # test modules read for the canaries (the graded files and their directories)
log = logging.getLogger(__name__)


def test_ids(row: Any, name: str) -> list[str]:
    value = field(row, name) or []
    return json.loads(value) if isinstance(value, str) else list(value)  # SWE-bench stores JSON strings


@dataclass
class Grading:
    """What is graded for a row, before any sandbox."""

    runner: TestRunner
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    test_patch: str
    task_files: set[str]  # files of the tests: never the agent's to change
    roots: tuple[str, ...]  # the repository's import roots, relative to it ("" and e.g. "src")

    @property
    def test_ids(self) -> list[str]:
        return list(dict.fromkeys(self.fail_to_pass + self.pass_to_pass))

    @property
    def test_files(self) -> list[str]:
        parsed = (self.runner.parse_id(t) for t in self.test_ids)
        return sorted({tid.file for tid in parsed if tid is not None})


def plan_grading(row: Any, env: RepoEnv) -> Grading:
    runner = runner_for(field(row, "test_runner"))
    f2p, p2p = test_ids(row, "FAIL_TO_PASS"), test_ids(row, "PASS_TO_PASS")
    test_patch = field(row, "test_patch") or ""
    files = {tid.file for tid in map(runner.parse_id, f2p + p2p) if tid is not None}
    files |= {t.split("::")[0] for t in f2p + p2p if "::" in t}  # doctest items: their file too
    root = env.pythonpath.strip("./")
    return Grading(runner, f2p, p2p, test_patch, patch_files(test_patch) | files, ("", root) if root else ("",))


async def _sh(sb: SandboxAPI, script: str, timeout: float = 120.0, activate: str = "") -> tuple[int | None, str]:
    """A grader step: bash in CLEAN, nothing of the sandbox shell's state. With `activate` (the task's
    Python environment: its shell prefix, or "true"), the sandbox's own PATH, to find its Python."""
    body = f"{activate} && {script}" if activate else script
    clean = CLEAN.format(path='"$PATH"' if activate else SYSTEM_PATH)
    result = await sb.bash(f"{clean} /bin/bash --noprofile --norc -c {shlex.quote(body)}", timeout=timeout)
    if result.timed_out:
        raise SandboxError(f"evaluation step timed out after {timeout}s: {script[:120]}")
    return result.exit_code, result.output


async def evaluate_patch(
    row: Any,
    patch: str,
    spec: SandboxSpec,
    repo_dir: Path | None,
    timeout_s: float = 300.0,
    test_env: Path | None = None,
    backends: Backends | None = None,
) -> dict:
    """Grade `patch` for `row` in a fresh sandbox (see the module docstring), started through
    `backends` (a server's own; default: the process's)."""
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
    fields |= _dropped(first)
    if not first.kept.strip():
        return fields | {
            "reward": 0.0,
            "patch_applied": False,
            "reason": "the patch only changes files the grader keeps",
        }
    eval_spec = task_spec(spec, row, repo_dir, test_env)
    eval_spec = eval_spec.model_copy(
        update={
            "network": False,
            "env": eval_spec.env | {"PYTHONDONTWRITEBYTECODE": "1"},
            "output_limit_bytes": CHANNEL_LIMIT,
        }
    )
    started = time.monotonic()
    async with await create_sandbox(eval_spec, backends=backends) as sb:
        repo_path = await stage_repo(sb, row, scrub=False)
        repo = shlex.quote(repo_path)
        base, files = await _graded_base(sb, repo, grading.test_patch, env.activate)
        names = ImportNames(
            grading.roots,
            installed=await _importable(sb, env.activate, test_env is not None),
            tests=_test_packages(grading, files),
            existing=_top_entries(files, grading.roots),
        )
        plan = plan_patch(patch, grading.task_files, names)
        fields |= _dropped(plan)
        if not plan.kept.strip():
            return fields | {
                "reward": 0.0,
                "patch_applied": False,
                "reason": "the patch only changes files the grader keeps",
            }
        method, output = await _apply_agent_patch(sb, repo, plan.kept)
        if method is None:
            return fields | {
                "reward": 0.0,
                "patch_applied": False,
                "reason": "the patch does not apply",
                "apply_output": output[-1200:],
            }
        fields |= {"patch_applied": True, "apply_method": method}
        reset = await _neutralise(sb, repo, base, grading.task_files)
        fields["test_files_reset"] = reset
        if reset is None:
            return fields | {"reward": 0.0, "reason": "the patch's changes to test files could not be undone"}
        canaries = await _write_canaries(sb, repo_path, grading, files)
        fields["canaries"] = {
            "renamed": len(canaries.renamed),
            "must_fail": len(canaries.must_fail),
            "uncovered": canaries.uncovered[:20],
        }
        before = await _fingerprint(sb, repo)
        verdict, log_text, timed_out = await _run_tests(sb, repo_path, grading, canaries, env, timeout_s, test_env)
        after = await _fingerprint(sb, repo)
        changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
        verdict.evidence += [
            f"{p} was written while the tests ran" for p in changed if is_protected(p, grading.task_files)
        ][:20]
    if verdict.setup_error:
        raise VerifierError(f"task {field(row, 'instance_id')} cannot run as staged: {verdict.setup_error}")
    return fields | {"test_runner": grading.runner.name} | _score(grading, verdict, log_text, timed_out, started)


def _dropped(plan) -> dict[str, Any]:
    return {
        "dropped": plan.dropped,
        "test_files_dropped": sorted(plan.dropped),
        "tool_config": plan.tool_config,
    }


async def _graded_base(sb: SandboxAPI, repo: str, test_patch: str, activate: str) -> tuple[str, list[str]]:
    """Apply test_patch to the pristine tree and take that tree as the graded base: (tree id, its files)."""
    await _sh(sb, f"mkdir -p {HOME} {GUARD_DIR} && chmod 700 {HOME}")
    if test_patch:
        await sb.write_file(f"{WORK}/test.diff", test_patch)
        rc, out = await _sh(sb, f"cd {repo} && {GIT} apply --whitespace=nowarn {WORK}/test.diff")
        if rc != 0:  # the task is broken, not the agent's patch
            raise VerifierError(f"test_patch does not apply to the base commit: {out[-500:]}")
    rc, out = await _sh(
        sb,
        f"cd {repo} && {GIT} add -A -f && {GIT} write-tree > {WORK}/base && "
        f"{GIT} ls-tree -r -z --name-only $(cat {WORK}/base) > {WORK}/files",
    )
    if rc != 0:
        raise SandboxError(f"could not record the graded base: {out[-500:]}")
    tree = (await sb.read_bytes(f"{WORK}/base")).decode().strip()
    files = [p for p in (await sb.read_bytes(f"{WORK}/files")).decode(errors="surrogateescape").split("\0") if p]
    return tree, files


async def _importable(sb: SandboxAPI, activate: str, with_env: bool) -> frozenset[str]:
    """Top-level names the sandbox's Python imports before the repository is on sys.path."""
    env_path = f" {ENV_MOUNT}/site-packages" if with_env else ""
    script = (
        "import pkgutil, sys; sys.path += sys.argv[1:]; "
        "print(' '.join(sorted({m.name for m in pkgutil.iter_modules()} | set(sys.builtin_module_names))))"
    )
    rc, out = await _sh(sb, f"python -I -c {shlex.quote(script)}{env_path}", activate=activate or "true")
    return top_level_names(out.split()) if rc == 0 else frozenset()


def _test_packages(grading: Grading, files: list[str]) -> frozenset[str]:
    """The top-level packages (or modules) the graded test modules are imported under."""
    present, tops = set(files), set()
    for path in grading.test_files:
        parts = path.split("/")
        top = parts[-1].removesuffix(".py")
        for i in range(len(parts) - 1, 0, -1):
            if "/".join([*parts[:i], "__init__.py"]) not in present:
                break
            top = parts[i - 1]
        tops.add(top)
    return frozenset(tops)


def _top_entries(files: list[str], roots: tuple[str, ...]) -> frozenset[str]:
    out = set()
    for root in roots:
        prefix = f"{root}/" if root else ""
        out |= {prefix + p[len(prefix) :].split("/")[0] for p in files if p.startswith(prefix)}
    return frozenset(out)


FUZZY_PATCH = "patch -p1 --batch --forward --fuzz=3 --no-backup-if-mismatch -u -i {work}/agent.diff"
APPLY_AGENT_PATCH = (
    "cd {repo} && if "
    + GIT
    + " apply --whitespace=nowarn {work}/agent.diff 2>{work}/apply.err; then echo APPLIED=git; "
    "elif "
    + FUZZY_PATCH
    + " --dry-run >{work}/patch.out 2>&1 && "
    + FUZZY_PATCH
    + " >/dev/null; then echo APPLIED=patch; "
    "else echo APPLIED=no; tail -c 600 {work}/apply.err; tail -c 600 {work}/patch.out; fi"
)


async def _apply_agent_patch(sb: SandboxAPI, repo: str, patch: str) -> tuple[str | None, str]:
    """`git apply`, else `patch --fuzz=3` (dry run first: all or nothing); (method or None, output)."""
    await sb.write_file(f"{WORK}/agent.diff", patch)
    rc, out = await _sh(sb, APPLY_AGENT_PATCH.format(work=WORK, repo=repo))
    if "APPLIED=no" in out or rc != 0:
        return None, out
    return ("git apply" if "APPLIED=git" in out else "patch --fuzz=3"), out


async def _neutralise(sb: SandboxAPI, repo: str, base: str, task_files: set[str]) -> list[str] | None:
    """Reset protected paths that differ from the graded base (raw blobs: no filter, attribute or
    hook applies); returns them (None: could not)."""
    rc, _ = await _sh(
        sb,
        f"cd {repo} && {GIT} add -A -f && {GIT} diff --cached --name-only -z --no-renames {base} > {WORK}/changed",
    )
    if rc != 0:
        return None
    changed = [p for p in (await sb.read_bytes(f"{WORK}/changed")).decode(errors="surrogateescape").split("\0") if p]
    protected = sorted(p for p in changed if is_protected(p, task_files))
    if not protected:
        return []
    await sb.write_file(f"{WORK}/reset", "\0".join(protected) + "\0")
    rc, _ = await _sh(
        sb,
        f"cd {repo} && while IFS= read -r -d '' p; do "
        f'rm -rf -- "$p" || exit 1; '
        f'mode=$({GIT} ls-tree {base} -- "$p" | cut -d" " -f1); '
        f'if [ -n "$mode" ]; then mkdir -p -- "$(dirname -- "$p")" || exit 1; '
        f'if [ "$mode" = 120000 ]; then ln -s -- "$({GIT} cat-file blob "{base}:$p")" "$p" || exit 1; '
        f'else {GIT} cat-file blob "{base}:$p" > "$p" || exit 1; [ "$mode" = 100755 ] && chmod +x -- "$p"; fi; fi; '
        f"done < {WORK}/reset",
    )
    return protected if rc == 0 else None


async def _write_canaries(sb: SandboxAPI, repo_path: str, grading: Grading, files: list[str]) -> CanaryPlan:
    """Read the graded test modules (and their directories', for mixins), write them back with canaries."""
    dirs = {f.rsplit("/", 1)[0] if "/" in f else "" for f in grading.test_files}
    wanted = [f for f in grading.test_files if f in files]
    wanted += [f for f in files if f.endswith(".py") and (f.rsplit("/", 1)[0] if "/" in f else "") in dirs]
    sources = {}
    for path in list(dict.fromkeys(wanted))[:MAX_SOURCES]:
        sources[path] = (await sb.read_bytes(f"{repo_path}/{path}")).decode(errors="surrogateescape")
    runner = grading.runner
    plan = await asyncio.to_thread(  # parses every source: CPU-bound, off the event loop
        plan_canaries, grading.fail_to_pass, grading.pass_to_pass, sources, runner.parse_id, runner.format_id
    )
    for path, text in plan.sources.items():
        await sb.write_file(f"{repo_path}/{path}", text.encode(errors="surrogateescape"))
    return plan


# What the test run could use to change what runs or how: Python files, start-up hooks, configuration.
FINGERPRINT = (
    "find . -path ./.git -prune -o -type f \\( -name '*.py' -o -name '*.pth' -o -name '*.ini' -o -name '*.toml' "
    "-o -name '*.cfg' \\) -print0 | sort -z | xargs -0 -r sha256sum -- > {work}/fingerprint 2>/dev/null; true"
)


async def _fingerprint(sb: SandboxAPI, repo: str) -> dict[str, str]:
    """path -> sha256 of the repository's Python and configuration files (find and sha256sum: no git, whose
    repository config the test run could have rewritten)."""
    await _sh(sb, f"cd {repo} && " + FINGERPRINT.format(work=WORK))
    out = (await sb.read_bytes(f"{WORK}/fingerprint")).decode(errors="surrogateescape")
    return {line[66:].removeprefix("./"): line[:64] for line in out.splitlines() if len(line) > 66}


async def _run_tests(
    sb: SandboxAPI,
    repo_path: str,
    grading: Grading,
    canaries: CanaryPlan,
    env: RepoEnv,
    timeout_s: float,
    test_env: Path | None,
) -> tuple[Verdict, str, bool]:
    """Run the graded ids and the canaries under the runner's guard; the verdict from its events."""
    runner = grading.runner
    guard = f"{GUARD_DIR}/{runner.guard}"
    await sb.write_file(guard, await asyncio.to_thread((GUARD_SOURCES / runner.guard).read_text))
    roots = [f"{repo_path}/{r}".rstrip("/") if r else repo_path for r in grading.roots[::-1]]
    env_paths = [f"{ENV_MOUNT}/site-packages"] if test_env is not None else []
    ids = _interleave(canaries.run_ids(grading.test_ids))
    command = runner.command(guard, ids, roots, env_paths)
    # The tests' own children see the repository on PYTHONPATH, as they would outside the grader.
    children = ":".join([*roots, *env_paths])
    run = (
        f"cd {shlex.quote(repo_path)} && {env.activate or 'true'} && "
        f'env -i PATH="$PATH" HOME={HOME} LANG=C.UTF-8 TMPDIR=/tmp PYTHONDONTWRITEBYTECODE=1 '
        f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONPATH={shlex.quote(children)} "
        f"timeout -k 5 {int(timeout_s)} {command} 3>&1 >{WORK}/tests.log 2>&1"
    )
    result = await sb.bash(run, timeout=timeout_s + 60)
    if result.timed_out:
        raise SandboxError(f"the test run did not end after {timeout_s + 60:.0f}s")
    if sb.own_pid_namespace:  # whatever the run left behind is not the grader's: end it before looking
        await sb.bash(END_STRAYS, timeout=60)
    await sb.bash(FREE_SCRATCH, timeout=60)
    await _sh(sb, f"tail -c {MAX_LOG} {WORK}/tests.log > {WORK}/tests.tail")
    log_text = (await sb.read_bytes(f"{WORK}/tests.tail")).decode(errors="replace")
    verdict = judge(
        runner,
        grading.test_ids,
        canaries,
        result.output,
        log_text,
        repo_path,
        lambda p: is_protected(p, grading.task_files),
    )
    if result.truncated:
        verdict.evidence.append("the run wrote more than the grader's channel holds")
    if result.shell_restarted:
        verdict.evidence.append("the test run ended the grader's shell")
    return verdict, log_text, result.exit_code in (124, 137)


def _interleave(ids: list[str]) -> list[str]:
    """Graded ids and canaries in one order that says nothing about which is which (by name)."""
    return sorted(dict.fromkeys(ids))


def _score(grading: Grading, verdict: Verdict, log_text: str, timed_out: bool, started: float) -> dict:
    """reward 1.0 iff every listed test passed, by the guard's events and the runner's output alike,
    and the run can be trusted (see monitor.py)."""
    ids = grading.test_ids
    results = verdict.statuses
    failed = [t for t in ids if results.get(t) != "passed"]
    tampered = bool(verdict.evidence)
    fields = {
        "reward": 1.0 if not failed and verdict.complete and not tampered else 0.0,
        "runner_tampered": tampered,
        "tamper_evidence": verdict.evidence[:20],
        "tests_passed": len(ids) - len(failed),
        "tests_failed": len(failed),
        "failed_tests": failed[:50],
        "fail_to_pass_passed": sum(results.get(t) == "passed" for t in grading.fail_to_pass),
        "pass_to_pass_passed": sum(results.get(t) == "passed" for t in grading.pass_to_pass),
        "tests_timed_out": timed_out,
        "eval_seconds": round(time.monotonic() - started, 2),
        "log_tail": log_text[-2000:] if failed or tampered or not verdict.complete else "",
    }
    fields["resolved"] = fields["reward"] == 1.0
    if tampered:
        fields["reason"] = "runner_tampered"
    elif timed_out:
        fields["reason"] = "the tests timed out"
    elif not verdict.complete:
        fields["reason"] = "the test run did not complete"
    elif failed:
        fields["reason"] = f"{len(failed)} of {len(ids)} tests did not pass"
        kinds = sorted({note for t, note in verdict.notes.items() if t in failed})
        if kinds:
            fields["reason"] += f" ({'; '.join(kinds)})"
    fields["test_notes"] = dict(list(verdict.notes.items())[:20])
    return fields


async def agent_diff(
    sandbox: SandboxAPI, base_commit: str, repo_path: str = "/workspace", max_bytes: int = 1 << 20
) -> str:
    """The agent's changes against base_commit, from the AGENT's sandbox at the end of the rollout.

    Run in a clean bash (the agent's aliases, functions, GIT_* variables and global git config do not
    apply); a deleted or broken .git is restored from the read-only base when there is one. Binary and
    non-UTF-8 files are left out (they would not apply), and files past max_bytes in total.
    repo_path: where the repository is (repos.repo_env(row).repo_path; /testbed for images).
    """
    out_dir = f"/tmp/prorl-diff-{random.randbytes(4).hex()}"
    repo, base = shlex.quote(repo_path), shlex.quote(base_commit)
    script = (
        f"mkdir -p {HOME} && cd {repo} && mkdir -p {out_dir} && "
        f"{{ {GIT} rev-parse -q --verify {base}^{{commit}} >/dev/null || "
        f"{{ test -d {REPO_MOUNT}/.git && rm -rf .git && cp -a {REPO_MOUNT}/.git .git; }}; }} && "
        f"{GIT} add -A && {GIT} diff --cached {DIFF_OPTS} {base} > {out_dir}/all.diff && "
        f"head -c {8 * max_bytes} {out_dir}/all.diff > {out_dir}/head.diff && wc -c < {out_dir}/all.diff"
    )
    clean = CLEAN.format(path=SYSTEM_PATH)
    result = await sandbox.bash(f"{clean} /bin/bash --noprofile --norc -c {shlex.quote(script)}", timeout=300)
    if result.timed_out:
        raise SandboxError(f"computing the agent's diff timed out: {result.output[-500:]}")
    if result.exit_code != 0:  # the agent broke its repository (e.g. removed .git in an image): nothing to score
        log.warning("no diff from sandbox %s: %s", sandbox.id, result.output[-500:])
        return ""
    total = int(result.output.strip().splitlines()[-1])
    text = (await sandbox.read_bytes(f"{out_dir}/head.diff")).decode(errors="replace")
    sections = [s.text for s in split_patch(text)]
    if total > 8 * max_bytes and sections:
        sections = sections[:-1]  # cut off mid-section
    kept, size = [], 0
    for section in sections:
        binary = "\nBinary files " in section or "\nGIT binary patch" in section or "\ufffd" in section  # or not UTF-8
        if binary or size + len(section) > max_bytes:
            continue
        kept.append(section)
        size += len(section)
    return "".join(kept)
