# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Which backends there are, by kind, and the base of their options models.

A backend is a folder of backends/ with its options model (a BackendOptions subclass whose `kind`
names it) and a class implementing backends.base.Backend. BACKENDS names both as "module:name";
they are imported on first use, by name, so an unused backend costs nothing and reading a spec
imports its backend's options only, not what the backend runs on (Ray). Adding a backend is one
line here. Nothing outside a backend looks at its kind: what a backend can do beyond the contract
is a capability it declares (base.py; RunsImages below, for its options).
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any, Protocol, runtime_checkable

from pydantic import ConfigDict

from prorl_gym.config import StrictConfig
from prorl_gym.errors import ProrlError

# kind -> (its options model, its Backend class)
BACKENDS: dict[str, tuple[str, str]] = {
    "local": (
        "prorl_gym.sandbox.backends.local.options:LocalOptions",
        "prorl_gym.sandbox.backends.local.backend:LocalBackend",
    ),
    "apptainer": (
        "prorl_gym.sandbox.backends.apptainer.options:ApptainerOptions",
        "prorl_gym.sandbox.backends.apptainer.backend:ApptainerBackend",
    ),
    "ray": (
        "prorl_gym.sandbox.backends.ray.options:RayOptions",
        "prorl_gym.sandbox.backends.ray.backend:RayBackend",
    ),
    "container": (
        "prorl_gym.sandbox.backends.container.options:ContainerOptions",
        "prorl_gym.sandbox.backends.container.backend:ContainerBackend",
    ),
}


class BackendOptions(StrictConfig):
    """A backend's own options; `kind` names the backend (a key of BACKENDS).

    Each backend defines its subclass (LocalOptions, ApptainerOptions, ...). In config,
    `backend: apptainer` is short for `backend: {kind: apptainer}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str

    @property
    def hides_packages(self) -> bool:
        """Whether sandboxes of these options see SandboxSpec.hidden_packages' copies in their view of the
        system as empty placeholders (False: as they are)."""
        return False


@runtime_checkable
class RunsImages(Protocol):
    """Options of a backend that runs container images (SandboxSpec.image). An image's own
    directories are not the sandbox's to write (root-owned): one the task must change (a SWE
    image's repository) is copied to the sandbox's own disk and bound back writable."""

    def with_writable(self, *paths: str) -> BackendOptions:
        """These options with `paths` (image directories) writable to the sandbox."""
        ...


class UnknownBackendError(ProrlError, ValueError):
    pass


def targets(kind: str) -> tuple[str, str]:
    """(options model, Backend class) of a kind, as "module:name"."""
    try:
        return BACKENDS[kind]
    except KeyError:
        raise UnknownBackendError(f"unknown sandbox backend {kind!r}; known: {sorted(BACKENDS)}") from None


def load(target: str) -> Any:
    """What a "module:name" target names, its module imported."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@cache
def options_class(kind: str) -> type[BackendOptions]:
    return load(targets(kind)[0])
