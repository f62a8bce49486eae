# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A kernel's socket directory and connection file: fresh, and trusted only once checked."""

import json
import os
import socket

import pytest

from prorl_gym.runtime.kernel_sockets import CONNECTED, PORTS, KernelSocketError, new_connection, seal


def _bind_all(connection, names=CONNECTED):
    bound = []
    for name in names:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(connection.socket_dir / f"k-{PORTS[name]}"))
        bound.append(s)
    return bound


def test_each_connection_has_its_own_directory_key_and_file(tmp_path):
    a, b = (new_connection(tmp_path, tmp_path, None) for _ in range(2))
    assert a.socket_dir != b.socket_dir and a.info["key"] != b.info["key"]
    assert json.loads(a.connection_file.read_text()) == a.info
    assert a.iopub_address == f"ipc://{a.socket_dir}/k-{PORTS['iopub_port']}"


def test_a_planted_connection_file_is_never_written_through(tmp_path, monkeypatch):
    monkeypatch.setattr("secrets.token_hex", lambda n: "0" * (2 * n))
    (tmp_path / "elsewhere").write_text("host file")
    os.symlink(tmp_path / "elsewhere", tmp_path / f"kernel-{'0' * 12}.json")
    (tmp_path / "sockets").mkdir()
    with pytest.raises(FileExistsError):
        new_connection(tmp_path / "sockets", tmp_path, None)
    assert (tmp_path / "elsewhere").read_text() == "host file"


def test_sockets_are_sealed_only_if_each_connected_one_is_a_real_socket(tmp_path):
    connection = new_connection(tmp_path, tmp_path, None)
    bound = _bind_all(connection, CONNECTED[:-1])
    os.symlink("/etc/passwd", connection.socket_dir / f"k-{PORTS[CONNECTED[-1]]}")
    with pytest.raises(KernelSocketError, match="not the kernel's socket"):
        seal(connection, None)
    os.unlink(connection.socket_dir / f"k-{PORTS[CONNECTED[-1]]}")
    bound += _bind_all(connection, CONNECTED[-1:])
    seal(connection, None)  # no heartbeat socket needed
    for s in bound:
        s.close()
