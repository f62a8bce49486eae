# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Our failure types in NeMo Gym 0.7's failure vocabulary: every type has a kind it accepts (a shared name or
`prorl:<type>`), a failed record is masked and says whether a resume may run it again (the infrastructure's
failures only), a record without a failure says none of it. The resume itself: tests/test_end_to_end.py."""

import pytest
from nemo_gym.base_resources_server import BaseVerifyResponse
from nemo_gym.failure_kinds import is_namespaced, is_registered
from nemo_gym.rollout_collection import NG_TERMINAL_KEY, is_terminal_failure

from prorl_gym.wire.failures import Failure, FailureType, Stage
from prorl_gym.wire.records import RolloutRecord, failed_record


@pytest.mark.parametrize("infra", [True, False])
@pytest.mark.parametrize("type_", list(FailureType))
def test_each_failure_speaks_nemo_gyms_vocabulary(type_, infra):
    failure = Failure(stage=Stage.RUN, type=type_, message="what happened", infra=infra)
    record = failed_record({"task_id": "math/1"}, failure).wire()
    assert is_registered(record["failure_kind"]) or is_namespaced(record["failure_kind"]), record["failure_kind"]
    assert record["failure_reason"] == "what happened" and record["mask_sample"] is True
    assert record["_ng_failure_class"] == type_.value
    # ng_collect_rollouts' own reading of the record: a resume runs the infrastructure's failures again
    assert is_terminal_failure(record) is (not infra)
    assert NG_TERMINAL_KEY == "_ng_failure_terminal" and record[NG_TERMINAL_KEY] is (not infra)


def test_kinds_name_what_happened():
    kinds = {
        (FailureType.INIT_ERROR, True): "provider_unavailable",
        (FailureType.INIT_ERROR, False): "prorl:init_error",
        (FailureType.SANDBOX_LOST, True): "session_lost",
        (FailureType.TIMEOUT, False): "agent_timeout",
        (FailureType.EVAL_ERROR, True): "verifier_error",
        (FailureType.SHUTDOWN, True): "shutdown",
    }
    for (type_, infra), kind in kinds.items():
        assert Failure(stage=None, type=type_, message="", infra=infra).kind == kind


def test_a_record_without_failure_keeps_what_its_verifier_said():
    record = RolloutRecord.model_validate({"reward": 1.0, "mask_sample": False, "failure_kind": None}).wire()
    assert record["mask_sample"] is False and record["failure_kind"] is None
    assert NG_TERMINAL_KEY not in record and "_ng_failure_class" not in record
    # a verifier's own masked sample (a judge that failed) passes through: not ours to overrule
    judged = RolloutRecord.model_validate({"reward": 0.0, "mask_sample": True, "failure_kind": "judge_failed"})
    assert judged.wire()["mask_sample"] is True and judged.wire()["failure_kind"] == "judge_failed"
    assert set(BaseVerifyResponse.model_fields) >= {"mask_sample", "failure_kind", "failure_reason"}
