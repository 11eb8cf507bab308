"""One card through the turn's later stages: fusion (as if each branch's depth had reached it), the cross-encoder
(its logit and where that would place it), dedup, top_k, the threshold and the refusal rule, then the first stage
that lost it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from retrieval.fusion import fuse_branches
from retrieval.parents import best_per_parent, cosine_cut_skipped
from retrieval.settings import Settings
from retrieval.types import BranchResult, FusedHit, RerankedHit, RetrievalResult
from retrieval.why_ranks import Standing, hits_at

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever


def candidates(result: RetrievalResult) -> list[RerankedHit | FusedHit]:
    """What the final cut runs over: the reranked head, then the fused tail, best sub-chunk per card."""
    return best_per_parent([*result.reranked, *result.fused[len(result.reranked) :]])


def card_position(result: RetrievalResult, card_id: str) -> int | None:
    """The card's 1-based position among the candidates after parent dedup (None: not a candidate)."""
    return next((p for p, h in enumerate(candidates(result), start=1) if h.parent_id == card_id), None)


def fusion_standing(
    retriever: HybridRetriever,
    result: RetrievalResult,
    card_id: str,
    s: Settings,
    whole: dict[str, Standing],
) -> dict[str, Any]:
    """The card in the fused list: the real one if the branches reached it, else the branch lists cut just deep
    enough to hold it (``as_if_depth``) fused at this k and these weights."""
    reached = [h for h in best_per_parent(result.fused)]
    for rank, h in enumerate(reached, start=1):
        if h.parent_id == card_id:
            return {
                "rank": rank,
                "score": round(h.score, 6),
                "chunk_id": h.chunk_id,
                "reached": True,
                "as_if_depth": None,
                "branch_ranks": dict(h.branch_ranks),
                "contributions": {k: round(v, 6) for k, v in h.contributions.items()},
            }
    depth = s.candidate_depth
    lists, deepest = [], depth
    for branch in (result.bm25, result.dense):
        info, order, scores = whole[branch.name]
        if not branch.usable or not order:
            continue
        need = max(depth, info.get("chunk_rank") or 0)
        deepest = max(deepest, need)
        lists.append(BranchResult(branch.name, hits_at(retriever, order, scores, need)))
    weights = result.weights or {"bm25": s.bm25_weight, "dense": s.dense_weight}
    fused = fuse_branches(lists, weights, retriever.parent_of, fusion=s.fusion, k=s.rrf_k) if lists else []
    for rank, h in enumerate(best_per_parent(fused), start=1):
        if h.parent_id == card_id:
            return {
                "rank": rank,
                "score": round(h.score, 6),
                "chunk_id": h.chunk_id,
                "reached": False,
                "as_if_depth": deepest,
                "branch_ranks": dict(h.branch_ranks),
                "contributions": {k: round(v, 6) for k, v in h.contributions.items()},
            }
    return {
        "rank": None,
        "score": None,
        "chunk_id": None,
        "reached": False,
        "as_if_depth": deepest,
        "branch_ranks": {},
        "contributions": {},
    }


