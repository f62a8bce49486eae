# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The base image, built here: no registry needed.

A root file system of the host's own Debian packages (those below and everything they depend on,
as dpkg lists their files), imported into the engine as a tar (`docker import` through the API).
It has the host's Python, so the sandbox venv (bound read-only, as every backend does) runs in
it. The tag is a hash of the packages' names and versions: the engine's image store is the cache,
and a host whose packages changed builds a new one. Measured here: ~3 s to tar, ~5 s to import,
~150 MiB; debootstrap would need ~2 minutes of downloads for the same.

    python -m prorl_gym.sandbox.backends.container.image [--socket PATH]   # prints the image
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import os
import re
import subprocess
import tarfile
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from prorl_gym.sandbox.backends.container.engine import Engine, EngineError, default_socket
from prorl_gym.sandbox.backends.container.options import BASE_IMAGE

PACKAGES = (
    "bash", "dash", "libc-bin", "coreutils", "python3", "python3.11", "findutils", "grep", "sed", "tar", "gzip", "util-linux",
    "procps", "diffutils", "patch", "git", "ca-certificates", "mawk", "libstdc++6",
)  # fmt: skip
TOP_LEVEL_LINKS = ("bin", "lib", "lib64", "sbin")  # merged /usr: these are links on the host too
BUILDER_VERSION = "2"  # part of the tag: a change here builds a new image
CHUNK = 1 << 20


class ImageBuildError(EngineError):
    """The base image could not be built here (no dpkg: not a Debian-family host, or a missing package)."""


def _dpkg(*args: str) -> str:
    try:
        return subprocess.run(["dpkg-query", *args], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError as exc:
        raise ImageBuildError("building the base image needs dpkg (a Debian-family host)") from exc


def installed_versions() -> dict[str, str]:
    out = _dpkg("-W", "-f=${Package}\t${Version}\t${db:Status-Status}\t${Depends}, ${Pre-Depends}\n")
    return {line.split("\t")[0]: line for line in out.splitlines() if line.split("\t")[2:3] == ["installed"]}


def closure(roots: tuple[str, ...], installed: dict[str, str]) -> list[str]:
    """The packages and, transitively, what they depend on (the first installed alternative)."""
    missing = [name for name in roots if name not in installed]
    if missing:
        raise ImageBuildError(f"the base image needs these Debian packages installed: {missing}")
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for alternatives in installed[name].split("\t")[3].split(","):
            for choice in alternatives.split("|"):
                dependency = re.split(r"[ :(]", choice.strip())[0]
                if dependency in installed:
                    todo.append(dependency)
                    break
    return sorted(seen)


def image_tag(packages: list[str], installed: dict[str, str]) -> str:
    versions = "\n".join(installed[name].split("\t")[1] + " " + name for name in packages)
    return hashlib.sha256(f"{BUILDER_VERSION}\n{versions}".encode()).hexdigest()[:16]


def package_files(packages: list[str]) -> list[str]:
    """Every file and link the packages installed, at its real path (merged /usr: /bin/x is /usr/bin/x)."""
    listed = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, check=False).stdout
    files = set()
    for path in listed.splitlines():
        if not path.startswith("/") or path.startswith("/usr/share/doc") or path.startswith("/usr/share/man"):
            continue
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if os.path.islink(real) or os.path.isfile(real):
            files.add(real)
    return sorted(files)


def write_rootfs(target: Path, files: list[str], uid: int = 100000) -> None:
    """The tar: the files, their directories, /bin-style links, a passwd naming root and the sandbox user."""
    with tarfile.open(target, "w") as tar:
        directories = sorted({parent for path in files for parent in _parents(path)})
        links = [f"/{link}" for link in TOP_LEVEL_LINKS if os.path.islink(f"/{link}")]
        for path in dict.fromkeys([*directories, *links, *files]):  # a tar with a path twice is refused
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
        etc = {
            "etc/passwd": f"root:x:0:0:root:/root:/bin/bash\nsandbox:x:{uid}:{uid}::/workspace:/bin/bash\n",
            "etc/group": f"root:x:0:\nsandbox:x:{uid}:\n",
        }
        for name, text in etc.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text), 0o644
            tar.addfile(info, io.BytesIO(text.encode()))
        for name, mode in (("tmp", 0o1777), ("workspace", 0o755), ("root", 0o700)):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)


def _parents(path: str) -> list[str]:
    parts = Path(path).parent.parts[1:]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with open(path, "rb") as f:  # read in a thread, chunk by chunk
        while chunk := await asyncio.to_thread(f.read, CHUNK):
            yield chunk


async def ensure_base_image(engine: Engine) -> str:
    """The base image's name, built and imported unless the engine has it already."""
    installed = await asyncio.to_thread(installed_versions)
    packages = closure(PACKAGES, installed)
    tag = image_tag(packages, installed)
    image = f"{BASE_IMAGE}:{tag}"
    if await engine.has_image(image):
        return image
    with tempfile.TemporaryDirectory(prefix="prorl-image-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        files = await asyncio.to_thread(package_files, packages)
        await asyncio.to_thread(write_rootfs, tar, files)
        await engine.import_image(BASE_IMAGE, tag, _chunks(tar))
    for stale in await engine.images(BASE_IMAGE):  # built from packages this host no longer has
        if stale != image:
            await engine.remove_image(stale)
    return image


async def _main(socket_path: str | None) -> None:
    path = socket_path or default_socket()
    if path is None:
        raise SystemExit("no container engine socket: pass --socket or set DOCKER_HOST=unix://...")
    engine = Engine(path)
    try:
        print(await ensure_base_image(engine))
    finally:
        await engine.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", help="the Engine API socket (default: $DOCKER_HOST, podman's, docker's)")
    asyncio.run(_main(parser.parse_args().socket))
