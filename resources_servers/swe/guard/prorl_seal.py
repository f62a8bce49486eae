# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Seal a test run off from the grader, then become the run (SWE EVAL, inside the sandbox).

    python -I -B prorl_seal.py --events-fd 3 [--write DIR]... -- <command>...
    python -I -B prorl_seal.py --probe

Before any code of the repository exists in the process (the command is exec'd afterwards, and
what it starts inherits all of this, irrevocably):

- a session of its own: no controlling terminal, so no TIOCSTI into the grader's shell;
- Landlock (Linux 5.13+, unprivileged): the whole filesystem readable, writable only under the
  --write directories (scratch space, never the repository: it is read-only for the whole run) and
  the usual character devices; from ABI 5 no ioctl on other devices, from ABI 6 no signal to a
  process outside the run and no abstract Unix socket outside it; ptrace and /proc/<pid>/mem of a
  process outside the run are refused by every ABI.

It says what it did as the first event of the run (`{"e": "sealed", "abi": N, "session": bool, "tty":
bool}`: a session of its own, a controlling terminal left):
nothing of the repository ran yet, so this one line is the run's own. --probe prints the ABI the
kernel offers (0: none) and exits, so the grader knows before the run what the run must report.

Standard library only (the sandbox's Python, possibly an old one).
"""

import ctypes
import json
import os
import sys

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
VERSION_FLAG = 1
PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
MAKE_ALL = sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char/dir/reg/sock/fifo/block/sym
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi():
    try:
        return max(0, int(_libc().syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(VERSION_FLAG))))
    except (OSError, AttributeError, ValueError):  # no ctypes, no libc: no Landlock
        return 0


def file_rights(version):
    rights = EXECUTE | WRITE_FILE | READ_FILE
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def all_rights(version):
    rights = file_rights(version) | READ_DIR | MAKE_ALL
    if version >= 2:
        rights |= REFER
    return rights


def restrict(version, writable):
    """Landlock the process: read and execute everywhere, write only beneath `writable`."""
    libc = _libc()
    attr = RulesetAttr(all_rights(version), 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)
    size = 24 if version >= 6 else 16 if version >= 4 else 8  # the struct as this ABI knows it
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        rules = [("/", EXECUTE | READ_FILE | READ_DIR)]
        rules += [(path, all_rights(version)) for path in writable if os.path.isdir(path)]
        rules += [(path, file_rights(version) & ~EXECUTE) for path in DEVICES if os.path.exists(path)]
        for path, rights in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneathAttr(rights, fd)
                if (
                    libc.syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(PATH_BENEATH), ctypes.byref(rule), 0)
                    < 0
                ):
                    raise OSError(ctypes.get_errno(), "landlock_add_rule " + path)
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def own_session():
    """A session of our own (we are no process group leader under `timeout`), so no controlling terminal;
    if that cannot be, the terminal let go of (TIOCNOTTY). (whether setsid worked, whether a terminal remains)"""
    try:
        os.setsid()
        return True, False
    except OSError:
        pass
    try:
        import fcntl
        import termios

        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        try:
            fcntl.ioctl(fd, termios.TIOCNOTTY)
        finally:
            os.close(fd)
    except (OSError, ImportError):
        pass
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
        return False, True
    except OSError:
        return False, False


def main(argv):
    if argv == ["--probe"]:
        print(abi())
        return 0
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1 :]
    events_fd = int(opts[opts.index("--events-fd") + 1])
    writable = [opts[i + 1] for i, opt in enumerate(opts) if opt == "--write"]
    session, tty = own_session()
    version = abi()
    error = None
    if version:
        try:
            restrict(version, writable)
        except OSError as exc:
            version, error = 0, str(exc)
    event = {"e": "sealed", "abi": version, "session": session, "tty": tty}
    if error:
        event["error"] = error
    os.write(events_fd, ("@prorl " + json.dumps(event, sort_keys=True) + "\n").encode())
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
