# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import pytest

from prorl_gym.jsonl import read_jsonl, write_jsonl
from prorl_gym.stack import collected_records, failures_path


def test_rows_round_trip_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "deep" / "rows.jsonl"
    write_jsonl(path, [{"a": 1}, {"b": "é"}], ensure_ascii=False)
    path.write_text(path.read_text() + "\n")
    assert read_jsonl(path) == [{"a": 1}, {"b": "é"}] and "é" in path.read_text()


def test_a_missing_file_is_empty_only_when_allowed(tmp_path):
    assert read_jsonl(tmp_path / "none.jsonl", missing_ok=True) == []
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "none.jsonl")


def test_a_collection_is_its_successes_then_its_failures(tmp_path):
    output = tmp_path / "math.jsonl"
    assert failures_path(output) == tmp_path / "math_failures.jsonl" and collected_records(output) == []
    write_jsonl(output, [{"reward": 1.0}])
    write_jsonl(failures_path(output), [{"failure": {"type": "policy_error"}}])
    assert collected_records(output) == [{"reward": 1.0}, {"failure": {"type": "policy_error"}}]