def cross_encoder_standing(
    retriever: HybridRetriever, query: str, card_id: str, chunk_id: str | None, result: RetrievalResult, s: Settings
) -> dict[str, Any]:
    """The card's logit (one pair, cached per turn) and where it would stand among the scored head."""
    from retrieval.rerank import load_error, load_reranker, score_pairs

    ran = bool(result.reranked)
    info: dict[str, Any] = {
        "score": None,
        "chunk_id": chunk_id,
        "ran": ran,
        "in_head": False,
        "would_place": None,
        "head": len(result.reranked),
        "reason": "",
    }
    if not ran:
        info["reason"] = result.reranker_status or "the reranker did not run on this turn"
    if chunk_id is None:
        info["reason"] = "no sub-chunk of the card matches the turn in any branch"
        return info
    mine = next((h for h in result.reranked if h.parent_id == card_id), None)
    if mine is not None:
        info.update(chunk_id=mine.chunk_id, in_head=True, score=round(mine.score, 4))
        logit = mine.score
    else:
        scorer = load_reranker(s.reranker_model)
        if scorer is None:
            info["reason"] = load_error(s.reranker_model) or "the reranker is unavailable"
            return info
        try:
            scored = score_pairs(scorer, query, [retriever.by_id[chunk_id].indexed_text])[0]
            if scored is None or not math.isfinite(scored):
                raise ValueError(f"no finite score ({scored!r})")
        except Exception as exc:  # a failing model is reported, never raised
            info["reason"] = f"scoring the pair failed ({type(exc).__name__}: {exc})"
            return info
        logit = scored
        info["score"] = round(logit, 4)
    others = [h.score for h in best_per_parent(result.reranked) if h.parent_id != card_id]
    info["would_place"] = 1 + sum(x > logit for x in others)
    info["lowest_in_head"] = round(min(others), 4) if others else None
    return info


def cut_stages(
    result: RetrievalResult, card_id: str, s: Settings, position: int | None, similarity: float | None
) -> list[dict[str, Any]]:
    """Dedup, top_k, the threshold and the refusal rule, each with passed and its value."""
    kept = card_id in {h.parent_id for h in result.final}
    out = [
        {
            "stage": "dedup",
            "passed": position is not None,
            "value": position,
            "note": (
                f"its best sub-chunk stands for it at card position {position}"
                if position is not None
                else "not a candidate: no sub-chunk of it reached the final cut"
            ),
        }
    ]
    if position is None:
        return out
    out.append(
        {
            "stage": "top_k",
            "passed": position <= s.top_k,
            "value": position,
            "note": f"card position {position} {'<=' if position <= s.top_k else '>'} top_k={s.top_k}",
        }
    )
    if similarity is None:
        out.append({"stage": "threshold", "passed": True, "value": None, "note": "skipped (no embeddings)"})
    elif cosine_cut_skipped(result.refusal, s):
        out.append(
            {
                "stage": "threshold",
                "passed": True,
                "value": round(similarity, 4),
                "note": f"cosine {similarity:.3f}: MIN_SIMILARITY not applied (the turn is in another language "
                "than most cards)",
            }
        )
    else:
        ok = similarity >= s.min_similarity
        out.append(
            {
                "stage": "threshold",
                "passed": ok,
                "value": round(similarity, 4),
                "note": f"cosine {similarity:.3f} {'>=' if ok else '<'} MIN_SIMILARITY {s.min_similarity:g}",
            }
        )
    refusal = result.refusal
    refused = refusal is not None and refusal.refused
    if refusal is None:
        note = f"REFUSAL_RULE={s.refusal_rule}"
    else:
        note = f"the turn was refused: {refusal.reason}" if refused else "the turn was answered"
    out.append({"stage": "refusal", "passed": not refused, "value": refusal.reason if refusal else "", "note": note})
    out.append(
        {
            "stage": "final",
            "passed": kept,
            "value": position if kept else None,
            "note": "among the final cards" if kept else "not among the final cards",
        }
    )
    return out


def lost_at(result: RetrievalResult, card_id: str, s: Settings, stages: list[dict[str, Any]]) -> str | None:
    """The first stage that lost the card (one of ``why_report.STAGES``), or None when it is a final card."""
    if card_id in {h.parent_id for h in result.final}:
        return None
    by = {st["stage"]: st for st in stages}
    if not by["dedup"]["passed"]:
        return "depth"
    if not by["top_k"]["passed"]:
        fused_pos = next(
            (p for p, h in enumerate(best_per_parent(result.fused), start=1) if h.parent_id == card_id), None
        )
        return "rerank" if result.reranked and fused_pos is not None and fused_pos <= s.top_k else "fusion"
    if not by["threshold"]["passed"]:
        return "threshold"
    return "refusal"
