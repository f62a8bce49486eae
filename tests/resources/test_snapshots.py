# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Snapshots and branches (resources/snapshots.py) on this machine; on a Ray host the same is
tested in tests/sandbox/ray/test_hosts.py."""

from __future__ import annotations

import pytest

from prorl_gym.resources.snapshots import SnapshotStore, UnknownSnapshotError
from prorl_gym.resources.tools.editor import EditorArgs, run_editor
from tests.support.cancelled import cancelled_midway, hold


async def test_a_branch_starts_as_the_snapshot_was_and_undoes_its_last_edit(sandbox):
    store = SnapshotStore()
    await run_editor(sandbox, EditorArgs(command="create", path="a.py", file_text="v1\n"))
    await run_editor(sandbox, EditorArgs(command="str_replace", path="a.py", old_str="v1", new_str="v2"))
    snapshot = await store.take(sandbox)
    await run_editor(sandbox, EditorArgs(command="str_replace", path="a.py", old_str="v2", new_str="v3"))
    branch = await store.branch(snapshot)
    try:
        assert await branch.read_file("a.py") == "v2\n"  # not the parent's later edit
        undone = await run_editor(branch, EditorArgs(command="undo_edit", path="a.py"))
        assert undone.content == f"Undid the last edit of {branch.resolve('a.py')}"
        assert await branch.read_file("a.py") == "v1\n"
        await run_editor(branch, EditorArgs(command="undo_edit", path="a.py"))  # undoes the create
        assert (await branch.bash("test -e a.py")).exit_code == 1
        assert await sandbox.read_file("a.py") == "v3\n"  # the parent's history is its own
        assert len(sandbox.edit_history[sandbox.resolve("a.py")]) == 3
    finally:
        await branch.close()
        await store.close()


async def test_a_released_snapshot_cannot_be_branched(sandbox):
    store = SnapshotStore()
    snapshot = await store.take(sandbox)
    assert await store.release([snapshot]) == 1
    with pytest.raises(UnknownSnapshotError):
        await store.branch(snapshot)


async def test_a_snapshot_taken_and_released_by_cancelled_requests_is_kept_then_freed(sandbox, monkeypatch):
    store = SnapshotStore()
    freezing = hold(monkeypatch, type(sandbox), "freeze")
    try:
        await cancelled_midway(lambda: store.take(sandbox), freezing.reached)
        freezing.go_on.set()
        await store._to_the_end.wait()
        assert len(freezing.results) == 1 and len(store) == 1  # kept: the TTL or the batch's release frees it
        template = freezing.results[0]
        closing = hold(monkeypatch, type(template), "close")
        await cancelled_midway(lambda: store.release([template.id]), closing.reached)
        closing.go_on.set()
    finally:
        await store.close()  # waits for the close its request did not see end
    assert len(store) == 0 and not template.directory.exists()
