# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""hidden_packages: copies of a package anywhere in a sandbox's view of the system are empty placeholders,
while binds marked as the task's own show it as it is."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from prorl_gym.sandbox import create_sandbox
from prorl_gym.sandbox.backends.local import hidden
from prorl_gym.sandbox.spec import Bind


@pytest.fixture
def system(request):
    """A directory laid out like part of a system, readable by the sandbox uid."""
    root = Path(tempfile.mkdtemp(prefix="prorl-hidden-", dir="/tmp"))
    files = {
        "lib/sdk/third_party/acme/__init__.py": "FIXED = True\n",
        "lib/sdk/third_party/acme/core.py": "x = 1\n",
        "lib/sdk/third_party/acme/vendor/acme/__init__.py": "nested\n",  # inside a copy: hidden with it
        "lib/python3/dist-packages/acme.py": "FIXED = True\n",
        "lib/python3/dist-packages/Acme-2.0.dist-info/METADATA": "Name: Acme\n",
        "share/wheels/acme-2.0-py3-none-any.whl": "zip\n",
        "lib/docs/acme/readme.txt": "not a package: no __init__.py\n",
        "lib/other/__init__.py": "",
        "lib/acmetools.py": "a different name\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "lib/link").symlink_to(root / "lib/sdk")  # links are not followed
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_copies_are_found_outermost_first(system):
    found = hidden.copies(["acme"], [(str(system), "/opt/system")])
    assert found == [
        ("/opt/system/lib/python3/dist-packages/Acme-2.0.dist-info", True),
        ("/opt/system/lib/python3/dist-packages/acme.py", False),
        ("/opt/system/lib/sdk/third_party/acme", True),
        ("/opt/system/share/wheels/acme-2.0-py3-none-any.whl", False),
    ]
    assert hidden.copies(["nothing"], [(str(system), "/x")]) == []


async def test_a_sandbox_sees_placeholders_where_copies_were(sandbox_spec, system):
    spec = sandbox_spec.model_copy(
        update={
            "hidden_packages": ["acme"],
            "binds": [
                Bind(src=str(system), dst="/opt/system"),
                Bind(src=str(system / "lib/sdk"), dst="/task/own", hide_packages=False),
            ],
        }
    )
    async with await create_sandbox(spec) as sb:
        seen = (await sb.bash("cd /opt/system && find . -type f -size +0 | sort")).output.split()
        own = (await sb.bash("cat /task/own/third_party/acme/__init__.py")).output.strip()
        written = await sb.bash("touch /opt/system/lib/sdk/third_party/acme/new 2>&1")
    assert seen == ["./lib/acmetools.py", "./lib/docs/acme/readme.txt"], seen
    assert own == "FIXED = True"  # the task's own bind is shown as it is
    assert written.exit_code != 0  # a placeholder is read-only
