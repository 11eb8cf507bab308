"""HybridRetriever: branches -> fusion -> rerank -> parent dedup -> top_k -> threshold (ADR-0022).

It decides and reports the degradation level (``full``, ``rrf_only``, ``dense_only``, ``bm25_only``,
``no_match``) as data on the result and as the span attribute ``agent.hybrid_path``. A request never fails
because a model or a branch failed. Branch lists, query embeddings and cross-encoder scores are cached per
turn, so changing rrf_k, weights, top_k, the threshold or a failure toggle re-runs no model.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import shutil
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace

from retrieval import rerank as rerank_mod
from retrieval.bm25 import BM25Index
from retrieval.corpus import DEFAULT_CHUNK_WORDS, load_cards, split_cards
from retrieval.dense import DenseStore, EmbeddingFailed, Progress, chroma_client, forget_client, opening_guard
from retrieval.encoders import BUNDLED_EMBEDDERS, Embedder, canonical_embedder, load_embedder
from retrieval.fusion import convex_fusion, min_max, reciprocal_rank_fusion
from retrieval.parents import best_per_parent
from retrieval.settings import Settings
from retrieval.weighting import choose_weights
from retrieval.types import BranchResult, Chunk, FinalHit, FusedHit, Hit, RerankedHit, RetrievalResult

log = logging.getLogger(__name__)
tracer = trace.get_tracer("retrieval")

MAX_QUERY_CHARS = 2000
REFUSAL = ("I could not find this in the medication cards I have, so I will not guess. "
           "Please ask your pharmacist or care team.")

class _StagePool:
    """A small thread pool per stage (bm25, dense, rerank).

    A backend that hangs (e.g. a Chroma server that stops answering) ties up only its own stage's workers, never
    the other branch; and once every worker has been busy for longer than a new call's budget, that call fails at
    once instead of queueing behind them (it could not start in time anyway).
    """

    def __init__(self, name: str, workers: int = 4) -> None:
        self.name = name
        self.workers = workers
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"retrieval-{name}")
        self._running: dict[object, float] = {}
        self._lock = threading.Lock()

    def submit(self, budget_ms: float, fn: Callable[..., Any], *args: Any) -> cf.Future:
        now = time.perf_counter()
        with self._lock:
            started = list(self._running.values())
        if len(started) >= self.workers and now - max(started) > budget_ms / 1000:
            future: cf.Future = cf.Future()
            future.set_exception(RuntimeError(
                f"all {self.workers} {self.name} workers have been busy for over {budget_ms} ms with earlier calls "
                "(the backend is not answering); skipped"))
            return future

        def run() -> Any:
            token = object()
            with self._lock:
                self._running[token] = time.perf_counter()
            try:
                return fn(*args)
            finally:
                with self._lock:
                    del self._running[token]

        return self._pool.submit(run)


_POOLS = {name: _StagePool(name) for name in ("bm25", "dense", "rerank")}


class QueryError(ValueError):
    """A turn that cannot be searched as typed; the message says what to change."""


def _without_controls(text: str) -> str:
    """Control characters and lone surrogates -> spaces (they are not text, and would not encode as UTF-8)."""
    return "".join(" " if unicodedata.category(ch) in {"Cc", "Cs"} else ch for ch in text)


def clean_query(text: Any) -> str:
    """Normalise a turn (NFC, control characters -> spaces, whitespace collapsed) or raise ``QueryError``."""
    if not isinstance(text, str):
        raise QueryError(f"The turn must be text, got {type(text).__name__}.")
    text = unicodedata.normalize("NFC", text)
    text = " ".join(_without_controls(text).split())
    if not text:
        raise QueryError("The turn is empty: type a question, e.g. 'What does GlucoSense GS-40 error E-07 mean?'.")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"The turn is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
                         "Shorten it to the question you want answered.")
    return text


class _LRU:
    """A small thread-safe LRU cache for per-turn values."""

    def __init__(self, size: int = 4096) -> None:
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class _Stage:
    value: Any = None
    ms: float = 0.0
    cached: bool = False


class HybridRetriever:
    """The retrieval core over one corpus and one embedding model.

    Index-level settings (corpus, embedding model, Chroma location) are fixed at construction; every other
    setting can change per call to ``retrieve``.
    """

    def __init__(self, settings: Settings | None = None, *, chunks: Sequence[Chunk] | None = None,
                 progress: Progress | None = None, cache_size: int = 4096) -> None:
        self.settings = settings or Settings.from_env()
        s = self.settings
        if chunks is None:
            chunks = split_cards(load_cards(s.corpus_path), DEFAULT_CHUNK_WORDS)
        self.chunks: tuple[Chunk, ...] = tuple(chunks)
        self.by_id = {c.chunk_id: c for c in self.chunks}
        started = time.perf_counter()
        self.bm25 = BM25Index(self.chunks, self.settings.bm25_tokenizer)
        self.bm25_build_ms = (time.perf_counter() - started) * 1000
        self._bm25_indexes = {self.bm25.tokenizer: self.bm25}
        self.embedder: Embedder | None = None
        self.dense: DenseStore | None = None
        self.dense_error = ""
        self._progress = progress
        self._dense_lock = threading.Lock()
        self._bm25_lock = threading.Lock()
        self._cache = _LRU(cache_size)  # per-turn values; an evaluation over many turns asks for more
        self._connect_dense()

    # ----------------------------------------------------------------------------------------- dense store
    def _connect_dense(self) -> None:
        s = self.settings
        try:
            self.embedder = self.embedder or load_embedder(s.embedding_model)
        except Exception as exc:
            if canonical_embedder(s.embedding_model) not in BUNDLED_EMBEDDERS:
                # A name that is neither bundled nor loadable is a configuration error, not a runtime fault: the
                # index could never be built, so refuse to start instead of answering bm25_only forever.
                choices = "; ".join(f"{name} (also {', '.join(a for a in aliases if a != name)})"
                                    for name, aliases in BUNDLED_EMBEDDERS.items())
                raise ValueError(f"EMBEDDING_MODEL={s.embedding_model!r} could not be loaded ({exc}). Use a bundled "
                                 f"model: {choices}; or the name or path of a sentence-transformers model that is "
                                 "already on disk.") from exc
            self.dense_error = str(exc)
            log.error("dense branch unavailable: %s", exc)
            return
        try:
            self.dense = self._open_store()
            self.dense_error = ""
        except Exception as exc:
            where = f"Chroma server {s.chroma_host}:{s.chroma_port}" if s.chroma_host else f"Chroma at {s.chroma_path}"
            self.dense_error = f"{where} unavailable ({type(exc).__name__}: {exc})"
            log.error("dense branch unavailable: %s", self.dense_error)

    def _open_store(self) -> DenseStore:
        s = self.settings
        assert self.embedder is not None
        if s.chroma_host:
            return DenseStore(self.chunks, self.embedder, chroma_client(host=s.chroma_host, port=s.chroma_port),
                              progress=self._progress)
        try:
            with opening_guard(s.chroma_path):  # survives a crash inside Chroma on damaged files (see dense.py)
                return DenseStore(self.chunks, self.embedder, chroma_client(path=s.chroma_path),
                                  progress=self._progress)
        except EmbeddingFailed:
            raise  # the corpus or the model is at fault: moving the store aside would not help
        except Exception as exc:
            # A corrupted or half-written store: move it aside (nothing is deleted) and rebuild from the corpus.
            stamp, n = time.strftime('%Y%m%d-%H%M%S'), 0
            while (aside := Path(f"{s.chroma_path}.corrupt-{stamp}{f'-{n}' if n else ''}")).exists():
                n += 1
            log.warning("Chroma store at %s could not be opened (%s: %s); moved it to %s and rebuilding",
                        s.chroma_path, type(exc).__name__, exc, aside)
            forget_client(s.chroma_path)  # chromadb caches one client per path; it would keep the bad files open
            if Path(s.chroma_path).exists():
                shutil.move(s.chroma_path, aside)
            with opening_guard(s.chroma_path):
                return DenseStore(self.chunks, self.embedder, chroma_client(path=s.chroma_path),
                                  progress=self._progress)

    def _ensure_dense(self) -> DenseStore | None:
        if self.dense is None:
            with self._dense_lock:
                if self.dense is None:
                    self._connect_dense()
        return self.dense

    # --------------------------------------------------------------------------------------------- caching
    def _cached(self, key: Hashable, compute: Callable[[], Any]) -> _Stage:
        hit = self._cache.get(key)
        if hit is not None:
            return _Stage(hit, 0.0, True)
        start = time.perf_counter()
        value = compute()
        ms = (time.perf_counter() - start) * 1000
        self._cache.put(key, value)
        return _Stage(value, ms, False)

    def embed_query(self, query: str) -> _Stage:
        if self.embedder is None:
            raise RuntimeError(self.dense_error or "no embedder")
        return self._cached(("qvec", self.embedder.name, query), lambda: self.embedder.embed_query(query))

    # --------------------------------------------------------------------------------------------- branches
    def bm25_index(self, tokenizer: str) -> BM25Index:
        """The BM25 index for a tokenizer (``plain`` or ``snowball``), built on first use (sub-second)."""
        with self._bm25_lock:
            if tokenizer not in self._bm25_indexes:
                self._bm25_indexes[tokenizer] = BM25Index(self.chunks, tokenizer)
            return self._bm25_indexes[tokenizer]

    def _run_bm25(self, query: str, depth: int, tokenizer: str = "plain") -> tuple[list[Hit], dict[str, float]]:
        index = self.bm25_index(tokenizer)
        stage = self._cached(("bm25", tokenizer, query, depth), lambda: index.search(query, depth))
        return stage.value, {"bm25": stage.ms}

    def _run_dense(self, query: str, depth: int) -> tuple[list[Hit], dict[str, float]]:
        store = self._ensure_dense()
        if store is None:
            raise RuntimeError(self.dense_error)
        qvec = self.embed_query(query)
        key = ("dense", store.embedder.name, store.fingerprint, query, depth)
        hit = self._cache.get(key)
        if hit is not None:
            return hit, {"embed_query": qvec.ms, "chroma_query": 0.0}
        start = time.perf_counter()
        hits = store.search(qvec.value, depth)
        ms = (time.perf_counter() - start) * 1000
        self._cache.put(key, hits)
        return hits, {"embed_query": qvec.ms, "chroma_query": ms}

    @staticmethod
    def _collect(name: str, future: cf.Future, budget_ms: int, started: float,
                 timings: dict[str, float]) -> BranchResult:
        remaining = max(0.0, budget_ms / 1000 - (time.perf_counter() - started))
        try:
            hits, stage_ms = future.result(timeout=remaining)
        except cf.TimeoutError:
            return BranchResult(name, status="timeout", reason=f"{name} exceeded its {budget_ms} ms budget",
                                ms=(time.perf_counter() - started) * 1000)
        except Exception as exc:
            return BranchResult(name, status="failed", reason=f"{name} failed: {type(exc).__name__}: {exc}",
                                ms=(time.perf_counter() - started) * 1000)
        timings.update(stage_ms)
        ms = sum(stage_ms.values())
        if not hits and name == "bm25":
            return BranchResult(name, (), status="ok", reason="no chunk shares a term with the turn", ms=ms)
        return BranchResult(name, tuple(hits), status="ok", ms=ms)

    # ---------------------------------------------------------------------------------------------- rerank
    def _rerank(self, query: str, fused: Sequence[FusedHit], s: Settings) -> tuple[list[RerankedHit] | None, str, float]:
        """Cross-encoder scores for the top ``RERANKER_MAX_INPUT`` fused candidates, or (None, why, ms)."""
        if s.simulate_reranker_failure:
            return None, "reranker load failure (simulated)", 0.0
        if s.reranker_max_input == 0:
            return None, "reranker disabled (RERANKER_MAX_INPUT=0)", 0.0
        scorer = rerank_mod.load_reranker(s.reranker_model)
        if scorer is None:
            return None, rerank_mod.load_error(s.reranker_model) or f"reranker {s.reranker_model!r} unavailable", 0.0
        head = list(fused[: s.reranker_max_input])
        started = time.perf_counter()
        deadline = started + s.rerank_timeout_ms / 1000

        def score_all() -> list[float]:
            scores = []
            for hit in head:
                key = ("rerank", scorer.name, query, hit.chunk_id)
                value = self._cache.get(key)
                if value is None:
                    if time.perf_counter() > deadline:
                        raise TimeoutError
                    value = scorer.score(query, self.by_id[hit.chunk_id].indexed_text)
                    if not math.isfinite(value):
                        raise ValueError(f"non-finite score {value!r} for {hit.chunk_id}")
                    self._cache.put(key, value)
                scores.append(value)
            return scores

        future = _POOLS["rerank"].submit(s.rerank_timeout_ms, score_all)
        try:
            scores = future.result(timeout=max(0.0, deadline - time.perf_counter()))
        except (cf.TimeoutError, TimeoutError):
            ms = (time.perf_counter() - started) * 1000
            return None, f"reranker exceeded its {s.rerank_timeout_ms} ms budget", ms
        except Exception as exc:
            ms = (time.perf_counter() - started) * 1000
            return None, f"reranker failed while scoring ({type(exc).__name__}: {exc})", ms
        ms = (time.perf_counter() - started) * 1000
        by_logit = sorted(range(len(head)), key=lambda i: (-scores[i], head[i].rank))
        if s.rerank_mode == "rrf":
            # Protect the fused order from an out-of-domain cross-encoder: fuse its ranking with the fused one.
            cids = [h.chunk_id for h in head]
            blended = dict(reciprocal_rank_fusion(
                {"rerank": [cids[i] for i in by_logit], "fused": cids}, k=s.rrf_k,
                weights={"rerank": s.rerank_weight, "fused": 1.0}))
            order = sorted(range(len(head)), key=lambda i: (-blended[cids[i]], head[i].rank))
            blend = [blended[cids[i]] for i in range(len(head))]
        else:
            order, blend = by_logit, [None] * len(head)
        reranked = [RerankedHit(chunk_id=head[i].chunk_id, parent_id=head[i].parent_id, rank=r, score=scores[i],
                                fused_rank=head[i].rank, blend_score=blend[i]) for r, i in enumerate(order, start=1)]
        return reranked, "", ms

    # ---------------------------------------------------------------------------------------------- public
    def retrieve(self, query: str, settings: Settings | None = None) -> RetrievalResult:
        """Run one turn. Never raises for a bad turn or a failed model: the result says what happened."""
        s = settings or self.settings
        with tracer.start_as_current_span("retrieval.retrieve") as span:
            result = self._retrieve(query, s)
            span.set_attribute("agent.hybrid_path", result.hybrid_path)
            span.set_attribute("retrieval.reason", result.reason)
            span.set_attribute("retrieval.rrf_k", s.rrf_k)
            span.set_attribute("retrieval.weights.bm25", result.weights.get("bm25", 0.0))
            span.set_attribute("retrieval.weights.dense", result.weights.get("dense", 0.0))
            span.set_attribute("retrieval.tokenizer", s.bm25_tokenizer)
            span.set_attribute("retrieval.fusion", s.fusion)
            span.set_attribute("retrieval.rerank_mode", s.rerank_mode)
            span.set_attribute("retrieval.weight_reason", result.weight_reason)
            span.set_attribute("retrieval.final_count", len(result.final))
            return result

    def _retrieve(self, raw_query: Any, s: Settings) -> RetrievalResult:
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        try:
            query = clean_query(raw_query)
        except QueryError as exc:
            empty = BranchResult("bm25", status="skipped", reason=str(exc))
            # Echo the turn without control characters or lone surrogates: the result must encode as UTF-8 JSON.
            return RetrievalResult(query=_without_controls(str(raw_query)[:MAX_QUERY_CHARS]), hybrid_path="no_match", reason=str(exc),
                                   bm25=empty, dense=BranchResult("dense", status="skipped", reason=str(exc)),
                                   fused=(), reranked=(), final=(), cut=(), consensus=(),
                                   timings_ms={"total": 0.0}, settings=s.to_dict())
        depth = s.candidate_depth

        # 1. Branches, concurrently, each within its budget.
        started = time.perf_counter()
        dense_future = _POOLS["dense"].submit(s.dense_timeout_ms, self._run_dense, query, depth)
        if not s.hybrid_enabled:
            bm25 = BranchResult("bm25", status="disabled", reason="hybrid disabled (RETRIEVAL_HYBRID_ENABLED=false)")
        elif s.simulate_empty_bm25 or self.bm25.empty:
            why = "BM25 index is empty (simulated)" if s.simulate_empty_bm25 else "BM25 index is empty"
            bm25 = BranchResult("bm25", status="empty", reason=why)
        else:
            bm25 = self._collect("bm25", _POOLS["bm25"].submit(s.bm25_timeout_ms, self._run_bm25, query, depth,
                                                                  s.bm25_tokenizer),
                                 s.bm25_timeout_ms, started, timings)
        dense = self._collect("dense", dense_future, s.dense_timeout_ms, started, timings)

        # 2. Fusion over the branches that ran (one usable branch fuses to its own order).
        start = time.perf_counter()
        turn_weights = choose_weights(query, s.bm25_weight, s.dense_weight, s.query_weighting)
        weights = turn_weights.as_dict()
        usable = [b for b in (bm25, dense) if b.usable]
        fused = self._fuse(usable, s, weights)
        timings["fusion"] = (time.perf_counter() - start) * 1000
        consensus = tuple(sorted({h.chunk_id for h in bm25.hits} & {h.chunk_id for h in dense.hits}))

        # 3. Level of service and reranking.
        reasons: list[str] = []
        reranked: list[RerankedHit] = []
        if bm25.usable and dense.usable:
            path = "full"
        elif dense.usable:
            path = "dense_only"
            reasons.append(bm25.reason)
        elif bm25.usable:
            path = "bm25_only"
            reasons.append(dense.reason)
        else:
            path = "no_match"
            reasons.append("; ".join(r for r in (bm25.reason, dense.reason) if r) or "no branch ran")
        candidates: list[Hit | FusedHit | RerankedHit] = list(fused)
        if path in {"full", "bm25_only"} and fused:
            ranked, why, ms = self._rerank(query, fused, s)
            timings["rerank"] = ms
            if ranked is None:
                reasons.append(why)
                if path == "full":
                    path = "rrf_only"
            else:
                # The cross-encoder reorders the head it scored; the unscored tail keeps its fused order.
                reranked = ranked
                candidates = [*ranked, *fused[len(ranked):]]

        # 4. Parent dedup -> top_k -> minimum similarity.
        start = time.perf_counter()
        final, cut, threshold_note = self._finalize(query, candidates, s)
        timings["dedup_threshold"] = (time.perf_counter() - start) * 1000
        if threshold_note:
            reasons.append(threshold_note)
        if path != "no_match" and not final:
            path = "no_match"
            reasons.insert(0, "no candidate passed the similarity threshold" if fused else "no candidate found")
        timings["total"] = (time.perf_counter() - t0) * 1000
        reason = _describe(path, reasons)
        return RetrievalResult(query=query, hybrid_path=path, reason=reason, bm25=bm25, dense=dense,
                               fused=tuple(fused), reranked=tuple(reranked), final=tuple(final), cut=tuple(cut),
                               consensus=consensus, timings_ms={k: round(v, 3) for k, v in timings.items()},
                               settings=s.to_dict(), weights=weights, weight_reason=turn_weights.reason,
                               reranker_status="ok" if reranked else (reasons[-1] if path == "rrf_only" else ""))

    def _fuse(self, branches: Sequence[BranchResult], s: Settings, weights: dict[str, float]) -> list[FusedHit]:
        """Fuse the usable branches (one usable branch fuses to its own order) with RRF or convex fusion.

        Each hit keeps its per-branch ranks and weighted contributions, which sum to its fused score.
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
        if s.fusion == "convex":
            total = sum(w.values()) or 1.0
            fused = convex_fusion({b.name: [(h.chunk_id, h.score) for h in b.hits] for b in branches}, w)
            for b in branches:
                for h, norm in zip(b.hits, min_max([h.score for h in b.hits])):
                    contributions.setdefault(h.chunk_id, {})[b.name] = w[b.name] * norm / total
        else:
            fused = reciprocal_rank_fusion({b.name: [h.chunk_id for h in b.hits] for b in branches}, k=s.rrf_k,
                                           weights=w)
            for b in branches:
                for h in b.hits:
                    contributions.setdefault(h.chunk_id, {})[b.name] = w[b.name] / (s.rrf_k + h.rank)
        out = []
        for rank, (cid, score) in enumerate(fused, start=1):
            ranks = {name: position.get(name, {}).get(cid) for name in ("bm25", "dense")}
            parts = {name: contributions[cid].get(name, 0.0) for name in ("bm25", "dense")}
            out.append(FusedHit(chunk_id=cid, parent_id=self.by_id[cid].parent_id, rank=rank, score=score,
                                branch_ranks=ranks, contributions=parts))
        return out

    def _finalize(self, query: str, candidates: Sequence[Hit | FusedHit | RerankedHit],
                  s: Settings) -> tuple[list[FinalHit], list[FinalHit], str]:
        parents = best_per_parent(candidates)
        qvec = None
        note = ""
        if self.dense is not None and self.embedder is not None:
            try:
                qvec = self.embed_query(query).value
            except Exception as exc:  # the embedder failed now: keep results, say the threshold was skipped
                note = f"similarity threshold skipped ({type(exc).__name__}: {exc})"
        else:
            note = "similarity threshold skipped (no embeddings available)"
        final: list[FinalHit] = []
        cut: list[FinalHit] = []
        for position, hit in enumerate(parents, start=1):
            sim = self.dense.similarity(qvec, hit.chunk_id) if qvec is not None and self.dense is not None else None
            if position > s.top_k:
                cut.append(FinalHit(hit.chunk_id, hit.parent_id, 0, hit.score, sim, False,
                                    f"beyond top_k={s.top_k}"))
            elif sim is not None and sim < s.min_similarity:
                cut.append(FinalHit(hit.chunk_id, hit.parent_id, 0, hit.score, sim, False,
                                    f"similarity {sim:.3f} < MIN_SIMILARITY {s.min_similarity:g}"))
            else:
                final.append(FinalHit(hit.chunk_id, hit.parent_id, len(final) + 1, hit.score, sim))
        return final, cut, note


def _describe(path: str, reasons: list[str]) -> str:
    reasons = [r for r in reasons if r]
    lead = {
        "full": "BM25 + dense fused with RRF, then reranked by the cross-encoder",
        "rrf_only": "BM25 + dense fused with RRF; no reranking",
        "dense_only": "dense retrieval only (legacy path)",
        "bm25_only": "BM25 only: the dense branch is unavailable",
        "no_match": "no answer, the assistant refuses",
    }[path]
    return lead + (": " + "; ".join(reasons) if reasons else "")


_RETRIEVERS: dict[tuple, HybridRetriever] = {}
_RETRIEVERS_LOCK = threading.Lock()


def get_retriever(settings: Settings | None = None, progress: Progress | None = None) -> HybridRetriever:
    """The process-wide retriever for these index-level settings (corpus, embedding model, Chroma), built once."""
    s = settings or Settings.from_env()
    key = (str(Path(s.corpus_path).resolve()), canonical_embedder(s.embedding_model), s.chroma_path,
           s.chroma_host, s.chroma_port)
    with _RETRIEVERS_LOCK:
        if key not in _RETRIEVERS:
            _RETRIEVERS[key] = HybridRetriever(s, progress=progress)
        return _RETRIEVERS[key]
