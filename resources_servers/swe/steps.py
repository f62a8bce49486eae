# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The grader's steps inside the EVAL sandbox (evaluate.py orders them).

Every step is a fresh `bash` started through absolute paths (`/usr/bin/env -i ... /bin/bash --noprofile
--norc -c`): no function, alias or variable of any shell applies, nothing of the sandbox's environment,
its own HOME, no global or system git config, git's hooks, fsmonitor and attributes file off. git is used
for `git apply` alone, outside any repository (the repository's .git is gone before the agent's patch
is applied); what changed is decided by fingerprints (tree.py), never by git.

The test run (`run_sealed`): one bash that opens the event channel (a FIFO read by `cat`, whose output
is the grader's terminal, read outside the sandbox as it comes), starts the runner's command under the
seal (guard/prorl_seal.py: its own session, Landlock), with stdin from /dev/null and no descriptor of
the terminal; when the command ends it kills every process that did not exist before the run (all but
pid 1, the grader's shells and itself), waits for `cat` to drain the channel, frees the scratch space
the run filled, keeps the end of its log, and says the command's status last. Nothing of the run can write to the terminal but through the channel.
"""

from __future__ import annotations

import json
import logging
import random
import shlex
from typing import Any

from prorl_gym.sandbox import SandboxAPI, SandboxError
from resources_servers.swe.patches import split_patch
from resources_servers.swe.repos import REPO_MOUNT
from resources_servers.swe.tree import SCRIPT as TREE

WORK = "/tmp/prorl-eval"
HOME = f"{WORK}/home"
GUARD_DIR = f"{WORK}/guard"
SEAL = f"{GUARD_DIR}/prorl_seal.py"
LOG = f"{WORK}/tests.log"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
CLEAN = (
    f"/usr/bin/env -i PATH={{path}} HOME={HOME} LANG=C.UTF-8 TMPDIR=/tmp GIT_CONFIG_NOSYSTEM=1 "
    "GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0"
)
GIT = (
    "git -c safe.directory=* -c core.quotepath=false -c core.fsmonitor=false -c core.hooksPath=/dev/null "
    "-c core.attributesFile=/dev/null -c core.untrackedCache=false -c core.autocrlf=false"
)
DIFF_OPTS = "--no-color --no-ext-diff --no-textconv --no-renames --src-prefix=a/ --dst-prefix=b/"
# Every process of the sandbox that did not exist before the run (`spare`: pid 1, the grader's shells,
# the channel's reader, this step's bash: none of them can be signalled by a sealed run, so none can be
# replaced by one of its processes under a recycled pid), however it detached; again until none is left.
SNAPSHOT = 'spare=""; for d in /proc/[0-9]*; do spare="$spare ${d#/proc/}"; done'
END_STRAYS = (
    "for round in 1 2 3 4 5 6 7 8; do left=0; for d in /proc/[0-9]*; do p=${d#/proc/}; "
    'case " $spare " in *" $p "*) continue;; esac; kill -9 "$p" 2>/dev/null && left=1; done; '
    "[ $left = 0 ] && break; done"
)
# The scratch space the run filled (a full /tmp would fail the grader's next steps): everything in /tmp and
# /dev/shm but the grader's own directory, and in it everything but the log and HOME.
FREE_SCRATCH = (
    f"find /tmp /dev/shm -mindepth 1 -maxdepth 1 ! -path {WORK} -exec rm -rf {{}} + 2>/dev/null; "
    f"find {WORK} -mindepth 1 -maxdepth 1 ! -name tests.log ! -name home -exec rm -rf {{}} + 2>/dev/null; true"
)
CHANNEL = f"{WORK}/channel"
log = logging.getLogger(__name__)
RUN = (  # the grader's files go first: the run sees nothing of the graded base but the tree (no test sources, no diff)
    f"find {WORK} -mindepth 1 -maxdepth 1 ! -name guard ! -name home -exec rm -rf {{{{}}}} + && "
    "cd {repo} && rm -rf .git && {activate} && rm -f {channel} && mkfifo -m 600 {channel} && "
    "{{ /bin/cat {channel} & }} && catpid=$! && exec 4>{channel} && rm -f {channel} && {snapshot} && "
    '/usr/bin/env -i PATH="$PATH" HOME={home} LANG=C.UTF-8 TMPDIR=/tmp PYTHONDONTWRITEBYTECODE=1 '
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONPATH={children} "
    "/usr/bin/timeout -k 5 {limit} python -I -B {seal} --events-fd 3 --write /tmp --write /dev/shm -- {command} "
    "3>&4 4>&- >{log} 2>&1 </dev/null; rc=$?; exec 4>&-; {end_strays}; "
    "wait $catpid; {free_scratch}; tail -c {log_bytes} {log} > {tail} 2>/dev/null; "
    'echo "@grader rc=$rc"'
)
LOG_TAIL = f"{WORK}/tests.tail"  # the end of the runner's own log, after the run


async def sh(sb: SandboxAPI, script: str, timeout: float = 120.0, activate: str = "") -> tuple[int | None, str]:
    """A grader step: a fresh bash in CLEAN. With `activate` (the task's Python environment: its shell
    prefix, or "true"), the sandbox's own PATH, to find its Python."""
    body = f"{activate} && {script}" if activate else script
    clean = CLEAN.format(path='"$PATH"' if activate else SYSTEM_PATH)
    result = await sb.bash(f"{clean} /bin/bash --noprofile --norc -c {shlex.quote(body)}", timeout=timeout)
    if result.timed_out:
        raise SandboxError(f"evaluation step timed out after {timeout}s: {script[:120]}")
    return result.exit_code, result.output


async def python(
    sb: SandboxAPI, activate: str, code: str, *args: str, timeout: float = 300.0
) -> tuple[int | None, str]:
    """The sandbox's Python (isolated: nothing of the repository or its environment on sys.path) on `code`."""
    argv = " ".join(shlex.quote(a) for a in args)
    return await sh(sb, f"python -I -c {shlex.quote(code)} {argv}", timeout, activate=activate or "true")


async def job(sb: SandboxAPI, activate: str, name: str, steps: list[dict[str, Any]], timeout: float = 300.0) -> dict:
    """Steps of tree.SCRIPT in the sandbox's Python, in one process; their results by name. The results
    stay in the sandbox at WORK/<name>.out (a later step may read a tree from there)."""
    spec, out = f"{WORK}/{name}.job", f"{WORK}/{name}.out"
    await sb.write_file(spec, json.dumps(steps))
    rc, output = await python(sb, activate, TREE, spec, out, timeout=timeout)
    if rc != 0:
        raise SandboxError(f"the grader's step {name} failed in the sandbox: {output[-800:]}")
    return json.loads(await sb.read_bytes(out))


async def run_sealed(
    sb: SandboxAPI, repo: str, activate: str, command: str, children: str, limit: int, log_bytes: int
) -> tuple[str, int | None, str | None]:
    """The test run (see the module docstring): (what came on the channel, the command's status or None if
    the grader's run step did not finish, what went wrong with the step itself if anything did). Strays
    are ended only in a sandbox with its own pid namespace (an unisolated one sees the host's processes)."""
    script = RUN.format(
        repo=shlex.quote(repo),
        activate=activate or "true",
        channel=CHANNEL,
        home=HOME,
        children=shlex.quote(children),
        limit=int(limit),
        seal=SEAL,
        command=command,
        log=LOG,
        free_scratch=FREE_SCRATCH,
        log_bytes=log_bytes,
        tail=LOG_TAIL,
        snapshot=SNAPSHOT if sb.own_pid_namespace else "true",
        end_strays=END_STRAYS if sb.own_pid_namespace else "true",
    )
    clean = CLEAN.format(path='"$PATH"')
    result = await sb.bash(f"{clean} /bin/bash --noprofile --norc -c {shlex.quote(script)}", timeout=limit + 90)
    lines = result.output.replace("\r", "").split("\n")
    status = lines[-2] if len(lines) > 1 and lines[-2].startswith("@grader rc=") and not lines[-1] else ""
    rc = int(status.split("=", 1)[1]) if status.split("=", 1)[-1].isdigit() else None
    problem = None
    if result.timed_out:
        problem = "the test run did not end: something it left held the grader's channel"
    elif result.truncated:
        problem = "the run wrote more than the grader's channel holds"
    elif result.shell_restarted:
        problem = "the test run ended the grader's shell"
    elif rc is None:
        problem = "the grader's run step did not finish"
    return "\n".join(lines[:-2] if status else lines), rc, problem


async def agent_diff(
    sandbox: SandboxAPI, base_commit: str, repo_path: str = "/workspace", max_bytes: int = 1 << 20
) -> str:
    """The agent's changes against base_commit, from the AGENT's sandbox at the end of the rollout.

    Run through absolute paths in a fresh bash with an empty environment (no function, alias, GIT_*
    variable or global git config of the agent's applies), with a git directory and index of the grader's
    own: nothing of the agent's .git but its objects (and its excludes) is used, so no config, filter,
    diff driver or `gitdir:` pointer of the agent's steers what is taken; the base's objects also come from
    the read-only base when there is one. Binary and non-UTF-8 files are left out (they would not apply),
    and files past max_bytes in total. Whatever comes out is the agent's text to the grader: it is parsed
    as untrusted (patches.py) and applied by git alone. A diff that cannot be taken (the agent broke its
    repository or its sandbox) is an empty patch: reward 0, never an infrastructure failure.
    repo_path: where the repository is (repos.repo_env(row).repo_path; /testbed for images).
    """
    out_dir = f"/tmp/prorl-diff-{random.randbytes(4).hex()}"
    repo, base = shlex.quote(repo_path), shlex.quote(base_commit)
    own = f"{out_dir}/git"
    git = f"{GIT} --git-dir={own} --work-tree=."
    script = (
        f"mkdir -p {HOME} {out_dir} && cd {repo} && {GIT} init -q --bare --template= {own} && "
        f'for o in {REPO_MOUNT}/.git/objects {repo}/.git/objects; do if test -d "$o"; then echo "$o"; fi; done '
        f"> {own}/objects/info/alternates && "
        f"mkdir -p {own}/info && {{ test ! -f .git/info/exclude || cp .git/info/exclude {own}/info/exclude; }} && "
        f"{git} rev-parse -q --verify {base}^{{commit}} >/dev/null && {git} read-tree {base} && "
        f"{git} add -A && {git} diff --cached {DIFF_OPTS} {base} > {out_dir}/all.diff && "
        f"head -c {8 * max_bytes} {out_dir}/all.diff > {out_dir}/head.diff && wc -c < {out_dir}/all.diff"
    )
    clean = CLEAN.format(path=SYSTEM_PATH)
    result = await sandbox.bash(f"{clean} /bin/bash --noprofile --norc -c {shlex.quote(script)}", timeout=300)
    last = result.output.strip().splitlines()[-1:] or [""]
    if result.timed_out or result.exit_code != 0 or not last[0].isdigit():
        log.warning("no diff from sandbox %s: %s", sandbox.id, result.output[-500:])
        return ""
    text = (await sandbox.read_bytes(f"{out_dir}/head.diff")).decode(errors="replace")
    sections = [s.text for s in split_patch(text)]
    if int(last[0]) > 8 * max_bytes and sections:
        sections = sections[:-1]  # cut off mid-section
    kept, size = [], 0
    for section in sections:
        binary = "\nBinary files " in section or "\nGIT binary patch" in section or "\ufffd" in section  # or not UTF-8
        if binary or size + len(section) > max_bytes:
            continue
        kept.append(section)
        size += len(section)
    return "".join(kept)
