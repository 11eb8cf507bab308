"""Lexical branch: BM25 over sub-chunks, rebuilt at start-up, never pickled (ADR-0022 C).

The scores are rank_bm25 0.2.2's ``BM25Okapi.get_scores`` (k1=1.5, b=0.75, epsilon=0.25: idf
``log(N - n + 0.5) - log(n + 0.5)``, a negative idf floored to ``epsilon * average idf``, a repeated query term
counted each time), computed with the same float64 operations in the same order, so they are bit for bit the
same. What changes is the cost: each (term, chunk) contribution is computed once at build time into a sparse
matrix whose columns are the terms' postings, so a turn costs the sum of its terms' posting lengths instead of
a Python pass over every chunk. ``tests/test_bm25_equivalence.py`` checks scores and rankings against
rank_bm25 itself, which stays in the project as the reference.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from retrieval.tokenize import (
    STOPWORDS,
    TOKENIZERS,
    _stemmer,
    analyze,
    base_language,
    detect_language,
    has_cjk,
    tokenize,
)
from retrieval.types import Chunk, Hit

K1 = 1.5
B = 0.75
EPSILON = 0.25

# Chunks analysed per vectorised step of the build: bounds the temporary token arrays, not the result.
_BUILD_BATCH = 20_000
# ``tokenize`` of an ASCII text, by byte translation: letters and digits kept (lowercased), everything else a space.
_ASCII_WORDS = bytes(c if chr(c).isalnum() else 32 for c in range(256)).lower()


class _SnowballIds(dict):
    """Raw token -> term id in one language (-1 for a stop word): ``analyze``'s snowball step, done once per
    distinct token (a CJK bigram is never stemmed). New stems get the next id of the shared vocabulary."""

    def __init__(self, vocab: dict[str, int], lang: str) -> None:
        super().__init__()
        self.vocab, self.stop, self.stem = vocab, STOPWORDS[lang], _stemmer(lang).stemWord

    def __missing__(self, token: str) -> int:
        if token in self.stop:
            tid = -1
        else:
            tid = self.vocab[token if has_cjk(token) else self.stem(token)]
        self[token] = tid
        return tid


def _postings(
    chunks: Sequence[Chunk], tokenizer: str
) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``analyze`` of every chunk as term ids, counted: the vocabulary (in first-appearance order), the chunk
    lengths, and one (chunk, term, tf) triple per distinct term of a chunk, sorted by chunk then term.

    Equal to counting ``analyze(c.indexed_text, tokenizer, c.lang)`` chunk by chunk (tests/test_bm25_equivalence.py
    checks it), but a distinct token is stemmed and looked up once, and an ASCII text is split without the regex.
    """
    n_docs = len(chunks)
    # Term ids in order of first appearance: the order rank_bm25's document-frequency dict is filled in,
    # so the average idf is summed in its order.
    vocab: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    by_lang: dict[str, dict[str, int]] = {}
    doc_len = np.zeros(n_docs, dtype=np.int64)
    parts_doc, parts_term, parts_tf = [], [], []
    for start in range(0, n_docs, _BUILD_BATCH):
        batch = chunks[start : start + _BUILD_BATCH]
        ids: list[int] = []
        raw_len = np.empty(len(batch), dtype=np.int64)
        for k, chunk in enumerate(batch):
            text = chunk.indexed_text
            tokens = text.encode().translate(_ASCII_WORDS).decode().split() if text.isascii() else tokenize(text)
            if tokenizer == "plain":
                ids.extend(map(vocab.__getitem__, tokens))
            else:
                lang = base_language(chunk.lang)
                to_ids = by_lang.get(lang)
                if to_ids is None:
                    to_ids = by_lang[lang] = _SnowballIds(vocab, lang)
                ids.extend(map(to_ids.__getitem__, tokens))
            raw_len[k] = len(tokens)
        term = np.array(ids, dtype=np.int64)
        del ids
        local_doc = np.repeat(np.arange(len(batch), dtype=np.int64), raw_len)
        if tokenizer != "plain":  # stop words out
            kept = term >= 0
            term, local_doc = term[kept], local_doc[kept]
        doc_len[start : start + len(batch)] = np.bincount(local_doc, minlength=len(batch))
        # One (chunk, term) key per token; unique keys with their counts are the term frequencies.
        keys, tf = np.unique((local_doc << 32) | term, return_counts=True)
        parts_doc.append((keys >> 32).astype(np.int32) + start)
        parts_term.append((keys & 0xFFFFFFFF).astype(np.int32))
        parts_tf.append(tf.astype(np.int32))
    vocab.default_factory = None
    empty = np.zeros(0, dtype=np.int32)
    return (
        vocab,
        doc_len,
        np.concatenate(parts_doc or [empty]),
        np.concatenate(parts_term or [empty]),
        np.concatenate(parts_tf or [empty]),
    )


