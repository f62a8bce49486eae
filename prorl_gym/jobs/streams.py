# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A batch's results as a stream: its records in the order they finished, read from the journal, so
that record n is at offset n for every reader, before and after a restart (resume with `after`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson

from prorl_gym.jobs.state import BatchState, JobBook

STREAM_CHUNK = 64  # records read from the journal at a time by a stream


def stream_line(record_json: bytes | str, job_id: str, batch_id: str, status: str) -> str:
    """A stored record as a stream line: the record's JSON with the stream's fields added."""
    text = record_json.decode() if isinstance(record_json, bytes) else record_json
    extra = orjson.dumps({"job_id": job_id, "batch_id": batch_id, "status": status}).decode()
    return f"{text[:-1]},{extra[1:]}" if text != "{}" else extra


def follow(book: JobBook, batch_id: str, after: int = 0) -> AsyncIterator[str | None]:
    """The batch's records (stream lines, JSON) from number `after` on, until all are in; None is a
    heartbeat. Ends early when the agent shuts down (resume with `after` once it is back). 404 now."""
    return _follow(book, book.batch(batch_id), max(0, after))


async def _follow(book: JobBook, batch: BatchState, index: int) -> AsyncIterator[str | None]:
    while True:
        changed = batch.changed
        if index < len(batch.results):
            chunk = batch.results[index : index + STREAM_CHUNK]
            records = await book.journal.records([job_id for job_id, _ in chunk])
            for job_id, status in chunk:
                if job_id not in records:  # the batch was forgotten meanwhile
                    return
                yield stream_line(records[job_id], job_id, batch.id, status)
                index += 1
            continue
        if batch.done or book.closing:
            return
        try:
            await asyncio.wait_for(changed.wait(), book.limits.heartbeat_s)
        except TimeoutError:
            yield None
