"""The `local` backend: a private directory and process groups, no namespaces.

Processes run as the server's user with the host's view of the filesystem; only the
working directory, HOME and TMPDIR are private. Every process started inside carries a
tag in its environment, so close() finds and kills what escaped its process group
(`setsid`, double forks) by scanning /proc.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path

from prorl_gym.sandbox.spec import SandboxSpec

TAG_VAR = "PRORL_SANDBOX_ID"


class LocalPlacement:
    def __init__(self, sandbox_id: str, private_dir: Path, spec: SandboxSpec):
        self.sandbox_id = sandbox_id
        self.private_dir = private_dir
        self.workspace = str(private_dir / "workspace")
        self.socket_dir = private_dir / "run"
        self.python = spec.kernel_python
        self._spec = spec
        self._closed = False

    def wrap(self, argv: list[str]) -> list[str]:
        return list(argv)

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": self.workspace,
            "TMPDIR": str(self.private_dir / "tmp"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "PYTHONUNBUFFERED": "1",
        }
        env.update(self._spec.env)
        env[TAG_VAR] = self.sandbox_id
        return env

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(kill_tagged, self.sandbox_id)
        await asyncio.to_thread(shutil.rmtree, self.private_dir, True)


class LocalBackend:
    async def place(self, sandbox_id: str, spec: SandboxSpec) -> LocalPlacement:
        private_dir = Path(spec.root_dir) / sandbox_id
        for sub in ("workspace", "tmp", "run"):
            (private_dir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(private_dir, 0o700)
        return LocalPlacement(sandbox_id, private_dir, spec)


def kill_tagged(sandbox_id: str) -> int:
    """SIGKILL every process whose environment carries this sandbox's tag; returns how many."""
    tag = f"{TAG_VAR}={sandbox_id}".encode()
    killed = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
        except OSError:
            continue
    return killed
