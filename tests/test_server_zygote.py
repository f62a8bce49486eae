# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The server zygote (prorl_gym/server_zygote.py): a server it forks runs as `python app.py` would, its
supervisor learns how it ended, and it does not outlive its supervisor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

APP = textwrap.dedent(
    """
    import gc, json, os, sys
    import helper  # a module beside the script: sys.path[0] is the script's directory
    print(json.dumps({"name": __name__, "argv": sys.argv, "cwd": os.getcwd(), "var": os.environ.get("SERVER_VAR"),
                      "helper": helper.VALUE, "pgid_is_own": os.getpgid(0) == os.getpid(),
                      "preloaded_frozen": gc.get_freeze_count() > 10000}), flush=True)
    if sys.argv[1] == "wait":
        import time
        time.sleep(600)
    sys.exit(int(sys.argv[1]))
    """
)
DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from prorl_gym.server_zygote import fork_server
    child = fork_server([sys.executable, "app.py", sys.argv[1]], dict(os.environ, SERVER_VAR="given"))
    print(json.dumps({"pid": child.pid if child else None}), file=sys.stderr, flush=True)
    print(json.dumps({"exit": child.wait() if child else None}), file=sys.stderr, flush=True)
    """
)


@pytest.fixture
def short_tmp():
    """A temporary directory with a short path: the zygote's Unix socket is made in it."""
    with tempfile.TemporaryDirectory(prefix="zt-", dir="/tmp") as path:
        yield Path(path)


@pytest.fixture
def app(short_tmp):
    tmp_path = short_tmp
    folder = tmp_path / "server"
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    (folder / "helper.py").write_text("VALUE = 7\n")
    (folder / "driver.py").write_text(DRIVER)
    env = dict(os.environ, TMPDIR=str(tmp_path))  # a zygote of this test's own (its socket is under TMPDIR)
    env.pop("PRORL_SERVER_ZYGOTE", None)
    yield folder, env
    for sock in tmp_path.glob("prorl-server-zygote-*.sock"):
        _stop_zygote(sock)


def _stop_zygote(sock: Path) -> None:
    out = subprocess.run(["pgrep", "-f", f"prorl_gym.server_zygote {sock}"], capture_output=True, text=True).stdout
    for pid in out.split():
        os.kill(int(pid), signal.SIGKILL)


def _drive(folder: Path, env: dict, arg: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "driver.py", arg], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )


def test_a_forked_server_runs_as_python_app_py_would_and_its_exit_code_is_told(app):
    import json

    folder, env = app
    driver = _drive(folder, env, "3")
    out, err = driver.communicate(timeout=120)
    said = json.loads(out.decode().strip().splitlines()[-1])  # the driver's stdout is the server's
    assert said == {
        "name": "__main__",
        "argv": ["app.py", "3"],
        "cwd": str(folder),
        "var": "given",
        "helper": 7,
        "pgid_is_own": True,
        "preloaded_frozen": True,  # out of its collections: the zygote's pages stay shared
    }
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    assert lines[0]["pid"] and lines[0]["pid"] != driver.pid and lines[1] == {"exit": 3}
    zygote = Path(f"/proc/{lines[0]['pid']}")
    assert not zygote.exists()  # reaped


def test_a_server_ends_with_its_supervisor_even_killed(app):
    import json

    folder, env = app
    driver = _drive(folder, env, "wait")
    pid = None
    for line in driver.stderr:
        if line.startswith(b"{"):
            pid = json.loads(line)["pid"]
            break
    assert pid and Path(f"/proc/{pid}").exists()
    driver.kill()  # SIGKILL: no chance to pass anything on
    driver.wait()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()


def test_concurrent_supervisors_share_one_zygote_and_it_has_no_threads(app, short_tmp):
    tmp_path = short_tmp
    folder, env = app
    drivers = [_drive(folder, env, "0") for _ in range(3)]
    for driver in drivers:
        driver.communicate(timeout=120)
        assert driver.returncode == 0
    (sock,) = tmp_path.glob("prorl-server-zygote-*.sock")
    out = subprocess.run(["pgrep", "-f", f"prorl_gym.server_zygote {sock}"], capture_output=True, text=True).stdout
    (zygote,) = out.split()
    assert len(os.listdir(f"/proc/{zygote}/task")) == 1


def test_off_it_spawns(app):
    folder, env = app
    driver = _drive(folder, env | {"PRORL_SERVER_ZYGOTE": "0"}, "0")
    _, err = driver.communicate(timeout=60)
    assert b'{"pid": null}' in err
