"""Exercises made from real turns: a turn's BM25 and dense lists (top few cards) as a classroom exercise.

Used by the Inspector's "make an exercise from this turn" and by ``scripts/hybrid_loss_exercise.py``, which looks
in the shipped labeled set for a turn where fusion ranks the relevant card below a single branch ("the hybrid does
not always win"). Card ids become letters (A, B, C...) a student can type; each letter's label is the card's title
and id. Pure functions over a ``RetrievalResult``; the pipeline is only imported by ``find_hybrid_losses``.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrieval.exercises import Exercise
from retrieval.parents import best_per_parent

if TYPE_CHECKING:
    from retrieval.corpus import Dataset
    from retrieval.pipeline import HybridRetriever
    from retrieval.settings import Settings
    from retrieval.types import RetrievalResult

TOP = 5
BRANCH_NAMES = {"bm25": "BM25", "dense": "Dense"}
LETTERS = string.ascii_uppercase


def card_lists(result: RetrievalResult, top: int = TOP) -> dict[str, list[str]]:
    """Each usable branch's cards (best sub-chunk per card, best first), cut to ``top``."""
    if not 1 <= top <= 10:
        raise ValueError(f"top must be 1 to 10 cards per list, got {top!r}.")
    out = {}
    for branch in (result.bm25, result.dense):
        if branch.usable and branch.hits:
            out[BRANCH_NAMES[branch.name]] = [h.parent_id for h in best_per_parent(branch.hits)][:top]
    return out


def fused_cards(result: RetrievalResult) -> list[str]:
    """The pipeline's fused list at card level (parent dedup after fusion, as the pipeline does)."""
    return [h.parent_id for h in best_per_parent(result.fused)]


