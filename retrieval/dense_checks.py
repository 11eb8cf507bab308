"""Whether a dense collection's stored vectors can be kept: read back by id, unit length, a sample re-embedded to its
stored vector, and (for a complete collection) an index that finds the stored vectors queried back."""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.encoders import Embedder
from retrieval.types import Chunk

# Reused collections of this app (their name holds the model and corpus fingerprint): chunks re-embedded and compared
# with their stored vectors, evenly spaced. Another model or tokenizer changes every vector, so a few find it; each
# costs a document embedding (~9 ms on one thread) at every cold start. A collection attached from elsewhere is
# checked on more rows, and every vector for NaN and length (``retrieval.attach_vectors``).
VERIFY_REEMBED = 4
VERIFY_PROBES = 256  # reused collections: stored vectors queried back, each must find itself


def read_embeddings(collection: Any, ids: list[str]) -> np.ndarray | None:
    """The stored vectors of ``ids`` in that order, or None if any is missing."""
    rows = read_present(collection, ids)
    if len(rows) != len(ids):
        return None
    return np.stack([rows[i] for i in ids])


def read_present(collection: Any, ids: list[str]) -> dict[str, np.ndarray]:
    """The stored vectors of this corpus's ids (those present)."""
    rows: dict[str, np.ndarray] = {}
    for lo in range(0, len(ids), 1000):
        got = collection.get(ids=ids[lo : lo + 1000], include=["embeddings"])
        for cid, emb in zip(got["ids"], got["embeddings"]):
            rows[cid] = np.asarray(emb, dtype=np.float32)
    return rows


def foreign_ids(collection: Any, ids: set[str]) -> int:
    """How many ids stored in the collection are not in ``ids`` (read page by page, ids only)."""
    foreign, lo = 0, 0
    while True:
        got = collection.get(limit=1000, offset=lo, include=[])
        foreign += sum(1 for cid in got["ids"] if cid not in ids)
        if len(got["ids"]) < 1000:
            return foreign
        lo += 1000


def reused_problem(collection: Any, rows: list[Chunk], embedder: Embedder, stored: np.ndarray) -> str:
    """Why a reused collection cannot be trusted ("" if it can): vectors that are not unit length (damaged
    files), vectors that are not their chunk's embedding (another model or tokenizer), or an index that does
    not find the stored vectors."""
    norms = np.linalg.norm(stored, axis=1)
    bad = np.flatnonzero(np.abs(norms - 1.0) > 1e-2)
    if bad.size:
        return f"{bad.size} stored vectors are not unit length, e.g. {rows[bad[0]].chunk_id!r}"
    n = len(stored)
    for i in np.unique(np.linspace(0, n - 1, min(n, VERIFY_REEMBED)).astype(int)):
        fresh = embedder.embed_document(rows[i].indexed_text)
        cosine = float(np.dot(fresh, stored[i]))
        if cosine < 0.999:
            return f"the stored vector of {rows[i].chunk_id!r} is not its text's embedding (cosine {cosine:.3f})"
    probes = np.unique(np.linspace(0, n - 1, min(n, VERIFY_PROBES)).astype(int))
    got = collection.query(query_embeddings=stored[probes], n_results=1, include=["distances"])
    misses = sum(1 for d in got["distances"] if not d or d[0] > 1e-3)
    if misses > len(probes) // 100:
        return f"the index does not find {misses} of {len(probes)} stored vectors queried back"
    return ""


def partial_problem(rows: list[Chunk], embedder: Embedder, have: dict[str, np.ndarray]) -> str:
    """Why the vectors of a partial collection cannot be kept ("" if they can): not unit length, or a sample
    that does not re-embed to its stored vector."""
    present = [c for c in rows if c.chunk_id in have]
    stored = np.stack([have[c.chunk_id] for c in present])
    bad = np.flatnonzero(np.abs(np.linalg.norm(stored, axis=1) - 1.0) > 1e-2)
    if bad.size:
        return f"{bad.size} stored vectors are not unit length, e.g. {present[bad[0]].chunk_id!r}"
    for i in np.unique(np.linspace(0, len(present) - 1, min(len(present), VERIFY_REEMBED)).astype(int)):
        cosine = float(np.dot(embedder.embed_document(present[i].indexed_text), stored[i]))
        if not cosine >= 0.999:  # NaN fails too
            return f"the stored vector of {present[i].chunk_id!r} is not its text's embedding (cosine {cosine:.3f})"
    return ""
