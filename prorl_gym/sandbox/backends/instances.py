# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The backend instances a server holds: one per kind, made on first use, for the server's life.

Backends keep state of their own (a Ray backend the sandbox hosts it started, Apptainer its image
pulls and what a site refused), so there is one instance of each per server, not one per call:
a resources server's sessions own a `Backends` (resources/sessions.py), a Ray sandbox host one for
its inner backends, and every sandbox, template and reaper of that server goes through it.
`close()` releases what the instances hold.

Scripts, tests and library calls given no `Backends` use the process's default one,
`default_backends()` (what `create_sandbox(spec)` and `get_backend(kind)` use). Its instances
live as long as the process: a backend that holds something tied to an event loop (the Ray
backend's hosts) must be closed (`await default_backends().close()`) before that loop ends.
"""

from __future__ import annotations

from functools import cache

from prorl_gym.sandbox.backends.base import Backend
from prorl_gym.sandbox.backends.kinds import load, targets
from prorl_gym.sandbox.spec import SandboxSpec


@cache
def backend_class(kind: str) -> type[Backend]:
    """The Backend class of a kind (UnknownBackendError if there is none)."""
    return load(targets(kind)[1])


class Backends:
    def __init__(self) -> None:
        self._instances: dict[str, Backend] = {}

    def get(self, spec_or_kind: SandboxSpec | str) -> Backend:
        """The instance of a spec's backend (or of a kind), made on first use."""
        kind = spec_or_kind if isinstance(spec_or_kind, str) else spec_or_kind.backend.kind
        backend = self._instances.get(kind)
        if backend is None:
            backend = self._instances[kind] = backend_class(kind)()
        return backend

    async def close(self) -> None:
        """Release what every instance holds (they stay usable: a later call starts afresh)."""
        for backend in list(self._instances.values()):
            await backend.close()


_default = Backends()


def default_backends() -> Backends:
    """The process's default backends, for scripts and tests (see the module docstring)."""
    return _default


def get_backend(spec_or_kind: SandboxSpec | str) -> Backend:
    """The default backends' instance of a spec's backend (or of a kind)."""
    return _default.get(spec_or_kind)
