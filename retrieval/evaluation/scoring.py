"""Scoring turn runs: mean metrics per configuration, refusal rates, each configuration against the best single
branch (paired randomization test, Holm-adjusted), and the class rule's verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.evaluation.metrics import METRICS, score_turn
from retrieval.evaluation.significance import DEFAULT_RESAMPLES, compare, holm
from retrieval.evaluation.turn_runs import BASELINE_REFUSAL, BRANCHES, TurnRun
from retrieval.settings import Settings

ALPHA = 0.05


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def per_turn_scores(runs: Sequence[TurnRun], configs: Sequence[str]) -> list[dict[str, dict[str, float]]]:
    """For every answerable turn: metric -> config -> value."""
    out = []
    for run in runs:
        if not run.answerable:
            continue
        scores = {c: score_turn(run.ranked[c], run.query.relevant) for c in configs}
        out.append({m: {c: scores[c][m] for c in configs} for m in METRICS})
    return out


def aggregate(runs: Sequence[TurnRun], configs: Sequence[str], *, deep_enough: bool = True) -> dict[str, dict]:
    """Mean metrics per configuration over the answerable turns (plus ms per turn when measured)."""
    answerable = [r for r in runs if r.answerable]
    scores = per_turn_scores(answerable, configs)
    out: dict[str, dict] = {}
    for c in configs:
        row = {m: _mean([s[m][c] for s in scores]) for m in METRICS}
        if not deep_enough:
            row["recall@100"] = None
        timed = [r.ms[c] for r in runs if c in r.ms]
        if timed:
            row["ms_per_turn"] = round(sum(timed) / len(timed), 3)
        out[c] = row
    return out


def refusal_report(
    runs: Sequence[TurnRun], settings: Settings, configs: Sequence[str], thresholds: str = "defaults"
) -> dict[str, Any]:
    """Refusal rate on ``no_match`` turns and false-refusal rate on answerable turns, at the configured threshold.

    ``thresholds`` says where the evidence rule's thresholds came from (``defaults``, or the corpus's stored
    calibration, which the page's turns on that corpus use too)."""
    no_match = [r for r in runs if r.query.category == "no_match" or not r.answerable]
    answerable = [r for r in runs if r.answerable]
    measured = [c for c in (*configs, BASELINE_REFUSAL) if any(c in r.refused for r in runs)]

    def rate(group: Sequence[TurnRun], c: str) -> float | None:
        return round(sum(r.refused[c] for r in group) / len(group), 6) if group else None

    return {
        "min_similarity": settings.min_similarity,
        "top_k": settings.top_k,
        "no_match_turns": len(no_match),
        "answerable_turns": len(answerable),
        "refusal_rate": {c: rate(no_match, c) for c in measured},
        "false_refusal_rate": {c: rate(answerable, c) for c in measured},
        "refusal_rule": settings.refusal_rule,
        "thresholds": thresholds,
        "note": (
            "refusal = the pipeline's no_match level; full = configured settings, rrf = reranker off, "
            "dense = the legacy dense-only path (RETRIEVAL_HYBRID_ENABLED=false); the pipeline has no "
            f"BM25-only switch, so bm25 has no refusal rate; {BASELINE_REFUSAL} = full with "
            "REFUSAL_RULE=cosine (only the MIN_SIMILARITY cut), the baseline"
        ),
    }


def significance(
    runs: Sequence[TurnRun],
    configs: Sequence[str],
    *,
    metric: str = "ndcg@10",
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> dict[str, Any] | None:
    """Each configuration vs the best single branch on ``metric``: paired randomization test (explicit seed),
    bootstrap 95% interval of the difference, Holm-adjusted p-values across the comparisons."""
    branches = [c for c in BRANCHES if c in configs]
    scores = per_turn_scores(runs, configs)
    if not branches or len(scores) < 2:
        return None
    means = {c: sum(s[metric][c] for s in scores) / len(scores) for c in configs}
    baseline = max(branches, key=lambda c: (means[c], c == "bm25"))
    base = [s[metric][baseline] for s in scores]
    tests = {
        c: compare([s[metric][c] for s in scores], base, seed=seed, resamples=resamples).to_dict()
        for c in configs
        if c != baseline
    }
    adjusted = holm({c: t["p_value"] for c, t in tests.items()})
    for c, t in tests.items():
        wins = sum(s[metric][c] > s[metric][baseline] for s in scores)
        losses = sum(s[metric][c] < s[metric][baseline] for s in scores)
        t.update(
            p_holm=round(adjusted[c], 6),
            significant=adjusted[c] < ALPHA,
            wins=wins,
            losses=losses,
            ties=len(scores) - wins - losses,
        )
        for key in ("mean_a", "mean_b", "diff", "p_value", "ci_low", "ci_high"):
            t[key] = round(t[key], 6)
    return {
        "metric": metric,
        "baseline": baseline,
        "alpha": ALPHA,
        "method": "paired randomization test (sign flip), two-sided; bootstrap 95% CI of the mean difference; "
        "Holm correction across the comparisons",
        "seed": seed,
        "resamples": resamples,
        "tests": tests,
    }


def verdict(
    configs_report: Mapping[str, Mapping[str, Any]], sig: Mapping[str, Any] | None, metric: str = "ndcg@10"
) -> dict[str, dict[str, Any]]:
    """The class rule: a hybrid earns its double cost only if it beats each branch alone."""
    out = {}
    for c in configs_report:
        if c in BRANCHES:
            continue
        value = configs_report[c][metric]
        beats = {f"beats_{b}": value > configs_report[b][metric] for b in BRANCHES if b in configs_report}
        test = (sig or {}).get("tests", {}).get(c)
        out[c] = {
            metric: value,
            **beats,
            "beats_each_branch": all(beats.values()) if beats else None,
            "significant_vs_best_branch": bool(test and test["significant"] and test["diff"] > 0),
        }
    return out
