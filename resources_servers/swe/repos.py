# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Where a SWE task's repository comes from, and how it gets into a sandbox.

A row's `environment` says how to get the repository at `base_commit`:

    {"sdist": "toolz==1.2.0", "sha256": "...", "bug_patch": "<diff>", "pythonpath": "."}
        local recipe: the PyPI sdist (downloaded once, sha256-checked) with the bug patch
        applied, committed as the only commit with a fixed identity and date, so
        `base_commit` is the same on every machine. Built into the cache by prepare_repo.
    {"repo_dir": "/abs/path", "pythonpath": "."}
        local, prepared already (a git repository whose HEAD is base_commit).
    {"image": "docker://...", "repo_path": "/testbed", "activate": "<shell prefix>"}
        apptainer: the repository is inside the image (SWE-bench, SWE-Gym and R2E-Gym put
        it at /testbed); top-level `image_name` / `docker_image` (SWE-smith, R2E-Gym) also work.

Local repositories are bound read-only at REPO_MOUNT and copied into the workspace; the
copy has a single commit, so no later history is visible. Image repositories are used in
place (their installed package points there) after SCRUB: their object store then holds
what base_commit reaches and nothing else (no later commit, tree or blob, however stored).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prorl_gym.errors import ProrlError
from prorl_gym.paths import REPO_ROOT
from prorl_gym.sandbox import RunsImages, SandboxAPI, SandboxError, SandboxSpec
from prorl_gym.sandbox.spec import Bind

ENV_MOUNT = "/task/env"  # the task's test environment inside sandboxes, read-only (site-packages/ on PYTHONPATH)
# Distributions of the test runner itself: a test environment never brings its own (the
# sandbox's are used), so a requirement cannot swap the runner the grader relies on.
RUNNER_DISTRIBUTIONS = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py", "exceptiongroup", "tomli")
REPO_MOUNT = "/task/repo"  # the prepared repository inside sandboxes, read-only (as app.py binds it)
DEFAULT_CACHE = REPO_ROOT / "data" / "swe" / "cache"
DEFAULT_IMAGE_REPO = "/testbed"
# SWE-bench images keep the test environment in conda env "testbed"; harmless elsewhere.
DEFAULT_ACTIVATE = "if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate testbed; fi"
# Generated files that must never end up in the agent's diff.
GITIGNORE = ["__pycache__/", "*.py[cod]", ".pytest_cache/", ".hypothesis/", ".coverage", ".tox/", ".mypy_cache/"]
# Fixed identity, date and message: the base commit's hash depends only on the tree.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "prorl-gym",
    "GIT_AUTHOR_EMAIL": "swe@prorl-gym.invalid",
    "GIT_COMMITTER_NAME": "prorl-gym",
    "GIT_COMMITTER_EMAIL": "swe@prorl-gym.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}
GIT = "git -c 'safe.directory=*' -c core.quotepath=false"  # inside sandboxes
GIT_SAFE = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
GIT_OPTS = [
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "init.defaultBranch=main",
]


class RepoPrepError(ProrlError):
    """The task's repository could not be prepared (download, checksum, patch, base commit)."""


@dataclass(frozen=True)
class RepoEnv:
    """How a row's repository appears inside a sandbox."""

    kind: Literal["local", "image"]
    repo_path: str  # where the agent works on it (the workspace for local rows)
    pythonpath: str  # relative to repo_path ("src" for src layouts), "" for none
    activate: str  # shell prefix before running Python (image environments)
    image: str | None = None


def environment_of(row: Any) -> dict:
    data = row if isinstance(row, dict) else row.model_dump()
    env = dict(data.get("environment") or {})
    for key in ("image_name", "docker_image"):
        if data.get(key) and "image" not in env and "repo_dir" not in env and "sdist" not in env:
            env["image"] = data[key]
    return env


def field(row: Any, name: str, default: Any = None) -> Any:
    return row.get(name, default) if isinstance(row, dict) else getattr(row, name, default)


