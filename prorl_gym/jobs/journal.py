# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The job service's journal: batches, jobs and results on disk (SQLite, WAL), so that an agent
killed and started again serves every finished result again, with the same offsets.

What is written, and when (JobManager decides; this module only stores):
  a batch and its jobs (with their rows)   before the submission is answered
  a job's record and its offset in each    before any stream sees the record, in one transaction,
  batch's stream                           so an offset once delivered never changes
  a batch forgotten (acknowledged or       batch, results, and jobs no other batch holds
  expired), then space given back          (incremental vacuum, WAL checkpoint)

Durability: WAL with synchronous=NORMAL survives the process being killed (not a power cut).
Every call runs on one thread of its own, in order: the event loop never blocks on the disk,
and writes keep their order. One agent per journal file (an advisory lock says which).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from prorl_gym.config import StrictConfig
from prorl_gym.errors import ProrlError
from prorl_gym.paths import REPO_ROOT

SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY, job_ids TEXT NOT NULL, stop_after INTEGER, created REAL NOT NULL, finished REAL,
    options TEXT
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, row TEXT, status TEXT NOT NULL,
    runs INTEGER NOT NULL DEFAULT 1, record TEXT
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    batch_id TEXT NOT NULL, seq INTEGER NOT NULL, job_id TEXT NOT NULL, status TEXT NOT NULL,
    PRIMARY KEY (batch_id, seq)
);
"""


WAL_SIZE_LIMIT = 4 << 20  # bytes the write-ahead log keeps after a checkpoint
FREE_PAGES_KEPT = 4 << 20  # bytes of freed pages (dropped rows) kept for reuse before they go back to the disk


class JournalConfig(StrictConfig):
    """The agent's `journal:` config block."""

    persist: bool = True  # false: in memory only (a restart forgets every job)
    # <dir>/<agent name>.sqlite; default $PRORL_JOURNAL_DIR, else results/journal/ in the checkout
    dir: str | None = None
    on_restart: Literal["rerun", "fail"] = "rerun"  # jobs running when the agent died: again, or agent_restarted

    def path(self, agent: str) -> Path | None:
        if not self.persist:
            return None
        directory = self.dir or os.environ.get("PRORL_JOURNAL_DIR") or REPO_ROOT / "results" / "journal"
        return Path(directory) / f"{agent}.sqlite"


class JournalInUse(ProrlError):
    pass


class StreamOffset(NamedTuple):
    """Where a job's record stands in one batch's stream: its offset, and whether it completes the batch."""

    batch_id: str
    offset: int
    batch_done: bool


# Columns added since the first schema: (table, column, type). A journal written before them gets them at open.
ADDED_COLUMNS = [("batches", "options", "TEXT")]


@dataclass
class StoredBatch:
    id: str
    job_ids: list[str]
    stop_after: int | None
    finished: float | None  # wall clock
    results: list[tuple[str, str]]  # (job id, status) in stream order
    options: dict[str, Any]  # the rest of how it was submitted (BatchOptions, jobs.py)


@dataclass
class StoredJob:
    id: str
    fingerprint: str
    row: dict | None  # kept until the job finishes
    status: str
    runs: int  # how many times it was started (an agent restart starts it again)


