"""Opening a corpus's own dense collection: reuse a complete one whose vectors check out, resume a partial one (a
cancelled or crashed build), else rebuild; the missing rows embedded in blocks, with progress and a cancel check."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.dense_checks import foreign_ids, partial_problem, read_embeddings, read_present, reused_problem
from retrieval.encoders import Embedder
from retrieval.types import Chunk

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
_ADD_BATCH = 256
_EMBED_BLOCK = 16  # sub-chunks per parallel embedding call: the cancel check and the progress step
_PROGRESS_EVERY = 16


class EmbeddingFailed(RuntimeError):
    """The embedder failed on a sub-chunk while building: the corpus or the model is at fault, not the store."""


class IndexingCancelled(RuntimeError):
    """A build was cancelled between sub-chunks; what it stored is kept and the next open resumes from it."""


def stderr_progress(done: int, total: int) -> None:
    """Default indexing progress: one line on stderr, rewritten in place."""
    end = "\n" if done >= total else "\r"
    print(f"embedding chunks into Chroma: {done}/{total}", end=end, file=sys.stderr, flush=True)


@dataclass
class Opened:
    """A collection opened for ``rows``: its vectors (one per row), and whether (and from where) they were built."""

    collection: Any
    vectors: np.ndarray
    built: bool = False
    resumed_from: int = 0
    seconds: float = 0.0


def open_or_build(
    client: Any,
    name: str,
    fingerprint: str,
    rows: list[Chunk],
    embedder: Embedder,
    progress: Progress,
    cancel: threading.Event | None,
) -> Opened:
    """The collection ``name`` holding a vector per row: reused if complete and checked, resumed if partial and its
    stored vectors check out, else built anew."""
    metadata = {"hnsw:space": "cosine", "model": embedder.name, "fingerprint": fingerprint}
    collection = client.get_or_create_collection(name, metadata=metadata)
    ids = [c.chunk_id for c in rows]
    count = collection.count()
    have: dict[str, np.ndarray] = {}
    if count == len(ids) and len(ids) > 0:
        got = read_embeddings(collection, ids)
        problem = "it lacks some of the corpus ids" if got is None else reused_problem(collection, rows, embedder, got)
        if got is not None and not problem:
            return Opened(collection, got)
        log.warning("Chroma collection %s does not match the corpus (%s); rebuilding it", name, problem)
    elif count:
        have = _kept(collection, name, rows, embedder, count)
    if count and not have:
        client.delete_collection(name)
        collection = client.get_or_create_collection(name, metadata=metadata)
    start = time.perf_counter()
    vectors = _embed_missing(collection, rows, embedder, have, progress, cancel)
    return Opened(collection, vectors, built=True, resumed_from=len(have), seconds=time.perf_counter() - start)


def _kept(collection: Any, name: str, rows: list[Chunk], embedder: Embedder, count: int) -> dict[str, np.ndarray]:
    """Same fingerprint, fewer vectors: a build that was cancelled or died part-way. Keep what it stored (if every
    stored id belongs to this corpus and a sample re-embeds to its stored vector), so only the missing sub-chunks
    are embedded; anything else ({}) rebuilds from scratch."""
    ids = [c.chunk_id for c in rows]
    foreign = foreign_ids(collection, set(ids))  # (not count - len(have): another process may
    have = read_present(collection, ids)  # be adding to the same collection right now)
    problem = (
        f"{foreign} stored ids are not rows of this corpus (one per distinct sub-chunk text)"
        if foreign
        else partial_problem(rows, embedder, have)
        if have
        else ""
    )
    if problem:
        log.warning(
            "Chroma collection %s holds %d vectors but the corpus has %d sub-chunks, and %s; rebuilding it",
            name,
            count,
            len(ids),
            problem,
        )
        return {}
    log.warning(
        "Chroma collection %s holds %d vectors but the corpus has %d sub-chunks (a half-written "
        "build); resuming: embedding the %d missing",
        name,
        count,
        len(ids),
        len(ids) - count,
    )
    return have


def _embed_missing(
    collection: Any,
    rows: list[Chunk],
    embedder: Embedder,
    have: dict[str, np.ndarray],
    progress: Progress,
    cancel: threading.Event | None,
) -> np.ndarray:
    """Embed every row not in ``have`` (one sequence per model call) and add it to the collection in batches;
    ``cancel`` is checked between sub-chunks, and what was embedded before a cancel is stored first, so the next
    open resumes from it."""
    vectors = np.zeros((len(rows), embedder.dim), dtype=np.float32)
    for i, chunk in enumerate(rows):
        if chunk.chunk_id in have:
            vectors[i] = have[chunk.chunk_id]
    missing = [i for i, c in enumerate(rows) if c.chunk_id not in have]
    done, total = len(have), len(rows)
    pending: list[int] = []

    def flush() -> None:
        if pending:
            batch = [rows[i] for i in pending]
            # upsert: another process indexing the same corpus writes the same ids and vectors (the
            # embedders are deterministic), so both end with one complete collection
            collection.upsert(
                ids=[c.chunk_id for c in batch],
                embeddings=vectors[pending],
                documents=[c.text for c in batch],
                metadatas=[{"parent_id": c.parent_id, "title": c.title, "lang": c.lang} for c in batch],
            )
            pending.clear()

    progress(done, total)  # where this build starts (a resumed one starts at what the store held)
    many = getattr(embedder, "embed_documents", None)  # parallel one-sequence calls (the ONNX models)
    step = _EMBED_BLOCK if many is not None else 1
    for lo in range(0, len(missing), step):
        if cancel is not None and cancel.is_set():
            flush()
            raise IndexingCancelled(
                f"indexing cancelled after {done:,} of {total:,} sub-chunks; the "
                "vectors stored so far are kept and the next open resumes from them"
            )
        block = missing[lo : lo + step]
        try:
            if many is not None:
                vectors[block] = many([rows[i].indexed_text for i in block])
            else:
                vectors[block[0]] = embedder.embed_document(rows[block[0]].indexed_text)
        except Exception as exc:
            raise EmbeddingFailed(_name_failure(rows, embedder, block, exc)) from exc
        pending.extend(block)
        done += len(block)
        if len(pending) >= _ADD_BATCH or lo + step >= len(missing):
            flush()
        if step > 1 or done % _PROGRESS_EVERY == 0 or done == total:
            progress(done, total)
    return vectors


def _name_failure(rows: list[Chunk], embedder: Embedder, block: list[int], exc: Exception) -> str:
    """Which sub-chunk the embedder failed on (a failed block is retried one text at a time to find it)."""
    for i in block if len(block) > 1 else ():
        try:
            embedder.embed_document(rows[i].indexed_text)
        except Exception as one:
            block, exc = [i], one
            break
    return f"embedding sub-chunk {rows[block[0]].chunk_id!r} failed ({type(exc).__name__}: {exc})"
