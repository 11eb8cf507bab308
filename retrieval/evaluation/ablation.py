"""``python -m retrieval eval --ablation``: the quality levers added one at a time, from the ADR recipe to the
shipped defaults, each row tested against the best single branch.

Rows (cumulative unless marked "instead"):

1. the ADR recipe: plain BM25, equal-weight RRF with k=60;
2. + Snowball BM25 (stop words and stemming per language);
3. + k=10;
4. + dense weight 2;
5. + query-aware weights (codes, units and quotes lean to BM25): the shipped ``rrf`` default;
6. + branch-evidence weights (``QUERY_WEIGHTING=adaptive``: BM25 weight halved when its best chunk covers little
   of the turn);
7. convex fusion of min-max scores instead of RRF (Bruch et al., 2023), the weights of row 5;
8-11. the cross-encoder: over the defaults blended with the fused order (RRF of the two orders, the default
   ``RERANK_MODE=rrf``), the same with adaptive weights (when they are not the default), over the defaults
   replacing the fused order, and over the ADR recipe (cheapest first: they share their cross-encoder calls).

All rows share one retriever, so branch lists, embeddings and cross-encoder scores are computed once.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrieval.evaluation.metrics import score_turn
from retrieval.evaluation.significance import DEFAULT_RESAMPLES, compare, holm
from retrieval.evaluation.turn_runs import Progress, TurnRun, run_turns
from retrieval.settings import ADR_RECIPE, Settings

if TYPE_CHECKING:
    from retrieval.corpus import Dataset
    from retrieval.pipeline import HybridRetriever

REPORTED = ("ndcg@10", "recall@100", "mrr@10")


def ablation_rows(defaults: Settings) -> list[tuple[str, str, dict[str, Any]]]:
    """``(label, config, overrides)`` per row; ``config`` is the list that row scores (``rrf`` or ``full``)."""
    adr = dict(ADR_RECIPE)
    snow = {**adr, "bm25_tokenizer": "snowball"}
    k10 = {**snow, "rrf_k": 10}
    dense2 = {**k10, "dense_weight": 2.0}
    auto = {**dense2, "query_weighting": "auto"}
    tuned = {key: getattr(defaults, key) for key in ADR_RECIPE}
    return [
        ("ADR recipe: plain BM25, RRF k=60, equal weights", "rrf", adr),
        ("+ Snowball BM25 (stemming, stop words)", "rrf", snow),
        ("+ k=10", "rrf", k10),
        ("+ dense weight 2", "rrf", dense2),
        ("+ query-aware weights", "rrf", auto),
        ("+ branch-evidence weights (adaptive)", "rrf", {**auto, "query_weighting": "adaptive"}),
        ("  convex min-max fusion instead of RRF", "rrf", {**auto, "fusion": "convex"}),
        ("defaults + cross-encoder blended with the fused order", "full", {**tuned, "rerank_mode": "rrf"}),
        *(
            [
                (
                    "  the same with branch-evidence weights (adaptive)",
                    "full",
                    {**tuned, "rerank_mode": "rrf", "query_weighting": "adaptive"},
                )
            ]
            if defaults.query_weighting != "adaptive"
            else []
        ),
        ("defaults + cross-encoder replacing the fused order", "full", {**tuned, "rerank_mode": "replace"}),
        ("ADR recipe + cross-encoder (replaces the fused order)", "full", {**adr, "rerank_mode": "replace"}),
    ]


def run_ablation(
    dataset: Dataset,
    retriever: HybridRetriever,
    defaults: Settings,
    *,
    depth: int,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    rerank: bool = True,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score every row on ``dataset``; each row's hybrid list is compared with the best single branch.

    The single branches are scored at the ADR's plain tokenization and at Snowball; the best of those three lists
    (BM25 plain, BM25 Snowball, dense) on mean nDCG@10 is the baseline every row must beat.
    """
    rows = [r for r in ablation_rows(defaults) if rerank or r[1] != "full"]
    branch_runs = {
        "bm25 (plain)": run_turns(
            dataset,
            retriever,
            defaults.replace(**ADR_RECIPE),
            configs=("bm25", "dense"),
            depth=depth,
            refusals=False,
            progress=progress,
            label="ablation: branches",
        ),
        "bm25 (snowball)": run_turns(
            dataset,
            retriever,
            defaults.replace(bm25_tokenizer="snowball"),
            configs=("bm25",),
            depth=depth,
            refusals=False,
            progress=progress,
            label="ablation: snowball",
        ),
    }
    singles: dict[str, list[dict[str, float]]] = {
        "bm25 (plain)": _scores(branch_runs["bm25 (plain)"], "bm25"),
        "bm25 (snowball)": _scores(branch_runs["bm25 (snowball)"], "bm25"),
        "dense": _scores(branch_runs["bm25 (plain)"], "dense"),
    }
    baseline = max(singles, key=lambda name: _mean(singles[name], "ndcg@10"))
    out_rows = [{"row": name, "config": name, **{m: _mean(s, m) for m in REPORTED}} for name, s in singles.items()]
    tests: dict[str, dict[str, Any]] = {}
    for i, (label, config, overrides) in enumerate(rows):
        settings = defaults.replace(**overrides)
        runs = run_turns(
            dataset,
            retriever,
            settings,
            configs=(config,),
            depth=depth,
            refusals=False,
            progress=progress,
            label=f"ablation {i + 1}/{len(rows)}",
        )
        scores = _scores(runs, config)
        test = compare(
            [s["ndcg@10"] for s in scores], [s["ndcg@10"] for s in singles[baseline]], seed=seed, resamples=resamples
        ).to_dict()
        tests[label] = test
        out_rows.append(
            {
                "row": label,
                "config": config,
                **{m: _mean(scores, m) for m in REPORTED},
                "overrides": dict(overrides),
                "diff_vs_best_branch": round(test["diff"], 6),
                "p_value": round(test["p_value"], 6),
            }
        )
        if progress:  # long runs: each row as soon as it is known
            row = out_rows[-1]
            print(
                f"ablation row {i + 1}: {label}: nDCG@10 {row['ndcg@10']:.4f} R@100 {row['recall@100']:.4f} "
                f"MRR@10 {row['mrr@10']:.4f} (diff vs {baseline} {test['diff']:+.4f}, p {test['p_value']:.3f})",
                file=sys.stderr,
                flush=True,
            )
    adjusted = holm({label: t["p_value"] for label, t in tests.items()})
    for row in out_rows:
        if row["row"] in adjusted:
            row["p_holm"] = round(adjusted[row["row"]], 6)
            row["significant"] = adjusted[row["row"]] < 0.05
    return {
        "dataset": dataset.name,
        "turns": len(dataset.queries),
        "baseline": baseline,
        "test": f"paired randomization on nDCG@10 vs {baseline}, seed {seed}, {resamples} resamples, Holm",
        "rows": out_rows,
    }


