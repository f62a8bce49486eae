# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What a sandbox should be: the one config object every backend reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, SerializeAsAny

from prorl_gym.config import StrictConfig
from prorl_gym.runtime.python import PythonRuntimeKind
from prorl_gym.sandbox.backends.kinds import BackendOptions, options_class
from prorl_gym.sandbox.layout import default_python, default_root_dir

GiB = 1 << 30


class ResourceLimits(StrictConfig):
    """Enforced per sandbox with rlimits (rootless, portable) and tmpfs sizes.

    A hit gives a clear result: CPU time -> SIGXCPU, file size -> SIGXFSZ ("File too
    large"), memory -> allocation failure (MemoryError), processes -> fork fails inside the
    sandbox only (counted per sandbox: each has its own user namespace). Wall time per call
    and output size are the shell/kernel timeouts and output cap.
    """

    cpu_time_s: int | None = 600  # per process
    memory_bytes: int | None = 8 * GiB  # address space per process
    processes: int | None = 512  # per sandbox
    file_size_bytes: int | None = 1 * GiB  # per file
    open_files: int | None = 4096  # per process
    workspace_bytes: int = 4 * GiB  # tmpfs size of the workspace
    tmp_bytes: int = 1 * GiB  # tmpfs size of /tmp


class Bind(StrictConfig):
    src: str
    dst: str | None = None  # default: same path inside
    writable: bool = False
    # Copies of the spec's hidden_packages inside it are hidden too (False: the task's own files, e.g. its
    # repository, shown as they are).
    hide_packages: bool = True


def backend_options(value: Any) -> BackendOptions:
    """A backend's options from config: a name, a mapping with `kind` (default: local), or options."""
    if isinstance(value, BackendOptions):
        return value
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, Mapping):
        raise ValueError(f"backend must be a name or a mapping with `kind`, got {value!r}")
    value = dict(value)
    value.setdefault("kind", "local")
    return options_class(value["kind"]).model_validate(value)


class SandboxSpec(StrictConfig):
    # Where and how isolated: the backend and its own options (local: bubblewrap; apptainer; ...).
    backend: Annotated[SerializeAsAny[BackendOptions], BeforeValidator(backend_options)] = Field(
        default_factory=lambda: backend_options("local")
    )
    network: bool = False  # off: the sandbox has its own empty network namespace
    root_dir: str = Field(default_factory=default_root_dir, description="Host directory for per-sandbox dirs.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment inside the sandbox.")
    workspace: str = "/workspace"  # the working directory (and HOME) inside an isolated sandbox
    image: str | None = None  # a .sif path or a docker:// URI (e.g. a SWE-bench image), for backends that run images
    binds: list[Bind] = Field(default_factory=list)  # extra paths the task needs (read-only by default)
    # Python packages (import or distribution names) whose copies in the sandbox's view of the system are
    # hidden behind empty placeholders: a SWE task's package must be readable only in its repository.
    hidden_packages: list[str] = Field(default_factory=list)
    limits: ResourceLimits = Field(default_factory=ResourceLimits)
    lease_ttl_s: float | None = 6 * 3600  # a sandbox older than this is a leak: the reaper ends it
    output_limit_bytes: int = 16 * 1024
    command_timeout_s: float = 30.0
    python_timeout_s: float = 30.0
    # a harness file operation (read, write, edit) takes milliseconds: not done by then, the sandbox is unresponsive
    file_timeout_s: float = 60.0
    interrupt_grace_s: float = 1.0
    start_timeout_s: float = 30.0
    # Set by fork.py, not in config. template_dir: a frozen copy of another sandbox's files (<dir>/<workspace>,
    # <dir>/tmp) that this one starts from, copy-on-write. staging: made to be frozen whole (its writes
    # go to disk through an overlay over nothing, and become the template's files without a copy).
    template_dir: str | None = None
    # A snapshot of a fork is its writes over its template: the layers below template_dir, lowest first.
    template_lowers: list[str] = Field(default_factory=list)
    staging: bool = False
    kernel_python: str = Field(
        default_factory=default_python, description="Interpreter inside the sandbox (with ipykernel for `ipython`)."
    )
    # The Python tool's runtime (runtime/python.py): `repl`, a lean persistent interpreter (state, the last
    # value shown as IPython shows it, tracebacks, interrupts, top-level await); `ipython`, a real kernel
    # (magics, rich display, get_ipython()) at ~10x the CPU per rollout.
    python_runtime: PythonRuntimeKind = "repl"

    def with_backend(self, **options: Any) -> SandboxSpec:
        """This spec with some of its backend's options changed."""
        return self.model_copy(update={"backend": self.backend.model_copy(update=options)})
