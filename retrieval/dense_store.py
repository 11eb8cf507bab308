"""DenseStore: one corpus's Chroma collection (its own, or one attached from elsewhere) and the chunk embeddings kept
in memory, searched by cosine."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.attach_vectors import attach_problem
from retrieval.corpus import fingerprint
from retrieval.dense_build import Progress, open_or_build, stderr_progress
from retrieval.dense_checks import read_embeddings
from retrieval.dense_rows import row_layout, spread
from retrieval.encoders import Embedder
from retrieval.types import Chunk, Hit


class AttachMismatch(ValueError):
    """An attached collection's vectors are not the named model's embeddings of its texts (or of another size)."""


def open_attached(client: Any, name: str, embedder: Embedder, chunks: list[Chunk]) -> tuple[Any, np.ndarray, str]:
    """A collection made elsewhere (``--attach``): read, checked against the embedder, never written. Returns it,
    its unit-length vectors (a row per sub-chunk) and its distance space."""
    collection = client.get_collection(name)
    got = read_embeddings(collection, [c.chunk_id for c in chunks])
    if got is None:
        raise AttachMismatch(f"collection {name!r} changed since it was attached (ids are missing): attach it again")
    problem = attach_problem(embedder, chunks, got)
    if problem:
        raise AttachMismatch(f"collection {name!r}: {problem}")
    config = getattr(collection, "configuration", None) or {}
    space = str((config.get("hnsw") or {}).get("space") or (collection.metadata or {}).get("hnsw:space") or "l2")
    norms = np.linalg.norm(got, axis=1, keepdims=True)
    return collection, got / np.where(norms > 0, norms, 1.0), space


class DenseStore:
    """A Chroma collection keyed by model + corpus fingerprint, and the chunk embeddings kept in memory for the
    similarity threshold. A restart with the same corpus and model reuses the collection; a changed one rebuilds;
    a partial one (a cancelled or crashed build: same fingerprint, fewer vectors) resumes.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        embedder: Embedder,
        client: Any,
        *,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        attach: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.cancel = cancel
        self.client = client
        self._chunks = list(chunks)
        self._by_id = {c.chunk_id: c for c in self._chunks}
        # what the collection stores: one sub-chunk per distinct text (``stored_rows``), a row each if attached
        self._rows, self._row_of, self._copies = row_layout(self._chunks, attach)
        self.fingerprint = fingerprint(self._chunks, embedder.name)
        self.collection_name = attach or f"chunks-{self.fingerprint}"
        self.built, self.resumed_from, self.index_seconds = False, 0, 0.0
        self.space = "cosine"
        if attach:
            self.collection, self.embeddings, self.space = open_attached(client, attach, embedder, self._chunks)
        else:
            opened = open_or_build(
                client,
                self.collection_name,
                self.fingerprint,
                self._rows,
                embedder,
                progress or stderr_progress,
                cancel,
            )
            self.collection, self.embeddings = opened.collection, opened.vectors[self._row_of]
            self.built, self.resumed_from, self.index_seconds = opened.built, opened.resumed_from, opened.seconds
        self._row = {c.chunk_id: i for i, c in enumerate(self._chunks)}

    def __len__(self) -> int:
        return len(self._chunks)

    def search(self, query_vector: np.ndarray, depth: int) -> list[Hit]:
        """The ``depth`` nearest sub-chunks by cosine similarity (Chroma's cosine distance is 1 - cosine)."""
        if depth < 1 or not self._chunks:
            return []
        got = self.collection.query(
            query_embeddings=[np.asarray(query_vector, dtype=np.float32)],
            n_results=min(depth, len(self._rows)),
            include=["distances"],
        )
        pairs = spread(got["ids"][0], got["distances"][0], self._copies, depth)
        # cosine and ip distances are 1 - cosine for unit vectors; squared l2 (an attached collection's default
        # space) is 2 - 2 cosine
        half = 0.5 if self.space == "l2" else 1.0
        return [
            Hit(chunk_id=cid, parent_id=self._by_id[cid].parent_id, rank=r, score=1.0 - half * float(dist))
            for r, (cid, dist) in enumerate(pairs, start=1)
        ]

    def similarity(self, query_vector: np.ndarray, chunk_id: str) -> float:
        """Cosine between the query and a chunk, from the in-memory copy of the embeddings."""
        return float(np.dot(self.embeddings[self._row[chunk_id]], query_vector))
