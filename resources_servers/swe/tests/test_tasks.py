# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""SWE tasks end to end with real sandboxes: the shipped data, the evaluator's defences, the agent's diff.

The repository cache (data/swe/cache) builds from the rows' recipes on first use (the
sdists come from the PyPI mirror), exactly as INIT does.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, create_sandbox
from resources_servers.swe.evaluate import evaluate_patch
from resources_servers.swe.patches import is_protected, split_patch
from resources_servers.swe.prompts import build_row
from resources_servers.swe.repos import (
    RepoCache,
    RepoPrepError,
    prepare_repo,
    prepare_test_env,
    repo_env,
    stage_repo,
    task_spec,
)
from resources_servers.swe.runners import parse_pytest
from resources_servers.swe.steps import agent_diff

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = [json.loads(line) for line in (DATA / "example.jsonl").read_text().splitlines()]
TASKS = [json.loads(line) for line in (DATA / "tasks.jsonl").read_text().splitlines()]
# A conftest that turns every test report into a pass (checked by hand to win when not neutralised).
CHEAT_CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
IDS = [row["instance_id"] for row in EXAMPLES]


def new_file(path: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    body = "".join("+" + line for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


def overriding_tests(row: dict) -> tuple[str, str]:
    """Append to the failing tests' file definitions that replace them with tests that pass."""
    tests = [split_test_id(row, test) for test in row["FAIL_TO_PASS"]]
    test_file = tests[0][0]
    defs = []
    for parts in tests:
        if parts[0] == test_file and len(parts) == 2:
            defs.append(f"def {parts[1].split('[')[0]}():\n    pass\n")
        elif parts[0] == test_file:
            defs.append(f"{parts[1]}.{parts[2].split('[')[0]} = lambda self: None\n")
    return test_file, "\n\n" + "\n".join(defs)


def split_test_id(row: dict, test: str) -> list[str]:
    """[file, (class,) name] of a test id of either runner (unittest ids are dotted)."""
    if row.get("test_runner") == "unittest":
        *module, cls, name = test.split(".")
        return ["/".join(module) + ".py", cls, name]
    return test.split("::")


async def grade(row: dict, patch: str, spec: SandboxSpec) -> dict:
    """evaluate_patch as the server calls it: the row's repository and test environment prepared."""
    repo, env = await prepare_repo(row), await prepare_test_env(row, spec.kernel_python)
    return await evaluate_patch(row, patch, spec, repo, 120, test_env=env)


async def append_patch(row: dict, spec: SandboxSpec, path: str, text: str) -> str:
    """A real git diff that appends text to a file of the base repository."""
    repo = await prepare_repo(row)
    async with await create_sandbox(task_spec(spec, row, repo)) as sb:
        await stage_repo(sb, row)
        await sb.write_file(f"/workspace/{path}", (await sb.read_file(f"/workspace/{path}")) + text)
        return await agent_diff(sb, row["base_commit"])


@pytest.mark.parametrize("row", EXAMPLES, ids=IDS)
async def test_gold_patch_resolves(row, sandbox_root):
    result = await grade(row, row["patch"], SandboxSpec(root_dir=sandbox_root))
    assert result["reward"] == 1.0, result
    assert result["fail_to_pass_passed"] == len(row["FAIL_TO_PASS"]) and result["tests_failed"] == 0


@pytest.mark.parametrize("row", EXAMPLES, ids=IDS)
async def test_empty_patch_scores_zero_without_running_tests(row):
    spec = SandboxSpec(root_dir="/proc/no-such-dir")  # any sandbox would fail to start: none is
    result = await evaluate_patch(row, "  \n", spec, None, 120)
    assert result["reward"] == 0.0 and result["reason"] == "empty patch"


@pytest.mark.parametrize("row", EXAMPLES, ids=IDS)
async def test_editing_the_tests_does_not_win(row, sandbox_root):
    spec = SandboxSpec(root_dir=sandbox_root)
    test_file, overrides = overriding_tests(row)
    # The failing tests redefined to pass, a conftest that passes everything, a harmless source change.
    patch = await append_patch(row, spec, test_file, overrides)
    patch += new_file("conftest.py", CHEAT_CONFTEST) + new_file("NOTES.txt", "looked at the tests\n")
    result = await grade(row, patch, spec)
    assert result["reward"] == 0.0, result
    assert {test_file, "conftest.py"} <= set(result["test_files_dropped"])
    assert result["fail_to_pass_passed"] == 0 and result["pass_to_pass_passed"] == len(row["PASS_TO_PASS"])


async def test_pytest_config_changes_are_dropped(sandbox_root):
    row = next(r for r in EXAMPLES if r["repo"] == "pytoolz/toolz")  # its pytest config is in pyproject.toml
    spec = SandboxSpec(root_dir=sandbox_root)
    patch = await append_patch(row, spec, "pyproject.toml", "\n[tool.pytest.ini_options.extra]\nx = 1\n")
    result = await grade(row, patch + row["patch"], spec)
    assert result["dropped"] == {"pyproject.toml": "pytest configuration"} and result["reward"] == 1.0, result


@pytest.mark.parametrize("row", EXAMPLES, ids=IDS)
async def test_patch_that_does_not_apply_scores_zero(row, sandbox_root):
    # The bug patch is already in the base commit: applying it again fails (also with fuzz).
    result = await grade(row, row["environment"]["bug_patch"], SandboxSpec(root_dir=sandbox_root))
    assert result["reward"] == 0.0 and not result["patch_applied"]
    assert result["reason"] == "the patch does not apply" and "tests_passed" not in result


async def test_agent_diff_is_what_the_agent_changed(sandbox_root):
    """The agent applies the fix and leaves junk behind; its diff is the fix alone and resolves the task."""
    row = EXAMPLES[0]
    repo = await prepare_repo(row)
    spec = task_spec(SandboxSpec(root_dir=sandbox_root), row, repo)
    async with await create_sandbox(spec) as sb:
        assert await stage_repo(sb, row) == "/workspace"
        await sb.write_file("/tmp/fix.diff", row["patch"])
        setup = (
            "git apply /tmp/fix.diff && printf 'PNG\\0\\1\\377' > blob.bin && printf '\\377\\376x' > latin.txt && python -m pytest -q -p no:cacheprovider -o addopts= "
            + row["FAIL_TO_PASS"][0]
        )
        assert (await sb.bash(setup, timeout=120)).exit_code == 0
        assert (await sb.bash("git log --oneline | wc -l")).output.strip() == "1"  # only the base commit
        await sb.bash("alias git=false; export GIT_DIR=/nowhere; cd /")  # the agent's shell state must not matter
        diff = await agent_diff(sb, row["base_commit"])
    assert [s.paths for s in split_patch(diff)] == [s.paths for s in split_patch(row["patch"])]
    result = await evaluate_patch(row, diff, SandboxSpec(root_dir=sandbox_root), repo, 120)
    assert result["reward"] == 1.0, result


async def test_gold_patches_of_every_project_resolve(sandbox_root):
    """The first tasks of each project in tasks.jsonl (the prepare script validated all of them the same way);
    Django's and SymPy's: tests/test_project_runners.py (each of their graded runs costs tens of seconds)."""
    gate, spec, started = asyncio.Semaphore(2), SandboxSpec(root_dir=sandbox_root), time.monotonic()
    own = [r for r in TASKS if r.get("test_runner") not in ("django", "sympy")]
    sample = [row for repo in sorted({r["repo"] for r in own}) for row in [r for r in own if r["repo"] == repo][:2]]

    async def gold(row: dict) -> float:
        async with gate:
            return (await grade(row, row["patch"], spec))["reward"]

    rewards = await asyncio.gather(*(gold(row) for row in sample))
    failed = [row["instance_id"] for row, reward in zip(sample, rewards) if reward != 1.0]
    assert not failed, failed
    print(f"{len(sample)} gold patches in {time.monotonic() - started:.1f}s")


def test_the_data_has_the_promised_shape():
    assert len(EXAMPLES) == 5 and len({r["repo"] for r in EXAMPLES}) >= 2
    assert len(TASKS) >= 200 and len({r["repo"] for r in TASKS}) >= 8
    assert len({r["instance_id"] for r in TASKS}) == len(TASKS)
    for row in TASKS:
        assert row["task_id"] == f"swe/{row['instance_id']}" and row["test_patch"] == ""
        assert [m["role"] for m in row["responses_create_params"]["input"]] == ["system", "user"]
        assert build_row({k: v for k, v in row.items() if k not in ("task_id", "responses_create_params")}) == row
        assert not any(is_protected(p, set()) for section in split_patch(row["patch"]) for p in section.paths)
        assert 1 <= len(row["FAIL_TO_PASS"]) <= 20 and not set(row["FAIL_TO_PASS"]) & set(row["PASS_TO_PASS"])


async def test_base_commit_is_deterministic(tmp_path):
    """A fresh cache builds the same base commit as the one recorded (and refuses a wrong one)."""
    row = EXAMPLES[-1]
    shared = await prepare_repo(row)  # the default cache has the sdist now: reuse it, no second download
    for name in ("cache", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "sdists").symlink_to(shared.parents[1] / "sdists")
    cache = RepoCache(tmp_path / "cache")
    await cache.prepare(row)  # raises if HEAD != base_commit
    with pytest.raises(RepoPrepError, match="base_commit"):
        await RepoCache(tmp_path / "other").prepare(row | {"base_commit": "0" * 40})


def test_pytest_summary_parsing():
    log = "\n".join(
        [
            "PASSED fake::test_x",  # captured output before the summary must not count
            "=========================== short test summary info ============================",
            "PASSED t.py::T::test_a",
            "PASSED t.py::test_p[a b]",
            "SUBFAILED(i=1) t.py::T::test_a - AssertionError: 1 not less than 1",
            "FAILED t.py::test_p[c - d] - AssertionError: assert 'c - d' == 'a b'",
            "XFAIL t.py::test_xf",
            "SKIPPED [1] t.py:16: unconditional skip",
            "========== 2 failed, 3 passed in 0.02s ==========",
        ]
    )
    ids = [
        "t.py::T::test_a",
        "t.py::test_p[a b]",
        "t.py::test_p[c - d]",
        "t.py::test_xf",
        "t.py::test_gone",
        "fake::test_x",
    ]
    assert parse_pytest(log, ids) == {
        "t.py::T::test_a": "failed",
        "t.py::test_p[a b]": "passed",
        "t.py::test_p[c - d]": "failed",
        "t.py::test_xf": "xfail",  # a pass only where the graded source marks it (monitor.py)
    }


def test_protected_paths():
    assert all(
        is_protected(p, set())
        for p in [
            "conftest.py",
            "src/pkg/conftest.py",
            "tests/helpers.py",
            "pkg/test/data.txt",
            "test_x.py",
            "pkg/x_test.py",
            "pytest.ini",
            "sub/tox.ini",
            "setup.cfg",
            "sub/pyproject.toml",
            "sitecustomize.py",
            "a.pth",
        ]
    )
    assert not any(
        is_protected(p, set()) for p in ["src/pkg/core.py", "pkg/testing_utils.py", "README.md", "pytest.py"]
    )
    assert is_protected("docs/example.py", {"docs/example.py"})


def test_image_rows():
    env = repo_env({"instance_id": "x", "image_name": "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"})
    assert (env.kind, env.repo_path, env.image) == (
        "image",
        "/testbed",
        "docker://swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
    )
    spec = task_spec(
        SandboxSpec(backend="apptainer"), {"environment": {"image": "/images/t.sif", "pythonpath": "src"}}, None
    )
    assert spec.image == "/images/t.sif" and spec.env["PYTHONPATH"] == "/testbed/src" and not spec.binds
    assert spec.backend.disk_copies == ("/testbed",)  # Apptainer: the root-owned repository copied to disk


# An image's repository as images have been seen to keep it: the future (the fix) in its object store under
# every name git has for it (branch, tag, remote, stash, notes, reflog, ORIG_HEAD, FETCH_HEAD, a kept pack,
# a commit-graph, objects borrowed through alternates), HEAD reset to the base.
FUTURE_REPO = """set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
mkdir -p /workspace/elsewhere && git init -q --bare /workspace/elsewhere
mkdir -p /workspace/testbed && cd /workspace/testbed && git init -q
c() { git commit -q --allow-empty -m "$1"; }
echo 'def f(): return 1' > m.py && git add m.py && c old
echo 'def f(): return 2' > m.py && git add m.py && c base && base=$(git rev-parse HEAD)
git tag v1
echo 'THE_FIX = 42' > fix.py && git add fix.py && c future && future=$(git rev-parse HEAD)
git tag v2 && git branch later && git notes add -m 'see the fix' HEAD
git remote add origin https://example.invalid/x.git && git update-ref refs/remotes/origin/main HEAD
echo 'stashed = 1' > m.py && git stash -q
git pack-refs --all && git repack -a -d -q && touch .git/objects/pack/$(ls .git/objects/pack | grep pack$ | head -1 | sed 's/pack$/keep/')
git commit-graph write --reachable 2>/dev/null || true
git push -q /workspace/elsewhere later:refs/heads/later
echo /workspace/elsewhere/objects > .git/objects/info/alternates
git reset -q --hard $base && git update-ref ORIG_HEAD $future && echo "$future branch 'later' of x" > .git/FETCH_HEAD
touch built.so && echo "$base $future $(git rev-parse $future:fix.py)"
"""


async def test_image_repository_history_is_scrubbed(sandbox_root):
    """An image's repository keeps only what base_commit reaches: no later commit, tree or blob however it
    was stored, no ref, reflog or leftover head that names one (issue 37, class H)."""
    async with await create_sandbox(SandboxSpec(root_dir=sandbox_root)) as sb:
        made = await sb.bash(f"bash -c {shlex.quote(FUTURE_REPO)}", timeout=120)
        base, future, blob = made.output.strip().splitlines()[-1].split()
        row = {
            "instance_id": "x",
            "base_commit": base,
            "environment": {"image": "docker://x", "repo_path": "/workspace/testbed"},
        }
        seen = (await sb.bash(f"cd /workspace/testbed && git cat-file -e {blob} && echo BEFORE")).output
        assert "BEFORE" in seen  # the fix is in the store
        assert await stage_repo(sb, row) == "/workspace/testbed"
        checks = {
            "log": "git log --all --format=%s | sort | tr '\\n' ' '",
            "names": "git remote; git tag; git stash list; git notes list 2>/dev/null; ls .git | grep -E '_HEAD|^logs$' ; true",
            "future": f"git cat-file -e {future} 2>/dev/null && echo HAS_FUTURE; git cat-file -e {blob} 2>/dev/null && echo HAS_FIX; true",
            "stored": "git cat-file --batch-all-objects --batch-check='%(objectname)' | sort > /tmp/all && "
            "git rev-list --objects --all --indexed-objects | cut -d' ' -f1 | sort -u > /tmp/reach && comm -23 /tmp/all /tmp/reach | wc -l",
            "unreachable": "git fsck --unreachable --no-reflogs 2>/dev/null | wc -l",
            "borrowed": "cat .git/objects/info/alternates 2>/dev/null; ls .git/objects/pack | grep -v -E '\\.(pack|idx)$'; true",
            "status": "pwd; git status --porcelain",
        }
        out = {name: (await sb.bash(f"cd /workspace/testbed && {cmd}")).output.strip() for name, cmd in checks.items()}
    assert out["log"].split() == ["base", "old"], out
    assert out["names"] == "" and out["future"] == "" and out["borrowed"] == "", out
    assert out["stored"] == "0" and out["unreachable"] == "0", out
    assert out["status"] == "/workspace/testbed", out  # clean; the image's build artifact excluded
