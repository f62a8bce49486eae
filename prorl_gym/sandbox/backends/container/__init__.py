# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `container` backend: sandboxes as Docker or Podman containers, through the Docker Engine API."""