def repo_env(row: Any, workspace: str = "/workspace") -> RepoEnv:
    env = environment_of(row)
    if "image" in env:
        image = env["image"] if "://" in env["image"] or env["image"].endswith(".sif") else f"docker://{env['image']}"
        return RepoEnv(
            "image",
            env.get("repo_path", DEFAULT_IMAGE_REPO),
            env.get("pythonpath", ""),
            env.get("activate", DEFAULT_ACTIVATE),
            image,
        )
    if "sdist" in env or "repo_dir" in env:
        return RepoEnv("local", workspace, env.get("pythonpath", "."), env.get("activate", ""))
    raise RepoPrepError(f"row {field(row, 'instance_id')!r}: environment needs one of sdist, repo_dir, image")


def pythonpath_of(env: RepoEnv) -> str:
    return "" if not env.pythonpath else os.path.normpath(os.path.join(env.repo_path, env.pythonpath))


def task_spec(spec: SandboxSpec, row: Any, repo_dir: Path | None, test_env: Path | None = None) -> SandboxSpec:
    """The sandbox for this task: the config's spec plus the repository (bound, or the image) and its
    test environment (bound read-only, after the repository on PYTHONPATH)."""
    env = repo_env(row, spec.workspace)
    paths = [pythonpath_of(env)] if env.pythonpath else []
    if test_env is not None:
        paths.append(f"{ENV_MOUNT}/site-packages")
    extra = {"PYTHONPATH": ":".join(paths)} if paths else {}
    binds = [b for b in spec.binds if b.dst not in (REPO_MOUNT, ENV_MOUNT)]
    if test_env is not None:
        binds.append(Bind(src=str(test_env), dst=ENV_MOUNT))
    if env.kind == "image":  # the image's repository belongs to its root: let git (ours, the agent's) use it
        update = {"image": env.image, "env": spec.env | extra | GIT_SAFE, "binds": binds}
        if isinstance(spec.backend, RunsImages):  # root-owned there: the sandbox works on its own copy
            update["backend"] = spec.backend.with_writable(env.repo_path)
        return spec.model_copy(update=update, deep=True)
    if repo_dir is None:
        raise RepoPrepError("a local SWE row needs its prepared repository (prepare_repo)")
    binds.append(Bind(src=str(repo_dir), dst=REPO_MOUNT, hide_packages=False))
    hidden = package_names(str(repo_dir), env.pythonpath, environment_of(row).get("sdist"))
    # A copy installed in the sandbox's Python (SymPy is, for the math environments) is hidden behind an empty
    # directory where the backend can: the repository's regular package then wins over that namespace portion.
    installed = sorted(set(hidden) & installed_names(spec.kernel_python))
    if installed and not spec.backend.hides_packages:
        raise RepoPrepError(
            f"the task's package {installed} is installed in the sandbox's Python ({spec.kernel_python}) and this "
            "backend does not hide it: its tests would import that copy, and the agent could read it"
        )
    update = {"binds": binds, "env": spec.env | extra, "hidden_packages": [*spec.hidden_packages, *hidden]}
    return spec.model_copy(update=update, deep=True)


# Top-level names of a source tree that are not the project's package.
NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts", "tools", "build"}
NOT_MODULES = {"setup", "conftest", "noxfile", "fabfile", "tasks", "versioneer", "manage", "tox", "run_tests"}


@functools.lru_cache(maxsize=1024)
def package_names(repo_dir: str, pythonpath: str, sdist: str | None = None) -> tuple[str, ...]:
    """The import names (and distribution name) of the package a prepared repository holds: what a
    sandbox must show nowhere else (SandboxSpec.hidden_packages). From its egg-info's top_level.txt
    when the sdist has one, else its top-level packages and modules. Cached: a few small reads."""
    repo, root = Path(repo_dir), Path(repo_dir) / (pythonpath or ".")
    names: set[str] = set()
    for listing in [*repo.glob("*.egg-info/top_level.txt"), *root.glob("*.egg-info/top_level.txt")]:
        names |= {line.strip() for line in listing.read_text(errors="replace").splitlines() if line.strip()}
    if not names and root.is_dir():
        for entry in root.iterdir():
            if entry.is_dir() and (entry / "__init__.py").exists():
                names.add(entry.name)
            elif entry.suffix == ".py":
                names.add(entry.stem)
    names = {n for n in names if n not in NOT_PACKAGES | NOT_MODULES and n.isidentifier()}
    if sdist:
        names.add(re.split(r"[=<>!~\[;@ ]", sdist, maxsplit=1)[0])
    return tuple(sorted(names))


