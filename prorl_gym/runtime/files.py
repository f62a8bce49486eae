# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""File operations that go through the sandbox itself, not through the host filesystem.

Every read and write runs inside the sandbox (through a dedicated shell, so the agent's
own shell state is untouched), with the sandbox's privileges and its view of the files.
That is what makes them work on a container image the host cannot see, and what keeps a
symlink planted by the agent from turning a host-side write into an escape.
"""

from __future__ import annotations

import base64
import posixpath
import shlex

from prorl_gym.errors import ProrlError
from prorl_gym.runtime.shell import PtyShell

MAX_FILE_BYTES = 32 * 1024 * 1024


class SandboxFileError(ProrlError, OSError):
    """A file operation failed inside the sandbox (the message says why)."""


class SandboxFileNotFound(SandboxFileError, FileNotFoundError):
    pass


class SandboxFileTooLarge(SandboxFileError):
    """A file, or content to write, beyond the file API's size limit."""


class FileChannelError(ProrlError):
    """The file shell did not finish an operation (it timed out or died): the sandbox failed, not
    the file. Deliberately not a SandboxFileError, which is the file's own problem (the agent's)."""


class EditError(SandboxFileError, ValueError):
    """An exact-match replace found the old text zero times, or more than once."""


def resolve_path(workspace: str, path: str) -> str:
    """Relative paths are relative to the workspace."""
    return posixpath.normpath(posixpath.join(workspace, path))


class SandboxFiles:
    def __init__(self, shell: PtyShell, workspace: str, timeout_s: float = 60.0, max_bytes: int = MAX_FILE_BYTES):
        self._shell = shell
        self.workspace = workspace
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes

    def resolve(self, path: str) -> str:
        return resolve_path(self.workspace, path)

    async def _run(self, command: str, output_limit: int = 64 * 1024) -> str:
        result = await self._shell.run(command, self.timeout_s, output_limit=output_limit)
        if result.timed_out or result.exit_code is None:
            raise FileChannelError(f"file operation did not complete: {result.output[-300:]}")
        return result.output

    async def read_bytes(self, path: str) -> bytes:
        target = self.resolve(path)
        q = shlex.quote(target)
        out = await self._run(
            f"if [ -d {q} ]; then echo DIR; elif [ ! -e {q} ]; then echo MISSING; "
            f"elif [ ! -f {q} ]; then echo SPECIAL; elif [ ! -r {q} ]; then echo DENIED; "
            f"else printf 'OK:'; head -c {self.max_bytes + 1} -- {q} | base64 -w0; fi",
            output_limit=(self.max_bytes + 1) * 4 // 3 + 64,
        )
        status, _, payload = out.strip().partition(":")
        if status == "MISSING":
            raise SandboxFileNotFound(f"no such file: {target}")
        if status == "DIR":
            raise SandboxFileError(f"is a directory: {target}")
        if status == "SPECIAL":  # a FIFO or a device would block or never end the read
            raise SandboxFileError(f"not a regular file: {target}")
        if status == "DENIED":
            raise SandboxFileError(f"permission denied: {target}")
        if status != "OK":
            raise SandboxFileError(f"could not read {target}: {out[-300:]}")
        data = base64.b64decode(payload)
        if len(data) > self.max_bytes:
            raise SandboxFileTooLarge(f"file too large to read (> {self.max_bytes} bytes): {target}")
        return data

    async def read(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Text of a file, optionally lines start_line..end_line (1-based, inclusive)."""
        text = (await self.read_bytes(path)).decode("utf-8", errors="replace")
        if start_line is None and end_line is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max(1, start_line or 1)
        end = len(lines) if end_line is None or end_line < 0 else end_line
        return "".join(lines[start - 1 : end])

    async def write(self, path: str, content: str | bytes) -> str:
        """Create or overwrite a file (parents created); returns the absolute path."""
        data = content.encode() if isinstance(content, str) else content
        if len(data) > self.max_bytes:
            raise SandboxFileTooLarge(f"content too large (> {self.max_bytes} bytes)")
        target = self.resolve(path)
        q = shlex.quote(target)
        parent = shlex.quote(posixpath.dirname(target) or "/")
        encoded = base64.encodebytes(data).decode()
        out = await self._run(
            f"mkdir -p -- {parent} && base64 -d > {q} <<'PRORL_B64_END'\n{encoded}PRORL_B64_END\necho RC=$?"
        )
        if not out.rstrip().endswith("RC=0"):
            raise SandboxFileError(f"could not write {target}: {out[-300:].strip()}")
        return target

    async def edit(self, path: str, old: str, new: str) -> str:
        """Replace the one exact occurrence of `old` with `new`; returns the new text."""
        if not old:
            raise EditError("old text must not be empty")
        text = await self.read(path)
        count = text.count(old)
        if count == 0:
            raise EditError(f"old text not found in {self.resolve(path)}")
        if count > 1:
            raise EditError(f"old text occurs {count} times in {self.resolve(path)}; include more context")
        updated = text.replace(old, new, 1)
        await self.write(path, updated)
        return updated
