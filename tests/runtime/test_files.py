# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import os
import signal

import pytest

from prorl_gym.runtime.files import EditError, FileChannelError, SandboxFileError, SandboxFileNotFound, SandboxFiles


@pytest.fixture
def files(shell, tmp_path):
    return SandboxFiles(shell, str(tmp_path))


async def test_write_then_read_with_line_ranges(files: SandboxFiles, tmp_path):
    path = await files.write("dir/sub/a.txt", "one\ntwo\nthree\nfour\n")
    assert path == str(tmp_path / "dir/sub/a.txt")
    assert await files.read("dir/sub/a.txt") == "one\ntwo\nthree\nfour\n"
    assert await files.read("dir/sub/a.txt", 2, 3) == "two\nthree\n"
    assert await files.read("dir/sub/a.txt", 3) == "three\nfour\n"


async def test_binary_and_large_content_round_trips(files: SandboxFiles):
    data = bytes(range(256)) * 4000  # 1 MB, every byte value, long lines
    await files.write("blob.bin", data)
    assert await files.read_bytes("blob.bin") == data


async def test_exact_replace_must_match_once(files: SandboxFiles):
    await files.write("f.py", "a = 1\nb = 1\n")
    with pytest.raises(EditError, match="not found"):
        await files.edit("f.py", "c = 1", "c = 2")
    with pytest.raises(EditError, match="2 times"):
        await files.edit("f.py", "= 1", "= 2")
    assert await files.edit("f.py", "b = 1", "b = 2") == "a = 1\nb = 2\n"
    assert await files.read("f.py") == "a = 1\nb = 2\n"


async def test_missing_files_and_directories_fail_clearly(files: SandboxFiles):
    with pytest.raises(SandboxFileNotFound):
        await files.read("nope.txt")
    await files.write("d/x", "")
    with pytest.raises(SandboxFileError, match="directory"):
        await files.read("d")


async def test_paths_with_spaces_and_quotes(files: SandboxFiles):
    await files.write("it's a file.txt", "ok")
    assert await files.read("it's a file.txt") == "ok"


async def test_a_fifo_is_refused_not_waited_on(files: SandboxFiles, tmp_path):
    """An agent can leave a FIFO where the harness will read its answer: reading it would block
    until the operation times out, which is the sandbox's failure, not the agent's."""
    os.mkfifo(tmp_path / "answer.py")
    files.timeout_s = 5
    with pytest.raises(SandboxFileError, match="not a regular file"):
        await files.read_bytes("answer.py")


async def test_an_operation_the_shell_does_not_finish_is_a_channel_error(files: SandboxFiles, shell):
    """Not a SandboxFileError: nothing is wrong with the file; the shell that reads it is stuck."""
    await files.write("a.txt", "x")
    files.timeout_s = 0.5
    os.kill(shell.pid, signal.SIGSTOP)
    try:
        with pytest.raises(FileChannelError) as raised:
            await files.read_bytes("a.txt")
        assert not isinstance(raised.value, SandboxFileError)
    finally:
        if shell.pid > 0:
            os.kill(shell.pid, signal.SIGCONT)
