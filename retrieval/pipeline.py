"""HybridRetriever: branches -> fusion -> rerank -> parent dedup -> top_k -> threshold (ADR-0022).

This module is the flow and the levels; each stage lives in its own module (``bm25``, ``dense``, ``fusion``,
``rerank``, ``parents``, ``weighting``), the per-turn cache and the stage pools in ``cache``. It decides and reports
the degradation level (``full``, ``rrf_only``, ``dense_only``, ``bm25_only``, ``no_match``) as data on the result
and as the span attribute ``agent.hybrid_path``. A request never fails because a model or a branch failed.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from opentelemetry import trace

from retrieval import crosslingual, gate_evidence, ood_examples
from retrieval.bm25 import BM25Index
from retrieval.cache import LRU, POOLS, InUse, cached
from retrieval.context import REFUSAL
from retrieval.corpus import DEFAULT_CHUNK_WORDS, load_cards, split_cards
from retrieval.dense import DenseBranch, Progress
from retrieval.encoders import Embedder, canonical_embedder
from retrieval.fusion import fuse_branches
from retrieval.parents import best_per_parent, cosine_cut_skipped, finalize
from retrieval.query import MAX_QUERY_CHARS, QueryError, clean_query, normalised_from, without_controls
from retrieval.refusal import RefusalDecision, needs_multilingual
from retrieval.refusal_evidence import Candidate, gather
from retrieval.refusal_gates import judge, unavailable
from retrieval.refusal_thresholds import OOD_MARGIN_OFF, RefusalThresholds
from retrieval.refusal_vocabulary import Vocabulary
from retrieval.rerank import PRESCORER, load_reranker, rerank
from retrieval.settings import Settings
from retrieval.types import BranchResult, Chunk, FinalHit, FusedHit, Hit, RerankedHit, RetrievalResult
from retrieval.weighting import weigh_turn

__all__ = ["MAX_QUERY_CHARS", "REFUSAL", "HybridRetriever", "QueryError", "clean_query", "get_retriever"]

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
        with _chroma_ahead(s):  # chromadb imports while the models, the cards and BM25 load
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
                _vocabulary_ahead(self)

    dense = property(lambda self: self.dense_branch.store, doc="The Chroma store, or None if unavailable.")
    embedder = property(lambda self: self.dense_branch.embedder, doc="The embedding model, or None.")
    dense_error = property(lambda self: self.dense_branch.error, doc="Why the dense branch is unavailable.")

    def embed_query(self, query: str):
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
        answered, ``prescore`` scores ahead, in the background, the pairs a moved control may need (``_prescore``)."""
        s = settings or self.settings
        with self.using(), tracer.start_as_current_span("retrieval.retrieve") as span, PRESCORER.foreground():
            result = self._retrieve(query, s)
            _record(span, s, result)
        if prescore and result.reranked:
            _prescore(self, result, s)
        return result

    def _retrieve(self, raw_query: Any, s: Settings) -> RetrievalResult:
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        try:
            query = clean_query(raw_query)
        except QueryError as exc:
            return _refused_input(raw_query, str(exc), s)

        # 1. Branches, concurrently, each within its budget.
        bm25, dense = self._branches(query, s, timings)

        # 2. Fusion over the branches that ran (one usable branch fuses to its own order).
        start = time.perf_counter()
        turn_weights = weigh_turn(query, s, bm25, dense, self.bm25_index)
        weights = turn_weights.as_dict()
        fused = fuse_branches(
            [b for b in (bm25, dense) if b.usable], weights, self.parent_of, fusion=s.fusion, k=s.rrf_k
        )
        timings["fusion"] = (time.perf_counter() - start) * 1000
        consensus = tuple(sorted({h.chunk_id for h in bm25.hits} & {h.chunk_id for h in dense.hits}))

        # 3. Level of service, then reranking of the fused head (the unscored tail keeps its fused order).
        path, reasons = _level(bm25, dense)
        reranked: list[RerankedHit] = []
        rerank_why = "the dense-only path does not rerank" if path == "dense_only" else ""
        candidates: list[Hit | FusedHit | RerankedHit] = list(fused)
        if path in {"full", "bm25_only"} and fused:
            ranked, why, timings["rerank"] = rerank(query, fused, s, lambda cid: self.by_id[cid].indexed_text)
            if ranked is None:
                reasons.append(why)
                rerank_why = why
                path = "rrf_only" if path == "full" else path
            else:
                reranked = ranked
                candidates = [*ranked, *fused[len(ranked) :]]

        # 4. The refusal rule, then parent dedup -> top_k -> minimum similarity; nothing left is a refusal.
        start = time.perf_counter()
        similarity, threshold_note = self.dense_branch.similarity_to(query, self._cache)
        decision = None
        if s.refusal_rule == "evidence" and path != "no_match" and candidates:
            began = time.perf_counter()
            missing = {"cross-encoder": rerank_why, "cosine": threshold_note}
            decision = _refusal(self, query, path, candidates, reranked, bm25, dense, similarity, missing, s)
            timings["refusal"] = (time.perf_counter() - began) * 1000
        final, cut, note = _final_cards(decision, candidates, similarity, s)
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

    def _branches(self, query: str, s: Settings, timings: dict[str, float]) -> tuple[BranchResult, BranchResult]:
        """Run BM25 and dense concurrently on their stage pools; each result says whether it ran, and why not."""
        depth = s.candidate_depth
        started = time.perf_counter()
        known = self.dense_branch.search_cached(query, depth, self._cache)  # cached: no thread hand-off
        dense_future = (
            _done(known)
            if known is not None
            else POOLS["dense"].submit(s.dense_timeout_ms, self.dense_branch.search, query, depth, self._cache)
        )
        if not s.hybrid_enabled:
            bm25 = BranchResult("bm25", status="disabled", reason="hybrid disabled (RETRIEVAL_HYBRID_ENABLED=false)")
        elif s.simulate_empty_bm25 or self.bm25.empty:
            why = "BM25 index is empty (simulated)" if s.simulate_empty_bm25 else "BM25 index is empty"
            bm25 = BranchResult("bm25", status="empty", reason=why)
        else:
            hits = self._cache.get(("bm25", s.bm25_tokenizer, query, depth))
            future = (
                _done((hits, {"bm25": 0.0}))
                if hits is not None
                else POOLS["bm25"].submit(s.bm25_timeout_ms, self._search_bm25, query, depth, s.bm25_tokenizer)
            )
            bm25 = _collect("bm25", future, s.bm25_timeout_ms, started, timings)
        dense = _collect("dense", dense_future, s.dense_timeout_ms, started, timings)
        return bm25, dense

    def _search_bm25(self, query: str, depth: int, tokenizer: str) -> tuple[list[Hit], dict[str, float]]:
        index = self.bm25_index(tokenizer)
        stage = cached(self._cache, ("bm25", tokenizer, query, depth), lambda: index.search(query, depth))
        return stage.value, {"bm25": stage.ms}


