# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The shared tools (editor, submit, bash/python output) driven against a real sandbox."""

import pytest

from prorl_gym.resources.tools import TOOLS
from prorl_gym.resources.tools.editor import EditorArgs, run_editor


def edit(**kwargs) -> EditorArgs:
    return EditorArgs(**kwargs)


async def test_editor_create_view_replace_insert_undo(sandbox):
    created = await run_editor(sandbox, edit(command="create", path="pkg/mod.py", file_text="a = 1\nb = 2\nc = 3\n"))
    assert created.content == "File created: /workspace/pkg/mod.py"
    view = await run_editor(sandbox, edit(command="view", path="pkg/mod.py", view_range=[2, -1]))
    assert view.content == "     2\tb = 2\n     3\tc = 3\n"
    replaced = await run_editor(
        sandbox, edit(command="str_replace", path="pkg/mod.py", old_str="b = 2", new_str="b = 20")
    )
    assert "b = 20" in replaced.content
    inserted = await run_editor(sandbox, edit(command="insert", path="pkg/mod.py", insert_line=0, new_str="# top"))
    assert "# top" in inserted.content
    assert await sandbox.read_file("pkg/mod.py") == "# top\na = 1\nb = 20\nc = 3\n"
    await run_editor(sandbox, edit(command="undo_edit", path="pkg/mod.py"))
    await run_editor(sandbox, edit(command="undo_edit", path="pkg/mod.py"))
    assert await sandbox.read_file("pkg/mod.py") == "a = 1\nb = 2\nc = 3\n"
    listing = await run_editor(sandbox, edit(command="view", path="pkg"))
    assert "/workspace/pkg/mod.py" in listing.content


@pytest.mark.parametrize(
    "args,message",
    [
        (dict(command="view", path="missing.py"), "no such file"),
        (dict(command="str_replace", path="f.py", old_str="nope", new_str="x"), "not found"),
        (dict(command="str_replace", path="f.py", old_str="x", new_str="y"), "2 times"),
        (dict(command="create", path="f.py", file_text="again"), "already exists"),
        (dict(command="insert", path="f.py", insert_line=99, new_str="z"), "between 0 and 2"),
        (dict(command="undo_edit", path="f.py"), "no edit"),
        (dict(command="create", path="g.py"), "file_text"),
    ],
)
async def test_editor_mistakes_are_answers_not_failures(sandbox, args, message):
    await sandbox.write_file("f.py", "x = 1\nx = 2\n")
    result = await run_editor(sandbox, edit(**args))
    assert result.content.startswith("Error: ") and message in result.content


async def test_tool_results_say_what_went_wrong(sandbox):
    failed = await TOOLS["bash"].run(sandbox, TOOLS["bash"].args(command="echo out; false"))
    assert failed.content == "out\n[exit code 1]" and failed.metadata["exit_code"] == 1
    exited = await TOOLS["bash"].run(sandbox, TOOLS["bash"].args(command="exit 3"))
    assert exited.content.endswith("[the environment was restarted; earlier state is gone; exit code 3]")
    hog = await TOOLS["bash"].run(
        sandbox, TOOLS["bash"].args(command='python3 -c \'open("big", "wb").write(bytes(2 << 30))\'')
    )
    assert "MemoryError" in hog.content or "File too large" in hog.content
    quiet = await TOOLS["bash"].run(sandbox, TOOLS["bash"].args(command="true"))
    assert quiet.content == "[no output]"
    submitted = await TOOLS["submit"].run(sandbox, TOOLS["submit"].args(note="fixed it"))
    assert submitted.content.startswith("Submitted") and submitted.metadata == {"note": "fixed it"}


def test_every_tool_has_a_strict_function_schema():
    for tool in TOOLS.values():
        schema = tool.schema()
        assert (
            schema["type"] == "function" and schema["name"] == tool.name and schema["parameters"]["type"] == "object"
        )
        assert schema["parameters"].get("additionalProperties") is False
