"""Parent dedup (ADR-0020): keep the best-ranked sub-chunk of each parent card, in order; then top_k and the
similarity threshold, which cut cards but keep them (with the reason) for the inspector."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, TypeVar

from retrieval.settings import MULTILINGUAL_EMBEDDERS, Settings
from retrieval.types import FinalHit

if TYPE_CHECKING:
    from retrieval.refusal import RefusalDecision


class _HasParent(Protocol):
    @property
    def parent_id(self) -> str: ...

    @property
    def chunk_id(self) -> str: ...

    @property
    def score(self) -> float: ...


H = TypeVar("H", bound=_HasParent)


def best_per_parent(hits: Iterable[H]) -> list[H]:
    """The first (best-ranked) hit of every parent, preserving order. ``hits`` must be best-first."""
    seen: set[str] = set()
    out: list[H] = []
    for hit in hits:
        if hit.parent_id not in seen:
            seen.add(hit.parent_id)
            out.append(hit)
    return out


def finalize(
    candidates: Iterable[H],
    top_k: int,
    min_similarity: float,
    similarity: Callable[[str], float] | None,
    cut_below: bool = True,
) -> tuple[list[FinalHit], list[FinalHit]]:
    """Parent dedup -> the first ``top_k`` cards -> the cosine threshold (skipped when ``similarity`` is None, or
    ``cut_below`` is False: each card's cosine is still recorded).

    Returns the kept cards (ranked 1..n) and the cut ones, each with its reason.
    """
    final: list[FinalHit] = []
    cut: list[FinalHit] = []
    for position, hit in enumerate(best_per_parent(candidates), start=1):
        sim = similarity(hit.chunk_id) if similarity is not None else None
        if position > top_k:
            cut.append(FinalHit(hit.chunk_id, hit.parent_id, 0, hit.score, sim, False, f"beyond top_k={top_k}"))
        elif cut_below and sim is not None and sim < min_similarity:
            cut.append(
                FinalHit(
                    hit.chunk_id,
                    hit.parent_id,
                    0,
                    hit.score,
                    sim,
                    False,
                    f"similarity {sim:.3f} < MIN_SIMILARITY {min_similarity:g}",
                )
            )
        else:
            final.append(FinalHit(hit.chunk_id, hit.parent_id, len(final) + 1, hit.score, sim))
    return final, cut


def cosine_cut_skipped(decision: RefusalDecision | None, s: Settings) -> bool:
    """True when the MIN_SIMILARITY cut does not apply: a turn the refusal rule answered across languages while the
    embedder is English (its cosine would judge the language, not the content)."""
    return (
        decision is not None
        and not decision.refused
        and decision.cross_language
        and s.embedding_model not in MULTILINGUAL_EMBEDDERS
    )