PRESCORE_MAX = 24  # pairs scored ahead per turn, at most


def _prescore(retriever: HybridRetriever, result: RetrievalResult, s: Settings) -> None:
    """Ask the background pre-scorer (``retrieval.rerank.Prescorer``: it only fills the pair-score cache, and
    pauses while any turn is being answered) for the pairs of ``likely_entrants``."""
    scorer = load_reranker(s.reranker_model)
    if scorer is not None:
        entrants = likely_entrants(result, s, retriever.parent_of)
        PRESCORER.request(scorer, result.query, [retriever.by_id[cid].indexed_text for cid in entrants])


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


def _done(value: Any) -> cf.Future:
    """A branch answered from the per-turn cache (a moved control that changes no branch list), as a finished
    future: no thread hand-off, which costs a time slice when the cores are shared."""
    future: cf.Future = cf.Future()
    future.set_result(value)
    return future


def _collect(name: str, future: cf.Future, budget_ms: int, started: float, timings: dict[str, float]) -> BranchResult:
    """A branch's result from its future, or why it has none (timeout, failure). A branch that finished after its
    budget timed out even when the caller looked only later (it waited for the other branch first)."""

    def timeout(at: float) -> BranchResult:
        return BranchResult(
            name, status="timeout", reason=f"{name} exceeded its {budget_ms} ms budget", ms=(at - started) * 1000
        )

    remaining = max(0.0, budget_ms / 1000 - (time.perf_counter() - started))
    try:
        hits, stage_ms = future.result(timeout=remaining)
    except cf.TimeoutError:
        return timeout(time.perf_counter())
    except Exception as exc:
        return BranchResult(
            name,
            status="failed",
            reason=f"{name} failed: {type(exc).__name__}: {exc}",
            ms=(time.perf_counter() - started) * 1000,
        )
    done_at = getattr(future, "done_at", None)
    if done_at is not None and done_at - started > budget_ms / 1000:
        return timeout(done_at)
    timings.update(stage_ms)
    ms = sum(stage_ms.values())
    if not hits and name == "bm25":
        return BranchResult(name, (), status="ok", reason="no chunk shares a term with the turn", ms=ms)
    return BranchResult(name, tuple(hits), status="ok", ms=ms)


