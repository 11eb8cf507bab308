"""Paired randomization test and bootstrap: exact values by hand, determinism per seed, clear errors."""

import itertools

import numpy as np
import pytest

from retrieval.evaluation.significance import bootstrap_ci, compare, holm, randomization_test


def test_exact_p_value_by_enumeration():
    # differences +1, +1, +1, -1: mean 0.5; of the 16 sign assignments, |mean| >= 0.5 when the sum is +-2 or +-4
    a, b = [1, 1, 1, 0], [0, 0, 0, 1]
    p, method = randomization_test(a, b, seed=0)
    sums = [abs(sum(s)) for s in itertools.product((1, -1), repeat=4)]
    assert method == "exact"
    assert p == sum(x >= 2 for x in sums) / 16 == 10 / 16


def test_identical_systems_give_p_one():
    assert randomization_test([0.3, 0.5, 0.9], [0.3, 0.5, 0.9], seed=1) == (1.0, "exact")


def test_monte_carlo_is_deterministic_per_seed_and_close_to_exact():
    rng = np.random.default_rng(42)
    a = rng.random(40)
    b = a - 0.05 + rng.normal(0, 0.2, 40)
    p1 = randomization_test(a, b, seed=7, resamples=5000)
    p2 = randomization_test(a, b, seed=7, resamples=5000)
    p3 = randomization_test(a, b, seed=8, resamples=5000)
    assert p1 == p2 and p1[1] == "monte-carlo"
    assert p1 != p3  # the seed is used
    assert abs(p1[0] - p3[0]) < 0.03  # and only moves the Monte Carlo estimate a little


def test_a_consistent_large_difference_is_significant():
    a = [0.9] * 30
    b = [0.1 + 0.01 * i for i in range(30)]
    p, _ = randomization_test(a, b, seed=0)
    assert p == pytest.approx(1 / 10_001)  # no resample reaches the observed mean: (0 + 1) / (R + 1)


def test_bootstrap_ci_contains_the_mean_and_is_seeded():
    rng = np.random.default_rng(0)
    a, b = rng.random(50), rng.random(50)
    low, high = bootstrap_ci(a, b, seed=3)
    assert low < float(np.mean(a - b)) < high
    assert bootstrap_ci(a, b, seed=3) == (low, high)
    assert bootstrap_ci(a, b, seed=4) != (low, high)


def test_compare_bundles_everything():
    t = compare([1.0, 0.5, 0.75], [0.5, 0.5, 0.25], seed=0, resamples=1000)
    assert (t.n, t.mean_a, t.mean_b, t.diff) == (3, 0.75, 0.4166666666666667, pytest.approx(1 / 3))
    # differences 0.5, 0, 0.5: the two 0.5s keep the same sign in 4 of the 8 assignments
    assert t.method == "exact" and t.p_value == 0.5
    assert t.to_dict()["seed"] == 0


def test_holm_by_hand():
    adjusted = holm({"x": 0.01, "y": 0.04, "z": 0.03})
    assert adjusted == pytest.approx({"x": 0.03, "z": 0.06, "y": 0.06})
    assert holm({"a": 0.6, "b": 0.5}) == {"b": 1.0, "a": 1.0}


@pytest.mark.parametrize(
    ("a", "b", "kw", "message"),
    [
        ([1, 2], [1], {}, "one score per turn for both systems: got 2 and 1"),
        ([], [], {}, "no turns to compare"),
        ([1, float("nan")], [1, 2], {}, "NaN or infinity"),
        ([1, 2], [1, 2], {"resamples": 10}, "resamples must be an integer >= 100"),
    ],
)
def test_bad_inputs(a, b, kw, message):
    with pytest.raises(ValueError, match=message):
        randomization_test(a, b, seed=0, **kw)
