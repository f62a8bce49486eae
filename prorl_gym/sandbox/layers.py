# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A sandbox's files, read and changed on the host: a fork's writes (an overlay's upper directory)
or a live sandbox's own tree (/proc/<pid 1>/root/<dir>), copied into a template (sandbox/fork.py).

Everything below the directory given is the sandbox's to forge, and may change while it is read:
nothing here follows a link or resolves a path by name from the top (every open is relative to an
open directory, with O_NOFOLLOW), so an entry swapped for a symlink mid-copy is copied as a link,
or left out, never followed. Only directories, regular files, symlinks and overlay whiteouts are
copied; of extended attributes only overlay's opaque mark; hard links become separate files; a
directory on another file system (a mount point: the sandbox's sockets) is left out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from pathlib import Path

OPAQUE = "user.overlay.opaque"  # an unprivileged overlay's (userxattr) mark of a directory that hides its lowers
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO never blocks the open
_GONE = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)  # changed under us: left out
MAX_DEPTH = 200  # directories below the top: each level holds two descriptors and a frame while it is copied


class LayerTooLarge(Exception):
    """The files exceed what a copy may hold (bytes, or directory depth)."""


def copy_layer(source: Path, destination: Path, uid: int | None, max_bytes: int) -> int:
    """Copy the tree at `source` (a directory of the host, the last component not followed) to the
    new directory `destination`, owned by `uid` (None: ours); returns the bytes copied."""
    src = os.open(source, _DIR_FLAGS)
    try:
        os.mkdir(destination, 0o700)
        dst = os.open(destination, _DIR_FLAGS)
        try:
            budget = [max_bytes]
            _copy_dir(src, dst, uid, budget, os.fstat(src).st_dev, MAX_DEPTH)
            _finish(src, dst, uid)
            return max_bytes - budget[0]
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_dir(src: int, dst: int, uid: int | None, budget: list[int], device: int, depth: int) -> None:
    with os.scandir(src) as entries:
        names = [entry.name for entry in entries]
    for name in names:
        try:
            info = os.stat(name, dir_fd=src, follow_symlinks=False)
        except OSError as exc:
            if exc.errno in _GONE:
                continue
            raise
        mode = info.st_mode
        if stat.S_ISDIR(mode) and info.st_dev != device:
            continue  # a mount point
        if stat.S_ISDIR(mode):
            if depth == 0:
                raise LayerTooLarge(f"directories nested deeper than {MAX_DEPTH}")
            if (child := _open_unless_gone(name, _DIR_FLAGS, src)) is None:
                continue
            try:
                os.mkdir(name, 0o700, dir_fd=dst)
                out = os.open(name, _DIR_FLAGS, dir_fd=dst)
                try:
                    _copy_dir(child, out, uid, budget, device, depth - 1)
                    _finish(child, out, uid)
                finally:
                    os.close(out)
            finally:
                os.close(child)
        elif stat.S_ISREG(mode):
            _copy_file(src, dst, name, uid, budget)
        elif stat.S_ISLNK(mode):
            try:
                target = os.readlink(name, dir_fd=src)
            except OSError as exc:
                if exc.errno in (*_GONE, errno.EINVAL):
                    continue
                raise
            os.symlink(target, name, dir_fd=dst)
            if uid is not None:
                os.chown(name, uid, uid, dir_fd=dst, follow_symlinks=False)
        elif stat.S_ISCHR(mode) and info.st_rdev == 0:  # a whiteout: the file is deleted in this layer
            os.mknod(name, stat.S_IFCHR, 0, dir_fd=dst)
        # sockets, FIFOs and devices are not a sandbox's files


def _open_unless_gone(name: str, flags: int, directory: int) -> int | None:
    """`name` in `directory` opened, or None where it went or changed kind since it was listed."""
    try:
        return os.open(name, flags, dir_fd=directory)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise


def _copy_file(src: int, dst: int, name: str, uid: int | None, budget: list[int]) -> None:
    if (fd_in := _open_unless_gone(name, _FILE_FLAGS, src)) is None:
        return
    try:
        info = os.fstat(fd_in)
        if not stat.S_ISREG(info.st_mode):  # swapped since the stat
            return
        budget[0] -= info.st_size
        if budget[0] < 0:
            raise LayerTooLarge(f"the sandbox's writes exceed {budget[0] + info.st_size} bytes left")
        fd_out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst)
        try:
            _copy_bytes(fd_in, fd_out, info.st_size)
            if uid is not None:
                os.fchown(fd_out, uid, uid)
            os.fchmod(fd_out, stat.S_IMODE(info.st_mode) & 0o7777 & ~(stat.S_ISUID | stat.S_ISGID))
            os.utime(fd_out, ns=(info.st_atime_ns, info.st_mtime_ns))  # git's index compares mtimes
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)


def _copy_bytes(fd_in: int, fd_out: int, size: int) -> None:
    """In the kernel: copy_file_range (a reflink where the file system can) within one file system,
    sendfile across (a tmpfs to disk)."""
    left, same_fs = size, True
    while left > 0:
        try:
            copied = os.copy_file_range(fd_in, fd_out, left) if same_fs else os.sendfile(fd_out, fd_in, None, left)
        except OSError as exc:
            if not same_fs or exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            same_fs = False
            continue
        if copied == 0:  # shrunk under us
            break
        left -= copied


def _finish(src: int, dst: int, uid: int | None) -> None:
    """A directory's mode, owner, opaque mark and times, once its entries are in."""
    info = os.fstat(src)
    with contextlib.suppress(OSError):  # most directories have no mark
        if os.getxattr(src, OPAQUE) == b"y":
            os.setxattr(dst, OPAQUE, b"y")
    if uid is not None:
        os.fchown(dst, uid, uid)
    os.fchmod(dst, stat.S_IMODE(info.st_mode) & 0o1777)
    os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))


def open_beneath(directory: Path, relative: str, flags: int, mode: int = 0o600) -> int:
    """Open `relative` below `directory` (itself trusted) without following any link on the way."""
    parts = [part for part in relative.split("/") if part]
    fd = os.open(directory, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            if part == "..":
                raise PermissionError(f"{relative!r} leaves {directory}")
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


def remove_beneath(directory: Path, names: list[str]) -> None:
    """Remove these entries of `directory` (files, or trees: never through a link), if present."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        fd = os.open(directory, _DIR_FLAGS)
        try:
            for name in names:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(name, dir_fd=fd)  # fd-based, links not followed (avoids_symlink_attacks)
                else:
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
