# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Sandboxes: a persistent shell, a lazy IPython kernel and files, behind one async API."""

from prorl_gym.runtime.files import EditError, SandboxFileError, SandboxFileNotFound, SandboxFileTooLarge
from prorl_gym.runtime.python import PythonResult
from prorl_gym.runtime.shell import ShellResult
from prorl_gym.sandbox.api import Forkable, SandboxAPI, TemplateAPI
from prorl_gym.sandbox.backends.instances import Backends, default_backends, get_backend
from prorl_gym.sandbox.backends.kinds import RunsImages, UnknownBackendError
from prorl_gym.sandbox.errors import (
    SandboxClosedError,
    SandboxError,
    SandboxForkError,
    SandboxKernelError,
    SandboxLostError,
    SandboxStartError,
    SandboxUnresponsiveError,
)
from prorl_gym.sandbox.sandbox import Sandbox, create_sandbox
from prorl_gym.sandbox.spec import Bind, ResourceLimits, SandboxSpec

__all__ = [
    "Backends",
    "Bind",
    "ResourceLimits",
    "EditError",
    "Forkable",
    "PythonResult",
    "RunsImages",
    "Sandbox",
    "SandboxClosedError",
    "SandboxAPI",
    "SandboxError",
    "SandboxForkError",
    "SandboxFileError",
    "SandboxFileNotFound",
    "SandboxFileTooLarge",
    "SandboxKernelError",
    "SandboxLostError",
    "SandboxSpec",
    "SandboxStartError",
    "SandboxUnresponsiveError",
    "TemplateAPI",
    "ShellResult",
    "UnknownBackendError",
    "create_sandbox",
    "default_backends",
    "get_backend",
]
