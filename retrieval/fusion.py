"""Rank fusion as pure functions over ranked id lists (1-based ranks, ties broken by id), and the fusion stage
that applies them to the branches' lists, keeping each candidate's ranks and weighted contributions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.types import BranchResult, FusedHit


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]] | Mapping[str, Sequence[str]],
    k: int = 60,
    weights: Sequence[float] | Mapping[str, float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked lists with (weighted) Reciprocal Rank Fusion (Cormack et al., 2009).

    ``score(d) = sum_r w_r / (k + rank_r(d))`` with 1-based ranks; a document missing from a ranking adds
    nothing. Sorted by score descending, ties broken by id ascending so the order is deterministic.

    Args:
        rankings: ranked id lists, best first; a list of lists or a mapping name -> list.
        k: the RRF constant, a positive integer.
        weights: one weight per ranking (same order / same keys); default 1.0 each.

    Returns:
        ``[(doc_id, score), ...]``, best first.
    """
    names, lists = _as_named(rankings)
    w = _as_weights(names, weights)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer (the RRF constant, e.g. 60), got {k!r}.")
    scores: dict[str, float] = {}
    for name, ranked in zip(names, lists):
        seen: set[str] = set()
        for rank, doc in enumerate(ranked, start=1):
            if doc in seen:
                raise ValueError(f"ranking {name!r} lists {doc!r} twice: each id may appear once per ranking.")
            seen.add(doc)
            scores[doc] = scores.get(doc, 0.0) + w[name] / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def rrf_terms(
    rankings: Mapping[str, Sequence[str]], k: int = 60, weights: Mapping[str, float] | None = None
) -> dict[str, dict[str, tuple[int | None, float]]]:
    """Per document, per ranking: ``(rank or None, weighted contribution)``: the arithmetic behind RRF."""
    names, lists = _as_named(rankings)
    w = _as_weights(names, weights)
    out: dict[str, dict[str, tuple[int | None, float]]] = {}
    for name, ranked in zip(names, lists):
        for rank, doc in enumerate(ranked, start=1):
            out.setdefault(doc, {n: (None, 0.0) for n in names})[name] = (rank, w[name] / (k + rank))
    return out


def _as_named(rankings: Sequence[Sequence[str]] | Mapping[str, Sequence[str]]) -> tuple[list[str], list[list[str]]]:
    if isinstance(rankings, Mapping):
        return list(rankings.keys()), [list(v) for v in rankings.values()]
    if isinstance(rankings, (str, bytes)):
        raise TypeError("rankings must be a list of ranked id lists, not a string.")
    lists = [list(r) for r in rankings]
    return [str(i) for i in range(len(lists))], lists


def _as_weights(names: list[str], weights: Sequence[float] | Mapping[str, float] | None) -> dict[str, float]:
    if weights is None:
        return {n: 1.0 for n in names}
    if isinstance(weights, Mapping):
        missing = [n for n in names if n not in weights]
        if missing:
            raise ValueError(f"weights has no entry for rankings {missing}: give one weight per ranking.")
        w = {n: float(weights[n]) for n in names}
    else:
        if len(weights) != len(names):
            raise ValueError(f"got {len(weights)} weights for {len(names)} rankings: give one weight per ranking.")
        w = {n: float(x) for n, x in zip(names, weights)}
    bad = {n: x for n, x in w.items() if not x >= 0}
    if bad:
        raise ValueError(f"weights must be >= 0, got {bad}.")
    return w


def min_max(scores: Sequence[float]) -> list[float]:
    """Scale scores to [0, 1] (all-equal scores map to 1.0, so a single hit is a full match)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0 for _ in scores]
    return [(x - lo) / (hi - lo) for x in scores]


def convex_fusion(
    scored: Mapping[str, Sequence[tuple[str, float]]], weights: Mapping[str, float] | None = None
) -> list[tuple[str, float]]:
    """Score-based fusion (Bruch et al., TOIS 2023): a convex combination of min-max normalised scores.

    ``score(d) = sum_r w_r * minmax_r(d) / sum_r w_r``; a document missing from a list adds 0 for it.
    Sorted by score descending, ties by id.

    Args:
        scored: per list name, ``[(doc_id, raw_score), ...]`` in that list's own units.
        weights: per list name; default 1.0 each.
    """
    names = list(scored)
    w = _as_weights(names, weights)
    total = sum(w.values())
    if total <= 0:
        raise ValueError("convex fusion needs at least one positive weight.")
    out: dict[str, float] = {}
    for name in names:
        ids = [doc for doc, _ in scored[name]]
        if len(set(ids)) != len(ids):
            raise ValueError(f"list {name!r} lists an id twice: each id may appear once per list.")
        for doc, norm in zip(ids, min_max([s for _, s in scored[name]])):
            out[doc] = out.get(doc, 0.0) + w[name] * norm / total
    return sorted(out.items(), key=lambda item: (-item[1], item[0]))


def fuse_branches(
    branches: Sequence[BranchResult],
    weights: Mapping[str, float],
    parent_of: Mapping[str, str],
    *,
    fusion: str = "rrf",
    k: int = 60,
) -> list[FusedHit]:
    """Fuse the usable branches (one usable branch fuses to its own order) with RRF or convex fusion.

    Each hit keeps its per-branch ranks and weighted contributions, which sum to its fused score.
    ``parent_of`` maps a sub-chunk id to its card id.
    """
    if not branches:
        return []
    w = {b.name: weights[b.name] for b in branches}
    if not any(w.values()):
        # Only zero-weight branches are left (e.g. DENSE_WEIGHT=0 on the dense-only path): weight them equally,
        # so the branch keeps its own order instead of every score being 0 (or convex fusion raising).
        w = {name: 1.0 for name in w}
    position = {b.name: {h.chunk_id: h.rank for h in b.hits} for b in branches}
    contributions: dict[str, dict[str, float]] = {}
    if fusion == "convex":
        total = sum(w.values()) or 1.0
        fused = convex_fusion({b.name: [(h.chunk_id, h.score) for h in b.hits] for b in branches}, w)
        for b in branches:
            for h, norm in zip(b.hits, min_max([h.score for h in b.hits])):
                contributions.setdefault(h.chunk_id, {})[b.name] = w[b.name] * norm / total
    else:
        fused = reciprocal_rank_fusion({b.name: [h.chunk_id for h in b.hits] for b in branches}, k=k, weights=w)
        for b in branches:
            for h in b.hits:
                contributions.setdefault(h.chunk_id, {})[b.name] = w[b.name] / (k + h.rank)
    out = []
    for rank, (cid, score) in enumerate(fused, start=1):
        ranks = {name: position.get(name, {}).get(cid) for name in ("bm25", "dense")}
        parts = {name: contributions[cid].get(name, 0.0) for name in ("bm25", "dense")}
        out.append(
            FusedHit(
                chunk_id=cid, parent_id=parent_of[cid], rank=rank, score=score, branch_ranks=ranks, contributions=parts
            )
        )
    return out