@functools.lru_cache(maxsize=8)
def installed_names(python: str) -> frozenset[str]:
    """Top-level names installed in a virtual environment's site-packages (empty for a system Python)."""
    venv = Path(python).parent.parent
    if not (venv / "pyvenv.cfg").exists():
        return frozenset()
    found: set[str] = set()
    for site in venv.glob("lib/python*/site-packages"):
        for entry in site.iterdir():
            if entry.suffix in (".py", ".so") or (entry.is_dir() and "." not in entry.name):
                found.add(entry.name.split(".", 1)[0])
    return frozenset(found)


# An image's repository keeps only what base_commit reaches. Deleting refs is not enough (`git fsck
# --unreachable` and `cat-file --batch-all-objects` still list the future's commits and blobs: the fix):
# every ref, reflog and leftover head goes, borrowed objects come home and the link to them goes, .keep
# packs lose their keep, commit-graphs and indexes that name other commits go, then everything is repacked
# from what the base (HEAD, one branch at it, the index) reaches and the rest is pruned.
SCRUB = """set -e
G="git -c safe.directory=* -c core.quotepath=false -c core.fsmonitor=false -c core.hooksPath=/dev/null -c gc.auto=0"
base={base}
test "$($G rev-parse HEAD)" = "$base"
gd=$($G rev-parse --absolute-git-dir)
branch=$($G symbolic-ref -q --short HEAD || true)
$G read-tree "$base"
$G update-index -q --refresh >/dev/null || true
if [ -s "$gd/objects/info/alternates" ]; then $G repack -a -d -q; rm -f "$gd/objects/info/alternates"; fi
$G for-each-ref --format='%(refname)' | while read -r ref; do $G update-ref -d "$ref"; done
$G remote | while read -r r; do $G remote remove "$r"; done
if [ -n "$branch" ]; then $G update-ref "refs/heads/$branch" "$base"; else $G update-ref --no-deref HEAD "$base"; fi
rm -rf "$gd/logs" "$gd/refs/original" "$gd/rr-cache" "$gd/modules" "$gd/worktrees" "$gd/sequencer" \\
  "$gd/rebase-merge" "$gd/rebase-apply" "$gd/lost-found" "$gd/gitk.cache" "$gd/info/refs" "$gd/hooks" \\
  "$gd/objects/info/commit-graph" "$gd/objects/info/commit-graphs" "$gd/objects/pack/multi-pack-index"
rm -f "$gd"/*_HEAD "$gd"/BISECT_* "$gd/AUTO_MERGE" "$gd"/objects/pack/*.keep "$gd"/objects/pack/*.bitmap \\
  "$gd"/objects/pack/*.rev "$gd"/objects/pack/*.promisor
$G repack -a -d -q --no-write-bitmap-index
$G prune --expire=now
if [ -f "$gd/shallow" ]; then
  while read -r c; do $G cat-file -e "$c^{{commit}}" 2>/dev/null && echo "$c"; done < "$gd/shallow" > "$gd/shallow.kept" || true
  mv "$gd/shallow.kept" "$gd/shallow"; [ -s "$gd/shallow" ] || rm -f "$gd/shallow"
fi
"""


async def stage_repo(sandbox: SandboxAPI, row: Any, scrub: bool = True) -> str:
    """Put the repository at base_commit where the agent works, cd there; returns the path.

    An image's repository is scrubbed (SCRUB: only objects base_commit reaches stay in its object store)
    unless scrub=False (the grader's sandbox, which removes .git altogether). Untracked files present now
    (build artifacts of images) go to .git/info/exclude, so the agent's diff and the evaluator see only
    what changes from here on.
    """
    env = repo_env(row, sandbox.spec.workspace)
    base, repo = shlex.quote(field(row, "base_commit")), shlex.quote(env.repo_path)
    steps = [f"cp -a {REPO_MOUNT}/. {repo}/"] if env.kind == "local" else []
    steps.append(f'cd {repo} && test "$({GIT} rev-parse HEAD)" = {base}')
    if env.kind == "image" and scrub:
        steps.append(f"bash -c {shlex.quote(SCRUB.format(base=base))}")
    steps.append(f"mkdir -p .git/info && {GIT} ls-files -o --exclude-standard | sed 's|^|/|' >> .git/info/exclude")
    result = await sandbox.bash(f"( {' && '.join(steps)} ) && cd {repo}", timeout=1800)
    if result.timed_out or result.exit_code != 0:
        raise SandboxError(f"staging the repository at {env.repo_path} failed: {result.output[-500:]}")
    return env.repo_path


