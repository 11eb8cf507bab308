"""The dense branch: ``open_store`` (a corpus's store on a Chroma server or embedded, a damaged embedded store moved
aside and rebuilt) and ``DenseBranch`` (the embedder, the store's reconnects and the cached searches of a turn)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from functools import partial

from retrieval.cache import LRU, Stage, cached
from retrieval.chroma_store import (
    StorePathError,
    check_store_path,
    chroma_client,
    forget_client,
    move_store_aside,
    opening_guard,
)
from retrieval.dense_build import EmbeddingFailed, IndexingCancelled, Progress
from retrieval.dense_rows import stored_rows
from retrieval.dense_store import AttachMismatch, DenseStore
from retrieval.encoders import BUNDLED_EMBEDDERS, Embedder, canonical_embedder, load_embedder
from retrieval.settings import Settings
from retrieval.types import Chunk, Hit

log = logging.getLogger(__name__)


def open_store(
    chunks: Sequence[Chunk],
    embedder: Embedder,
    *,
    chroma_path: str,
    chroma_host: str | None = None,
    chroma_port: int = 8000,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    attach: str | None = None,
) -> DenseStore:
    """The dense store for ``chunks`` on a Chroma server (``chroma_host``) or embedded at ``chroma_path``.

    An embedded store that cannot be opened (corrupted or half-written files) has its own files (database and
    segment folders) moved aside, nothing deleted, and is rebuilt from the corpus; other stores in the same folder
    (``beir-*``) stay. A failing embedder is re-raised as it is (moving the store would not help), and so is a
    cancel (``IndexingCancelled``: what was stored is kept for the next open to resume).

    Raises:
        StorePathError: ``chroma_path`` is a file, or a folder of things that are not a Chroma store.
    """
    if chroma_host:
        return DenseStore(
            chunks,
            embedder,
            chroma_client(host=chroma_host, port=chroma_port),
            progress=progress,
            cancel=cancel,
            attach=attach,
        )
    if attach:  # a collection made elsewhere: opened as it is, never moved aside or rebuilt
        return DenseStore(chunks, embedder, chroma_client(path=chroma_path), attach=attach)
    check_store_path(chroma_path)  # a configuration error: never "recovered" by moving the user's files
    try:
        with opening_guard(chroma_path):  # survives a crash inside Chroma on damaged files
            return DenseStore(chunks, embedder, chroma_client(path=chroma_path), progress=progress, cancel=cancel)
    except (EmbeddingFailed, IndexingCancelled, StorePathError):
        raise
    except Exception as exc:
        forget_client(chroma_path)  # chromadb caches one client per path; it would keep the bad files open
        aside, moved, kept = move_store_aside(chroma_path)
        log.warning(
            "Chroma store at %s could not be opened (%s: %s); moved its files (%s) to %s and rebuilding%s",
            chroma_path,
            type(exc).__name__,
            exc,
            ", ".join(moved) or "none",
            aside,
            f"; left in place: {', '.join(kept)}" if kept else "",
        )
        with opening_guard(chroma_path):
            return DenseStore(chunks, embedder, chroma_client(path=chroma_path), progress=progress, cancel=cancel)


class DenseBranch:
    """The dense branch of one retriever: its embedder, its store's lifecycle (open, recover, reconnect) and its
    cached searches. A store that is unavailable leaves ``store`` None and says why in ``error``; the next turn
    tries to connect again.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        attach: str | None = None,
    ) -> None:
        self.chunks = chunks
        self.attach = attach
        self._cancel = cancel
        self.settings = settings
        self.embedder = embedder
        self.store: DenseStore | None = None
        self.error = ""
        self._progress = progress
        self._lock = threading.Lock()
        self.resume_in_turn = True  # False (a corpus of the Data tab): a turn never embeds, see ``ensure``
        self.connect()

    def connect(self) -> None:
        """Load the embedder (a name that can never load is a configuration error) and open the store."""
        s = self.settings
        try:
            self.embedder = self.embedder or load_embedder(s.embedding_model)
        except Exception as exc:
            if canonical_embedder(s.embedding_model) not in BUNDLED_EMBEDDERS:
                # Neither bundled nor loadable: the index could never be built, so refuse to start instead of
                # answering bm25_only forever.
                raise _unloadable(s.embedding_model, exc) from exc
            self.error = str(exc)
            log.error("dense branch unavailable: %s", exc)
            return
        try:
            self.store = open_store(
                self.chunks,
                self.embedder,
                chroma_path=s.chroma_path,
                chroma_host=s.chroma_host,
                chroma_port=s.chroma_port,
                progress=self._progress,
                cancel=self._cancel,
                attach=self.attach,
            )
            self.error = ""
        except (IndexingCancelled, StorePathError, AttachMismatch):
            raise  # the caller asked to stop, or CHROMA_PATH is wrong: no retriever is built
        except Exception as exc:
            self.error = f"{_where(s)} unavailable ({type(exc).__name__}: {exc})"
            log.error("dense branch unavailable: %s", self.error)

    def ensure(self) -> DenseStore | None:
        """The store, reconnecting first if an earlier attempt failed. Without ``resume_in_turn`` a reconnect opens
        only a complete collection: one the store kept half-written (it went away mid-build) is left to the Data tab
        or the CLI to resume, and the turn answers without the dense branch, saying so."""
        if self.store is None:
            with self._lock:
                if self.store is None and (self.resume_in_turn or self._complete()):
                    self.connect()
        return self.store

    def _complete(self) -> bool:
        from retrieval.dense_complete import complete_or_why

        s = self.settings
        where = f"the {_where(s)}" if s.chroma_host else _where(s)
        client = partial(chroma_client, host=s.chroma_host, port=s.chroma_port, path=s.chroma_path)
        why = complete_or_why(self.chunks, self.embedder, client, len(stored_rows(self.chunks)), where, self.attach)
        if why:
            self.error = why
        return not why

    def embed_query(self, query: str, cache: LRU) -> Stage:
        if self.embedder is None:
            raise RuntimeError(self.error or "no embedder")
        embedder = self.embedder
        return cached(cache, ("qvec", embedder.name, query), lambda: embedder.embed_query(query))

    def search(self, query: str, depth: int, cache: LRU) -> tuple[list[Hit], dict[str, float]]:
        """The ``depth`` nearest sub-chunks and the time spent embedding the turn and querying Chroma."""
        store = self.ensure()
        if store is None:
            raise RuntimeError(self.error)
        qvec = self.embed_query(query, cache)
        found = cached(
            cache,
            ("dense", store.embedder.name, store.fingerprint, query, depth),
            lambda: store.search(qvec.value, depth),
        )
        return found.value, {"embed_query": qvec.ms, "chroma_query": found.ms}

    def search_cached(self, query: str, depth: int, cache: LRU) -> tuple[list[Hit], dict[str, float]] | None:
        """``search``'s answer when ``cache`` already holds it (a moved control that changes no branch list), found
        without a thread, a model or Chroma; else None."""
        store, embedder = self.store, self.embedder
        if store is None or embedder is None or cache.get(("qvec", embedder.name, query)) is None:
            return None
        hits = cache.get(("dense", store.embedder.name, store.fingerprint, query, depth))
        return None if hits is None else (hits, {"embed_query": 0.0, "chroma_query": 0.0})

    def similarity_to(self, query: str, cache: LRU) -> tuple[Callable[[str], float] | None, str]:
        """A function chunk id -> cosine with the turn, or (None, why the threshold cannot be applied)."""
        if self.store is None or self.embedder is None:
            return None, "similarity threshold skipped (no embeddings available)"
        try:
            qvec = self.embed_query(query, cache).value
        except Exception as exc:  # the embedder failed now: keep results, say the threshold was skipped
            return None, f"similarity threshold skipped ({type(exc).__name__}: {exc})"
        store = self.store
        return (lambda chunk_id: store.similarity(qvec, chunk_id)), ""


def _where(s: Settings) -> str:
    """The store the settings name, in words."""
    return f"Chroma server {s.chroma_host}:{s.chroma_port}" if s.chroma_host else f"Chroma at {s.chroma_path}"


def _unloadable(model: str, exc: Exception) -> ValueError:
    """EMBEDDING_MODEL names a model that is neither bundled nor loadable: the error that refuses to start."""
    choices = "; ".join(
        f"{name} (also {', '.join(a for a in aliases if a != name)})" for name, aliases in BUNDLED_EMBEDDERS.items()
    )
    return ValueError(
        f"EMBEDDING_MODEL={model!r} could not be loaded ({exc}). Use a bundled model: {choices}; or the name or path "
        "of a sentence-transformers model that is already on disk."
    )
