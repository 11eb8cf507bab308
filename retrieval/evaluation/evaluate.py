"""``python -m retrieval eval``: does the hybrid beat each branch alone? Metrics per configuration, per category.

Configurations, all scored at parent (card / document) level after ``best_per_parent``:

- ``bm25``: the BM25 branch alone; ``dense``: the dense branch alone;
- ``rrf``: both branches fused with Reciprocal Rank Fusion;
- ``full``: what the pipeline returns: the cross-encoder reorders the fused head, the fused tail follows.

One deep ``retrieve`` call per turn yields all four lists (top_k=100, a per-branch depth of 200 sub-chunks by
default, no similarity cut). A second call with the *configured* settings gives the per-turn latency and the
refusal decision at the configured ``MIN_SIMILARITY``; two more (reranker off, hybrid off) give the refusal of
``rrf`` and of the legacy dense path. The pipeline caches branch lists, query embeddings and rerank scores, so
these extra calls and the sweeps cost few model calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from retrieval.corpus import QUERY_CATEGORIES, Dataset
from retrieval.evaluation.prepare import thresholds_source
from retrieval.evaluation.scoring import aggregate, per_turn_scores, refusal_report, significance, verdict
from retrieval.evaluation.significance import DEFAULT_RESAMPLES
from retrieval.evaluation.turn_runs import (
    CONFIGS,
    DEFAULT_DEPTH,
    LATENCY_NOTE,
    Progress,
    TurnRun,
    check_configs,
    eval_settings,
    run_turns,
)
from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever


def evaluate(
    dataset: Dataset,
    retriever: HybridRetriever,
    settings: Settings,
    configs: Sequence[str] = CONFIGS,
    *,
    depth: int = DEFAULT_DEPTH,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    refusals: bool = True,
    progress: Progress | None = None,
    runs: Sequence[TurnRun] | None = None,
    store_text: bool = True,
) -> dict[str, Any]:
    """Score ``configs`` on ``dataset``: overall, per category, refusals, significance, per turn.

    Args:
        dataset: the labeled turns (``load_shipped`` or ``load_beir``).
        retriever: a ``HybridRetriever`` over the dataset's chunks.
        settings: the configured settings (threshold, reranker, rrf_k, weights, ...); lists are scored with
            ``eval_settings(settings, depth)``.
        configs: any of ``bm25``, ``dense``, ``rrf``, ``full``.
        depth: sub-chunks per branch for the scored lists.
        seed / resamples: for the significance test.
        refusals: also run the configured settings (latency and refusal rates).
        progress: ``progress(done, total, label)`` after each turn.
        runs: reuse turns already run (``run_turns``) instead of running them.
        store_text: keep each turn's text in ``per_turn`` (off for third-party sets whose license forbids
            copying them, e.g. SciFact: ids only).

    Returns:
        A JSON-ready dict: ``dataset``, ``turns``, ``configs`` {config: {metric: value, "ms_per_turn": ms}},
        ``categories``, ``refusal``, ``significance``, ``verdict``, ``settings``, ``per_turn``, ``notes``.
    """
    check_configs(configs)
    if runs is None:
        runs = run_turns(
            dataset, retriever, settings, configs=configs, depth=depth, refusals=refusals, progress=progress
        )
    deep = eval_settings(settings, depth)
    deep_enough = deep.top_k >= 100 and deep.candidate_depth >= 100
    overall = aggregate(runs, configs, deep_enough=deep_enough)
    categories: dict[str, Any] = {}
    for cat in _categories(runs):
        group = [r for r in runs if r.query.category == cat and r.answerable]
        categories[cat] = {"turns": len(group), **aggregate(group, configs, deep_enough=deep_enough)}
    sig = significance(runs, configs, seed=seed, resamples=resamples)
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "turns": len(runs),
        "answerable_turns": sum(r.answerable for r in runs),
        "configs": overall,
        "categories": categories,
        "refusal": refusal_report(runs, settings, configs, thresholds_source(retriever, settings))
        if refusals
        else None,
        "significance": sig,
        "verdict": verdict(overall, sig),
        "settings": {
            "configured": _settings_summary(settings),
            "evaluation": {"top_k": deep.top_k, "candidate_depth": deep.candidate_depth, "min_similarity": -1.0},
            "documents": len({c.parent_id for c in retriever.chunks}),
            "chunks": len(retriever.chunks),
        },
        "configured_levels": _count(r.level for r in runs if r.level),
        "reranker_missing_turns": sum(not r.reranked for r in runs) if "full" in configs else 0,
        "cached_turns": sum(r.cached for r in runs),
        "notes": {
            "level": "parent (card / document) level: each branch list is deduped to its best sub-chunk per parent",
            "metrics": "mean over answerable turns; nDCG uses graded linear gains and a log2 discount",
            "latency": LATENCY_NOTE,
            "recall@100": (
                "measured"
                if deep_enough
                else f"null: the lists hold at most {deep.top_k} cards (depth {deep.candidate_depth})"
            ),
        },
        "per_turn": _per_turn(runs, configs, store_text),
    }
    return report


def _per_turn(runs: Sequence[TurnRun], configs: Sequence[str], store_text: bool = True) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        row: dict[str, Any] = {
            "id": r.query.id,
            "category": r.query.category,
            "relevant": dict(r.query.relevant),
            "top3": {c: r.ranked[c][:3] for c in configs},
        }
        if store_text:
            row["text"] = r.query.text
        if r.answerable:
            row.update(
                {
                    m: {c: round(v, 6) for c, v in scores.items()}
                    for m, scores in per_turn_scores([r], configs)[0].items()
                    if m in ("ndcg@10", "mrr@10")
                }
            )
        if r.refused:
            row["refused"] = dict(r.refused)
        if r.level:
            row["level"] = r.level
        out.append(row)
    return out


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _categories(runs: Sequence[TurnRun]) -> list[str]:
    present = {r.query.category for r in runs if r.answerable}
    return [c for c in QUERY_CATEGORIES if c in present] + sorted(present - set(QUERY_CATEGORIES))


def _settings_summary(s: Settings) -> dict[str, Any]:
    keep = (
        "rrf_k",
        "bm25_weight",
        "dense_weight",
        "embedding_model",
        "reranker_model",
        "reranker_max_input",
        "top_k",
        "candidate_multiplier",
        "min_similarity",
        "hybrid_enabled",
        "bm25_tokenizer",
        "fusion",
        "query_weighting",
        "rerank_mode",
        "rerank_weight",
    )
    data = s.to_dict()
    return {k: data[k] for k in keep if k in data}
