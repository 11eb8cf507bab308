"""Where one card stands in each branch over the whole corpus, not only the branch's depth: its BM25 rank, score
and the turn's terms it holds or lacks (with their idf), its best sub-chunk's cosine and exact dense rank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.settings import Settings
from retrieval.tokenize import analyze
from retrieval.types import Hit, RetrievalResult

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever

# A branch's whole-corpus standing of the card: (its info, chunk positions best first, every chunk's score).
Standing = tuple[dict[str, Any], list[int], np.ndarray]


def _order(retriever: HybridRetriever, scores: np.ndarray, positive_only: bool) -> list[int]:
    """Chunk positions best first, as a branch ranks them: score descending, ties by chunk id."""
    idx = np.flatnonzero(scores > 0) if positive_only else np.arange(len(scores))
    ids = [retriever.chunks[i].chunk_id for i in idx.tolist()]
    order = sorted(range(len(ids)), key=lambda j: (-float(scores[idx[j]]), ids[j]))
    return [int(idx[j]) for j in order]


def hits_at(retriever: HybridRetriever, order: Sequence[int], scores: np.ndarray, n: int) -> tuple[Hit, ...]:
    """The first ``n`` chunk positions of ``order`` as a branch's hits (rank 1-based, with their scores)."""
    chunks = retriever.chunks
    return tuple(
        Hit(chunks[i].chunk_id, chunks[i].parent_id, r, float(scores[i])) for r, i in enumerate(order[:n], start=1)
    )


def _standing(retriever: HybridRetriever, order: Sequence[int], scores: np.ndarray, card_id: str) -> dict[str, Any]:
    """The card's rank (card level) and its best sub-chunk's rank and score in a whole-corpus order."""
    seen: set[str] = set()
    for chunk_rank, i in enumerate(order, start=1):
        parent = retriever.chunks[i].parent_id
        if parent not in seen:
            seen.add(parent)
            if parent == card_id:
                return {
                    "rank": len(seen),
                    "chunk_rank": chunk_rank,
                    "chunk_id": retriever.chunks[i].chunk_id,
                    "score": round(float(scores[i]), 6),
                    "ranked_cards": len({retriever.chunks[j].parent_id for j in order}),
                }
    return {
        "rank": None,
        "chunk_rank": None,
        "chunk_id": None,
        "score": 0.0,
        "ranked_cards": len({retriever.chunks[j].parent_id for j in order}),
    }


def bm25_standing(
    retriever: HybridRetriever, query: str, card_id: str, s: Settings, result: RetrievalResult
) -> Standing:
    """The card in BM25 over the whole corpus at ``s``'s tokenizer: rank, score, the turn's terms it holds and lacks."""
    index = retriever.bm25_index(s.bm25_tokenizer)
    terms = list(dict.fromkeys(index.query_terms(query)))
    scores = index.scores(terms) if not index.empty else np.zeros(len(retriever.chunks))
    order = _order(retriever, scores, positive_only=True)
    info = _standing(retriever, order, scores, card_id)
    held: set[str] = set()
    for chunk in retriever.chunks:
        if chunk.parent_id == card_id:
            held.update(analyze(chunk.indexed_text, s.bm25_tokenizer, chunk.lang))
    info["terms"] = [
        {"term": t, "idf": None if (idf := index.idf(t)) is None else round(idf, 4), "in_card": t in held}
        for t in terms
    ]
    info["contains"] = [t["term"] for t in info["terms"] if t["in_card"]]
    info["lacks"] = [t["term"] for t in info["terms"] if not t["in_card"]]
    info.update(
        tokenizer=s.bm25_tokenizer,
        status=result.bm25.status,
        reason=result.bm25.reason,
        in_list=any(h.parent_id == card_id for h in result.bm25.hits),
    )
    return info, order, scores


def dense_scores(embeddings: np.ndarray, query_vector: np.ndarray | Sequence[float]) -> np.ndarray:
    """Cosine of every sub-chunk with the query (rows are unit length), computed in the vectors' own dtype: the
    matrix is read as it is, never copied (a float64 copy per question was 60 MB at 20,000 sub-chunks); only the
    n scores are widened to float64."""
    q = np.asarray(query_vector, dtype=embeddings.dtype)
    return (embeddings @ q).astype(np.float64)


def dense_standing(retriever: HybridRetriever, query: str, card_id: str, result: RetrievalResult) -> Standing:
    """The card's best sub-chunk by exact cosine over every stored vector (no rank without a dense branch)."""
    store = retriever.dense
    if store is None or retriever.embedder is None:
        info = {
            "rank": None,
            "chunk_rank": None,
            "chunk_id": None,
            "cosine": None,
            "status": result.dense.status,
            "reason": result.dense.reason or retriever.dense_error,
            "in_list": False,
        }
        return info, [], np.zeros(len(retriever.chunks))
    qvec = retriever.embed_query(query).value
    scores = dense_scores(store.embeddings, qvec)
    order = _order(retriever, scores, positive_only=False)
    info = _standing(retriever, order, scores, card_id)
    info["cosine"] = info.pop("score") if info["rank"] is not None else None
    info.update(
        status=result.dense.status,
        reason=result.dense.reason,
        in_list=any(h.parent_id == card_id for h in result.dense.hits),
    )
    return info, order, scores
