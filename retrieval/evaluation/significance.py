"""Is a difference between two configurations real? Paired tests over per-turn scores, with an explicit seed.

- ``randomization_test``: the paired (sign-flip) randomization test (Fisher; Smucker, Allan & Carterette, 2007).
  Under the null hypothesis the two systems are exchangeable on every turn, so each per-turn difference is
  equally likely to have either sign. The p-value is the share of sign assignments whose mean difference is at
  least as extreme as the observed one. With at most ``2**n <= resamples`` assignments it is computed exactly
  by enumeration; otherwise by Monte Carlo with ``(hits + 1) / (resamples + 1)`` (never 0).
- ``bootstrap_ci``: a paired percentile bootstrap confidence interval of the mean difference.
- ``holm``: Holm-Bonferroni adjusted p-values for a family of comparisons.

Same inputs and same seed give the same numbers, byte for byte.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class PairedTest:
    """The outcome of comparing system ``a`` with system ``b`` on the same turns."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    p_value: float
    ci_low: float
    ci_high: float
    method: str
    resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _paired(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("scores must be flat lists of per-turn numbers.")
    if len(x) != len(y):
        raise ValueError(f"paired tests need one score per turn for both systems: got {len(x)} and {len(y)}.")
    if len(x) == 0:
        raise ValueError("no turns to compare: give at least one per-turn score for each system.")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("scores contain NaN or infinity: every per-turn score must be a finite number.")
    return x - y


def _check_resamples(resamples: int) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"resamples must be an integer >= 100 (e.g. 10000), got {resamples!r}.")


def randomization_test(
    a: Sequence[float], b: Sequence[float], *, seed: int, resamples: int = DEFAULT_RESAMPLES
) -> tuple[float, str]:
    """Two-sided paired randomization test of ``mean(a) == mean(b)``.

    Returns:
        ``(p_value, method)``, method ``"exact"`` or ``"monte-carlo"``.
    """
    d = _paired(a, b)
    _check_resamples(resamples)
    n = len(d)
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, observed)  # float noise must not turn a tie into a miss
    if not d.any():
        return 1.0, "exact"
    if n <= 20 and 2**n <= resamples:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = np.abs(signs @ d) / n
        return float(np.mean(means >= observed - tol)), "exact"
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < resamples:  # in blocks, to bound memory on large sets
        size = min(1000, resamples - done)
        signs = rng.choice((1.0, -1.0), size=(size, n))
        hits += int(np.sum(np.abs(signs @ d) / n >= observed - tol))
        done += size
    return (hits + 1) / (resamples + 1), "monte-carlo"


def bootstrap_ci(
    a: Sequence[float], b: Sequence[float], *, seed: int, resamples: int = DEFAULT_RESAMPLES, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(a - b)``, resampling turns with replacement."""
    d = _paired(a, b)
    _check_resamples(resamples)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence!r}.")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    done = 0
    while done < resamples:
        size = min(1000, resamples - done)
        idx = rng.integers(0, len(d), size=(size, len(d)))
        means[done : done + size] = d[idx].mean(axis=1)
        done += size
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def compare(a: Sequence[float], b: Sequence[float], *, seed: int, resamples: int = DEFAULT_RESAMPLES) -> PairedTest:
    """Randomization p-value plus a bootstrap 95% interval of the mean difference ``a - b``."""
    p, method = randomization_test(a, b, seed=seed, resamples=resamples)
    low, high = bootstrap_ci(a, b, seed=seed, resamples=resamples)
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    return PairedTest(
        n=len(x),
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        diff=float((x - y).mean()),
        p_value=float(p),
        ci_low=low,
        ci_high=high,
        method=method,
        resamples=resamples,
        seed=seed,
    )


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values (monotone, capped at 1), same keys."""
    order = sorted(p_values, key=lambda name: (p_values[name], name))
    m = len(order)
    adjusted: dict[str, float] = {}
    running = 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (m - i) * p_values[name]))
        adjusted[name] = running
    return adjusted
