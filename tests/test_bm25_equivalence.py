"""BM25Index against rank_bm25 0.2.2's BM25Okapi, the reference it replaces (issue 12): the same scores (to 1e-9)
and the same rankings (positive scores only, ties by chunk id), on random corpora and on the shipped set."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from retrieval.bm25 import BM25Index
from retrieval.corpus import DEFAULT_CHUNK_WORDS, load_cards, load_queries, split_cards
from retrieval.tokenize import analyze
from retrieval.types import Chunk
from tests.conftest import ROOT, SHIPPED_CARDS

TOLERANCE = 1e-9
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(chunks: Sequence[Chunk], tokenizer: str):
    """rank_bm25's BM25Okapi over the chunks as the index analyses them (None where it cannot build)."""
    from rank_bm25 import BM25Okapi

    corpus = [analyze(c.indexed_text, tokenizer, c.lang) for c in chunks]
    return (BM25Okapi(corpus) if any(corpus) else None), corpus


def reference_ranking(chunks: Sequence[Chunk], scores: np.ndarray, depth: int) -> list[tuple[str, float]]:
    """The ``depth`` best chunks with a positive score, ties by chunk id: the contract of ``search``."""
    positive = [i for i in range(len(chunks)) if scores[i] > 0]
    order = sorted(positive, key=lambda i: (-scores[i], chunks[i].chunk_id))[:depth]
    return [(chunks[i].chunk_id, float(scores[i])) for i in order]


def assert_equivalent(chunks: Sequence[Chunk], tokenizer: str, queries: Sequence[str], depths: Sequence[int]) -> None:
    index = BM25Index(chunks, tokenizer)
    ref, corpus = reference(chunks, tokenizer)
    if ref is None:
        assert index.empty and len(index) == 0
        assert all(index.search(q, d) == [] for q in queries for d in depths)
        return
    assert not index.empty and len(index) == len(chunks) and index.vocabulary_size == len(ref.idf)
    # Every term alone: its document frequency, and its score in every chunk (so every tf and chunk length).
    for term in ref.idf:
        assert index.document_frequency(term) == sum(1 for doc in ref.doc_freqs if term in doc), term
        assert np.array_equal(index.scores([term]), ref.get_scores([term])), term
    for query in queries:
        terms = index.query_terms(query)
        expected = np.asarray(ref.get_scores(terms), dtype=np.float64)
        got = index.scores(terms)
        assert got.shape == expected.shape and got.dtype == np.float64
        assert np.max(np.abs(got - expected), initial=0.0) <= TOLERANCE, (query, terms)
        for depth in depths:
            hits = index.search(query, depth)
            want = reference_ranking(chunks, expected, depth) if terms else []
            assert [h.chunk_id for h in hits] == [cid for cid, _ in want], (query, depth)
            assert all(abs(h.score - s) <= TOLERANCE for h, s in zip(hits, (s for _, s in want), strict=True))
            assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
            by_id = {c.chunk_id: c for c in chunks}
            assert all(h.parent_id == by_id[h.chunk_id].parent_id for h in hits)


# --------------------------------------------------------------------------------------------- random corpora
# A small vocabulary so that terms land in more than half the chunks (negative idf: the epsilon floor), empty
# chunks, duplicate chunks (exact ties, settled by chunk id), and ids whose order is not the corpus order.
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa", "e07", "500"]
DOC = st.lists(st.sampled_from(WORDS[:6]) | st.sampled_from(WORDS), max_size=12).map(" ".join)
QUERY = st.lists(st.sampled_from(WORDS + ["unknown", "zzz"]), min_size=0, max_size=8).map(" ".join)


@st.composite
def corpora(draw) -> list[Chunk]:
    texts = draw(st.lists(DOC, min_size=1, max_size=25))
    ids = draw(st.permutations([f"c{n:03d}#{n % 3}" for n in range(len(texts))]))
    return [
        Chunk(chunk_id=cid, parent_id=cid.split("#")[0], title="", lang="en", text=text)
        for cid, text in zip(ids, texts, strict=True)
    ]


# Text the analyzers must split exactly as ``analyze`` does: case, punctuation, underscores, accents, non-Latin
# digits, stop words and inflections in three languages, CJK runs (bigrams, never stemmed), in ASCII and non-ASCII
# chunks, with titles.
PIECES = [
    "Alpha",
    "ALPHA",
    "alpha",
    "GS-40",
    "e_07",
    "500mg",
    "olvidé",
    "Dosis",
    "ação",
    "Ñandú",
    "٣٤",
    "the",
    "de",
    "não",
    "running",
    "runs",
    "ran",
    "tomando",
    "tomar",
    "x",
    "ǅemal",
    "İstanbul",
    "ﬁle",
    "\u00a0",
    "—",
    ",",
    ".",
    "糖尿病の薬",
    "薬",
    "人々",
    "コーヒー",
    "인슐린을",
    "忘记吃药",
    "GS-40の",
    "の",
    "、",
    "。",
]
SEPARATORS = st.sampled_from([" ", "\n", ", ", "_", "/", "\t"])
TEXT = st.lists(st.tuples(st.sampled_from(PIECES), SEPARATORS), max_size=14).map(
    lambda parts: "".join(word + sep for word, sep in parts)
)


