# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The lean Python runtime: what an agent's Python tool relies on, started both ways (spawned
here; forked by the zygote inside a real sandbox), and a hostile cell that speaks out of turn."""

import asyncio

import pytest

from prorl_gym.resources.sessions import kernel_zygote_for
from prorl_gym.runtime.kernel import IPythonKernel
from prorl_gym.runtime.repl import PythonRepl
from prorl_gym.sandbox import create_sandbox
from tests.support.hosts import local_host


@pytest.fixture
async def repl(tmp_path):
    r = PythonRepl(local_host(tmp_path), output_limit=4096, interrupt_grace_s=2.0)
    await r.start()
    try:
        yield r
    finally:
        await r.close()


async def test_state_persists_and_the_last_value_is_shown(repl: PythonRepl, tmp_path):
    await repl.execute("x = 40\ndef add(a): return a + x", 10)
    result = await repl.execute("print('sum'); add(2)", 10)
    assert (result.output, result.error) == ("sum\n42\n", None)
    assert (await repl.execute("import os; os.getcwd()", 10)).output == f"{str(tmp_path)!r}\n"
    assert (await repl.execute("_ + '!'", 10)).output == f"{str(tmp_path) + '!'!r}\n"  # `_` as in IPython
    assert (await repl.execute("None", 10)).output == ""  # nothing shown, as in IPython
    assert (await repl.execute("y = 1\ny", 10)).output == "1\n"
    assert (await repl.execute("__name__", 10)).output == "'__main__'\n"


async def test_values_are_shown_as_ipython_shows_them(repl: PythonRepl, tmp_path):
    """The same text/plain an IPython kernel gives (IPython's pretty printer), side by side."""
    (tmp_path / "kernel").mkdir()
    kernel = IPythonKernel(local_host(tmp_path / "kernel"), output_limit=4096)
    await kernel.start()
    try:
        for code in (
            "{'a': list(range(40)), 'b': 'x' * 10}",
            "import numpy as np\nnp.arange(30).reshape(3, 10)",
            "import sympy\nsympy.symbols('x') ** 2 + 1",
            "set(range(3)), (1,), 'text'",
            "class P:\n    def _repr_pretty_(self, p, cycle): p.text('pretty P')\nP()",
        ):
            assert (await repl.execute(code, 20)).output == (await kernel.execute(code, 20)).output, code
    finally:
        await kernel.close()


async def test_tracebacks_name_the_cell_and_its_lines_only(repl: PythonRepl):
    await repl.execute("def inner():\n    return 1 / 0", 10)
    result = await repl.execute("x = 1\ninner()", 10)
    assert result.error["ename"] == "ZeroDivisionError" and result.error["evalue"] == "division by zero"
    assert 'File "<cell-2>", line 2' in result.output and "return 1 / 0" in result.output
    assert "repl_main" not in result.output and result.output == result.error["traceback"] + "\n"
    syntax = await repl.execute("def f(:\n  pass", 10)
    assert syntax.error["ename"] == "SyntaxError" and "ast.py" not in syntax.output and "def f(:" in syntax.output
    for code, ename in (("import sys; sys.exit(3)", "SystemExit"), ("raise KeyboardInterrupt", "KeyboardInterrupt")):
        result = await repl.execute(code, 10)
        assert result.error["ename"] == ename and not result.kernel_restarted  # the session lives on
    assert (await repl.execute("x", 10)).output == "1\n"


async def test_output_of_the_cell_and_its_subprocesses_in_order_and_capped(repl: PythonRepl):
    code = "import subprocess, sys\nprint('a')\nsubprocess.run(['echo', 'b'])\nprint('c', file=sys.stderr)\n'd'"
    assert (await repl.execute(code, 10)).output == "a\nb\nc\n'd'\n"
    result = await repl.execute("for i in range(100000): print(i)", 30)
    assert result.truncated and result.output.startswith("0\n1\n") and result.output.endswith("99999\n")
    assert "output truncated" in result.output
    assert (await repl.execute("print('é', '\\udcff')", 10)).output == "é \\udcff\n"  # never an encoding crash


async def test_a_timeout_interrupts_the_cell_and_keeps_the_state(repl: PythonRepl):
    await repl.execute("kept = 1", 10)
    result = await repl.execute("import time\nwhile True: time.sleep(0.01)", 0.5)
    assert result.timed_out and result.error["ename"] == "KeyboardInterrupt" and not result.kernel_restarted
    assert "repl_main" not in result.output
    assert (await repl.execute("kept", 10)).output == "1\n"


async def test_a_cell_that_ignores_the_interrupt_loses_the_session_not_the_call(repl: PythonRepl):
    await repl.execute("kept = 1", 10)
    code = (
        "import signal, time\nfor s in (signal.SIGINT, signal.SIGIO): signal.signal(s, signal.SIG_IGN)\n"
        "while True: time.sleep(0.01)"
    )
    result = await repl.execute(code, 0.3)
    assert result.timed_out and result.kernel_restarted and "state was lost" in result.output
    assert (await repl.execute("'kept' in dir()", 10)).output == "False\n"


async def test_a_death_is_reported_and_a_fresh_session_follows(repl: PythonRepl):
    await repl.execute("kept = 1", 10)
    died = await repl.execute("print('bye', flush=True); import os; os._exit(3)", 10)
    assert died.kernel_restarted and died.output.startswith("bye\n")
    assert (await repl.execute("'kept' in dir()", 10)).output == "False\n"


async def test_top_level_await_runs_on_the_sessions_loop(repl: PythonRepl):
    code = "import asyncio\nasync def twice(x):\n    await asyncio.sleep(0)\n    return 2 * x\nawait twice(21)"
    assert (await repl.execute(code, 10)).output == "42\n"
    assert (await repl.execute("await twice(1)", 10)).output == "2\n"


async def test_a_cell_that_forges_replies_on_the_control_socket_gets_nothing_from_it(repl: PythonRepl):
    """The control socket is the cell's own fd: what it sends is checked as data; a reply out
    of turn or oversized ends the session (its own), never the server or another call."""
    fd = int(
        (await repl.execute("import os; sorted(os.listdir('/proc/self/fd'), key=int)[-1]", 10)).output.strip("'\n")
    )
    forged = (
        f"import json, socket, struct\ns = socket.socket(fileno={fd})\n"
        "m = json.dumps({'n': 999, 'error': None}).encode()\ns.sendall(struct.pack('>I', len(m)) + m)\nimport time; time.sleep(1)"
    )
    result = await repl.execute(forged, 10)
    assert result.kernel_restarted and result.error is None
    huge = f"import socket, struct\nsocket.socket(fileno={fd}).sendall(struct.pack('>I', 1 << 30))\nimport time; time.sleep(1)"
    fresh_fd = int(
        (await repl.execute("import os; sorted(os.listdir('/proc/self/fd'), key=int)[-1]", 10)).output.strip("'\n")
    )
    assert fresh_fd == fd
    assert (await repl.execute(huge, 10)).kernel_restarted
    assert (await repl.execute("1 + 1", 10)).output == "2\n"


async def test_close_while_a_cell_runs_ends_the_call(repl: PythonRepl):
    running = asyncio.create_task(repl.execute("while True: print('x' * 100, flush=True)", 30))
    await asyncio.sleep(0.3)
    repl.stop_reading()
    await repl.close()
    result = await asyncio.wait_for(running, 5)
    assert result.kernel_restarted and "x" * 100 in result.output


async def test_forked_by_the_zygote_inside_a_real_sandbox(sandbox_spec):
    """The default runtime of a sandbox: forked in ~ms from a zygote that preloaded numpy and
    sympy, inside the sandbox's namespaces, as its uid, with its limits; fresh per sandbox."""
    assert sandbox_spec.python_runtime == "repl"
    zygote = kernel_zygote_for(sandbox_spec)
    await zygote.start()
    try:
        a = await create_sandbox(sandbox_spec, zygote=zygote)
        b = await create_sandbox(sandbox_spec, zygote=zygote)
        try:
            await a.bash("echo from-bash > here.txt")
            code = (
                "import os, resource, sys\n"
                "print(os.getcwd(), open('here.txt').read().strip(), os.path.exists('/work/main/pyproject.toml'))\n"
                "print(open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0], "
                "resource.getrlimit(resource.RLIMIT_NPROC)[0], 'numpy' in sys.modules, 'ipykernel' in sys.modules)\n"
                "secret = 42"
            )
            result = await a.python(code)
            assert result.output == f"/workspace from-bash False\n1 {sandbox_spec.limits.processes} True False\n"
            assert (await b.python("secret")).error["ename"] == "NameError"
            assert (await a.python("secret")).output == "42\n"
            assert (await a.python("import time\ntime.sleep(30)", timeout=0.5)).timed_out
        finally:
            await asyncio.gather(a.close(), b.close())
    finally:
        await zygote.close()


async def test_a_start_cancelled_midway_leaves_nothing_and_the_next_call_starts_afresh(tmp_path):
    repl = PythonRepl(local_host(tmp_path), output_limit=4096)
    starting = asyncio.create_task(repl.warm_up())
    await asyncio.sleep(0.01)  # spawned, not yet ready
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert repl.pid == -1 and not repl.alive
    try:
        assert (await repl.execute("6 * 7", 10)).output == "42\n"
    finally:
        await repl.close()
