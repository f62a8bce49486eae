# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Copies of named Python packages in what a sandbox sees of the system, so a backend can hide them.

A SWE task's repository must be the only copy of its package the agent can read: another one
elsewhere in the sandbox's view (vendored inside an SDK under /usr/lib, a distribution's
dist-packages, a wheel in a cache) may hold the fixed code. SandboxSpec.hidden_packages names the
packages; the backend binds an empty read-only placeholder over every copy found here, in the
directories it shows the sandbox read-only.

A copy is: a directory with that name holding an `__init__.py` (a package), `<name>.py`, a
distribution's metadata (`<name>-*.dist-info`, `.egg-info`) or archive (`<name>-*.whl`, `.egg`,
`.tar.gz`, `.zip`). Each root is indexed once per process (a walk of /usr takes ~0.3 s warm, a few
seconds cold), in the caller's thread; roots are not expected to change while a server runs.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterable

ARCHIVES = (".whl", ".egg", ".tar.gz", ".zip")
METADATA = (".dist-info", ".egg-info")
_LOCK = threading.Lock()


def normalized(name: str) -> str:
    """A distribution or import name as metadata file names spell it (PEP 503, underscores)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _entry_name(name: str, is_dir: bool, path: str) -> str | None:
    """The package name an entry is a copy of, if it is one."""
    if name.endswith(METADATA) or (not is_dir and name.endswith(ARCHIVES)):
        return "dist:" + normalized(name.split("-", 1)[0])
    if is_dir:
        return name if os.path.exists(os.path.join(path, "__init__.py")) else None
    return name[:-3] if name.endswith(".py") else None


@functools.lru_cache(maxsize=32)
def _index(root: str) -> dict[str, tuple[tuple[str, bool], ...]]:
    """name -> (path, is a directory) of every copy of a package under root (symlinks not followed)."""
    found: dict[str, list[tuple[str, bool]]] = {}
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir and not entry.is_file(follow_symlinks=False):
                continue
            name = _entry_name(entry.name, is_dir, entry.path)
            if name is not None:
                found.setdefault(name, []).append((entry.path, is_dir))
            if is_dir:
                stack.append(entry.path)
    return {name: tuple(paths) for name, paths in found.items()}


def index(root: str) -> dict[str, tuple[tuple[str, bool], ...]]:
    with _LOCK:  # one walk per root, however many sandboxes start at once
        return _index(os.path.realpath(root))


def copies(names: Iterable[str], roots: Iterable[tuple[str, str]]) -> list[tuple[str, bool]]:
    """(path inside the sandbox, is a directory) of every copy of `names` under `roots` (host directory,
    where the sandbox sees it), outermost only: a copy inside a hidden directory is hidden with it."""
    wanted = set()
    for name in names:
        wanted |= {name, "dist:" + normalized(name)}
    hits: list[tuple[str, bool]] = []
    for host, inside in roots:
        if not os.path.isdir(host) or os.path.islink(host):
            continue
        real = os.path.realpath(host)
        table = index(real)
        for name in wanted:
            for path, is_dir in table.get(name, ()):
                hits.append((inside.rstrip("/") + path[len(real) :], is_dir))
    hits.sort()
    out: list[tuple[str, bool]] = []
    for path, is_dir in hits:
        if not any(path.startswith(kept.rstrip("/") + "/") for kept, kept_dir in out if kept_dir):
            out.append((path, is_dir))
    return out
