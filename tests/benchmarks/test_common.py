# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The one percentile every benchmark reports with (benchmarks/common.py)."""

from __future__ import annotations

import random
import statistics

import pytest

from benchmarks.common import percentile


def test_percentiles_are_statistics_inclusive_quantiles_and_the_median():
    rng = random.Random(0)
    for n in (2, 3, 10, 101):
        values = [rng.uniform(0, 100) for _ in range(n)]
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        assert percentile(values, 50) == pytest.approx(statistics.median(values))
        assert percentile(values, 95) == pytest.approx(cuts[94])
        assert percentile(values, 99) == pytest.approx(cuts[98])
        assert percentile(iter(values), 0) == min(values) and percentile(values, 100) == max(values)


def test_one_value_is_every_percentile_and_none_is_refused():
    assert percentile([7.5], 50) == percentile([7.5], 99) == 7.5
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