# ---------------------------------------------------------------------- the local cache


async def run_command(argv: list[str], cwd: Path | None = None, stdin: bytes | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=os.environ | GIT_ENV,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate(stdin)
    if proc.returncode != 0:
        raise RepoPrepError(
            f"{' '.join(argv[:4])} ... failed ({proc.returncode}): {out.decode(errors='replace')[-800:]}"
        )
    return out.decode(errors="replace")


def make_readable(path: Path, stop: Path) -> None:
    """o+rX on path's tree, o+x on its parents up to stop: the sandbox uid reads the bind."""
    for root, _dirs, files in os.walk(path):
        os.chmod(root, os.stat(root).st_mode | 0o755)
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o644)
    for parent in [path, *path.parents]:
        os.chmod(parent, os.stat(parent).st_mode | 0o711)
        if parent == stop:
            break


def extract_sdist(archive: Path, dest: Path) -> None:
    """The sdist's single top-level directory becomes dest (the 'data' filter: no escapes)."""
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        top.rename(dest)


def _drop_runner(site: Path) -> None:
    """Remove what a test environment brought of the test runner itself (see RUNNER_DISTRIBUTIONS)."""
    for entry in site.iterdir():
        if entry.name.removesuffix(".py").split("-", 1)[0].lower() in RUNNER_DISTRIBUTIONS:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def _add_gitignore(repo: Path) -> None:
    path = repo / ".gitignore"
    have = path.read_text().splitlines() if path.exists() else []
    missing = [line for line in GITIGNORE if line not in have]
    if missing:
        path.write_text("\n".join(have + missing) + "\n")


