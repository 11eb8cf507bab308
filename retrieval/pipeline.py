"""HybridRetriever: branches -> fusion -> rerank -> parent dedup -> top_k -> threshold (ADR-0022).

This module is the flow and the levels; each stage lives in its own module (``branches`` runs ``bm25`` and
``dense``; ``fusion``, ``rerank``, ``refusal_turn``, ``parents``, ``weighting``), the per-turn cache and the stage
pools in ``cache``, the process-wide retrievers in ``retriever_cache``. It decides and reports the degradation level
(``full``, ``rrf_only``, ``dense_only``, ``bm25_only``, ``no_match``) as data on the result and as the span
attribute ``agent.hybrid_path``. A request never fails because a model or a branch failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace

from retrieval.bm25 import BM25Index
from retrieval.branches import run_branches
from retrieval.cache import LRU, InUse, Stage
from retrieval.corpus import DEFAULT_CHUNK_WORDS, load_cards, split_cards
from retrieval.dense import DenseBranch
from retrieval.dense_build import Progress
from retrieval.encoders import Embedder
from retrieval.entrants import prescore as prescore_ahead
from retrieval.fusion import fuse_branches
from retrieval.query import MAX_QUERY_CHARS, QueryError, clean_query, normalised_from, without_controls
from retrieval.refusal_turn import final_cards, refusal_decision
from retrieval.refusal_vocabulary import Vocabulary
from retrieval.rerank import PRESCORER, rerank
from retrieval.settings import Settings
from retrieval.types import BranchResult, Chunk, FusedHit, Hit, HybridPath, RerankedHit, RetrievalResult
from retrieval.warm_start import chroma_ahead, vocabulary_ahead
from retrieval.weighting import weigh_turn

__all__ = ["LEADS", "HybridRetriever"]

log = logging.getLogger(__name__)
tracer = trace.get_tracer("retrieval")

LEADS = {
    "full": "BM25 + dense fused with RRF, then reranked by the cross-encoder",
    "rrf_only": "BM25 + dense fused with RRF; no reranking",
    "dense_only": "dense retrieval only (legacy path)",
    "bm25_only": "BM25 only: the dense branch is unavailable",
    "no_match": "no answer, the assistant refuses",
}


class HybridRetriever:
    """The retrieval core over one corpus and one embedding model.

    Index-level settings (corpus, embedding model, Chroma location) are fixed at construction; every other
    setting can change per call to ``retrieve``. ``embedder`` replaces the one ``EMBEDDING_MODEL`` names (e.g. a
    memoising wrapper in the benchmark).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        chunks: Sequence[Chunk] | None = None,
        progress: Progress | None = None,
        cache_size: int = 4096,
        embedder: Embedder | None = None,
        cancel: threading.Event | None = None,
        attach: str | None = None,
    ) -> None:
        self.settings = s = settings or Settings.from_env()
        with chroma_ahead(s):  # chromadb imports while the models, the cards and BM25 load
            if chunks is None:
                chunks = split_cards(load_cards(s.corpus_path), DEFAULT_CHUNK_WORDS)
            self.chunks: tuple[Chunk, ...] = tuple(chunks)
            self.by_id = {c.chunk_id: c for c in self.chunks}
            self.parent_of = {c.chunk_id: c.parent_id for c in self.chunks}
            started = time.perf_counter()
            self.bm25 = BM25Index(self.chunks, s.bm25_tokenizer)
            self.bm25_build_ms = (time.perf_counter() - started) * 1000
            self._bm25_indexes, self._bm25_lock = {self.bm25.tokenizer: self.bm25}, threading.Lock()
            self._vocabulary: Vocabulary | None = None  # the refusal rule's, built on first use
            self._cache, self.using = LRU(cache_size), InUse()  # per-turn values; in use: get_retriever never evicts it
            self.dense_branch = DenseBranch(
                self.chunks, s, embedder=embedder, progress=progress, cancel=cancel, attach=attach
            )
            if s.refusal_rule == "evidence":
                vocabulary_ahead(self.refusal_vocabulary)

    dense = property(lambda self: self.dense_branch.store, doc="The Chroma store, or None if unavailable.")
    embedder = property(lambda self: self.dense_branch.embedder, doc="The embedding model, or None.")
    dense_error = property(lambda self: self.dense_branch.error, doc="Why the dense branch is unavailable.")

    def embed_query(self, query: str) -> Stage:
        return self.dense_branch.embed_query(query, self._cache)

    def bm25_index(self, tokenizer: str) -> BM25Index:
        """The BM25 index for a tokenizer (``plain`` or ``snowball``), built on first use."""
        with self._bm25_lock:
            if tokenizer not in self._bm25_indexes:
                self._bm25_indexes[tokenizer] = BM25Index(self.chunks, tokenizer)
            return self._bm25_indexes[tokenizer]

    def refusal_vocabulary(self) -> Vocabulary:
        """The words and identifiers of the chunk texts, for the refusal rule's vocabulary tests (built once)."""
        with self._bm25_lock:
            if self._vocabulary is None:
                self._vocabulary = Vocabulary.from_texts(c.indexed_text for c in self.chunks)
            return self._vocabulary

    # ---------------------------------------------------------------------------------------------- public
    def retrieve(self, query: str, settings: Settings | None = None, *, prescore: bool = True) -> RetrievalResult:
        """Run one turn. Never raises for a bad turn or a failed model: the result says what happened. Once it is
        answered, ``prescore`` scores ahead, in the background, the pairs a moved control may need (``entrants``)."""
        s = settings or self.settings
        with self.using(), tracer.start_as_current_span("retrieval.retrieve") as span, PRESCORER.foreground():
            result = _answer(self, query, s)
            _record(span, s, result)
        if prescore and result.reranked:
            prescore_ahead(result, s, self.parent_of, self.by_id)
        return result


