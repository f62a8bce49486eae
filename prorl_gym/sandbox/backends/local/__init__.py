# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `local` backend: sandboxes on this machine (backend.py, its options in options.py). Isolated
with bubblewrap (bwrap.py; the directories its sandboxes share: shared_dirs.py; the packages a
sandbox must not see: hidden.py), or not at all (unisolated.py); what is left of a sandbox is
found by processes.py."""
