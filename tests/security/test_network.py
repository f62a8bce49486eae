# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Containment of the network: reaching the host or the outside world from a sandbox.

A TCP listener on the host's loopback and an abstract unix socket (which lives in the
network namespace) must be unreachable; the sandbox has only `lo`, no routes and no DNS.
"""

from __future__ import annotations

import secrets
import socket

import pytest

from tests.security.helpers import _assert_usable

# =========================================================================== network


async def test_connect_to_host_loopback_listener_fails(make):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # abstract unix sockets live in the net namespace
    abstract_name = f"\0prorl-sec-{secrets.token_hex(6)}"
    abstract.bind(abstract_name)
    abstract.listen(8)
    abstract.setblocking(False)
    try:
        sb = await make()
        result = await sb.bash(
            f"echo hi > /dev/tcp/127.0.0.1/{port}; echo rc=$?; echo hi > /dev/tcp/localhost/{port}; echo rc=$?; "
            f"timeout 5 python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2)' 2>&1 | tail -1"
        )
        assert result.output.count("Connection refused") >= 3 and result.output.count("rc=1\n") == 2, result.output
        py = await sb.python(
            f"import socket\n"
            f"for target in [(socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, {abstract_name!r})]:\n"
            f"    s = socket.socket(target[0]); s.settimeout(2)\n"
            f"    try:\n"
            f"        s.connect(target[1]); print('CONNECTED', target)\n"
            f"    except OSError as e:\n"
            f"        print(type(e).__name__)\n"
        )
        assert py.output == "ConnectionRefusedError\nConnectionRefusedError\n", py
        for server in (listener, abstract):
            with pytest.raises(BlockingIOError):
                server.accept()  # nobody ever connected
        await _assert_usable(sb)
    finally:
        listener.close()
        abstract.close()


async def test_no_network_interfaces_routes_or_dns(make):
    sb = await make()
    result = await sb.bash(
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo routes=$(tail -n +2 /proc/net/route | wc -l); "
        "ls /etc/resolv.conf; getent hosts example.com; echo dns_rc=$?; "
        "echo > /dev/tcp/1.1.1.1/53; echo > /dev/tcp/10.0.2.2/80; true"
    )
    lines = result.output.splitlines()
    assert lines[0] == "lo" and lines[1] == "routes=0", result.output
    assert "dns_rc=2" in lines and "No such file or directory" in result.output, result.output
    assert result.output.count("Network is unreachable") >= 2, result.output
    py = await sb.python(
        "import socket\ntry:\n    socket.getaddrinfo('example.com', 80)\nexcept OSError as e:\n    print(type(e).__name__)"
    )
    assert py.output == "gaierror\n", py
    await _assert_usable(sb)
