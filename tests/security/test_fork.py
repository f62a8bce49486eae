# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Forks as the agent would attack them: through the template, a sibling, or a forged file stream."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import threading
from pathlib import Path

from prorl_gym.sandbox.fork import _extract


async def test_a_fork_cannot_see_what_a_sibling_wrote_nor_reach_its_files(make):
    parent = await make()
    await parent.bash("echo base > base.txt")
    first, second = await parent.fork(2)
    try:
        await first.bash("echo SIBLING-SECRET > secret.txt && echo SIBLING-SECRET > /tmp/secret")
        root = parent.spec.root_dir
        probe = await second.bash(f"grep -rls SIBLING-SECRET /workspace /tmp {root}; ls {root}")
        assert "SIBLING-SECRET" not in probe.output and "secret" not in probe.output
        assert probe.output.split() == [second.id]  # the only path of the root it sees: its own sockets
        assert (await parent.bash("ls")).output.split() == ["base.txt"]
    finally:
        await first.close()
        await second.close()


async def test_links_in_the_parent_are_copied_as_links_never_as_the_host_files_they_name(make):
    parent = await make()
    await parent.bash("ln -s /etc/shadow shadow && ln -s ../../../../etc/passwd up && mkdir d && ln -s / d/root")
    async with await parent.freeze() as template:
        frozen = template.directory / "files" / "workspace"
        for name in ("shadow", "up", "d/root"):
            assert (frozen / name).is_symlink()
        (child,) = await template.spawn(1)
        try:  # inside, the link resolves in the sandbox's own view, as in the parent
            assert (await child.bash("readlink shadow; test -e shadow || echo absent")).output.split() == [
                "/etc/shadow",
                "absent",
            ]
        finally:
            await child.close()


def _forged_stream() -> bytes:
    """What a sandbox that tampers with the tar process could send instead of its files."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:

        def add(name, kind=tarfile.REGTYPE, data=b"", **extra):
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data)
            for key, value in extra.items():
                setattr(info, key, value)
            archive.addfile(info, io.BytesIO(data) if data else None)

        add("/abs-escape", data=b"x")
        add("workspace/../../dotdot-escape", data=b"x")
        add("workspace/link", tarfile.SYMTYPE, linkname="/etc")
        add("workspace/link/escaped-through-link", data=b"x")
        add("workspace/hard", tarfile.LNKTYPE, linkname="/etc/passwd")
        add("workspace/dev", tarfile.CHRTYPE, devmajor=1, devminor=1)
        add("workspace/suid", data=b"#!/bin/sh\n", mode=0o4777, uid=0, gid=0)
        add("workspace/ok.txt", data=b"fine")
    return out.getvalue()


def test_a_forged_file_stream_writes_nothing_outside_the_template_and_no_privileged_file(tmp_path):
    files = tmp_path / "template" / "files"
    files.mkdir(parents=True)
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_fd, _forged_stream()), os.close(write_fd)))
    writer.start()
    _extract(read_fd, files, uid=os.getuid())
    writer.join()
    outside = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if files not in [p, *p.parents])
    assert outside == ["template"]
    assert not Path("/etc/escaped-through-link").exists() and not Path("/abs-escape").exists()
    workspace = files / "workspace"
    assert sorted(p.name for p in workspace.iterdir()) == ["link", "ok.txt", "suid"]  # no hard link
    assert (workspace / "ok.txt").read_bytes() == b"fine"
    mode = (workspace / "suid").stat().st_mode
    assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_IWOTH)
    assert (workspace / "suid").stat().st_uid == os.getuid()


async def test_a_tree_swapped_for_links_mid_snapshot_never_copies_a_host_file(make, tmp_path):
    """The snapshot copies a live sandbox's files on the host: the sandbox swaps a directory for links
    to host paths as fast as it can while it is snapshotted, directly and as a fork (its writes)."""
    secret = tmp_path / "host-secret"
    secret.mkdir()
    (secret / "key").write_text("HOST-SECRET\n")
    os.chmod(tmp_path, 0o755)
    parent = await make()
    swap = (
        f"while :; do rm -rf d; mkdir d; echo inside > d/key; rm -rf d; ln -s {secret} d; rm -f d; ln -s {secret}/key d; "
        "rm -f d; done >/dev/null 2>&1 &"
    )
    await parent.bash(swap)
    (fork,) = await parent.fork(1)
    try:
        await fork.bash(swap)
        caught = 0  # snapshots that caught `d` in one of its forms: the race was run
        for sandbox in (parent, fork):
            for _ in range(15):
                async with await sandbox.freeze() as template:
                    caught += os.path.lexists(template.directory / "files" / "workspace" / "d")
                    for path in (template.directory / "files").rglob("*"):
                        if path.is_file() and not path.is_symlink():
                            assert b"HOST-SECRET" not in path.read_bytes(), path
        assert caught > 0
        assert [p.name for p in secret.iterdir()] == ["key"] and (secret / "key").read_text() == "HOST-SECRET\n"
    finally:
        await fork.close()
