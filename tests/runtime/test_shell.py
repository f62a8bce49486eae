# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import asyncio
import os
import signal

import pytest

from prorl_gym.runtime.shell import PtyShell


async def test_state_persists_between_calls(shell: PtyShell):
    await shell.run("cd /usr && export FOO=bar && f() { echo fn-$1; }", 5)
    result = await shell.run("pwd; echo $FOO; f x", 5)
    assert result.output == "/usr\nbar\nfn-x\n"
    assert result.exit_code == 0


async def test_exit_code_is_returned(shell: PtyShell):
    assert (await shell.run("false", 5)).exit_code == 1
    assert (await shell.run("(exit 42)", 5)).exit_code == 42
    assert (await shell.run("true", 5)).exit_code == 0


async def test_syntax_errors_and_unclosed_quotes_do_not_hang(shell: PtyShell):
    result = await shell.run("echo 'unclosed", 5)
    assert not result.timed_out and result.exit_code == 2
    result = await shell.run("if then", 5)
    assert not result.timed_out and result.exit_code == 2
    assert (await shell.run("echo fine", 5)).output == "fine\n"


async def test_commands_reading_stdin_do_not_hang(shell: PtyShell):
    result = await shell.run("cat; read x; echo done", 5)
    assert result.output == "done\n" and not result.timed_out


async def test_output_resembling_the_marker_does_not_end_the_call(shell: PtyShell):
    fake = "printf '\\x1e0123456789abcdef:0\\x1e\\n'; printf '\\x1edeadbeef:0\\x1e'; sleep 0.2; echo real-end"
    result = await shell.run(fake, 5)
    assert result.output.endswith("real-end\n")
    assert result.exit_code == 0


async def test_timeout_interrupts_and_shell_stays_usable(shell: PtyShell):
    await shell.run("X=kept", 5)
    result = await shell.run("sleep 30", 0.3)
    assert result.timed_out
    assert not result.shell_restarted
    assert result.duration_s < 5
    assert (await shell.run("echo $X", 5)).output == "kept\n"


async def test_command_ignoring_sigint_is_killed(shell: PtyShell):
    result = await shell.run("trap '' INT; sleep 30", 0.3)
    assert result.timed_out
    follow_up = await shell.run("echo alive", 5)
    assert follow_up.output == "alive\n"


async def test_exit_restarts_the_shell_and_reports_status(shell: PtyShell):
    result = await shell.run("exit 7", 5)
    assert result.shell_restarted and result.exit_code == 7
    assert (await shell.run("echo again", 5)).output == "again\n"


async def test_output_is_capped_with_a_truncation_marker(shell: PtyShell):
    result = await shell.run("seq 1 100000", 10)
    assert result.truncated
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("99999\n100000\n")
    assert "bytes omitted" in result.output
    assert result.output_bytes == len("".join(f"{i}\n" for i in range(1, 100001)))
    assert len(result.output) < 4096 + 200


async def test_flood_is_stopped_by_timeout_with_bounded_output(shell: PtyShell):
    result = await shell.run("yes flood", 0.5)
    assert result.timed_out and result.truncated
    assert result.output_bytes > 100_000
    assert len(result.output) < 4096 + 200


async def test_a_stopped_shell_times_out_even_on_a_script_longer_than_the_terminal_buffer(shell: PtyShell):
    # A shell that stops reading (SIGSTOP; nsenter stops itself with its child) once left such a
    # write waiting for ever: a SWE evaluation that never ended. Now the write is inside the timeout.
    os.kill(shell.pid, signal.SIGSTOP)
    script = "true # " + "x" * 200_000
    result = await asyncio.wait_for(shell.run(script, 1.0), 30)
    assert result.timed_out and result.shell_restarted
    assert (await shell.run("echo back", 5)).output == "back\n"  # a fresh shell took its place


async def test_binary_output_survives_as_replacement_characters(shell: PtyShell):
    result = await shell.run("printf '\\xff\\xfe\\x00ok'", 5)
    assert result.output == "\ufffd\ufffd\x00ok"


async def test_long_lines_are_not_cut_by_the_terminal(shell: PtyShell):
    shell.output_limit = 1 << 20
    line = "x" * 20000
    result = await shell.run(f"echo {line} | wc -c", 5)
    assert result.output.strip() == "20001"


async def test_calls_are_serialised(shell: PtyShell):
    results = await asyncio.gather(*(shell.run(f"echo {i}", 5) for i in range(20)))
    assert [r.output for r in results] == [f"{i}\n" for i in range(20)]


async def test_close_is_idempotent(shell: PtyShell):
    await shell.close()
    await shell.close()
    assert not shell.alive


async def test_a_cancelled_command_is_stopped_and_the_shell_serves_the_next_call(shell):
    """A caller that goes away (its tool call timed out upstream, its rollout cancelled) must not
    leave its command holding the shell: the next call would wait for it, then time out."""
    await shell.run("export KEPT=1", 5)
    call = asyncio.create_task(shell.run("sleep 30", 60))
    await asyncio.sleep(0.3)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    result = await asyncio.wait_for(shell.run("echo $KEPT", 5), 5)
    assert result.output == "1\n" and not result.shell_restarted  # interrupted, the shell kept