def _level(bm25: BranchResult, dense: BranchResult) -> tuple[str, list[str]]:
    """The level the branches allow before reranking, and why it is below ``full``."""
    if bm25.usable and dense.usable:
        return "full", []
    if dense.usable:
        return "dense_only", [bm25.reason]
    if bm25.usable:
        return "bm25_only", [dense.reason]
    return "no_match", ["; ".join(r for r in (bm25.reason, dense.reason) if r) or "no branch ran"]


def _refusal(
    retriever: HybridRetriever,
    query: str,
    path: str,
    candidates: Sequence[Hit | FusedHit | RerankedHit],
    reranked: Sequence[RerankedHit],
    bm25: BranchResult,
    dense: BranchResult,
    similarity: Callable[[str], float] | None,
    missing: dict[str, str],
    s: Settings,
) -> RefusalDecision:
    """The refusal rule (``retrieval.refusal``) on the top_k cards before the cosine cut, with every branch's
    evidence; ``missing`` says why the cross-encoder or the cosine is unavailable."""
    logits = {h.chunk_id: h.score for h in reranked}
    cards = [
        Candidate(
            h.parent_id,
            h.chunk_id,
            retriever.by_id[h.chunk_id].indexed_text,
            similarity(h.chunk_id) if similarity is not None else None,
            logits.get(h.chunk_id),
        )
        for h in best_per_parent(candidates)[: s.top_k]
    ]
    both = bm25.usable and dense.usable
    # the corpus's stored refusal calibration, when retrieval.corpora (or a test) set one on the retriever
    thresholds = thresholds_for(getattr(retriever, "calibration", None), s)
    ood = None
    if thresholds.max_ood_margin < OOD_MARGIN_OFF and dense.usable and dense.hits and retriever.embedder is not None:
        near = ood_examples.nearest(
            retriever.embedder,
            retriever.embed_query(query).value,
            query,
            getattr(retriever, "ood_covered", frozenset()),
        )
        ood = (near[0], near[1], dense.hits[0].score) if near else None
    evidence = gather(
        query,
        path,
        cards,
        retriever.refusal_vocabulary(),
        [h.parent_id for h in bm25.hits] if both else None,
        [h.parent_id for h in dense.hits] if both else None,
        {name: why for name, why in missing.items() if why},
        ood=ood,
    )
    if cards and needs_multilingual(evidence, thresholds):  # another language, a low score: ask e5 (only then)
        try:
            evidence = replace(evidence, multilingual_cosine=crosslingual.cosine(query, cards[0].text))
        except Exception as exc:  # the wheel missing or the model failing: the English cosine judges instead
            evidence = replace(
                evidence, missing={**evidence.missing, "multilingual cosine": f"{type(exc).__name__}: {exc}"}
            )
    evidence, absent = gate_evidence.fill(evidence, thresholds, query, [c.text for c in cards], s)
    decision = judge(evidence, thresholds)
    for what, why in absent:
        decision = unavailable(decision, what, why)
    return decision


def thresholds_for(calibration: Any, s: Settings) -> RefusalThresholds:
    """The corpus's calibrated thresholds when it has them for these models and ``REFUSAL_CALIBRATION`` is on,
    else the settings' (``refusal_thresholds``)."""
    if (
        s.refusal_calibration
        and calibration is not None
        and calibration.report.get("embedder") == s.embedding_model
        and calibration.report.get("reranker") == s.reranker_model
    ):
        if calibration.report.get("refusal_model") != s.refusal_model:  # chosen for another answerability model
            return replace(calibration.thresholds, min_answerability=s.refusal_min_answerability)
        return calibration.thresholds
    return refusal_thresholds(s)


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


