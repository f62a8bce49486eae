# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Bounded capture of command output: keep a head and a tail, count what was dropped.

A command may print gigabytes (`yes`, a runaway loop); memory stays at head + tail bytes
however much arrives, and the text handed to the policy says explicitly what was cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRUNCATION_NOTE = "\n[... output truncated: {omitted} bytes omitted ...]\n"


@dataclass
class BoundedOutput:
    """Accumulates bytes; keeps the first `head_limit` and the last `tail_limit` bytes."""

    limit: int = 16 * 1024
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    @property
    def head_limit(self) -> int:
        return self.limit // 2

    @property
    def tail_limit(self) -> int:
        return self.limit - self.head_limit

    def append(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        """Decoded output; invalid UTF-8 becomes U+FFFD rather than an error."""
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + tail
        omitted = self.total - len(self.head) - len(self.tail)
        return head + TRUNCATION_NOTE.format(omitted=omitted) + tail
