# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
from prorl_gym.runtime.output import BoundedOutput


def test_small_output_is_kept_whole():
    out = BoundedOutput(limit=100)
    out.append(b"hello ")
    out.append(b"world")
    assert out.text() == "hello world"
    assert not out.truncated


def test_flood_keeps_head_and_tail_and_says_what_was_cut():
    out = BoundedOutput(limit=20)
    for i in range(10_000):
        out.append(b"%05d\n" % i)
    text = out.text()
    assert text.startswith("00000\n0000")
    assert text.endswith("09999\n")
    assert out.truncated
    omitted = out.total - 20
    assert f"{omitted} bytes omitted" in text
    assert len(out.head) + len(out.tail) == 20  # memory stays bounded


def test_invalid_utf8_becomes_replacement_characters():
    out = BoundedOutput(limit=100)
    out.append(b"\xff\xfeok")
    assert out.text() == "\ufffd\ufffdok"