def _scores(runs: Sequence[TurnRun], config: str) -> list[dict[str, float]]:
    return [score_turn(r.ranked[config], r.query.relevant) for r in runs if r.answerable]


def _mean(scores: Sequence[Mapping[str, float]], metric: str) -> float:
    return round(sum(s[metric] for s in scores) / len(scores), 4) if scores else 0.0


def format_ablation(report: Mapping[str, Any]) -> str:
    """The ablation as a Markdown table (the README quotes it as printed)."""
    lines = [
        f"dataset: {report['dataset']} ({report['turns']} turns); {report['test']}",
        "",
        "| row | list | nDCG@10 | R@100 | MRR@10 | Δ nDCG@10 vs best branch | p (Holm) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        diff = row.get("diff_vs_best_branch")
        sig = "" if "p_holm" not in row else f"{row['p_holm']:.3f}{' *' if row['significant'] else ''}"
        lines.append(
            f"| {row['row']} | {row['config'] if diff is not None else 'branch'} | {row['ndcg@10']:.4f} | "
            f"{row['recall@100']:.4f} | {row['mrr@10']:.4f} | "
            f"{'' if diff is None else f'{diff:+.4f}'} | {sig} |"
        )
    lines.append("")
    lines.append(f"best single branch: {report['baseline']}; * = significant at 0.05 after Holm correction")
    return "\n".join(lines)
