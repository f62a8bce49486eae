# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Images for the apptainer backend: the cached .sif of a URI, pulled first if absent (pull_image,
what a sandbox start uses), and the command that pre-pulls every image a dataset needs, ahead of time:

    python -m prorl_gym.sandbox.backends.apptainer.pull data/swe.jsonl [more.jsonl ...] \
        [--field image] [--cache-dir DIR] [--binary apptainer] [--jobs 2] [--dry-run]

Run it on a node with network (an HPC login node: compute nodes are often offline). Each
image lands in <cache-dir>/<sanitised uri>.sif, exactly where the apptainer backend looks
for it, so sandboxes start from the local .sif. Images already there are skipped; a .sif
path (not a URI) is only checked. --field may be dotted for nested keys (metadata.image).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
from pathlib import Path

from prorl_gym.sandbox.backends.apptainer.cli import INSTALL_HINT, ApptainerError, pull_argv, pull_env, run, sif_path

log = logging.getLogger(__name__)
PULL_HINT = (
    "pre-pull images on a node with network (e.g. a login node): "
    "python -m prorl_gym.sandbox.backends.apptainer.pull <dataset.jsonl>"
)


async def pull_image(
    uri: str, cache_dir: str | Path | None = None, binary: str = "apptainer", timeout: float | None = None
) -> Path:
    """The cached .sif of a docker://, oras://, library:// ... `uri`, pulled first if absent."""
    dest = sif_path(uri, cache_dir)
    if dest.exists():
        return dest
    if shutil.which(binary) is None:
        raise ApptainerError(f"{binary!r} not found to pull {uri}: {INSTALL_HINT}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.stem}.{os.getpid()}.tmp.sif")  # concurrent pullers never see half a file
    log.info("pulling %s to %s", uri, dest)
    code, out = await run(pull_argv(uri, tmp, binary), timeout, pull_env(os.environ))
    if code != 0:
        tmp.unlink(missing_ok=True)
        raise ApptainerError(f"{binary} pull {uri} failed (exit {code}): {out}\n{PULL_HINT}")
    os.replace(tmp, dest)
    return dest


class ImagePulls:
    """A backend's pulls: one per image at a time, so sandboxes starting from an image that is being
    pulled wait for that pull instead of pulling it too."""

    def __init__(self) -> None:
        self._locks: dict[Path, asyncio.Lock] = {}

    async def get(
        self, uri: str, cache_dir: str | Path | None = None, binary: str = "apptainer", timeout: float | None = None
    ) -> Path:
        async with self._locks.setdefault(sif_path(uri, cache_dir), asyncio.Lock()):
            return await pull_image(uri, cache_dir, binary, timeout)


def dataset_images(paths: list[str | Path], field: str = "image") -> list[str]:
    """Distinct non-empty values of `field` over the rows of JSONL files, in first-seen order."""
    images: dict[str, None] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                value = json.loads(line)
                for key in field.split("."):
                    value = value.get(key) if isinstance(value, dict) else None
                if isinstance(value, str) and value:
                    images[value] = None
    return list(images)


async def pull_all(images: list[str], cache_dir: str | None, binary: str, jobs: int) -> int:
    """Pull what is missing, `jobs` at a time; returns how many failed."""
    slots = asyncio.Semaphore(jobs)
    failed = 0

    async def one(image: str) -> None:
        nonlocal failed
        if "://" not in image:
            ok = Path(image).exists()
            failed += not ok
            print(f"{'local  ' if ok else 'MISSING'} {image}", flush=True)
            return
        if sif_path(image, cache_dir).exists():
            print(f"cached  {image}", flush=True)
            return
        async with slots:
            try:
                path = await pull_image(image, cache_dir, binary)
                print(f"pulled  {image} -> {path}", flush=True)
            except ApptainerError as exc:
                failed += 1
                print(f"FAILED  {image}: {exc}", file=sys.stderr, flush=True)

    await asyncio.gather(*(one(image) for image in images))
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m prorl_gym.sandbox.backends.apptainer.pull",
        description="Pre-pull every distinct Apptainer image a dataset needs, ahead of time.",
    )
    parser.add_argument("datasets", nargs="+", help="JSONL files, one task per line")
    parser.add_argument("--field", default="image", help="the row field naming the image (dotted for nested keys)")
    parser.add_argument(
        "--cache-dir", default=None, help="where .sif files go (the sandbox spec's apptainer.cache_dir)"
    )
    parser.add_argument("--binary", default="apptainer", help="apptainer or singularity")
    parser.add_argument("--jobs", type=int, default=2, help="pulls at a time (be gentle on a shared login node)")
    parser.add_argument("--dry-run", action="store_true", help="list the images and their .sif paths, pull nothing")
    args = parser.parse_args(argv)
    images = dataset_images(args.datasets, args.field)
    print(f"{len(images)} distinct image(s) in field {args.field!r}", flush=True)
    if args.dry_run:
        for image in images:
            print(f"{image} -> {sif_path(image, args.cache_dir) if '://' in image else image}")
        return 0
    if shutil.which(args.binary) is None:
        print(f"error: {args.binary!r} not found on PATH: {INSTALL_HINT}", file=sys.stderr)
        return 2
    failed = asyncio.run(pull_all(images, args.cache_dir, args.binary, max(1, args.jobs)))
    if failed:
        print(f"{failed} image(s) failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
