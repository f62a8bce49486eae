# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Sandbox.fork / freeze: what a fork carries over, and that its template lives as long as its forks."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from prorl_gym.sandbox import create_sandbox
from prorl_gym.sandbox.errors import SandboxForkError
from prorl_gym.sandbox.fork import staging_spec
from prorl_gym.sandbox.leases import read_leases


@pytest.fixture(params=["repl", "ipython"])
async def runtime_sandbox(request, sandbox_spec):
    """A sandbox with each Python runtime: a fork carries the state of either."""
    sb = await create_sandbox(sandbox_spec.model_copy(update={"python_runtime": request.param}))
    try:
        yield sb
    finally:
        await sb.close()


async def test_a_fork_starts_where_its_parent_is_files_shell_and_python(runtime_sandbox):
    sandbox = runtime_sandbox
    await sandbox.bash("mkdir -p src && cd src && echo v1 > app.py && echo scratch > /tmp/notes")
    await sandbox.bash("export TASK=demo; greet() { echo hello-$1; }")
    await sandbox.python("import math, random\nrandom.seed(7)\nxs = [1, 2]\ndef total(): return sum(xs)")
    parent_next = await sandbox.python("import random as r2; s = r2.getstate(); print(r2.random()); r2.setstate(s)")
    (child,) = await sandbox.fork(1)
    try:
        shell = await child.bash("pwd; echo $TASK; greet x; cat app.py /tmp/notes")
        assert shell.output.split() == ["/workspace/src", "demo", "hello-x", "v1", "scratch"]
        assert ".prorl-fork-shell.sh" not in (await child.bash("ls -A /tmp")).output  # loaded, then gone
        py = await child.python("xs.append(3); print(total(), math.floor(2.5), random.random())")
        total, floor, drawn = py.output.split()
        assert (total, floor) == ("6", "2")  # a function of the namespace sees the namespace's xs
        assert drawn == parent_next.output.strip()  # the same random stream as the parent
    finally:
        await child.close()


async def test_forks_are_isolated_from_their_parent_and_from_each_other(sandbox):
    await sandbox.bash("echo original > shared.txt && echo original > /tmp/shared")
    await sandbox.python("data = {'n': 0}")
    forks = await sandbox.fork(2)
    try:
        first, second = forks
        await first.bash(
            "echo first > shared.txt && echo first > /tmp/shared && touch only-first && rm -f /tmp/shared"
        )
        await first.python("data['n'] = 1")
        for other in (second, sandbox):
            listing = await other.bash("cat shared.txt /tmp/shared; ls")
            assert listing.output.split() == ["original", "original", "shared.txt"]
            assert (await other.python("print(data['n'])")).output.strip() == "0"
        await second.bash("echo second > shared.txt")
        assert (await first.bash("cat shared.txt")).output.strip() == "first"
    finally:
        await asyncio.gather(*(f.close() for f in forks))


async def test_the_parent_goes_on_unchanged_and_keeps_no_trace_of_the_fork(sandbox):
    await sandbox.bash("cd /tmp && export A=1")
    await sandbox.python("v = 41")
    forks = await sandbox.fork(1)
    await forks[0].close()
    after = await sandbox.bash("pwd; echo $A; ls -A /tmp")
    assert after.output.split()[:2] == ["/tmp", "1"] and ".prorl-fork" not in after.output  # no state files left
    assert (await sandbox.python("print(v + 1)")).output.strip() == "42"


async def test_a_template_outlives_none_of_its_forks_and_is_leased_meanwhile(sandbox):
    root = sandbox.spec.root_dir
    template = await sandbox.freeze()
    forks = await template.spawn(2)
    await template.close()
    assert template.directory.exists() and template.id in {lease.sandbox_id for lease in read_leases(root)}
    await forks[0].close()
    assert (await forks[1].bash("cat /proc/self/mountinfo | grep -c overlay")).output.strip() != "0"
    assert template.directory.exists()
    await forks[1].close()
    assert not template.directory.exists()
    assert template.id not in {lease.sandbox_id for lease in read_leases(root)}
    with pytest.raises(SandboxForkError):
        await template.spawn(1)


async def test_forks_of_forks_and_the_template_is_never_written_by_a_fork(sandbox):
    await sandbox.bash("echo gen0 > gen")
    async with await sandbox.freeze() as template:
        (child,) = await template.spawn(1)
        try:
            await child.bash("echo gen1 > gen && mkdir deep && echo x > deep/y")
            (grandchild,) = await child.fork(1)
            try:
                assert (await grandchild.bash("cat gen deep/y")).output.split() == ["gen1", "x"]
            finally:
                await grandchild.close()
            frozen = template.directory / "files" / "workspace"
            assert (frozen / "gen").read_text() == "gen0\n" and not (frozen / "deep").exists()
        finally:
            await child.close()


async def test_values_that_cannot_be_pickled_are_named_and_the_rest_carries_over(sandbox):
    await sandbox.python("import threading\nlock = threading.Lock()\nkept = 'yes'")
    async with await sandbox.freeze() as template:
        assert template.dropped == ["lock"]
        (child,) = await template.spawn(1)
        try:
            result = await child.python("print(kept, 'lock' in dir())")
            assert result.output.split() == ["yes", "False"]
        finally:
            await child.close()


async def test_a_sandbox_without_a_kernel_forks_without_starting_one(sandbox):
    (child,) = await sandbox.fork(1)
    try:
        assert not sandbox.kernel_started and not child.kernel_started
        assert (await child.python("print(1 + 1)")).output.strip() == "2"
    finally:
        await child.close()


