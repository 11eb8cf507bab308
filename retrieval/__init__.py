"""Hybrid retrieval core (ADR-0022): BM25 + dense (Chroma) + Reciprocal Rank Fusion + cross-encoder reranking.

Importing this package is light: torch, sentence-transformers, onnxruntime and chromadb load lazily, inside the
model and store loaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.fusion import reciprocal_rank_fusion
from retrieval.settings import Settings
from retrieval.types import HYBRID_PATHS, RetrievalResult

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever

__all__ = ["HYBRID_PATHS", "RetrievalResult", "Settings", "get_retriever", "reciprocal_rank_fusion"]


def get_retriever(settings: Settings | None = None) -> HybridRetriever:
    """The process-wide ``HybridRetriever`` for these settings (see ``retrieval.retriever_cache.get_retriever``)."""
    from retrieval.retriever_cache import get_retriever as _get

    return _get(settings)
