# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Bring your own agent: capture the exact token ids of a harness's policy calls (gateway.py), as a
tree (tree.py) that a trainer takes branch by branch (export.py)."""

from prorl_gym.capture.export import TreeExport, export, tree_from_export
from prorl_gym.capture.gateway import CaptureGateway
from prorl_gym.capture.trajectory import CaptureLimits, CaptureRecord, CaptureRefused, Trajectory

__all__ = [
    "CaptureGateway",
    "CaptureLimits",
    "CaptureRecord",
    "CaptureRefused",
    "Trajectory",
    "TreeExport",
    "export",
    "tree_from_export",
]
