"""Waiting on a file descriptor from the event loop: the one home of add_reader/add_writer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fd_event(fd: int, *, write: bool = False) -> Iterator[asyncio.Future[None]]:
    """A future that completes once `fd` is readable (or writable); the watch ends with the block."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    (loop.add_writer if write else loop.add_reader)(fd, wake)
    try:
        yield ready
    finally:
        (loop.remove_writer if write else loop.remove_reader)(fd)
