# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The file editor tool: view, create, str_replace, insert, undo_edit (SWE-agent style).

Every operation goes through the sandbox's own file API (so it works on any backend and
with the sandbox's permissions). Mistakes (a missing file, text not found or not unique)
are answers the policy reads and can act on, not failures of the rollout. Undo history is
kept per sandbox, per file.
"""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import Field

from prorl_gym.resources.tools.base import Tool, ToolArgs, ToolResult
from prorl_gym.sandbox import SandboxAPI, SandboxFileError

SNIPPET_LINES = 4
MAX_VIEW_CHARS = 16 * 1024


class EditorArgs(ToolArgs):
    command: Literal["view", "create", "str_replace", "insert", "undo_edit"] = Field(
        description="view a file (numbered lines) or directory; create a new file; str_replace one exact, unique "
        "occurrence; insert text after a line; undo_edit the last change to a file."
    )
    path: str = Field(description="File or directory; relative paths are relative to the workspace.")
    file_text: str | None = Field(default=None, description="create: the file's content.")
    old_str: str | None = Field(default=None, description="str_replace: the exact text to replace (must be unique).")
    new_str: str | None = Field(default=None, description="str_replace: the replacement; insert: the text to insert.")
    insert_line: int | None = Field(
        default=None, description="insert: the line after which to insert (0: at the top)."
    )
    view_range: list[int] | None = Field(default=None, description="view: [first, last] line, 1-based; last -1 = end.")


def _numbered(text: str, first: int = 1) -> str:
    return "".join(f"{n:6}\t{line}\n" for n, line in enumerate(text.splitlines(), start=first))


def _snippet(text: str, line: int) -> str:
    lines = text.splitlines()
    first = max(1, line - SNIPPET_LINES)
    return _numbered("\n".join(lines[first - 1 : line + SNIPPET_LINES]), first)


async def run_editor(sandbox: SandboxAPI, args: EditorArgs) -> ToolResult:
    try:
        content = await COMMANDS[args.command](sandbox, sandbox.resolve(args.path), args)
    except (SandboxFileError, ValueError) as exc:
        return ToolResult(content=f"Error: {exc}", metadata={"error": type(exc).__name__})
    return ToolResult(content=content)


def _require(value, name: str, command: str):
    if value is None:
        raise ValueError(f"`{name}` is required for {command}")
    return value


async def _view(sandbox: SandboxAPI, path: str, args: EditorArgs) -> str:
    if (await sandbox.bash(f"test -d {shlex.quote(path)}")).exit_code == 0:
        listing = await sandbox.bash(f"find {shlex.quote(path)} -maxdepth 2 -not -path '*/.*' | sort | head -500")
        return f"Files and directories up to 2 levels deep in {path}:\n{listing.output}"
    text = await sandbox.read_file(path)
    first, last = 1, len(text.splitlines())
    if args.view_range:
        if len(args.view_range) != 2:
            raise ValueError("view_range must be [first, last]")
        first, last = args.view_range[0], (last if args.view_range[1] == -1 else args.view_range[1])
    shown = _numbered("\n".join(text.splitlines()[first - 1 : last]), first)
    if len(shown) > MAX_VIEW_CHARS:
        shown = shown[:MAX_VIEW_CHARS] + "\n[... truncated: view a smaller view_range ...]\n"
    return shown


async def _create(sandbox: SandboxAPI, path: str, args: EditorArgs) -> str:
    if (await sandbox.bash(f"test -e {shlex.quote(path)}")).exit_code == 0:
        raise ValueError(f"{path} already exists; use str_replace or insert to change it")
    await sandbox.write_file(path, _require(args.file_text, "file_text", "create"))
    sandbox.edit_history.setdefault(path, []).append(None)
    return f"File created: {path}"


async def _str_replace(sandbox: SandboxAPI, path: str, args: EditorArgs) -> str:
    old = await sandbox.read_file(path)
    updated = await sandbox.edit_file(path, _require(args.old_str, "old_str", "str_replace"), args.new_str or "")
    sandbox.edit_history.setdefault(path, []).append(old)
    line = updated[: updated.find(args.new_str or "") if args.new_str else 0].count("\n") + 1
    return f"Edited {path}. The changed lines:\n{_snippet(updated, line)}"


async def _insert(sandbox: SandboxAPI, path: str, args: EditorArgs) -> str:
    at = _require(args.insert_line, "insert_line", "insert")
    old = await sandbox.read_file(path)
    lines = old.splitlines(keepends=True)
    if not 0 <= at <= len(lines):
        raise ValueError(f"insert_line must be between 0 and {len(lines)}")
    text = _require(args.new_str, "new_str", "insert")
    updated = "".join(lines[:at]) + text + ("" if text.endswith("\n") else "\n") + "".join(lines[at:])
    await sandbox.write_file(path, updated)
    sandbox.edit_history.setdefault(path, []).append(old)
    return f"Inserted into {path}. The changed lines:\n{_snippet(updated, at + 1)}"


async def _undo_edit(sandbox: SandboxAPI, path: str, args: EditorArgs) -> str:
    history = sandbox.edit_history.get(path)
    if not history:
        raise ValueError(f"no edit of {path} to undo")
    previous = history.pop()
    if previous is None:  # undoing a create
        await sandbox.bash(f"rm -f -- {shlex.quote(path)}")
        return f"Undid the creation of {path}"
    await sandbox.write_file(path, previous)
    return f"Undid the last edit of {path}"


COMMANDS = {"view": _view, "create": _create, "str_replace": _str_replace, "insert": _insert, "undo_edit": _undo_edit}


EDITOR = Tool(
    name="editor",
    description=(
        "View and edit files: `view` a file with line numbers (or a directory listing), `create` a new file, "
        "`str_replace` one exact and unique occurrence of old_str with new_str, `insert` new_str after "
        "insert_line, `undo_edit` the last change to a file."
    ),
    args=EditorArgs,
    run=run_editor,
    summary="`editor` views, creates and edits files",
)
