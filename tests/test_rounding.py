"""retrieval.rounding: the one helper every page formats a fused score with (half up, by decimal arithmetic)."""

from __future__ import annotations

import pytest

from retrieval.rounding import round_half_up


def test_half_rounds_up_as_the_class_writes_it():
    assert round_half_up(1 / 64) == "0.01563"  # 0.015625; f"{1/64:.5f}" gives 0.01562 (half to even)
    assert f"{1 / 64:.5f}" == "0.01562"  # why the helper exists
    assert round_half_up(1 / 61 + 1 / 62) == "0.03252"
    assert round_half_up(0.000015) == "0.00002" and round_half_up(0.000025) == "0.00003"
    assert round_half_up(1 / 64, 6) == "0.015625" and round_half_up(2.5, 0) == "3" and round_half_up(0) == "0.00000"


def test_a_negative_number_of_places_is_refused():
    with pytest.raises(ValueError, match="places must be 0 or more"):
        round_half_up(0.5, -1)


def test_a_huge_or_non_finite_value_is_not_an_error():
    assert round_half_up(1e308, 1).startswith("1000") and round_half_up(1e308, 1).endswith(".0")
    assert round_half_up(float("inf")) == "Infinity" and round_half_up(float("nan")) == "NaN"
