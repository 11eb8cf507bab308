"""Scoring ahead after a turn: the sub-chunks a likely control change would bring into the reranker's head
(``likely_entrants``), handed to the background pre-scorer (``prescore``)."""

from __future__ import annotations

from retrieval.fusion import fuse_branches
from retrieval.rerank import PRESCORER, load_reranker
from retrieval.settings import Settings
from retrieval.types import Chunk, RetrievalResult

PRESCORE_MAX = 24  # pairs scored ahead per turn, at most


def prescore(result: RetrievalResult, s: Settings, parent_of: dict[str, str], by_id: dict[str, Chunk]) -> None:
    """Ask the background pre-scorer (``retrieval.rerank.Prescorer``: it only fills the pair-score cache, and
    pauses while any turn is being answered) for the pairs of ``likely_entrants``."""
    scorer = load_reranker(s.reranker_model)
    if scorer is not None:
        entrants = likely_entrants(result, s, parent_of)
        PRESCORER.request(scorer, result.query, [by_id[cid].indexed_text for cid in entrants])


def likely_entrants(result: RetrievalResult, s: Settings, parent_of: dict[str, str]) -> list[str]:
    """Sub-chunks a likely control change would bring into the reranker's head, likeliest first, at most
    ``PRESCORE_MAX``: the heads fused at RRF k halved, doubled and 60, with either branch's weight doubled or
    halved, then the next candidates past the head (``RERANKER_MAX_INPUT`` raised)."""
    branches = [b for b in (result.bm25, result.dense) if b.usable]
    n = len(result.reranked)
    head = {h.chunk_id for h in result.reranked}
    w = dict(result.weights)
    variants: list[tuple[int, dict[str, float]]] = [(k, w) for k in (max(1, s.rrf_k // 2), s.rrf_k * 2, 60)]
    for name in w:
        variants += [(s.rrf_k, {**w, name: w[name] * 2}), (s.rrf_k, {**w, name: w[name] / 2})]
    seen: dict[str, None] = {}
    for k, weights in variants:
        for hit in fuse_branches(branches, weights, parent_of, fusion=s.fusion, k=k)[:n]:
            if hit.chunk_id not in head:
                seen.setdefault(hit.chunk_id)
    for hit in result.fused[n : n + 5]:
        seen.setdefault(hit.chunk_id)
    return list(seen)[:PRESCORE_MAX]
