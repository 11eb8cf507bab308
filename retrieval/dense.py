"""Semantic branch: chunk embeddings in Chroma (embedded PersistentClient by default, a Chroma server when
CHROMA_HOST is set). Embeddings are always computed here and passed explicitly; Chroma never embeds."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from retrieval.corpus import fingerprint
from retrieval.encoders import Embedder
from retrieval.types import Chunk, Hit

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
_ADD_BATCH = 256


def chroma_client(path: str | None = None, host: str | None = None, port: int = 8000):
    """A Chroma client with anonymized telemetry off: an HTTP client if ``host`` is given, else embedded."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if host:
        return chromadb.HttpClient(host=host, port=port, settings=chroma_settings)
    if path is None:
        raise ValueError("chroma_client needs a path (CHROMA_PATH) or a host (CHROMA_HOST).")
    Path(path).mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=path, settings=chroma_settings)


def stderr_progress(done: int, total: int) -> None:
    """Default indexing progress: one line on stderr, rewritten in place."""
    end = "\n" if done >= total else "\r"
    print(f"embedding chunks into Chroma: {done}/{total}", end=end, file=sys.stderr, flush=True)


class DenseStore:
    """A Chroma collection keyed by model + corpus fingerprint, and the chunk embeddings kept in memory for the
    similarity threshold. A restart with the same corpus and model reuses the collection; a changed one rebuilds.
    """

    def __init__(self, chunks: Sequence[Chunk], embedder: Embedder, client, *, progress: Progress | None = None):
        self.embedder = embedder
        self.client = client
        self._chunks = list(chunks)
        self._by_id = {c.chunk_id: c for c in self._chunks}
        self.fingerprint = fingerprint(self._chunks, embedder.name)
        self.collection_name = f"chunks-{self.fingerprint}"
        self.built = False
        self.index_seconds = 0.0
        self.collection = self._open_or_build(progress)
        self._row = {c.chunk_id: i for i, c in enumerate(self._chunks)}

    def __len__(self) -> int:
        return len(self._chunks)

    def _open_or_build(self, progress: Progress | None):
        metadata = {"hnsw:space": "cosine", "model": self.embedder.name, "fingerprint": self.fingerprint}
        collection = self.client.get_or_create_collection(self.collection_name, metadata=metadata)
        ids = [c.chunk_id for c in self._chunks]
        if collection.count() == len(ids) and len(ids) > 0:
            got = self._read_embeddings(collection, ids)
            if got is not None:
                self.embeddings = got
                return collection
            log.warning("collection %s is incomplete; rebuilding it", self.collection_name)
        if collection.count():
            self.client.delete_collection(self.collection_name)
            collection = self.client.get_or_create_collection(self.collection_name, metadata=metadata)
        start = time.perf_counter()
        vectors = np.zeros((len(ids), self.embedder.dim), dtype=np.float32)
        progress = progress or stderr_progress
        for lo in range(0, len(ids), _ADD_BATCH):
            batch = self._chunks[lo : lo + _ADD_BATCH]
            for j, chunk in enumerate(batch):
                vectors[lo + j] = self.embedder.embed_document(chunk.indexed_text)
            collection.add(
                ids=[c.chunk_id for c in batch],
                embeddings=vectors[lo : lo + len(batch)],
                metadatas=[{"parent_id": c.parent_id} for c in batch],
            )
            progress(lo + len(batch), len(ids))
        self.index_seconds = time.perf_counter() - start
        self.built = True
        self.embeddings = vectors
        return collection

    @staticmethod
    def _read_embeddings(collection, ids: list[str]) -> np.ndarray | None:
        rows: dict[str, np.ndarray] = {}
        for lo in range(0, len(ids), 1000):
            got = collection.get(ids=ids[lo : lo + 1000], include=["embeddings"])
            for cid, emb in zip(got["ids"], got["embeddings"]):
                rows[cid] = np.asarray(emb, dtype=np.float32)
        if len(rows) != len(ids):
            return None
        return np.stack([rows[i] for i in ids])

    def search(self, query_vector: np.ndarray, depth: int) -> list[Hit]:
        """The ``depth`` nearest chunks by cosine similarity (Chroma's cosine distance is 1 - cosine)."""
        if depth < 1 or not self._chunks:
            return []
        got = self.collection.query(
            query_embeddings=[np.asarray(query_vector, dtype=np.float32)],
            n_results=min(depth, len(self._chunks)),
            include=["distances"],
        )
        pairs = sorted(zip(got["ids"][0], got["distances"][0]), key=lambda p: (p[1], p[0]))
        return [Hit(chunk_id=cid, parent_id=self._by_id[cid].parent_id, rank=r, score=1.0 - float(dist))
                for r, (cid, dist) in enumerate(pairs, start=1)]

    def similarity(self, query_vector: np.ndarray, chunk_id: str) -> float:
        """Cosine between the query and a chunk, from the in-memory copy of the embeddings."""
        return float(np.dot(self.embeddings[self._row[chunk_id]], query_vector))
