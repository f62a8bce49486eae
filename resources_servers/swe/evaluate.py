# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SWE EVAL, SWE-bench style, in a fresh sandbox (never the agent's, which the agent controlled).

1. An empty patch scores 0 at once: no sandbox, no test run.
2. The base repository is staged as for the agent (repos.stage_repo).
3. The agent's patch is applied: `git apply`, else `patch -p1 --fuzz=3` (dry run first, so
   all or nothing). Sections for protected files are dropped first, so a stale test hunk
   cannot sink an otherwise good patch. A patch that does not apply scores 0, with a reason.
4. Test edits are neutralised: every path that now differs from the base commit (tracked
   changes and new files, ignored ones included) that is protected is reset to the base
   version, or removed if new. Protected: files of test_patch and of the test ids;
   test_*.py, *_test.py, conftest.py and anything under a tests/, test/ or testing/
   directory; pytest config (pytest.ini, pytest.toml, tox.ini, and setup.cfg /
   pyproject.toml whose pytest section changed); sitecustomize, usercustomize, *.pth; and
   top-level modules that would shadow the test runner (pytest, pluggy, ...).
5. test_patch is applied (it must apply: if not, the task is broken -> VerifierError).
6. FAIL_TO_PASS + PASS_TO_PASS run under `timeout` with pytest -rA; the short summary is
   parsed (swebench's parse_log_pytest rules, against the requested ids so ids with spaces
   work; pytest 9's SUBFAILED lines fail their parent test). Not using the swebench package
   itself: it pulls in docker, datasets, modal and pre-commit.
reward 1.0 iff every listed test PASSED (or XFAIL, as SWE-bench grades). Not covered: code
under test can still special-case the tests' inputs or patch pytest at import time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prorl_gym.sandbox import Sandbox, SandboxError, SandboxFileNotFound, SandboxSpec, create_sandbox
from prorl_gym.verify.pool import VerifierError
from resources_servers.swe.repos import ENV_MOUNT, GIT, REPO_MOUNT, RepoEnv, field, repo_env, stage_repo, task_spec
from resources_servers.swe.runners import GUARD_SOURCES, TestRunner, Verdict, judge, runner_for

TEST_DIRS = {"tests", "test", "testing"}
PROTECTED_NAMES = {
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "sitecustomize.py",
    "usercustomize.py",
}
RUNNER_MODULES = {"pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "exceptiongroup", "tomli", "pygments"}
PYTEST_SECTIONS = {"setup.cfg": r"\[tool:pytest\]", "pyproject.toml": r"\[tool\.pytest[\].]"}
DIFF_OPTS = "--no-color --no-ext-diff --no-textconv --no-renames --src-prefix=a/ --dst-prefix=b/"
WORK = "/tmp/prorl-eval"
GUARD_DIR = f"{WORK}/guard"
MAX_LOG = 4 << 20
log = logging.getLogger(__name__)


def test_ids(row: Any, name: str) -> list[str]:
    value = field(row, name) or []
    return json.loads(value) if isinstance(value, str) else list(value)  # SWE-bench stores JSON strings


def patch_files(patch: str) -> set[str]:
    return {p for paths, _ in split_patch(patch) for p in paths}


def split_patch(patch: str) -> list[tuple[list[str], str]]:
    """(paths, text) per file section of a git or plain unified diff."""
    lines = patch.splitlines(keepends=True)
    git = any(line.startswith("diff --git ") for line in lines)
    starts = (
        [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
        if git
        else [
            i
            for i, line in enumerate(lines)
            if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        ]
    )
    sections = []
    for n, start in enumerate(starts):
        text = lines[start : starts[n + 1] if n + 1 < len(starts) else len(lines)]
        paths = {_strip(line[4:]) for line in text if line.startswith(("--- ", "+++ "))}
        if git:
            m = re.match(r'diff --git ("?a/.*?"?) ("?b/.*"?)$', text[0].rstrip("\n"))
            paths |= {_strip(p) for p in m.groups()} if m else set()
        sections.append((sorted(p for p in paths if p), "".join(text)))
    return sections


def _strip(path: str) -> str:
    path = path.split("\t")[0].strip().strip('"')
    return "" if path == "/dev/null" else path.split("/", 1)[1] if "/" in path else path


def is_protected(path: str, task_files: set[str], roots: tuple[str, ...] = ("",)) -> bool:
    parts = path.split("/")
    name = parts[-1]
    if path in task_files or name in PROTECTED_NAMES or name.endswith(".pth"):
        return True
    if (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"):
        return True
    if any(part in TEST_DIRS for part in parts[:-1]):
        return True
    for root in roots:  # a module on sys.path that would be imported instead of the test runner's own
        prefix = f"{root}/" if root else ""
        if path.startswith(prefix) and path[len(prefix) :].split("/")[0].removesuffix(".py") in RUNNER_MODULES:
            return True
    return False


def pytest_section(text: str, name: str) -> str:
    """The pytest part of a setup.cfg / pyproject.toml (up to the next unrelated header)."""
    header = PYTEST_SECTIONS[name]
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("["):
            inside = bool(re.match(header, line)) or (
                inside and name == "pyproject.toml" and line.startswith("[tool.pytest")
            )
        if inside:
            out.append(line)
    return "\n".join(out)


async def _sh(sb: Sandbox, command: str, timeout: float = 120.0) -> tuple[int | None, str]:
    result = await sb.bash(command, timeout=timeout)
    if result.timed_out:
        raise SandboxError(f"evaluation step timed out after {timeout}s: {command[:120]}")
    return result.exit_code, result.output


# Shell steps of the evaluation, run in the fresh sandbox ({repo}: the repository, {work}: WORK).
LIST_UNTRACKED = "mkdir -p {work} && cd {repo} && " + GIT + " ls-files -o -z | sort -z > {work}/before"
FUZZY_PATCH = "patch -p1 --batch --forward --fuzz=3 --no-backup-if-mismatch -i {work}/agent.diff"
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
APPLY_TEST_PATCH = "cd {repo} && " + GIT + " apply --whitespace=nowarn {work}/test.diff"
# The tests under their runner's guard: the guard's key is on fd 9 only (its file deleted first).
RUN_TESTS = (
    "( exec 9< {work}/guard.key && rm -f {work}/guard.key && cd {repo} && {activate} && {runner_env} && "
    "export PRORL_GUARD_KEY_FD=9 PRORL_GUARD_REPORT={work}/guard.report PRORL_GUARD_CONFTESTS={conftests} "
    "PRORL_GUARD_TRUSTED={trusted} && "
    "timeout -k 5 {timeout} {command} ) > {work}/tests.log 2>&1; echo TESTS_RC=$?"
)
LIST_CONFTESTS = "cd {repo} && " + GIT + " ls-files -z -- '*conftest.py' > {work}/conftests"
KEEP_LOG_TAIL = "tail -c " + str(MAX_LOG) + " {work}/tests.log > {work}/tests.tail"


@dataclass
class Grading:
    """What is graded for a row and a patch, before any sandbox: the tests and the patch's non-test part."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    test_patch: str
    task_files: set[str]  # files of the tests: never the agent's to change
    roots: tuple[str, ...]  # where modules that would shadow the test runner live
    kept_patch: str  # the agent's patch without its sections for protected files
    dropped: list[str]  # the protected files those sections touched

    @property
    def test_ids(self) -> list[str]:
        return list(dict.fromkeys(self.fail_to_pass + self.pass_to_pass))


def plan_grading(row: Any, patch: str, env: RepoEnv) -> Grading:
    f2p, p2p = test_ids(row, "FAIL_TO_PASS"), test_ids(row, "PASS_TO_PASS")
    test_patch = field(row, "test_patch") or ""
    task_files = patch_files(test_patch) | {t.split("::")[0] for t in f2p + p2p}
    roots = ("", env.pythonpath.strip("./")) if env.pythonpath.strip("./") else ("",)
    sections = split_patch(patch)
    dropped = sorted({p for paths, _ in sections for p in paths if is_protected(p, task_files, roots)})
    kept = "".join(text for paths, text in sections if not any(is_protected(p, task_files, roots) for p in paths))
    return Grading(f2p, p2p, test_patch, task_files, roots, kept, dropped)


async def evaluate_patch(
    row: Any,
    patch: str,
    spec: SandboxSpec,
    repo_dir: Path | None,
    timeout_s: float = 300.0,
    test_env: Path | None = None,
) -> dict:
    """Grade `patch` for `row` in a fresh sandbox: apply, neutralise test edits, run the tests, score."""
    env = repo_env(row, spec.workspace)
    grading = plan_grading(row, patch, env)
    fields: dict[str, Any] = {
        "patch_bytes": len(patch.encode()),
        "fail_to_pass_total": len(grading.fail_to_pass),
        "pass_to_pass_total": len(grading.pass_to_pass),
    }
    if not patch.strip():
        return fields | {"reward": 0.0, "patch_applied": False, "reason": "empty patch"}
    if not grading.test_ids:
        raise VerifierError(f"task {field(row, 'instance_id')}: no FAIL_TO_PASS or PASS_TO_PASS tests")
    fields["test_files_dropped"] = grading.dropped
    if not grading.kept_patch.strip():
        return fields | {"reward": 0.0, "patch_applied": False, "reason": "the patch only changes test files"}
    eval_spec = task_spec(spec, row, repo_dir, test_env)
    eval_spec = eval_spec.model_copy(
        update={"network": False, "env": eval_spec.env | {"PYTHONDONTWRITEBYTECODE": "1"}}
    )
    started = time.monotonic()
    async with await create_sandbox(eval_spec) as sb:
        repo_path = await stage_repo(sb, row, scrub=False)
        repo = shlex.quote(repo_path)
        await _sh(sb, LIST_UNTRACKED.format(work=WORK, repo=repo))
        method, output = await _apply_agent_patch(sb, repo, grading.kept_patch)
        if method is None:
            return fields | {
                "reward": 0.0,
                "patch_applied": False,
                "reason": "the patch does not apply",
                "apply_output": output[-1200:],
            }
        fields |= {"patch_applied": True, "apply_method": method}
        base = shlex.quote(field(row, "base_commit"))
        reset = await _neutralise(sb, repo, base, grading.task_files, grading.roots)
        fields["test_files_reset"] = reset
        if reset is None:
            return fields | {"reward": 0.0, "reason": "the patch's changes to test files could not be undone"}
        if grading.test_patch:
            await _apply_test_patch(sb, repo, grading.test_patch)
        runner = runner_for(field(row, "test_runner"))
        trusted = ENV_MOUNT if test_env is not None else ""  # read-only: its code may implement runner hooks
        verdict, log_text, timed_out = await _run_tests(
            sb, repo_path, runner, env.activate, grading.test_ids, timeout_s, trusted
        )
    return fields | {"test_runner": runner.name} | _score(grading, verdict, log_text, timed_out, started)


async def _apply_agent_patch(sb: Sandbox, repo: str, patch: str) -> tuple[str | None, str]:
    """`git apply`, else `patch --fuzz=3` (dry run first: all or nothing); (method or None, output)."""
    await sb.write_file(f"{WORK}/agent.diff", patch)
    rc, out = await _sh(sb, APPLY_AGENT_PATCH.format(work=WORK, repo=repo))
    if "APPLIED=no" in out or rc != 0:
        return None, out
    return ("git apply" if "APPLIED=git" in out else "patch --fuzz=3"), out


async def _apply_test_patch(sb: Sandbox, repo: str, test_patch: str) -> None:
    await sb.write_file(f"{WORK}/test.diff", test_patch)
    rc, out = await _sh(sb, APPLY_TEST_PATCH.format(work=WORK, repo=repo))
    if rc != 0:  # the task is broken, not the agent's patch
        raise VerifierError(f"test_patch does not apply to the base commit: {out[-500:]}")


async def _run_tests(
    sb: Sandbox, repo_path: str, runner: TestRunner, activate: str, ids: list[str], timeout_s: float, trusted: str
) -> tuple[Verdict, str, bool]:
    """Run `ids` and two fresh canaries under the runner's guard; (verdict, log tail, timed out)."""
    repo, canaries, key = shlex.quote(repo_path), runner.canaries(), secrets.token_hex(32)
    guard_source = await asyncio.to_thread((GUARD_SOURCES / runner.guard).read_text)
    await sb.write_file(f"{GUARD_DIR}/{runner.guard}", guard_source)
    for path, text in canaries.files.items():
        await sb.write_file(f"{repo_path}/{path}", text)
    await sb.write_file(f"{WORK}/guard.key", key)
    await _sh(sb, LIST_CONFTESTS.format(work=WORK, repo=repo))
    listed = (await sb.read_bytes(f"{WORK}/conftests")).decode(errors="surrogateescape").split("\0")
    conftests = ":".join(f"{repo_path}/{p}" for p in listed if p and ":" not in p)
    run = RUN_TESTS.format(
        work=WORK,
        repo=repo,
        activate=activate or "true",
        runner_env=runner.environment(GUARD_DIR),
        conftests=shlex.quote(conftests),
        trusted=shlex.quote(trusted),
        timeout=int(timeout_s),
        command=runner.command([*ids, canaries.must_pass, canaries.must_fail], GUARD_DIR),
    )
    _, out = await _sh(sb, run, timeout=timeout_s + 60)
    await _sh(sb, KEEP_LOG_TAIL.format(work=WORK))
    log_text = (await sb.read_bytes(f"{WORK}/tests.tail")).decode(errors="replace")
    try:
        report = (await sb.read_bytes(f"{WORK}/guard.report")).decode(errors="replace")
    except SandboxFileNotFound:
        report = None  # the run never reached its end (killed, timed out, os._exit)
    timed_out = "TESTS_RC=124" in out or "TESTS_RC=137" in out
    return judge(runner, ids, canaries, log_text, report, key), log_text, timed_out


def _score(grading: Grading, verdict: Verdict, log_text: str, timed_out: bool, started: float) -> dict:
    """reward 1.0 iff every listed test passed, by the runner's guard and its own output alike,
    and the run can be trusted (the canaries right, the runner untouched)."""
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
        fields["reason"] = "the test run did not complete (no report from the runner's guard)"
    elif failed:
        fields["reason"] = f"{len(failed)} of {len(ids)} tests did not pass"
    return fields


async def _neutralise(
    sb: Sandbox, repo: str, base: str, task_files: set[str], roots: tuple[str, ...]
) -> list[str] | None:
    """Reset protected paths the patch changed; returns them (None: could not)."""
    _, _ = await _sh(
        sb,
        (
            f"cd {repo} && {GIT} ls-files -o -z | sort -z > {WORK}/after && "
            f"{{ {GIT} diff --name-only -z --no-renames {base}; comm -z -13 {WORK}/before {WORK}/after; }} > {WORK}/changed"
        ),
    )
    changed = [p for p in (await sb.read_bytes(f"{WORK}/changed")).decode(errors="surrogateescape").split("\0") if p]
    protected = [p for p in changed if is_protected(p, task_files, roots)]
    for path in (p for p in changed if p.rsplit("/", 1)[-1] in PYTEST_SECTIONS and p not in protected):
        q = shlex.quote(path)
        await _sh(
            sb,
            f"cd {repo} && {{ {GIT} show {base}:{q} 2>/dev/null || true; }} > {WORK}/base.cfg && cp -- {q} {WORK}/new.cfg 2>/dev/null || : > {WORK}/new.cfg",
        )
        old, new = [(await sb.read_bytes(f"{WORK}/{n}.cfg")).decode(errors="replace") for n in ("base", "new")]
        name = path.rsplit("/", 1)[-1]
        if pytest_section(old, name) != pytest_section(new, name):
            protected.append(path)
    if not protected:
        return []
    await sb.write_file(f"{WORK}/reset", "\0".join(protected) + "\0")
    rc, _ = await _sh(
        sb,
        (
            f"cd {repo} && export GIT_LITERAL_PATHSPECS=1 && while IFS= read -r -d '' p; do "
            f'if {GIT} cat-file -e {base}:"$p" 2>/dev/null; then rm -rf -- "$p" && {GIT} checkout -q {base} -- "$p" || exit 1; '
            f'else rm -rf -- "$p" || exit 1; fi; done < {WORK}/reset'
        ),
    )
    return sorted(protected) if rc == 0 else None


async def agent_diff(
    sandbox: Sandbox, base_commit: str, repo_path: str = "/workspace", max_bytes: int = 1 << 20
) -> str:
    """The agent's changes against base_commit, from the AGENT's sandbox at the end of the rollout.

    Run in a clean bash (the agent's shell may carry functions, aliases, GIT_* variables);
    a deleted or broken .git is restored from the read-only base when there is one. Binary
    and non-UTF-8 files are left out (they would not apply), and files past max_bytes in total.
    repo_path: where the repository is (repos.repo_env(row).repo_path; /testbed for images).
    """
    out_dir = f"/tmp/prorl-diff-{secrets.token_hex(4)}"
    repo, base = shlex.quote(repo_path), shlex.quote(base_commit)
    script = (
        f"cd {repo} && mkdir -p {out_dir} && "
        f"{{ {GIT} rev-parse -q --verify {base}^{{commit}} >/dev/null || "
        f"{{ test -d {REPO_MOUNT}/.git && rm -rf .git && cp -a {REPO_MOUNT}/.git .git; }}; }} && "
        f"{GIT} add -A && {GIT} diff --cached {DIFF_OPTS} {base} > {out_dir}/all.diff && "
        f"head -c {8 * max_bytes} {out_dir}/all.diff > {out_dir}/head.diff && wc -c < {out_dir}/all.diff"
    )
    clean = "/usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 /bin/bash --noprofile --norc -c"
    result = await sandbox.bash(f"{clean} {shlex.quote(script)}", timeout=300)
    if result.timed_out:
        raise SandboxError(f"computing the agent's diff timed out: {result.output[-500:]}")
    if result.exit_code != 0:  # the agent broke its repository (e.g. removed .git in an image): nothing to score
        log.warning("no diff from sandbox %s: %s", sandbox.id, result.output[-500:])
        return ""
    total = int(result.output.strip().splitlines()[-1])
    text = (await sandbox.read_bytes(f"{out_dir}/head.diff")).decode(errors="replace")
    sections = split_patch(text)
    if total > 8 * max_bytes and sections:
        sections = sections[:-1]  # cut off mid-section
    kept, size = [], 0
    for _, section in sections:
        binary = "\nBinary files " in section or "\nGIT binary patch" in section or "\ufffd" in section  # or not UTF-8
        if binary or size + len(section) > max_bytes:
            continue
        kept.append(section)
        size += len(section)
    return "".join(kept)
