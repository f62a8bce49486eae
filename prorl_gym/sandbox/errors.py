# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What can go wrong with a sandbox itself (not with the code run inside it)."""

from prorl_gym.errors import ProrlError


class SandboxError(ProrlError):
    """The sandbox failed: it could not start, is closed, or lost a part (shell, kernel)."""


class SandboxStartError(SandboxError):
    """A sandbox could not be placed or started (isolation unavailable, a backend failure, limits)."""

    may_live = False  # True: part of it may still run (its lease stays, for a reaper to finish)


class SandboxClosedError(SandboxError):
    pass


class SandboxLostError(SandboxError):
    """The sandbox is gone with its host or node (a dead Ray node or host process): its state is lost."""


class SandboxUnresponsiveError(SandboxError):
    """A shell the harness drives (the agent's, or the one for file operations) would not start or
    did not finish an operation: the sandbox failed, not the file or the command asked for."""


class SandboxKernelError(SandboxError):
    """The Python kernel could not be started (limits, resources)."""


class SandboxForkError(SandboxError):
    """A sandbox could not be frozen or forked (its backend cannot, or its state could not be read)."""
