# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The host side of a process in a container sandbox: what Placement.wrap puts in front of argv.

The runtimes spawn this (a pty shell, a kernel with its pipes) as if it were the program; it
hands its file descriptors and the program to the container's spawner (spawner_main.py), then
becomes a shell that waits and exits with the program's status, so the runtimes' pidfds, waits and kills see the
program. Killed, it closes the connection and the spawner kills the program's process group.
Stdlib only, started with `python -I -S`.

    python -I -S attach_main.py <spawner socket> <cwd> <argv...>
"""

import array
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import termios

SHELL = "/bin/sh"
WAIT_FD = 3  # the spawner's connection, for the shell that waits


def open_fds():
    listed = [int(name) for name in os.listdir("/proc/self/fd")]
    fds = []
    for fd in sorted(listed):
        try:
            os.fstat(fd)
        except OSError:  # listdir's own, closed by now
            continue
        fds.append(fd)
    return fds


def main():
    path, cwd, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    fds = open_fds()
    tty = os.isatty(0)
    if tty and os.getsid(0) == os.getpid():
        # The pty must become the controlling terminal of the program's session in the container:
        # give it up (as session leader that hangs up our own group, hence SIGHUP ignored).
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            fcntl.ioctl(0, termios.TIOCNOTTY)
        except OSError:
            pass
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": cwd, "fds": fds, "tty": tty}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        message = struct.pack("!I", len(request)) + request
        sent = conn.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        conn.sendall(message[sent:])
    except OSError as exc:
        os.write(2, f"sandbox attach: cannot reach the container's spawner: {exc}\n".encode())
        os._exit(126)
    for fd in fds:  # the program holds them now: a pty or pipe must see EOF when it ends, not when we do
        if fd != conn.fileno():
            try:
                os.close(fd)
            except OSError:
                pass
    # The wait is a shell's, not this interpreter's (~1 MiB instead of ~9 for each live shell and kernel):
    # the spawner's line is the program's exit status; none (the container ended under it) is a kill's 137.
    if conn.fileno() != WAIT_FD:
        os.dup2(conn.fileno(), WAIT_FD)
    os.set_inheritable(WAIT_FD, True)
    os.execv(SHELL, ["sh", "-c", f'read -r code <&{WAIT_FD} && exit "$code"; exit 137'])


if __name__ == "__main__":
    main()