class Journal:
    """path None: in memory (nothing survives the process; the same code path otherwise)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._db: sqlite3.Connection | None = None
        self._lock_fd = -1
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")

    @property
    def opened(self) -> bool:
        return self._db is not None

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> tuple[list[StoredBatch], list[StoredJob]]:
        """Open (creating it if new) and read back what it holds."""
        return await self._call(self._open)

    def _open(self) -> tuple[list[StoredBatch], list[StoredJob]]:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(self._lock_fd)
                self._lock_fd = -1
                raise JournalInUse(f"the journal {self.path} is in use by another agent") from None
        db = sqlite3.connect(str(self.path) if self.path else ":memory:", check_same_thread=False)
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes on a new file: before any table
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        # The write-ahead log keeps its largest size after a checkpoint unless told: a 20 MB row would
        # be on disk twice (log and database) for as long as the journal is open.
        db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        db.executescript(SCHEMA)
        for table, column, kind in ADDED_COLUMNS:
            if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        self._db = db
        results: dict[str, list[tuple[str, str]]] = {}
        for batch_id, job_id, status in db.execute(
            "SELECT batch_id, job_id, status FROM results ORDER BY batch_id, seq"
        ):
            results.setdefault(batch_id, []).append((job_id, status))
        batches = [
            StoredBatch(bid, json.loads(ids), stop_after, finished, results.get(bid, []), json.loads(options or "{}"))
            for bid, ids, stop_after, finished, options in db.execute(
                "SELECT id, job_ids, stop_after, finished, options FROM batches ORDER BY created"
            )
        ]
        jobs = [
            StoredJob(jid, fingerprint, json.loads(row) if row else None, status, runs)
            for jid, fingerprint, row, status, runs in db.execute(
                "SELECT id, fingerprint, row, status, runs FROM jobs"
            )
        ]
        return batches, jobs

    async def close(self) -> None:
        await self._call(self._close)
        self._thread.shutdown(wait=True)

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    # ------------------------------------------------------------------ writes

    async def add_batch(
        self,
        batch_id: str,
        job_ids: list[str],
        stop_after: int | None,
        new_jobs: list[tuple[str, str, str]],
        options: dict[str, Any] | None = None,
    ) -> None:
        """The batch and its new jobs (id, fingerprint, the row's JSON), in one transaction."""
        await self._call(
            self._add_batch, batch_id, json.dumps(job_ids), stop_after, new_jobs, json.dumps(options or {})
        )

    def _add_batch(self, batch_id: str, job_ids: str, stop_after: int | None, rows: list, options: str) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO batches (id, job_ids, stop_after, created, options) VALUES (?, ?, ?, ?, ?)",
                (batch_id, job_ids, stop_after, time.time(), options),
            )
            self._db.executemany("INSERT INTO jobs (id, fingerprint, row, status) VALUES (?, ?, ?, 'running')", rows)
        self._keep_small()

    async def setting(self, key: str) -> Any:
        """A value kept by set_setting (None if never set)."""
        return await self._call(self._setting, key)

    def _setting(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    async def set_setting(self, key: str, value: Any) -> None:
        sql = "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        await self._call(self._write, sql, (key, json.dumps(value)))

    async def set_options(self, batch_id: str, options: dict[str, Any]) -> None:
        await self._call(self._write, "UPDATE batches SET options = ? WHERE id = ?", (json.dumps(options), batch_id))

    async def set_stop_after(self, batch_id: str, k: int) -> None:
        await self._call(self._write, "UPDATE batches SET stop_after = ? WHERE id = ?", (k, batch_id))

    async def restarted(self, job_ids: list[str]) -> None:
        """These jobs are started again (after an agent restart)."""
        await self._call(self._write_many, "UPDATE jobs SET runs = runs + 1 WHERE id = ?", [(j,) for j in job_ids])

    async def finish_job(
        self, job_id: str, status: str, record: str, offsets: list[StreamOffset], keep_row: bool = False
    ) -> None:
        """The job's record (JSON) and its offset in each batch's stream. Its row is dropped unless
        `keep_row` (a rollout with snapshots: branches start from its row)."""
        await self._call(self._finish_job, job_id, status, record, offsets, keep_row)

    def _finish_job(self, job_id: str, status: str, record: str, offsets: list[StreamOffset], keep_row: bool) -> None:
        with self._db:
            self._db.execute(
                "UPDATE jobs SET status = ?, record = ?, row = CASE WHEN ? THEN row END WHERE id = ?",
                (status, record, keep_row, job_id),
            )
            self._add_offsets(job_id, status, offsets)
        self._keep_small()

    def _keep_small(self) -> None:
        """After a write that may have been large: a large payload is on disk once. Without this a
        row is in the log and the database until the log is reused, and again in the job's record
        (which holds its content) while its dropped pages wait for the batch to be forgotten."""
        free, page = (self._db.execute(f"PRAGMA {name}").fetchone()[0] for name in ("freelist_count", "page_size"))
        wal = Path(f"{self.path}-wal") if self.path is not None else None
        if free * page > FREE_PAGES_KEPT or (wal is not None and wal.exists() and wal.stat().st_size > WAL_SIZE_LIMIT):
            self._give_back_space()

    def _give_back_space(self) -> None:
        # fetchall: the vacuum frees a page per step, and execute() alone takes one step.
        self._db.execute("PRAGMA incremental_vacuum").fetchall()
        if self.path is not None:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    async def add_offsets(self, job_id: str, status: str, offsets: list[StreamOffset]) -> None:
        """A finished job's stored record gets offsets in more batches (a resubmission of the same job)."""
        await self._call(self._add_offsets_now, job_id, status, offsets)

    def _add_offsets_now(self, job_id: str, status: str, offsets: list[StreamOffset]) -> None:
        with self._db:
            self._add_offsets(job_id, status, offsets)

    def _add_offsets(self, job_id: str, status: str, offsets: list[StreamOffset]) -> None:
        now = time.time()
        for batch_id, seq, done in offsets:
            self._db.execute(
                "INSERT INTO results (batch_id, seq, job_id, status) VALUES (?, ?, ?, ?)",
                (batch_id, seq, job_id, status),
            )
            if done:
                self._db.execute("UPDATE batches SET finished = ? WHERE id = ?", (now, batch_id))

    async def forget_batches(self, batch_ids: list[str], job_ids: list[str]) -> None:
        """Drop finished batches and the jobs no remaining batch holds, then give the space back."""
        await self._call(self._forget, batch_ids, job_ids)

    def _forget(self, batch_ids: list[str], job_ids: list[str]) -> None:
        with self._db:
            self._db.executemany("DELETE FROM batches WHERE id = ?", [(b,) for b in batch_ids])
            self._db.executemany("DELETE FROM results WHERE batch_id = ?", [(b,) for b in batch_ids])
            self._db.executemany("DELETE FROM jobs WHERE id = ?", [(j,) for j in job_ids])
        self._give_back_space()

    def _write(self, sql: str, params: tuple) -> None:
        with self._db:
            self._db.execute(sql, params)

    def _write_many(self, sql: str, params: list[tuple]) -> None:
        with self._db:
            self._db.executemany(sql, params)

    # ------------------------------------------------------------------ reads

    async def records(self, job_ids: list[str]) -> dict[str, str]:
        """job id -> its record (JSON text), for those finished."""
        return await self._call(self._records, job_ids)

    def _records(self, job_ids: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(job_ids), 500):
            chunk = job_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT id, record FROM jobs WHERE record IS NOT NULL AND id IN ({marks})"
            found.update(self._db.execute(sql, chunk).fetchall())
        return found

    async def fields(self, job_ids: list[str], paths: list[str]) -> dict[str, list]:
        """job id -> the values at these JSON paths ('$.reward', ...) of its record, for those finished:
        SQLite reads them (in C, off the event loop's thread) so a caller that wants a few fields of many
        records (the dashboard's index) never parses them whole in Python."""
        return await self._call(self._fields, job_ids, paths)

    def _fields(self, job_ids: list[str], paths: list[str]) -> dict[str, list]:
        found: dict[str, list] = {}
        # several paths: one JSON array of their values (one parse); one path: its value alone, so wrapped
        extract = f"json_extract(record, {', '.join('?' * len(paths))})"
        extract = extract if len(paths) > 1 else f"json_array({extract})"
        for start in range(0, len(job_ids), 500):
            chunk = job_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT id, {extract} FROM jobs WHERE record IS NOT NULL AND id IN ({marks})"
            found.update((job_id, json.loads(values)) for job_id, values in self._db.execute(sql, [*paths, *chunk]))
        return found

    async def row(self, job_id: str) -> dict | None:
        return await self._call(self._row, job_id)

    def _row(self, job_id: str) -> dict | None:
        found = self._db.execute("SELECT row FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return json.loads(found[0]) if found and found[0] else None

    def size_on_disk(self) -> int:
        """Bytes of the database and its write-ahead log (two stat calls)."""
        if self.path is None:
            return 0
        return sum(os.path.getsize(p) for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    async def stats(self) -> dict[str, Any]:
        size = await asyncio.to_thread(self.size_on_disk)
        return {"path": str(self.path) if self.path else None, "bytes": size}
