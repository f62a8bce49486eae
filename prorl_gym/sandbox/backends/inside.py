# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""What every backend gives the processes inside a sandbox: their environment (an allow-list) and
the host directories of their Python. Used by more than one backend, so it lives here."""

from __future__ import annotations

from pathlib import Path

# The environment of every process inside a sandbox, whatever the backend (an allow-list: nothing of
# the server's own environment), before PATH, HOME and TMPDIR of the backend and the spec's own `env`.
SANDBOX_ENV = {"LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "PYTHONUNBUFFERED": "1"}


def python_dirs(python: str) -> list[str]:
    """Directories the interpreter needs inside: its venv and, if outside /usr, its base install."""
    exe = Path(python)
    dirs = []
    cfg = exe.parent.parent / "pyvenv.cfg"
    if cfg.exists():
        dirs.append(str(exe.parent.parent))
        home = next(
            (line.split("=", 1)[1].strip() for line in cfg.read_text().splitlines() if line.startswith("home")), ""
        )
        if home:
            dirs.append(str(Path(home).parent))
    else:
        dirs.append(str(exe.resolve().parent.parent))
    return [d for d in dict.fromkeys(dirs) if not d.startswith("/usr")]
