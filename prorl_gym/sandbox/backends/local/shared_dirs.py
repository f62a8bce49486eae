# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Host directories shared by every bubblewrap sandbox of a root, built once and read-only to them:
the /etc they see (a few copied host files plus passwd/group) and the empty base a staging
sandbox's overlay starts from (sandbox/fork.py). Both are built in a temporary directory and
renamed into place, so servers sharing a root can race."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "hosts",
    "protocols",
    "services",
    "mime.types",
)
ETC_BUILD_PREFIX = ".etc-build-"  # a shared /etc being built (a killed server's is removed by the reaper)
ETC_NETWORK_FILES = ("resolv.conf", "ssl", "ca-certificates", "gai.conf")

_ETC_LOCK = threading.Lock()  # placements call shared_etc from threads: one build per process, not one each


def shared_etc(root_dir: str, uid: int, workspace: str, network: bool) -> Path:
    """<root>/.etc-<digest>: the /etc of sandboxes running as `uid` with this workspace (HOME)."""
    with _ETC_LOCK:
        return _shared_etc(root_dir, uid, workspace, network)


@functools.lru_cache(maxsize=16)
def _shared_etc(root_dir: str, uid: int, workspace: str, network: bool) -> Path:
    """Built once per content (digest of the host files it copies, the uid, the network
    switch) and per process; atomic, so servers sharing a root can race. Builds left half done by
    a killed server (their pid is in the name) are removed first."""
    for stale in Path(root_dir).glob(f"{ETC_BUILD_PREFIX}*"):
        pid = stale.name.removeprefix(ETC_BUILD_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    names = [n for n in ETC_FILES + (ETC_NETWORK_FILES if network else ()) if os.path.lexists(f"/etc/{n}")]
    stamp = [(n, os.lstat(f"/etc/{n}").st_mtime_ns, os.lstat(f"/etc/{n}").st_size) for n in names]
    digest = hashlib.sha256(repr((stamp, uid, workspace)).encode()).hexdigest()[:16]
    target = Path(root_dir) / f".etc-{digest}"
    if target.is_dir():
        return target
    building = Path(tempfile.mkdtemp(prefix=f"{ETC_BUILD_PREFIX}{os.getpid()}-", dir=root_dir))
    for name in names:
        src, dst = Path("/etc", name), building / name
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)
    # Host users other than the agent are unmapped inside and show as 65534 ("nobody").
    (building / "passwd").write_text(
        f"agent:x:{uid}:{uid}:agent:{workspace}:/bin/bash\nnobody:x:65534:65534:host users:/:/bin/false\n"
    )
    (building / "group").write_text(f"agent:x:{uid}:\nnogroup:x:65534:\n")
    os.chmod(building, 0o755)
    try:
        building.rename(target)
    except OSError:  # another server built it first
        shutil.rmtree(building, ignore_errors=True)
    return target


_BASE_LOCK = threading.Lock()


def empty_base(root_dir: str, workspace: str) -> Path:
    """<root>/.fork-base-<workspace digest>/files: empty /tmp and workspace, read-only to sandboxes."""
    base = Path(root_dir) / (".fork-base-" + hashlib.sha256(workspace.encode()).hexdigest()[:12])
    with _BASE_LOCK:
        if not base.is_dir():
            building = Path(tempfile.mkdtemp(prefix=f"{base.name}-", dir=root_dir))
            for path in ("/tmp", workspace):
                (building / "files" / path.lstrip("/")).mkdir(mode=0o755, parents=True)
            os.chmod(building, 0o755)
            try:
                building.rename(base)
            except OSError:  # another server made it first
                shutil.rmtree(building, ignore_errors=True)
    return base / "files"


def empty_dir(root_dir: str) -> Path:
    """<root>/.empty: an empty directory, read-only to sandboxes (a placeholder over what they must not see)."""
    path = Path(root_dir) / ".empty"
    if not path.is_dir():
        building = Path(tempfile.mkdtemp(prefix=".empty-", dir=root_dir))
        os.chmod(building, 0o555)
        try:
            building.rename(path)
        except OSError:  # another server made it first
            shutil.rmtree(building, ignore_errors=True)
    return path
