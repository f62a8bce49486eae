# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What a submission to the job API must be before any of it is accepted (all or nothing): within
the bounds, its rows well-formed and each within the row bound, its job ids distinct. Pure: the
job service (submission.py) adds what needs its state (conflicts, capacity, the environment's check)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prorl_gym.errors import ProrlError
from prorl_gym.wire.jobs import JobLimits, SubmitRequest, row_problem
from prorl_gym.wire.records import SNAPSHOTS_KEY

LISTED = 20  # refusals list up to this many rows


class JobError(ProrlError):
    """A request the job service refuses: an HTTP status, the reason, and extra fields for the answer."""

    def __init__(self, status: int, detail: str, **extra: Any):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.extra = status, detail, extra


@dataclass
class Admission:
    """A submission that passed every check of its own: what the job manager accepts or refuses whole."""

    batch_id: str
    job_ids: list[str]  # row-major: row k's samples are job_ids[k * samples_per_row: ...]
    rows: list[dict]  # each row as it runs (sampling overrides, snapshots)
    texts: list[str]  # each row's one serialisation: measured, fingerprinted, journaled
    fingerprints: list[str]
    samples_per_row: int

    def row_of(self, job_index: int) -> int:
        return job_index // self.samples_per_row


def canonical(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check_bounds(request: SubmitRequest, limits: JobLimits, environments: tuple[str, ...]) -> None:
    if request.environment is not None and environments and request.environment not in environments:
        raise JobError(400, f"unknown environment {request.environment!r}; this agent serves {list(environments)}")
    rows = len(request.rows)
    if rows > limits.max_batch_rows:
        raise JobError(413, f"{rows} rows exceed the limit of {limits.max_batch_rows} rows per batch")
    if (n := rows * request.samples_per_row) > limits.max_batch_jobs:
        raise JobError(413, f"{n} jobs (rows x samples_per_row) exceed the limit of {limits.max_batch_jobs} per batch")
    if request.fork_from is not None and request.rows:
        raise JobError(422, "a branch (fork_from) takes no rows: it continues the job's own")
    if request.target_groups is not None and (request.samples_per_row < 2 or request.stop_after is not None):
        raise JobError(422, "target_groups (dynamic sampling) needs samples_per_row >= 2 and no stop_after")
    if request.stragglers is not None and request.stragglers.policy == "evict" and request.samples_per_row < 2:
        raise JobError(
            422, "stragglers policy evict admits a group without its stragglers: it needs samples_per_row >= 2"
        )
    if request.min_group_size is not None and request.min_group_size > request.samples_per_row:
        raise JobError(
            422, f"min_group_size {request.min_group_size} exceeds samples_per_row {request.samples_per_row}"
        )


def admit(
    request: SubmitRequest,
    rows: list[Any],
    limits: JobLimits,
    validate_row: Callable[[dict], Any] | None = None,
) -> Admission:
    """The submission's rows (the request's, or a branch's one row) made what runs, and its job ids."""
    samples = request.samples_per_row
    if not rows or samples == 0:
        raise JobError(422, "a batch needs at least one row")
    effective = effective_rows(rows, request.sampling.model_dump(exclude_none=True), validate_row)
    if request.snapshots is not None:
        effective = [row | {SNAPSHOTS_KEY: request.snapshots} for row in effective]
    texts = [canonical(row) for row in effective]
    if large := [{"index": i, "bytes": len(t)} for i, t in enumerate(texts) if len(t) > limits.max_row_bytes]:
        raise JobError(
            413, f"{len(large)} rows exceed the limit of {limits.max_row_bytes} bytes per row", rows=large[:LISTED]
        )
    n = len(rows) * samples
    batch_id = request.batch_id or f"b-{uuid.uuid4().hex[:12]}"
    ids = request.job_ids or [f"{batch_id}/{i}/{s}" for i in range(len(rows)) for s in range(samples)]
    if len(ids) != n or len(set(ids)) != n or not all(0 < len(i) <= 256 for i in ids):
        raise JobError(422, f"job_ids must be {n} distinct ids of 1 to 256 characters, one per row sample")
    return Admission(batch_id, ids, effective, texts, [fingerprint(t) for t in texts], samples)


def effective_rows(rows: list[Any], overrides: dict, validate_row: Callable[[dict], Any] | None) -> list[dict]:
    """Each row with the sampling overrides applied; 422 listing every malformed row."""
    effective, errors = [], []
    for index, row in enumerate(rows):
        if (error := row_problem(row)) is None:
            row = row | {"responses_create_params": row["responses_create_params"] | overrides}
            try:
                if validate_row:
                    validate_row(row)
            except Exception as exc:  # noqa: BLE001 - whatever the validator rejects is the row's fault
                error = str(exc)[:500]
        if error:
            errors.append({"index": index, "error": error})
        effective.append(row)
    if errors:
        raise JobError(422, f"{len(errors)} malformed rows (up to {LISTED} listed)", rows=errors[:LISTED])
    return effective
