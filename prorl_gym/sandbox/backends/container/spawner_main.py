# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Pid 1 of a container sandbox: starts the sandbox's processes with the host's file descriptors.

Runs inside the container (its source is passed with `python -c`: stdlib only, Python 3.6+). It
starts as container root with no capability but SETUID, SETGID and CHOWN, binds a Unix socket (root's
alone) in a root-owned directory bound at the same path on the host, and drops to the sandbox uid
for good: from then on it has no privilege, and as a former root it is not dumpable (the sandbox,
the same uid, can neither ptrace it nor read its /proc files). attach_main.py (a host process the
runtimes spawn as if it were the program) connects and sends argv, env, cwd and its own file
descriptors (SCM_RIGHTS): the pty slave of a shell, the pipes and control socket of a kernel.
The child gets them at the same numbers, its own session (the pty as its controlling terminal),
the sandbox's rlimits, default signal dispositions (Python ignores SIGPIPE and SIGXFSZ) and umask. Its exit status goes back to the attacher, which exits with it;
an attacher that goes (killed) takes the child's process group with it. As pid 1 it also reaps
every orphan of the sandbox; the signals the sandbox may send it are ignored or harmless (as pid 1
of its namespace, it gets no others from inside).

    python -I -S -c <this> '{"socket": path, "ready": fifo, "uid": n, "rlimits": {...}, "chown": [dirs], "chown_trees": [dirs]}'

`chown`: directories made for the sandbox (its workspace tmpfs) that become the sandbox uid's
(Podman's tmpfs takes no uid= option); `chown_trees`: image directories it may change, with
everything in them. The only uses of CAP_CHOWN.
"""

import array
import fcntl
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import termios

MAX_FDS = 64
EXIT_CANNOT_START = 126  # as a shell says of a command it found but could not run


def recv_request(conn):
    """One request: 4-byte length, JSON, the fds attached to its first bytes."""
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError
        data += more
    return json.loads(data[4:].decode()), list(fds)


def child(request, fds, limits):
    """In the forked child: become the program (never returns)."""
    try:
        os.setsid()
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 1024) for fd in fds]  # out of the way of the targets
        for target, fd in zip(request["fds"], moved):
            os.dup2(fd, target)
        keep = set(request["fds"])
        for fd in range(3, 1024 + 2 * MAX_FDS + 8):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if request.get("tty"):
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        for name, value in limits.items():
            soft, hard = value if isinstance(value, list) else (value, value)
            resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), (soft, hard))
        try:
            os.chdir(request.get("cwd") or "/")
        except OSError:
            os.chdir("/")
        for sig in range(1, signal.NSIG):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):  # SIGKILL, SIGSTOP, the real-time ones Python does not name
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.umask(0o022)
        env = request["env"]
        os.execvpe(request["argv"][0], request["argv"], env)
    except BaseException as exc:  # noqa: BLE001 - anything: say it, exit 127 like a shell
        try:
            os.write(2, f"sandbox spawner: {exc!r}\n".encode())
        finally:
            os._exit(127)


def reply(conn, code):
    """The program's exit status to its attacher, which exits with it."""
    try:
        conn.sendall(b"%d\n" % code)
    except OSError:
        pass
    conn.close()


def take_over(config):
    """As container root: hand the sandbox its directories, bind the socket (root's alone), open the
    ready fifo, then drop to the sandbox uid for good (no capability is left, and the process is no
    longer dumpable). Returns the listening socket and the fifo."""
    path, uid = config["socket"], config["uid"]
    for directory in config["chown"]:
        os.chown(directory, uid, uid)
    for top in config["chown_trees"]:  # image directories the sandbox may change (a SWE image's repository)
        for directory, dirs, files in os.walk(top):
            for name in [directory, *(os.path.join(directory, entry) for entry in dirs + files)]:
                os.lchown(name, uid, uid)
    os.umask(0o077)  # the socket: root's only (the sandbox uid cannot connect)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    server.bind(path)
    server.listen(64)
    ready_fifo = open(config["ready"], "wb", buffering=0)  # noqa: SIM115 - root's too: opened before the drop
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    return server, ready_fifo


def wakeup_pipe():
    """A pipe a signal (SIGCHLD) writes to, so select() wakes to reap; the signals the sandbox may send
    pid 1 ignored."""
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    return wake_r


class Spawner:
    """The attachers' connections and their children: conn -> child pid, child pid -> conn (None once its
    attacher went)."""

    def __init__(self, server, wake_r, limits):
        self.server, self.wake_r, self.limits = server, wake_r, limits
        self.conns, self.children = {}, {}

    def serve(self):
        while True:
            readable, _, _ = select.select([self.server, self.wake_r, *self.conns], [], [])
            for source in readable:
                if source is self.server:
                    self.accept()
                elif source is self.wake_r:
                    try:
                        os.read(self.wake_r, 4096)
                    except BlockingIOError:
                        pass
                else:
                    self.attacher_spoke(source)
            self.reap()

    def accept(self):
        conn, _ = self.server.accept()
        try:
            request, fds = recv_request(conn)
        except (OSError, ValueError, EOFError):
            conn.close()
            return
        try:
            pid = os.fork()
        except OSError:  # the sandbox is at its process limit: this program fails, not pid 1
            pid = None
        if pid == 0:
            child(request, fds, self.limits)
        for fd in fds:
            os.close(fd)
        if pid is None:
            reply(conn, EXIT_CANNOT_START)
            return
        self.conns[conn], self.children[pid] = pid, conn

    def attacher_spoke(self, conn):
        """An attacher wrote (nothing expected) or went: its child goes with it."""
        try:
            gone = not conn.recv(64)
        except OSError:
            gone = True
        if not gone:
            return
        pid = self.conns.pop(conn)
        conn.close()
        self.children[pid] = None
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass

    def reap(self):
        """Every exited child, ours (its status to its attacher) or an orphan of the sandbox."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                self.conns.pop(conn, None)
                reply(conn, os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def main():
    config = json.loads(sys.argv[1])
    server, ready_fifo = take_over(config)
    wake_r = wakeup_pipe()
    with ready_fifo:
        ready_fifo.write(b"ready\n")
    Spawner(server, wake_r, config["rlimits"]).serve()


if __name__ == "__main__":
    main()