def refusal_thresholds(s: Settings) -> RefusalThresholds:
    """The refusal rule's thresholds from the settings: the cosine ones are MIN_SIMILARITY plus a margin, so they
    follow the embedding model's cosine scale."""
    return RefusalThresholds(
        min_cross_encoder=s.refusal_min_cross_encoder,
        min_rescue_cosine=round(s.min_similarity + s.refusal_rescue_margin, 6),
        min_fallback_cosine=round(s.min_similarity + s.refusal_fallback_margin, 6),
        min_dense_only_cosine=round(s.min_similarity + s.refusal_fallback_margin, 6),
        check_identifiers=s.refusal_unknown_codes,
        min_cross_encoder_foreign=s.refusal_min_cross_encoder_foreign,
        max_unexplained_words=s.refusal_max_unexplained_words,
        min_cross_encoder_unexplained=s.refusal_min_cross_encoder_unexplained,
        min_multilingual_cosine=s.refusal_min_multilingual_cosine,
        max_ood_margin=s.refusal_max_ood_margin,
        min_multilingual_z=s.refusal_min_multilingual_z,
        min_answerability=s.refusal_min_answerability,
    )


NO_CUT_ACROSS_LANGUAGES = (
    "MIN_SIMILARITY not applied: the turn is in another language than most cards, which "
    "{model}'s cosine does not compare (the refusal rule judged it)"
)


@contextlib.contextmanager
def _chroma_ahead(s: Settings) -> Iterator[None]:
    """Import chromadb on a side thread while this one loads the cross-encoder (once per process: here rather than
    in the first turn), then runs the block (the cards, BM25, the embedder, the store). The import is
    ~0.6 s of Python (most of a cold start's 1 s, issue 20) and the model sessions are native work that runs
    without the GIL, so the two overlap on two cores (README "Speed"). The dense branch imports chromadb itself
    when it opens the store: Python's import lock makes it wait for this import, never run it twice; the block's
    end waits for it too, whatever happened. onnxruntime and tokenizers are imported first, here, so the two
    threads never import the same module."""
    if "chromadb" in sys.modules:  # nothing to overlap: the cross-encoder loads in the first turn, as it did
        yield
        return
    import onnxruntime  # noqa: F401  (see the docstring)
    import tokenizers  # noqa: F401

    def warm() -> None:
        try:
            import chromadb  # noqa: F401
        except Exception:  # not installed or broken: the dense branch says so when it imports it
            pass

    thread = threading.Thread(target=warm, name="import-chromadb", daemon=True)
    thread.start()
    try:
        if s.hybrid_enabled and not s.simulate_reranker_failure:
            load_reranker(s.reranker_model)
        yield
    finally:
        thread.join()


def _vocabulary_ahead(retriever: HybridRetriever) -> None:
    """The refusal rule's vocabulary, made on a side thread while the first turn's models run (~25 ms of a cold
    start). Python only: a daemon thread still inside onnxruntime when the interpreter exits aborts the process
    ("terminate called without an active exception": seen when the out-of-domain examples' check embedding ran here
    and a one-turn ``eval`` exited)."""
    threading.Thread(target=retriever.refusal_vocabulary, name="refusal-vocabulary", daemon=True).start()


def _final_cards(
    decision: RefusalDecision | None,
    candidates: Sequence[Hit | FusedHit | RerankedHit],
    similarity: Callable[[str], float] | None,
    s: Settings,
) -> tuple[list[FinalHit], list[FinalHit], str]:
    """Parent dedup -> top_k -> the MIN_SIMILARITY cut, then what the refusal rule's decision leaves of it (nothing
    when refused: each cut card says why), and a note for the level's reason. For a turn the rule answered across
    languages (a Spanish turn about English cards, or the reverse) with an English embedder, the cut is not applied:
    it would cut the cards for their language, not their content."""
    across = similarity is not None and cosine_cut_skipped(decision, s)
    final, cut = finalize(candidates, s.top_k, s.min_similarity, similarity, cut_below=not across)
    if decision is not None and decision.refused:
        return [], [replace(h, rank=0, kept=False, cut_reason=f"refused: {decision.reason}") for h in final] + cut, ""
    return final, cut, NO_CUT_ACROSS_LANGUAGES.format(model=s.embedding_model) if across else ""


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