def _answer(retriever: HybridRetriever, raw_query: Any, s: Settings) -> RetrievalResult:
    """One turn, top to bottom: the branches, fusion, the level and the reranked head, the refusal rule and the
    final cards; a turn that cannot be searched is refused as it is."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    try:
        query = clean_query(raw_query)
    except QueryError as exc:
        return _refused_input(raw_query, str(exc), s)

    # 1. Branches, concurrently, each within its budget.
    bm25, dense = run_branches(
        query, s, retriever.dense_branch, retriever.bm25.empty, retriever.bm25_index, retriever._cache, timings
    )

    # 2. Fusion over the branches that ran (one usable branch fuses to its own order).
    start = time.perf_counter()
    turn_weights = weigh_turn(query, s, bm25, dense, retriever.bm25_index)
    weights = turn_weights.as_dict()
    fused = fuse_branches(
        [b for b in (bm25, dense) if b.usable], weights, retriever.parent_of, fusion=s.fusion, k=s.rrf_k
    )
    timings["fusion"] = (time.perf_counter() - start) * 1000
    consensus = tuple(sorted({h.chunk_id for h in bm25.hits} & {h.chunk_id for h in dense.hits}))

    # 3. Level of service, then reranking of the fused head (the unscored tail keeps its fused order).
    path, reasons = _level(bm25, dense)
    reranked: list[RerankedHit] = []
    rerank_why = "the dense-only path does not rerank" if path == "dense_only" else ""
    candidates: list[Hit | FusedHit | RerankedHit] = list(fused)
    if path in {"full", "bm25_only"} and fused:
        ranked, why, timings["rerank"] = rerank(query, fused, s, lambda cid: retriever.by_id[cid].indexed_text)
        if ranked is None:
            reasons.append(why)
            rerank_why = why
            path = "rrf_only" if path == "full" else path
        else:
            reranked = ranked
            candidates = [*ranked, *fused[len(ranked) :]]

    # 4. The refusal rule, then parent dedup -> top_k -> minimum similarity; nothing left is a refusal.
    start = time.perf_counter()
    similarity, threshold_note = retriever.dense_branch.similarity_to(query, retriever._cache)
    decision = None
    if s.refusal_rule == "evidence" and path != "no_match" and candidates:
        began = time.perf_counter()
        missing = {"cross-encoder": rerank_why, "cosine": threshold_note}
        decision = refusal_decision(retriever, query, path, candidates, reranked, bm25, dense, similarity, missing, s)
        timings["refusal"] = (time.perf_counter() - began) * 1000
    final, cut, note = final_cards(decision, candidates, similarity, s)
    timings["dedup_threshold"] = (time.perf_counter() - start) * 1000 - timings.get("refusal", 0.0)
    reasons.append(note)
    if threshold_note:
        reasons.append(threshold_note)
    if path != "no_match" and not final:
        path = "no_match"
        if decision is not None and decision.refused:
            reasons.insert(0, f"refused by the evidence rule: {decision.reason}")
        else:
            reasons.insert(0, "no candidate passed the similarity threshold" if fused else "no candidate found")
    timings["total"] = (time.perf_counter() - t0) * 1000
    return RetrievalResult(
        query=query,
        hybrid_path=path,
        reason=_describe(path, reasons),
        bm25=bm25,
        dense=dense,
        fused=tuple(fused),
        reranked=tuple(reranked),
        final=tuple(final),
        cut=tuple(cut),
        consensus=consensus,
        timings_ms={k: round(v, 3) for k, v in timings.items()},
        settings=s.to_dict(),
        weights=weights,
        weight_reason=turn_weights.reason,
        weight_evidence=turn_weights.evidence,
        typed_query=normalised_from(raw_query, query),
        reranker_status="ok" if reranked else (reasons[-1] if path == "rrf_only" else ""),
        refusal=decision,
    )


def _level(bm25: BranchResult, dense: BranchResult) -> tuple[HybridPath, list[str]]:
    """The level the branches allow before reranking, and why it is below ``full``."""
    if bm25.usable and dense.usable:
        return "full", []
    if dense.usable:
        return "dense_only", [bm25.reason]
    if bm25.usable:
        return "bm25_only", [dense.reason]
    return "no_match", ["; ".join(r for r in (bm25.reason, dense.reason) if r) or "no branch ran"]


def _describe(path: str, reasons: list[str]) -> str:
    reasons = [r for r in reasons if r]
    return LEADS[path] + (": " + "; ".join(reasons) if reasons else "")


def _refused_input(raw_query: Any, why: str, s: Settings) -> RetrievalResult:
    """A turn that cannot be searched: refused, with the reason on both branches. The turn is echoed without
    control characters or lone surrogates (the result must encode as UTF-8 JSON)."""
    return RetrievalResult(
        query=without_controls(str(raw_query)[:MAX_QUERY_CHARS]),
        hybrid_path="no_match",
        reason=why,
        bm25=BranchResult("bm25", status="skipped", reason=why),
        dense=BranchResult("dense", status="skipped", reason=why),
        fused=(),
        reranked=(),
        final=(),
        cut=(),
        consensus=(),
        timings_ms={"total": 0.0},
        settings=s.to_dict(),
    )


def _record(span: Any, s: Settings, result: RetrievalResult) -> None:
    """The turn on its OpenTelemetry span: the level (``agent.hybrid_path``), why, and the knobs that decided it."""
    for name, value in (
        ("agent.hybrid_path", result.hybrid_path),
        ("retrieval.reason", result.reason),
        ("retrieval.rrf_k", s.rrf_k),
        ("retrieval.weights.bm25", result.weights.get("bm25", 0.0)),
        ("retrieval.weights.dense", result.weights.get("dense", 0.0)),
        ("retrieval.tokenizer", s.bm25_tokenizer),
        ("retrieval.fusion", s.fusion),
        ("retrieval.rerank_mode", s.rerank_mode),
        ("retrieval.weight_reason", result.weight_reason),
        ("retrieval.final_count", len(result.final)),
        ("retrieval.refusal_reason", result.refusal.reason if result.refusal else ""),
    ):
        span.set_attribute(name, value)