async def test_an_unisolated_sandbox_refuses_to_fork_with_a_typed_error(sandbox_spec):
    spec = sandbox_spec.with_backend(isolation="none")
    async with await create_sandbox(spec) as sandbox:
        with pytest.raises(SandboxForkError, match="cannot fork"):
            await sandbox.fork(1)
    assert not [p for p in Path(spec.root_dir).iterdir() if p.name.startswith("tpl-")]


async def test_a_staging_sandbox_gives_its_files_to_the_template_without_a_copy(sandbox_spec):
    staging = await create_sandbox(staging_spec(sandbox_spec))
    await staging.bash("mkdir -p repo && cd repo && seq 1 5000 > data && export STAGED=1")
    template = await staging.freeze(consume=True)
    assert staging.closed and not Path(staging.placement.private_dir).exists()
    assert (template.directory / "files" / "workspace" / "repo" / "data").stat().st_size > 0
    forks = await template.spawn(2)
    try:
        await forks[0].bash("echo changed > data")
        assert (await forks[1].bash("pwd; echo $STAGED; head -1 data")).output.split() == ["/workspace/repo", "1", "1"]
    finally:
        await template.close()
        await asyncio.gather(*(f.close() for f in forks))
    assert not template.directory.exists()


async def test_a_snapshot_of_a_fork_is_its_writes_over_its_template(sandbox, monkeypatch):
    """A fork's snapshot copies what the fork wrote (deletions and replaced directories included), not
    its workspace, and is stacked on the fork's template, which it keeps until it is gone too."""
    await sandbox.bash("mkdir -p keep gone/sub && seq 1 3000 > keep/big && echo a > gone/sub/f && echo t > /tmp/t")
    await sandbox.bash("echo old > edited && echo x > deleted && mkdir -p replaced && echo old > replaced/old")
    template = await sandbox.freeze()
    (fork,) = await template.spawn(1)
    await fork.bash("echo new > edited && rm deleted && rm -rf gone && rm -rf replaced && mkdir replaced")
    await fork.bash("echo fresh > replaced/new && echo added > added && cd keep && export STEP=2")
    await fork.python("counter = 5")
    snapshot = await fork.freeze()
    layer = snapshot.directory / "files" / "workspace"
    assert snapshot.spec.template_lowers == [template.spec.template_dir]
    assert not (layer / "keep" / "big").exists()  # unchanged: left below, not copied
    assert (layer / "added").read_text() == "added\n"
    (child,) = await snapshot.spawn(1)
    try:
        seen = await child.bash(
            "pwd; echo $STEP; cat ../edited ../added ../replaced/*; ls -A ..; wc -l < big; cat /tmp/t"
        )
        assert seen.output.split() == [
            "/workspace/keep",
            "2",
            "new",
            "added",
            "fresh",
            "added",
            "edited",
            "keep",
            "replaced",
            "3000",
            "t",
        ]
        assert (await child.python("print(counter)")).output.strip() == "5"
        await child.bash("echo child > ../edited")  # its own writes go to its own overlay
        assert (await fork.bash("cat ../edited")).output.strip() == "new"
        # the template and the fork may go: the snapshot holds the template's files below its own
        await template.close()
        await fork.close()
        assert template.directory.exists()
        (second,) = await snapshot.spawn(1)
        assert (await second.bash("wc -l < big; cat ../edited")).output.split() == ["3000", "new"]
        await second.close()
    finally:
        await child.close()
        await snapshot.close()
    assert not snapshot.directory.exists() and not template.directory.exists()


async def test_a_snapshot_chain_past_its_depth_is_copied_whole(sandbox, monkeypatch):
    monkeypatch.setattr("prorl_gym.sandbox.fork.MAX_LAYERS", 2)
    await sandbox.bash("echo 0 > gen")
    current, templates = sandbox, []
    try:
        for generation in range(1, 4):
            template = await current.freeze()
            templates.append(template)
            (current,) = await template.spawn(1)
            await current.bash(f"echo {generation} >> gen")
        assert [len(t.spec.template_lowers) for t in templates] == [0, 1, 0]  # the third: a full copy
        assert (await current.bash("cat gen")).output.split() == ["0", "1", "2", "3"]
    finally:
        await current.close()
        for template in templates:
            await template.close()


async def test_a_snapshot_copies_no_link_and_nothing_but_files(sandbox, tmp_path):
    """What a fork wrote is its own to forge: a link to a host file is copied as a link, never read;
    a FIFO is left out (the copy never waits on it)."""
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    async with await sandbox.freeze() as template:
        (fork,) = await template.spawn(1)
        try:
            await fork.bash(f"ln -s {secret} link && mkfifo pipe && mkdir d && ln -s {tmp_path} d/dir && echo ok > f")
            async with await fork.freeze() as snapshot:
                layer = snapshot.directory / "files" / "workspace"
                assert (layer / "link").is_symlink() and os.readlink(layer / "link") == str(secret)
                assert (layer / "d" / "dir").is_symlink() and not (layer / "pipe").exists()
                (child,) = await snapshot.spawn(1)
                try:
                    assert (await child.bash("cat f; ls")).output.split() == [
                        "ok",
                        "d",
                        "f",
                        "link",
                    ]
                finally:
                    await child.close()
        finally:
            await fork.close()


async def test_a_fork_that_never_ran_python_passes_its_parents_state_on_and_keeps_it(sandbox):
    await sandbox.python("inherited = 'from the parent'")
    (child,) = await sandbox.fork(1)
    try:
        assert not child.kernel_started
        (grandchild,) = await child.fork(1)  # a snapshot of the child: the state it has yet to load goes too
        try:
            assert (await grandchild.python("print(inherited)")).output.strip() == "from the parent"
        finally:
            await grandchild.close()
        assert (await child.python("print(inherited)")).output.strip() == "from the parent"  # still its own
    finally:
        await child.close()
