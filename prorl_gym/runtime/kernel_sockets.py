# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Where a kernel binds its sockets, and when the server trusts them.

The server may run as root and the sandbox must not steer it: the connection file lives in
a directory the sandbox can only read, and each kernel binds its sockets in a fresh directory
that, when the sandbox runs as another uid, is taken back from it as soon as the kernel
reports its sockets bound. Only then are they checked (real sockets of the right owner, not
symlinks) and connected, and the client never reconnects, so a path swapped later is never
followed.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prorl_gym.errors import ProrlError

PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
CONNECTED = ("shell_port", "iopub_port", "stdin_port", "control_port")  # never the heartbeat (a fork binds none)


class KernelSocketError(ProrlError):
    """A path where a kernel socket should be is something else."""


@dataclass
class KernelConnection:
    token: str
    socket_dir: Path
    connection_file: Path
    info: dict[str, Any]  # the connection file's content

    @property
    def iopub_address(self) -> str:
        return f"ipc://{self.info['ip']}-{self.info['iopub_port']}"  # the IPC address form of Jupyter's spec


def new_connection(socket_dir: Path, control_dir: Path, sandbox_uid: int | None) -> KernelConnection:
    """A fresh socket directory (the sandbox's uid may bind in it, for now) and connection file."""
    token = secrets.token_hex(6)
    directory = socket_dir / f"k{token}"
    directory.mkdir(mode=0o700)
    if sandbox_uid is not None:
        os.chown(directory, sandbox_uid, sandbox_uid)
    info = {
        "transport": "ipc",
        "ip": str(directory / "k"),
        **PORTS,
        "key": secrets.token_hex(16),
        "signature_scheme": "hmac-sha256",
        "kernel_name": "",
    }
    connection_file = control_dir / f"kernel-{token}.json"
    _write_new(connection_file, json.dumps(info).encode(), 0o644)
    return KernelConnection(token, directory, connection_file, info)


def seal(connection: KernelConnection, sandbox_uid: int | None) -> None:
    """Once the kernel reports its sockets bound: take the directory back (its sockets can no
    longer be swapped), then check they are the kernel's."""
    owner = os.getuid()
    if sandbox_uid is not None:
        os.chown(connection.socket_dir, os.getuid(), os.getgid())
        os.chmod(connection.socket_dir, 0o755)
        owner = sandbox_uid
    for name in CONNECTED:
        path = connection.socket_dir / f"k-{PORTS[name]}"
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != owner:
            raise KernelSocketError(f"{path} is not the kernel's socket")


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create a file that must not exist yet; never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
