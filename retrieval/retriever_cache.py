"""The process-wide retrievers: one per corpus, embedding model and store (``retriever_key``), built once by
``get_retriever``; at most MAX_RETRIEVERS are kept, the least recently used one not in use evicted first."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

from retrieval.dense_build import Progress
from retrieval.encoders import canonical_embedder
from retrieval.pipeline import HybridRetriever
from retrieval.settings import Settings
from retrieval.types import Chunk


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


def forget(corpus_key: str) -> None:
    """Drop every retriever of the corpus ``corpus_key`` (it was deleted): the next turn on that name opens anew."""
    with _RETRIEVERS_LOCK:
        for key in [k for k in _RETRIEVERS if k[0] == corpus_key]:
            _RETRIEVERS.pop(key, None)
