"""A corpus replicated to a scale it does not have (suffixed ids, nudged vectors), and embedders that embed each
distinct text once, so the million-sub-chunk bench measures the store and the branches, not the embedder."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from retrieval.settings import Settings
from retrieval.types import Chunk

if TYPE_CHECKING:
    from retrieval.encoders import Embedder
    from retrieval.pipeline import HybridRetriever


# ------------------------------------------------------------------------------------------------ replicas
def replicate_chunks(chunks: Sequence[Chunk], target: int, *, mark_titles: bool = False) -> list[Chunk]:
    """``chunks`` repeated until there are at least ``target``: replica 0 keeps the ids, replica n>0 renames card
    ``c`` to ``c~r<n>`` (chunk ``c#i`` becomes ``c~r<n>#i``); texts are unchanged, and so are titles unless
    ``mark_titles`` (then a replica's title ends in `` ~r<n>``, which ``ReplicaEmbedder`` reads: the dense store
    keeps one row per distinct text, so unmarked replicas would all share their original's row)."""
    if not chunks:
        raise ValueError("cannot replicate an empty corpus: CORPUS_PATH has no sub-chunks.")
    if isinstance(target, bool) or not isinstance(target, int) or target < 1:
        raise ValueError(f"scale target must be a positive number of sub-chunks, got {target!r}.")
    out = list(chunks)
    n = 1
    while len(out) < target:
        for c in chunks:
            parent = f"{c.parent_id}~r{n}"
            out.append(
                Chunk(
                    chunk_id=f"{parent}#{c.chunk_id.rsplit('#', 1)[-1]}",
                    parent_id=parent,
                    title=f"{c.title} ~r{n}" if mark_titles else c.title,
                    lang=c.lang,
                    text=c.text,
                )
            )
        n += 1
    return out


class MemoEmbedder:
    """Wraps an embedder: each distinct document text is embedded once, its vector reused for identical texts
    (replicas). Queries are embedded as usual."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._memo: dict[str, np.ndarray] = {}

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def embed_document(self, text: str) -> np.ndarray:
        vec = self._memo.get(text)
        if vec is None:
            vec = self._memo[text] = self.inner.embed_document(text)
        return vec

    @property
    def distinct(self) -> int:
        return len(self._memo)


class ReplicaEmbedder(MemoEmbedder):
    """A ``MemoEmbedder`` for replicas made with ``replicate_chunks(mark_titles=True)``: a text whose title ends in
    `` ~r<n>`` gets its original's vector (embedded once) nudged by a fixed offset seeded by ``n`` (cosine ~0.995),
    so a replicated corpus is stored as a row per sub-chunk (HNSW at its size) without embedding every replica.
    Deterministic, so a reopened store re-embeds its sample to the stored vectors."""

    _MARK = re.compile(r"(.*) ~r(\d+)")

    def embed_document(self, text: str) -> np.ndarray:
        title, newline, body = text.partition("\n")
        mark = self._MARK.fullmatch(title) if newline else None
        if mark is None:
            return super().embed_document(text)
        base = np.asarray(super().embed_document(f"{mark[1]}\n{body}" if mark[1] else body), dtype=np.float32)
        nudge = np.asarray(np.random.default_rng(int(mark[2])).standard_normal(base.shape[0]), dtype=np.float32)
        vec = base + 0.1 * nudge / np.linalg.norm(nudge)
        return np.asarray(vec / np.linalg.norm(vec), dtype=np.float32)


def retriever_with_embedder(
    settings: Settings, chunks: Sequence[Chunk], embedder: Embedder, progress: Callable[[int, int], None] | None = None
) -> HybridRetriever:
    """A ``HybridRetriever`` over ``chunks`` whose dense store is built with ``embedder`` (e.g. a MemoEmbedder)
    instead of the one ``EMBEDDING_MODEL`` names."""
    from retrieval.pipeline import HybridRetriever

    return HybridRetriever(settings, chunks=chunks, embedder=embedder, progress=progress or (lambda done, total: None))