@st.composite
def mixed_corpora(draw) -> list[Chunk]:
    n = draw(st.integers(1, 12))
    return [
        Chunk(
            chunk_id=f"m{k}#0",
            parent_id=f"m{k}",
            title=draw(st.sampled_from(["", "Alpha pen", "Olvidé"])),
            lang=draw(st.sampled_from(["en", "es", "pt", "es-419", "pt-BR", "fr"])),
            text=draw(TEXT),
        )
        for k in range(n)
    ]


ALL_SHARED = [
    Chunk(chunk_id=f"d{n}#0", parent_id=f"d{n}", title="", lang="en", text=t)
    for n, t in enumerate(["alpha beta", "alpha alpha gamma", "alpha delta", "", "beta beta"])
]


@PROPERTY
@given(chunks=corpora(), queries=st.lists(QUERY, min_size=1, max_size=6), depth=st.integers(1, 30))
@example(chunks=ALL_SHARED, queries=["alpha", "alpha alpha beta", "gamma unknown gamma", "zzz", ""], depth=2)
@example(chunks=ALL_SHARED[3:4], queries=["alpha"], depth=5)  # every chunk empty: an empty index
def test_random_corpora_score_and_rank_like_rank_bm25(chunks, queries, depth):
    assert_equivalent(chunks, "plain", queries, depths=(depth, len(chunks)))


@given(chunks=corpora(), queries=st.lists(QUERY, min_size=1, max_size=4))
@settings(max_examples=60, deadline=None)
def test_random_corpora_snowball(chunks, queries):
    assert_equivalent(chunks, "snowball", queries, depths=(3, len(chunks)))


@given(
    chunks=mixed_corpora(),
    queries=st.lists(TEXT, min_size=1, max_size=3),
    tokenizer=st.sampled_from(["plain", "snowball"]),
)
@settings(max_examples=150, deadline=None)
def test_mixed_text_is_analysed_like_analyze(chunks, queries, tokenizer):
    assert_equivalent(chunks, tokenizer, queries, depths=(2, len(chunks)))


def test_epsilon_floor_and_repeated_terms_by_the_formula():
    """Worked by hand on ALL_SHARED: 5 chunks of lengths 2, 3, 2, 0, 2 (avgdl 9/5); ``alpha`` is in 3 of 5
    (idf log(2.5) - log(3.5) < 0, floored to 0.25 * mean idf), ``gamma`` in 1."""
    index = BM25Index(ALL_SHARED, "plain")
    n, avgdl = 5, 9 / 5
    idf = {
        w: math.log(n - df + 0.5) - math.log(df + 0.5)
        for w, df in {"alpha": 3, "beta": 2, "gamma": 1, "delta": 1}.items()
    }
    assert idf["alpha"] < 0
    eps = 0.25 * sum(idf.values()) / len(idf)
    idf["alpha"] = eps

    def term(w: str, tf: int, dl: int) -> float:
        return idf[w] * tf * 2.5 / (tf + 1.5 * (1 - 0.75 + 0.75 * dl / avgdl))

    scores = index.scores(["gamma", "alpha", "gamma"])
    assert scores[1] == pytest.approx(term("gamma", 1, 3) + term("alpha", 2, 3) + term("gamma", 1, 3), abs=1e-12)
    assert scores[0] == pytest.approx(term("alpha", 1, 2), abs=1e-12)
    assert scores[3] == 0.0 and scores[4] == 0.0
    assert index.document_frequency("alpha") == 3 and index.document_frequency("nope") == 0
    # chunks 0 and 2 tie on "alpha" alone (same tf, same length): the chunk id decides.
    assert [h.chunk_id for h in index.search("alpha", 5)] == ["d1#0", "d0#0", "d2#0"]


@pytest.mark.parametrize("chunks", [[], ALL_SHARED[3:4]], ids=["no chunks", "only empty chunks"])
def test_empty_corpus_gives_an_empty_index(chunks):
    index = BM25Index(chunks, "plain")
    assert index.empty and len(index) == 0
    assert index.search("alpha", 10) == [] and index.document_frequency("alpha") == 0


# ------------------------------------------------------------------------------------------------ shipped set
@pytest.mark.parametrize("tokenizer", ["plain", "snowball"])
def test_shipped_set_scores_and_rankings_match_rank_bm25(tokenizer):
    chunks = split_cards(load_cards(SHIPPED_CARDS), DEFAULT_CHUNK_WORDS)
    turns = [q.text for q in load_queries(ROOT / "corpus" / "queries.jsonl")]
    assert len(chunks) > 200 and len(turns) > 60
    assert_equivalent(chunks, tokenizer, turns, depths=(1, 10, 50, len(chunks)))


@pytest.mark.parametrize("tokenizer", ["plain", "snowball"])
def test_columns_built_by_numpy_are_scipys_csc_arrays(tokenizer, monkeypatch):
    """Small indexes put their postings in columns with numpy (no scipy import at a cold start), large ones with
    scipy's csc_matrix: the two give the same arrays, element for element and dtype for dtype."""
    import retrieval.bm25 as bm25

    chunks = split_cards(load_cards(SHIPPED_CARDS), DEFAULT_CHUNK_WORDS)
    by_numpy = BM25Index(chunks, tokenizer)
    monkeypatch.setattr(bm25, "NUMPY_COLUMNS_MAX", 0)
    by_scipy = BM25Index(chunks, tokenizer)
    for name in ("_indptr", "_indices", "_data"):
        a, b = getattr(by_numpy, name), getattr(by_scipy, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
