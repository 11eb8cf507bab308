"""A vs B with relevance judgements: one list's metrics (the inspector's relevance marks) and both configurations
over every labeled turn (``python -m retrieval eval --compare`` and the Evaluation tab).

The per-list metrics are the evaluator's own functions (``retrieval.evaluation.metrics``) over the same
parent-level lists the evaluator scores (``turn_runs.ranked_parents``), so a column's nDCG@10 in the inspector is
the number ``eval`` would give that list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrieval.compare import changed_settings
from retrieval.corpus import Dataset
from retrieval.evaluation.metrics import Qrels, ndcg_at_k, recall_at_k
from retrieval.evaluation.report_text import text_table
from retrieval.evaluation.scoring import aggregate, per_turn_scores
from retrieval.evaluation.significance import DEFAULT_RESAMPLES, compare
from retrieval.evaluation.turn_runs import CONFIGS, DEFAULT_DEPTH, Progress, ranked_parents, run_turns
from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever
    from retrieval.types import RetrievalResult

# The inspector's stage names -> the evaluator's configuration names.
STAGE_CONFIGS = {"bm25": "bm25", "dense": "dense", "rrf": "rrf", "final": "full"}
METRIC = "ndcg@10"


def list_metrics(ranked: Sequence[str], qrels: Qrels) -> dict[str, Any] | None:
    """nDCG@10, Recall@10 and the rank of the first relevant id (None if none is listed) of one ranked parent
    list; None when nothing is judged relevant (an unlabeled turn has no metric, not a zero)."""
    if not any(g > 0 for g in qrels.values()):
        return None
    first = next((i for i, doc in enumerate(ranked, start=1) if qrels.get(doc, 0) > 0), None)
    return {
        "ndcg@10": ndcg_at_k(ranked, qrels, 10),
        "recall@10": recall_at_k(ranked, qrels, 10),
        "first_relevant": first,
    }


def stage_metrics(result: RetrievalResult, qrels: Qrels) -> dict[str, dict[str, Any] | None]:
    """``list_metrics`` of every stage of one result, each list deduped to parents as the evaluator does."""
    return {stage: list_metrics(ranked_parents(result, config), qrels) for stage, config in STAGE_CONFIGS.items()}


def compare_configs(
    dataset: Dataset,
    retriever: HybridRetriever,
    a: Settings,
    b: Settings,
    *,
    depth: int = DEFAULT_DEPTH,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    progress: Progress | None = None,
    retriever_b: HybridRetriever | None = None,
) -> dict[str, Any]:
    """Both configurations over every labeled turn of ``dataset``: A on ``retriever``, B on ``retriever_b`` (an
    index of B's embedding model; default ``retriever``, refused when B names another model: ``check_index``).

    Returns:
        ``a`` and ``b`` (each ``{config: {metric: value}}`` as ``eval`` reports them), ``turns`` (one item per
        labeled turn: ``id``, ``text``, ``category``, ``a_ndcg@10``, ``b_ndcg@10`` (None for a turn with nothing
        relevant), ``delta``), ``significance`` (B vs A on the full lists' nDCG@10, paired randomization test),
        ``changed`` (the settings B changes) and ``dataset``.
    """
    runs_a = run_turns(dataset, retriever, a, depth=depth, refusals=False, progress=progress, label="A")
    runs_b = run_turns(dataset, retriever_b or retriever, b, depth=depth, refusals=False, progress=progress, label="B")
    turns = []
    for ra, rb in zip(runs_a, runs_b):
        row: dict[str, Any] = {
            "id": ra.query.id,
            "text": ra.query.text,
            "category": ra.query.category,
            f"a_{METRIC}": None,
            f"b_{METRIC}": None,
            "delta": None,
        }
        if ra.answerable:
            sa = per_turn_scores([ra], ["full"])[0][METRIC]["full"]
            sb = per_turn_scores([rb], ["full"])[0][METRIC]["full"]
            row.update({f"a_{METRIC}": round(sa, 6), f"b_{METRIC}": round(sb, 6), "delta": round(sb - sa, 6)})
        turns.append(row)
    scored = [t for t in turns if t["delta"] is not None]
    sig = None
    if len(scored) >= 2:
        sig = compare(
            [t[f"b_{METRIC}"] for t in scored], [t[f"a_{METRIC}"] for t in scored], seed=seed, resamples=resamples
        ).to_dict()
        sig = {k: round(v, 6) if isinstance(v, float) else v for k, v in sig.items()}
        sig.update(
            metric=METRIC,
            config="full",
            direction="B minus A",
            fixed=sum(t["delta"] > 0 for t in scored),
            broke=sum(t["delta"] < 0 for t in scored),
            ties=sum(t["delta"] == 0 for t in scored),
        )
    return {
        "dataset": dataset.name,
        "a": aggregate(runs_a, CONFIGS),
        "b": aggregate(runs_b, CONFIGS),
        "changed": {n: {"a": x, "b": y} for n, x, y in _changed(a, b)},
        "turns": turns,
        "significance": sig,
    }


def _changed(a: Settings, b: Settings) -> list[tuple[str, Any, Any]]:
    return changed_settings(a.to_dict(), b.to_dict())


def fixed_and_broken(report: Mapping[str, Any], order: str = "delta") -> list[dict[str, Any]]:
    """The turns whose nDCG@10 B changed, sorted by the change (``delta``: most broken first; ``-delta``: most
    fixed first)."""
    rows = [t for t in report["turns"] if t.get("delta")]
    return sorted(rows, key=lambda t: (t["delta"] if order == "delta" else -t["delta"], t["id"]))


def format_compare(report: Mapping[str, Any]) -> str:
    """A readable text report of ``compare_configs``."""
    changed = ", ".join(f"{n} {v['a']} → {v['b']}" for n, v in report["changed"].items()) or "nothing"
    lines = [f"dataset: {report['dataset']}   turns: {len(report['turns'])}   B changes: {changed}", ""]
    metrics = ["ndcg@10", "recall@10", "recall@100", "mrr@10"]
    lines += text_table(
        ["config", *metrics],
        [[f"{side} {c}", *(report[side][c].get(m) for m in metrics)] for c in CONFIGS for side in ("a", "b")],
    )
    sig = report.get("significance")
    if sig:
        lines += [
            "",
            f"B vs A on {sig['metric']} (full): diff {sig['diff']:+.4f}, 95% CI [{sig['ci_low']:+.4f}, "
            f"{sig['ci_high']:+.4f}], p = {sig['p_value']:.4f} (paired randomization, seed {sig['seed']}); "
            f"B fixed {sig['fixed']}, broke {sig['broke']}, tied {sig['ties']}",
        ]
    changed_turns = fixed_and_broken(report)
    if changed_turns:
        lines += ["", "turns B changed (most broken first)"]
        lines += text_table(
            ["id", f"a {METRIC}", f"b {METRIC}", "delta", "text"],
            [[t["id"], t[f"a_{METRIC}"], t[f"b_{METRIC}"], t["delta"], t["text"]] for t in changed_turns],
        )
    return "\n".join(lines)
