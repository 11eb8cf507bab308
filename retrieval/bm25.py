"""Lexical branch: rank_bm25.BM25Okapi over sub-chunks, rebuilt at start-up, never pickled (ADR-0022 C)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.tokenize import analyze, detect_language
from retrieval.types import Chunk, Hit


class BM25Index:
    """BM25 over the same chunk list the dense store holds. An empty corpus gives an empty index.

    Args:
        chunks: the sub-chunks to index.
        tokenizer: ``plain`` (lowercase + punctuation stripping, the ADR's default) or ``snowball`` (stop words
            removed and stemmed, each chunk in its card's language and each turn in its detected language).
    """

    def __init__(self, chunks: Sequence[Chunk], tokenizer: str = "plain") -> None:
        from rank_bm25 import BM25Okapi

        self._chunks = list(chunks)
        self.tokenizer = tokenizer
        corpus = [analyze(c.indexed_text, tokenizer, c.lang) for c in self._chunks]
        # rank_bm25 divides by the corpus size, and an all-empty corpus has no vocabulary to score.
        self._bm25 = BM25Okapi(corpus) if any(corpus) else None

    @property
    def empty(self) -> bool:
        return self._bm25 is None

    def __len__(self) -> int:
        return 0 if self._bm25 is None else len(self._chunks)

    def query_terms(self, query: str) -> list[str]:
        """The terms BM25 looks up for ``query``."""
        lang = detect_language(query) if self.tokenizer != "plain" else "en"
        return analyze(query, self.tokenizer, lang)

    def document_frequency(self, term: str) -> int:
        """How many chunks contain ``term`` (0 for an unknown term or an empty index)."""
        if self._bm25 is None:
            return 0
        return sum(1 for doc in self._bm25.doc_freqs if term in doc)

    def search(self, query: str, depth: int) -> list[Hit]:
        """The ``depth`` best chunks with a positive BM25 score (a chunk sharing no term is not a match)."""
        if self._bm25 is None or depth < 1:
            return []
        terms = self.query_terms(query)
        if not terms:
            return []
        scores = np.asarray(self._bm25.get_scores(terms), dtype=np.float64)
        positive = np.flatnonzero(scores > 0)
        order = sorted(positive, key=lambda i: (-scores[i], self._chunks[i].chunk_id))[:depth]
        return [Hit(chunk_id=self._chunks[i].chunk_id, parent_id=self._chunks[i].parent_id, rank=r,
                    score=float(scores[i])) for r, i in enumerate(order, start=1)]
