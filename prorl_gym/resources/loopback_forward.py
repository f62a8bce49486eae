# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Runs inside a sandbox, on its own Python (standard library only): listens on the sandbox's
loopback and pipes each connection to the model socket bound into it, so a harness that only knows
a base URL (http://127.0.0.1:<port>/v1) reaches its rollout's capture endpoint while the sandbox
keeps no network. It forwards bytes and judges nothing: what may pass is the host side's to decide
(resources/harness.py). It ends with the process that started it.

    python -I loopback_forward.py <model socket> <port>
"""

import asyncio
import os
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main(socket_path: str, port: int) -> None:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    parent = os.getppid()
    server = await asyncio.start_server(forward, "127.0.0.1", port)
    async with server:
        while os.getppid() == parent:  # the launching shell is gone: so is the harness
            await asyncio.sleep(0.5)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