# Postings up to this many are put in columns by numpy (a stable argsort); more by scipy's counting sort, whose
# temporaries are smaller than argsort's int64 order (at a million sub-chunks, 24M postings). Importing
# scipy.sparse costs ~75 ms, which every cold start of a small corpus paid for nothing else.
NUMPY_COLUMNS_MAX = 1_000_000


def _columns_of(
    data: np.ndarray, doc: np.ndarray, term: np.ndarray, n_docs: int, n_terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSC arrays (indptr, indices, data) of the (chunk, term) -> weight entries, as scipy's ``csc_matrix``
    builds them (tests/test_bm25_equivalence.py compares both ways)."""
    if len(data) > NUMPY_COLUMNS_MAX:
        from scipy.sparse import csc_matrix

        matrix = csc_matrix((data, (doc, term)), shape=(n_docs, n_terms))
        return matrix.indptr, matrix.indices, matrix.data
    order = np.argsort(term, kind="stable")
    indptr = np.zeros(n_terms + 1, dtype=np.int32)
    np.cumsum(np.bincount(term, minlength=n_terms), out=indptr[1:])
    return indptr, doc[order].astype(np.int32, copy=False), data[order]


def _idf(term: np.ndarray, n_docs: int, n_terms: int) -> tuple[np.ndarray, float]:
    """rank_bm25's ``_calc_idf``, term by term in its order, with ``math.log`` as it does: each term's idf (a
    negative one replaced by epsilon times the mean idf) and that epsilon."""
    df = np.bincount(term, minlength=n_terms)
    idf_list = [math.log(n_docs - n + 0.5) - math.log(n + 0.5) for n in df.tolist()]
    idf_sum = 0.0
    for value in idf_list:
        idf_sum += value
    eps = EPSILON * (idf_sum / n_terms)
    idf = np.array(idf_list, dtype=np.float64)
    idf[idf < 0] = eps
    return idf, eps


def _weights(
    tf: np.ndarray, doc: np.ndarray, term: np.ndarray, idf: np.ndarray, doc_len: np.ndarray, avgdl: float
) -> np.ndarray:
    """rank_bm25's ``get_scores`` term for each posting, elementwise with its operations (IEEE + and * commute
    exactly, in its order): ``idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)))``; in slices, so no
    temporary is corpus-sized."""
    norm = K1 * (1 - B + B * doc_len / avgdl)
    data = np.empty(len(tf), dtype=np.float64)
    for lo in range(0, len(tf), 1 << 22):
        hi = lo + (1 << 22)
        tf_f = tf[lo:hi].astype(np.float64)
        denom = norm[doc[lo:hi]]
        denom += tf_f
        tf_f *= K1 + 1
        tf_f /= denom
        tf_f *= idf[term[lo:hi]]
        data[lo:hi] = tf_f
    return data


def _candidates(score: np.ndarray, rows: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunks with a positive score that may be among the ``depth`` best (ties at the cut kept, to be settled
    by chunk id), and their scores. ``rows`` are the chunks the query's postings touch (with repeats)."""
    if len(rows) * 16 < len(score):  # few postings: look only at the chunks they touch
        touched = np.unique(rows)
        cand = touched[score[touched] > 0]
    else:  # the postings cover much of the corpus: one pass over the scores is cheaper than sorting them
        cand = np.flatnonzero(score > 0)
    cand_score = score[cand]
    if len(cand) > depth:
        # Everything scoring at least the depth-th best, so ties at the cut are settled by chunk id after.
        cut = np.partition(cand_score, len(cand) - depth)[len(cand) - depth]
        keep = cand_score >= cut
        cand, cand_score = cand[keep], cand_score[keep]
    return cand, cand_score