def lettered(lists: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """card id -> letter, in order of first appearance (BM25 first)."""
    out: dict[str, str] = {}
    for items in lists.values():
        for card in items:
            if card not in out:
                out[card] = LETTERS[len(out)]
    return out


def exercise_from_result(
    result: RetrievalResult,
    title_of: Callable[[str], str],
    *,
    top: int = TOP,
    exercise_id: str = "from-turn",
    relevant: Mapping[str, int] | None = None,
    source: str = "",
) -> Exercise:
    """The turn's top ``top`` cards per branch as an exercise: predict the fused order of these lists, with the
    turn's k and branch weights. With ``relevant`` (card id -> grade), ask instead where the most relevant card
    lands after fusion."""
    lists = card_lists(result, top)
    if not lists:
        raise ValueError("this turn has no usable branch list to make an exercise of (run a turn that finds cards).")
    letter = lettered(lists)
    k = int(result.settings.get("rrf_k", 60))
    weights = {BRANCH_NAMES[n]: float(w) for n, w in (result.weights or {}).items() if BRANCH_NAMES.get(n) in lists}
    labels = {letter[c]: f"{title_of(c)} ({c})" for c in letter}
    turn = result.query
    graded = {letter[c]: int(g) for c, g in (relevant or {}).items() if c in letter and g > 0}
    common: dict[str, Any] = {
        "lists": {n: tuple(letter[c] for c in v) for n, v in lists.items()},
        "k": k,
        "weights": weights,
        "labels": labels,
        "relevant": graded,
        "source": source or f"A turn of the Inspector: {turn[:200]!r}",
    }
    weighting = " and ".join(f"{n} weight {weights.get(n, 1.0):g}" for n in lists)
    if graded:
        target = max(graded, key=lambda d: (graded[d], -ord(d[0])))
        return Exercise(
            id=exercise_id,
            title="The hybrid does not always win",
            question=(
                f"A real turn: {turn[:200]!r}. The labels mark {target} as the relevant card. Here are the top "
                f"{top} cards of each branch (k = {k}, {weighting}). At which fused rank does {target} land?"
            ),
            kind="rank",
            target=target,
            hints=(
                "Weighted RRF: each term is w/(k + rank), with this turn's k and weights.",
                f"Find {target} in each list, then every card that could beat it.",
            ),
            lesson=_loss_lesson(target, common["lists"], k, weights),
            **common,
        )
    return Exercise(
        id=exercise_id,
        title="From a turn of the Inspector",
        question=(
            f"The turn {turn[:200]!r}: the top {top} cards of each branch (k = {k}, {weighting}). "
            f"Enter the fused order of these cards, best first (letters)."
        ),
        kind="order",
        hints=("Each term is w/(k + rank), with this turn's k and weights.", "A card in both lists has two terms."),
        lesson="This is the turn's own fusion of these cards; the Inspector's fused column shows it on sub-chunks.",
        **common,
    )


def _loss_lesson(target: str, lists: Mapping[str, tuple[str, ...]], k: int, weights: Mapping[str, float]) -> str:
    from retrieval.fusion import reciprocal_rank_fusion

    order = [d for d, _ in reciprocal_rank_fusion(lists, k=k, weights={n: weights.get(n, 1.0) for n in lists})]
    where = ", ".join(f"#{v.index(target) + 1} in {n}" if target in v else f"absent from {n}" for n, v in lists.items())
    return (
        f"{target} is {where}, and #{order.index(target) + 1} after fusion: {order[0]} comes first. A branch alone "
        "ranked the relevant card higher than the hybrid does. The hybrid does not always win: always compare it "
        "against each branch alone, on labeled turns."
    )


@dataclass(frozen=True)
class HybridLoss:
    """A labeled turn where fusion ranks the relevant card below a branch: its ranks, card level."""

    turn_id: str
    text: str
    card: str
    branch_ranks: dict[str, int | None]
    fused_rank: int


def hybrid_losses(
    dataset: Dataset, retriever: HybridRetriever, settings: Settings, only: Iterable[str] | None = None
) -> list[HybridLoss]:
    """Every labeled turn (of ``only``, by id, if given) whose most relevant card fusion ranks below its rank in one
    branch alone (card level)."""
    wanted = set(only) if only is not None else None
    out = []
    for q in dataset.queries:
        if not q.relevant or (wanted is not None and q.id not in wanted):
            continue
        result = retriever.retrieve(q.text, settings)
        card = max(q.relevant, key=lambda c: (q.relevant[c], c))
        fused = fused_cards(result)
        ranks = {}
        for branch in (result.bm25, result.dense):
            cards = [h.parent_id for h in best_per_parent(branch.hits)]
            ranks[branch.name] = cards.index(card) + 1 if card in cards else None
        best = min((r for r in ranks.values() if r), default=None)
        if card in fused and best is not None and fused.index(card) + 1 > best:
            out.append(HybridLoss(q.id, q.text, card, ranks, fused.index(card) + 1))
    return out


def build_hybrid_loss(
    dataset: Dataset,
    retriever: HybridRetriever,
    settings: Settings,
    losses: Iterable[HybridLoss],
    turn_id: str | None = None,
) -> Exercise:
    """The "hybrid does not always win" exercise from the first loss (or ``turn_id``) whose exercise, the top
    ``TOP`` cards of each branch fused with the turn's k and weights, also ranks the card below a branch."""
    from retrieval.exercise_set import HYBRID_LOSS_ID
    from retrieval.exercises import expected_answer

    titles = {c.id: c.title for c in dataset.cards}
    queries = {q.id: q for q in dataset.queries}
    for loss in losses:
        if turn_id and loss.turn_id != turn_id:
            continue
        q = queries[loss.turn_id]
        result = retriever.retrieve(q.text, settings)
        ex = exercise_from_result(
            result,
            titles.__getitem__,
            exercise_id=HYBRID_LOSS_ID,
            relevant={loss.card: q.relevant[loss.card]},
            source=f"Shipped labeled turn {q.id} ({q.category}), corpus/queries.jsonl; default settings.",
        )
        best = min(r for r in ex_branch_ranks(ex).values() if r)
        if int(expected_answer(ex)) == loss.fused_rank and loss.fused_rank > best:
            return ex
    raise ValueError(f"no labeled turn {turn_id or ''} shows the loss in its top-{TOP} exercise.")


def ex_branch_ranks(ex: Exercise) -> dict[str, int | None]:
    """Where the exercise's target sits in each of its lists (None: absent)."""
    target = str(ex.target)
    return {n: (list(v).index(target) + 1 if target in v else None) for n, v in ex.lists.items()}
