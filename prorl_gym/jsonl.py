# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""JSON lines: the format of datasets, rollouts and their failure sidecars."""

from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: str | Path, missing_ok: bool = False) -> list[dict]:
    """Every non-empty line as a JSON value; [] for a missing file when missing_ok."""
    path = Path(path)
    if missing_ok and not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: str | Path, rows: list[dict], ensure_ascii: bool = True) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=ensure_ascii) + "\n")
    print(f"wrote {len(rows)} rows to {path}")