class BM25Index:
    """BM25 over the same chunk list the dense store holds. An empty corpus gives an empty index.

    Args:
        chunks: the sub-chunks to index.
        tokenizer: ``plain`` (lowercase + punctuation stripping, the ADR's default) or ``snowball`` (stop words
            removed and stemmed, each chunk in its card's language and each turn in its detected language). Both
            split Chinese, Japanese and Korean runs into overlapping character bigrams (``retrieval.tokenize``).
    """

    def __init__(self, chunks: Sequence[Chunk], tokenizer: str = "plain") -> None:
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer {tokenizer!r}: use one of {TOKENIZERS}.")
        self._chunks = list(chunks)
        self.tokenizer = tokenizer
        self._vocab: dict[str, int] = {}
        self._eps = 0.0
        # an empty index: no column, no posting (filled below when the corpus has text)
        self._indptr = np.zeros(1, dtype=np.int64)
        self._indices = self._id_rank = np.zeros(0, dtype=np.int64)
        self._data = np.zeros(0, dtype=np.float64)
        self._empty = True
        n_docs = len(self._chunks)
        if not n_docs:
            return
        vocab, doc_len, doc, term, tf = _postings(self._chunks, tokenizer)
        total_len = int(doc_len.sum())
        if not total_len:  # rank_bm25 divides by the average length: an all-empty corpus has nothing to score
            return
        self._vocab = vocab

        n_terms = len(vocab)
        idf, self._eps = _idf(term, n_docs, n_terms)
        data = _weights(tf, doc, term, idf, doc_len, total_len / n_docs)
        del tf

        # A term's postings are a column, chunks ascending within it (the entries are unique (chunk, term) pairs
        # sorted by chunk, so a stable sort by term keeps each column's chunks ascending).
        self._indptr, self._indices, self._data = _columns_of(data, doc, term, n_docs, n_terms)
        del data, doc, term
        # Ties are broken by chunk id: each chunk's position in chunk-id order.
        self._id_rank = np.empty(n_docs, dtype=np.int64)
        ids = [c.chunk_id for c in self._chunks]
        self._id_rank[sorted(range(n_docs), key=ids.__getitem__)] = np.arange(n_docs, dtype=np.int64)
        self._empty = False

    @property
    def empty(self) -> bool:
        return self._empty

    def __len__(self) -> int:
        return 0 if self._empty else len(self._chunks)

    @property
    def vocabulary_size(self) -> int:
        """How many distinct terms the index holds."""
        return len(self._vocab)

    def query_terms(self, query: str) -> list[str]:
        """The terms BM25 looks up for ``query``."""
        lang = detect_language(query) if self.tokenizer != "plain" else "en"
        return analyze(query, self.tokenizer, lang)

    def document_frequency(self, term: str) -> int:
        """How many chunks contain ``term`` (0 for an unknown term or an empty index)."""
        col = self._vocab.get(term)
        if col is None:
            return 0
        return int(self._indptr[col + 1] - self._indptr[col])

    def idf(self, term: str) -> float | None:
        """The idf ``term`` is scored with (a negative one floored as rank_bm25 does), or None if no chunk holds it."""
        df = self.document_frequency(term)
        if not df:
            return None
        value = math.log(len(self._chunks) - df + 0.5) - math.log(df + 0.5)
        return value if value >= 0 else self._eps

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """Every chunk's BM25 score for the analysed ``terms``: rank_bm25's ``get_scores``, bit for bit."""
        if self._empty:
            return np.zeros(len(self._chunks), dtype=np.float64)
        return self._accumulate(self._columns(terms))[0]

    def _columns(self, terms: Sequence[str]) -> list[int]:
        # An unknown term adds 0 to every chunk in rank_bm25: skipping it changes no score.
        return [col for col in map(self._vocab.get, terms) if col is not None]

    def _accumulate(self, cols: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The score of every chunk, and the chunks the columns' postings touch (with repeats)."""
        indptr, indices, data = self._indptr, self._indices, self._data
        if not cols:
            return np.zeros(len(self._chunks), dtype=np.float64), indices[:0]
        spans = [(indptr[col], indptr[col + 1]) for col in cols]
        rows = np.concatenate([indices[lo:hi] for lo, hi in spans])
        weights = np.concatenate([data[lo:hi] for lo, hi in spans])
        # bincount adds the weights one by one in input order, from 0.0: each chunk's terms are summed in query
        # order, a repeated term again, as rank_bm25's loop over the query does, so the sums are bit for bit its own.
        return np.bincount(rows, weights=weights, minlength=len(self._chunks)), rows

    def search(self, query: str, depth: int) -> list[Hit]:
        """The ``depth`` best chunks with a positive BM25 score (a chunk sharing no term is not a match)."""
        if self._empty or depth < 1:
            return []
        cols = self._columns(self.query_terms(query))
        if not cols:
            return []
        cand, cand_score = _candidates(*self._accumulate(cols), depth)
        order = np.lexsort((self._id_rank[cand], -cand_score))[:depth]
        hits = []
        for rank, j in enumerate(order.tolist(), start=1):
            chunk = self._chunks[int(cand[j])]
            hits.append(Hit(chunk_id=chunk.chunk_id, parent_id=chunk.parent_id, rank=rank, score=float(cand_score[j])))
        return hits
