"""Ranking metrics as pure functions over one ranked id list and its graded judgements.

The formulas are the ones trec_eval / pytrec_eval (and therefore BEIR) and ranx use:

- ``ndcg_at_k``: linear gains (the grade itself) with a ``log2(rank + 1)`` discount (Järvelin & Kekäläinen),
  normalised by the ideal DCG of all judged-relevant ids, not just the retrieved ones.
- ``recall_at_k``: relevant ids in the top ``k`` / all relevant ids.
- ``mrr_at_k``: ``1 / rank`` of the first relevant id within the top ``k``, else 0.

An id is relevant when its grade is > 0. A turn with no relevant id scores 0 on every metric (ranx's
convention); the evaluator leaves such turns (``no_match``) out of the averages and reports refusals instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, int]


def _check(ranked: Sequence[str], qrels: Qrels, k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer (the cut-off, e.g. 10), got {k!r}.")
    if isinstance(ranked, (str, bytes)):
        raise TypeError("ranked must be a list of ids, best first, not a string.")
    seen: set[str] = set()
    for doc in ranked:
        if doc in seen:
            raise ValueError(f"ranked lists {doc!r} twice: dedup the list (e.g. to parents) before scoring it.")
        seen.add(doc)
    bad = {d: g for d, g in qrels.items() if isinstance(g, bool) or not isinstance(g, int)}
    if bad:
        raise TypeError(f"grades must be integers, got {bad}.")


def dcg_at_k(ranked: Sequence[str], qrels: Qrels, k: int) -> float:
    """Discounted cumulative gain of the top ``k``: ``sum grade / log2(rank + 1)`` over relevant ids."""
    _check(ranked, qrels, k)
    return sum(
        qrels.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(ranked[:k], start=1) if qrels.get(doc, 0) > 0
    )


def ndcg_at_k(ranked: Sequence[str], qrels: Qrels, k: int = 10) -> float:
    """nDCG@k with graded (linear) gains and a log2 discount; 0.0 when nothing is relevant."""
    _check(ranked, qrels, k)
    ideal_order = sorted((d for d, g in qrels.items() if g > 0), key=lambda d: -qrels[d])
    ideal = dcg_at_k(ideal_order, qrels, k)
    return dcg_at_k(ranked, qrels, k) / ideal if ideal > 0 else 0.0


def recall_at_k(ranked: Sequence[str], qrels: Qrels, k: int = 10) -> float:
    """Share of the relevant ids found in the top ``k``; 0.0 when nothing is relevant."""
    _check(ranked, qrels, k)
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Qrels, k: int = 10) -> float:
    """Reciprocal rank of the first relevant id within the top ``k``; 0.0 if there is none."""
    _check(ranked, qrels, k)
    for rank, doc in enumerate(ranked[:k], start=1):
        if qrels.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


METRICS = {
    "ndcg@10": lambda ranked, qrels: ndcg_at_k(ranked, qrels, 10),
    "recall@10": lambda ranked, qrels: recall_at_k(ranked, qrels, 10),
    "recall@100": lambda ranked, qrels: recall_at_k(ranked, qrels, 100),
    "mrr@10": lambda ranked, qrels: mrr_at_k(ranked, qrels, 10),
}
"""The metrics the evaluator reports, by name."""


def score_turn(ranked: Sequence[str], qrels: Qrels, metrics: Sequence[str] = tuple(METRICS)) -> dict[str, float]:
    """Every named metric for one turn."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}: choose from {list(METRICS)}.")
    return {m: METRICS[m](ranked, qrels) for m in metrics}
