# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""copy_layer: a fork's writes copied on the host without following anything the sandbox made."""

from __future__ import annotations

import os
import stat

import pytest

from prorl_gym.sandbox.layers import MAX_DEPTH, OPAQUE, LayerTooLarge, copy_layer


def test_files_links_whiteouts_and_opaque_marks_are_copied_as_they_are(tmp_path):
    src, dst = tmp_path / "upper", tmp_path / "layer"
    (src / "d" / "e").mkdir(parents=True)
    (src / "d" / "e" / "f").write_text("data")
    os.chmod(src / "d" / "e" / "f", 0o4755)  # a set-uid bit is never carried
    os.utime(src / "d" / "e" / "f", ns=(1, 1_000_000_000))
    (src / "link").symlink_to("/etc/passwd")
    (src / "dirlink").symlink_to(tmp_path)  # a directory behind a link is never entered
    os.mknod(src / "whiteout", stat.S_IFCHR, 0)
    os.mkfifo(src / "fifo")
    os.setxattr(src / "d", OPAQUE, b"y")
    os.setxattr(src / "d" / "e" / "f", "user.other", b"1")
    copied = copy_layer(src, dst, None, 1 << 20)
    assert copied == 4
    assert (dst / "d" / "e" / "f").read_text() == "data"
    info = os.stat(dst / "d" / "e" / "f")
    assert stat.S_IMODE(info.st_mode) == 0o755 and info.st_mtime_ns == 1_000_000_000
    assert os.readlink(dst / "link") == "/etc/passwd" and os.readlink(dst / "dirlink") == str(tmp_path)
    whiteout = os.stat(dst / "whiteout", follow_symlinks=False)
    assert stat.S_ISCHR(whiteout.st_mode) and whiteout.st_rdev == 0
    assert not (dst / "fifo").exists()
    assert os.getxattr(dst / "d", OPAQUE) == b"y" and os.listxattr(dst / "d" / "e" / "f") == []


def test_a_layer_stops_at_its_size_and_a_link_at_the_top_is_refused(tmp_path):
    src = tmp_path / "upper"
    src.mkdir()
    (src / "big").write_bytes(b"x" * 1000)
    with pytest.raises(LayerTooLarge):
        copy_layer(src, tmp_path / "small", None, 999)
    (tmp_path / "linked").symlink_to(src)
    with pytest.raises(OSError):
        copy_layer(tmp_path / "linked", tmp_path / "other", None, 1 << 20)


def test_the_copy_is_owned_by_the_sandbox_uid(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    src = tmp_path / "upper"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_text("x")
    (src / "l").symlink_to("d")
    copy_layer(src, tmp_path / "layer", 54321, 1 << 20)
    for path in ("", "d", "d/f", "l"):
        assert os.stat(tmp_path / "layer" / path, follow_symlinks=False).st_uid == 54321, path


def test_a_tree_deeper_than_the_limit_is_refused_not_a_crash(tmp_path):
    src = tmp_path / "upper"
    deep = src.joinpath(*["d"] * (MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    with pytest.raises(LayerTooLarge, match="deeper"):
        copy_layer(src, tmp_path / "layer", None, 1 << 20)