class RepoCache:
    """Prepared repositories under cache_dir: sdists/<sha256>/<file>, repos/<id>.<key>/.

    Content-addressed and built in a temporary directory that is renamed into place, so
    concurrent INITs (coroutines or processes) are safe; a lock per key avoids duplicate work.
    """

    def __init__(self, cache_dir: Path | str = DEFAULT_CACHE, pip: list[str] | None = None):
        self.cache_dir = Path(cache_dir).resolve()
        self.pip = pip or [sys.executable, "-m", "pip"]
        # asyncio locks belong to one event loop (tests run one loop per test): a set per loop
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(asyncio.get_running_loop(), {}).setdefault(key, asyncio.Lock())

    async def prepare(self, row: Any) -> Path | None:
        """The host directory to bind for this row (None: the repository is in an image)."""
        env = environment_of(row)
        if "repo_dir" in env:
            return Path(env["repo_dir"]).resolve()
        if "sdist" not in env:
            repo_env(row)  # an image row, or a clear error
            return None
        recipe = {k: env.get(k) for k in ("sdist", "sha256", "bug_patch", "pythonpath")}
        key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
        name = re.sub(r"[^A-Za-z0-9._-]", "_", str(field(row, "instance_id", "task")))[:80]
        target = self.cache_dir / "repos" / f"{name}.{key}"
        async with self._lock(key):
            if not target.is_dir():
                await self._build(env, target, field(row, "base_commit"))
        return target

    async def sdist(self, requirement: str, sha256: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", sha256 or ""):
            raise RepoPrepError(f"{requirement}: the recipe needs the sdist's sha256")
        folder = self.cache_dir / "sdists" / sha256
        async with self._lock(sha256):
            if not folder.is_dir():
                await asyncio.to_thread(folder.parent.mkdir, parents=True, exist_ok=True)
                tmp = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".dl-", dir=folder.parent))
                try:
                    # --no-binary for this project only: with :all: pip builds the sdist's build backend from source too (minutes)
                    name = re.split(r"[=<>!~\[;@ ]", requirement, maxsplit=1)[0]
                    await run_command(
                        [*self.pip, "download", "--no-deps", "--no-binary", name, "-q", "-d", str(tmp), requirement]
                    )
                    (archive,) = list(tmp.iterdir())
                    digest = await asyncio.to_thread(lambda: hashlib.sha256(archive.read_bytes()).hexdigest())
                    if digest != sha256:
                        raise RepoPrepError(f"{requirement}: sha256 {digest} != recipe's {sha256}")
                    await asyncio.to_thread(os.rename, tmp, folder)
                except OSError as exc:
                    if not folder.is_dir():  # not a lost race: a real failure
                        raise RepoPrepError(f"{requirement}: {exc}") from exc
                finally:
                    await asyncio.to_thread(shutil.rmtree, tmp, True)
        (archive,) = list(folder.iterdir())
        return archive

    async def test_env(self, requirements: list[str], python: str) -> Path:
        """envs/<key>/site-packages: the pinned requirements installed for `python` (pip --target),
        once per set and interpreter; built in a temporary directory and renamed into place,
        readable by the sandbox uid. Pins are required: an environment must be reproducible."""
        loose = [r for r in requirements if "==" not in r]
        if loose:
            raise RepoPrepError(f"test requirements must be pinned (name==version): {loose}")
        version = (await run_command([python, "-c", "import sys; print(sys.version.split()[0])"])).strip()
        key = hashlib.sha256(json.dumps([sorted(requirements), version]).encode()).hexdigest()[:16]
        target = self.cache_dir / "envs" / key
        async with self._lock(f"env-{key}"):
            if not target.is_dir():
                await self._build_env(requirements, python, target)
        return target

    async def _build_env(self, requirements: list[str], python: str, target: Path) -> None:
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".env-", dir=target.parent))
        try:
            site = work / "site-packages"
            pip = [python, "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"]
            try:
                await run_command([*pip, "--target", str(site), *requirements])
            except RepoPrepError as exc:
                raise RepoPrepError(f"the test environment {requirements} could not be built: {exc}") from None
            await asyncio.to_thread(_drop_runner, site)
            await asyncio.to_thread(make_readable, work, self.cache_dir)
            try:
                await asyncio.to_thread(os.rename, work, target)
            except OSError:
                if not target.is_dir():  # not a lost race: a real failure
                    raise
        finally:
            await asyncio.to_thread(shutil.rmtree, work, True)

    async def _build(self, env: dict, target: Path, base_commit: str | None) -> None:
        archive = await self.sdist(env["sdist"], env.get("sha256", ""))
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".build-", dir=target.parent))
        repo = work / "repo"
        try:
            await asyncio.to_thread(extract_sdist, archive, repo)
            # init first: inside another work tree (the cache under this repo) git apply would use that one
            await run_command(["git", *GIT_OPTS, "init", "-q"], repo)
            if env.get("bug_patch"):
                await run_command(
                    ["git", *GIT_OPTS, "apply", "--whitespace=nowarn", "-"], repo, env["bug_patch"].encode()
                )
            await asyncio.to_thread(_add_gitignore, repo)
            await run_command(["git", *GIT_OPTS, "add", "-A"], repo)
            await run_command(["git", *GIT_OPTS, "commit", "-q", "-m", f"{env['sdist']} (base)"], repo)
            head = (await run_command(["git", "rev-parse", "HEAD"], repo)).strip()
            if base_commit and head != base_commit:
                raise RepoPrepError(f"{env['sdist']}: built base commit {head} != row's base_commit {base_commit}")
            await asyncio.to_thread(make_readable, repo, self.cache_dir)
            try:
                await asyncio.to_thread(os.rename, repo, target)
            except OSError:
                if not target.is_dir():
                    raise
        finally:
            await asyncio.to_thread(shutil.rmtree, work, True)


_caches: dict[Path, RepoCache] = {}


async def prepare_repo(row: Any, cache_dir: Path | str = DEFAULT_CACHE) -> Path | None:
    """The prepared repository for a row (see RepoCache.prepare); one cache per directory."""
    return await _cache(cache_dir).prepare(row)


async def prepare_test_env(row: Any, python: str, cache_dir: Path | str = DEFAULT_CACHE) -> Path | None:
    """The row's test environment (its recipe's `test_requires`), installed for `python`; None without one."""
    requirements = environment_of(row).get("test_requires") or []
    return await _cache(cache_dir).test_env(list(requirements), python) if requirements else None


def _cache(cache_dir: Path | str) -> RepoCache:
    path = Path(cache_dir).resolve()
    return _caches.setdefault(path, RepoCache(path))