# ------------------------------------------------------------------------------------------ process-wide
def _max_retrievers(env: Mapping[str, str] = os.environ) -> int:
    raw = (env.get("MAX_RETRIEVERS") or "").strip()
    if not raw:
        return 8
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"MAX_RETRIEVERS={raw!r}: give a whole number of retrievers kept in memory, 1 or more.")
    return int(raw)


# At most MAX_RETRIEVERS retrievers (one per corpus, model and store; each holds its sub-chunks, BM25 indexes and a
# per-turn cache) are kept, least recently used evicted first, never one in use; an evicted one reopens from its store.
MAX_RETRIEVERS = _max_retrievers()
_RETRIEVERS: OrderedDict[tuple, HybridRetriever] = OrderedDict()
_BUILDING: dict[tuple, threading.Lock] = {}
_RETRIEVERS_LOCK = threading.Lock()


def _evict() -> None:
    """Drop the least recently used retrievers not in use until at most ``MAX_RETRIEVERS`` are kept (lock held)."""
    over = len(_RETRIEVERS) - MAX_RETRIEVERS
    for key in list(_RETRIEVERS):
        if over <= 0:
            break
        if not _RETRIEVERS[key].using.active:
            del _RETRIEVERS[key]
            over -= 1


def retriever_key(s: Settings, corpus_key: str | None = None) -> tuple:
    """What identifies a retriever: the corpus (``CORPUS_PATH``, or a registry corpus's ``corpus_key``), the
    embedding model and the Chroma location."""
    return (
        corpus_key or str(Path(s.corpus_path).resolve()),
        canonical_embedder(s.embedding_model),
        s.chroma_path,
        s.chroma_host,
        s.chroma_port,
    )


def has_retriever(settings: Settings, corpus_key: str | None = None) -> bool:
    """True if the retriever for these index-level settings (and corpus) is already built in this process."""
    with _RETRIEVERS_LOCK:
        return retriever_key(settings, corpus_key) in _RETRIEVERS


def cached_retriever(settings: Settings, corpus_key: str | None = None) -> HybridRetriever | None:
    """The retriever for these index-level settings (and corpus) if this process has built it, else None."""
    with _RETRIEVERS_LOCK:
        return _RETRIEVERS.get(retriever_key(settings, corpus_key))


def get_retriever(
    settings: Settings | None = None,
    progress: Progress | None = None,
    *,
    chunks: Sequence[Chunk] | None = None,
    corpus_key: str | None = None,
    cancel: threading.Event | None = None,
    attach: str | None = None,
) -> HybridRetriever:
    """The process-wide retriever for these index-level settings, built once per key.

    ``chunks`` with ``corpus_key`` (its identity, e.g. ``corpus:<fingerprint>``; see ``retrieval.corpora``) replace
    the cards at ``CORPUS_PATH``; ``attach`` names a Chroma collection made elsewhere that holds their vectors
    (opened and checked, never written); ``cancel`` stops a build between sub-chunks (``IndexingCancelled``; nothing is
    cached and the next build resumes). The build (which may embed a whole corpus) holds only its own key's lock:
    callers for the same key wait for it, callers for other keys go on.
    """
    s = settings or Settings.from_env()
    if (chunks is None) != (corpus_key is None):
        raise ValueError("get_retriever: give both chunks and corpus_key (a corpus and its identity), or neither.")
    key = retriever_key(s, corpus_key)
    with _RETRIEVERS_LOCK:
        if key in _RETRIEVERS:
            _RETRIEVERS.move_to_end(key)
            return _RETRIEVERS[key]
        building = _BUILDING.setdefault(key, threading.Lock())
    with building:
        with _RETRIEVERS_LOCK:
            if key in _RETRIEVERS:
                _RETRIEVERS.move_to_end(key)
                return _RETRIEVERS[key]
        retriever = HybridRetriever(s, chunks=chunks, progress=progress, cancel=cancel, attach=attach)
        # a corpus's build starts or resumes in its indexing job only: a turn reconnects to a complete store
        retriever.dense_branch.resume_in_turn = corpus_key is None
        with _RETRIEVERS_LOCK:
            _RETRIEVERS[key] = retriever
            _BUILDING.pop(key, None)
            _evict()
        return retriever
