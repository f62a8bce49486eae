# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The root of every error prorl-gym raises on purpose.

Each concern keeps its own errors beside its code (sandbox, runtime, verify, pipeline, ...),
all under ProrlError, so `except ProrlError` catches what we raise and never hides a bug.
Where an error also is a standard one (a missing file, a bad value), it inherits that too.
"""


class ProrlError(Exception):
    """Raised by prorl-gym on purpose; the message says what happened and, where it can, what to do."""
