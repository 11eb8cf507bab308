"""Property-based tests: for any turn and any valid controls, the pipeline answers and its result is coherent.

Real bundled models over the 5-card mini corpus, so the example counts stay modest and deadlines are off.
"""

from __future__ import annotations

import json
import unicodedata

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from retrieval.parents import cosine_cut_skipped
from retrieval.query import MAX_QUERY_CHARS
from retrieval.settings import Settings
from retrieval.types import HYBRID_PATHS, RetrievalResult

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DOMAIN = [
    "GlucoSense",
    "GS-40",
    "GS-60",
    "E-07",
    "E-09",
    "error",
    "meter",
    "strip",
    "insulin",
    "pen",
    "fridge",
    "Glucavex",
    "500",
    "mg",
    "dose",
    "missed",
    "olvidé",
    "dosis",
    "pastilla",
    "cold",
    "hot",
    "warm",
    "car",
]
JUNK = [
    "<script>alert(1)</script>",
    "<b>",
    "&amp;",
    "\"'`",
    "💊",
    "🩸👩🏽‍⚕️",
    "مرحبا",
    "שלום",
    "\u202e",
    "\u200b",
    "\x00",
    "\x1b[31m",
    "\r\n",
    "\t",
    "\ud800",
    "\udcff",
    "𝔤𝔰",
    "Ⅻ",
    "ﬁ",
    "e\u0301",
    "%s%n",
    "{0}",
    "NaN",
    "-1",
]

ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=300)  # includes controls, surrogates
DOMAINISH = st.lists(st.sampled_from(DOMAIN + JUNK), min_size=1, max_size=40).map(" ".join)
LONG = st.builds(
    lambda unit, n: (unit * n)[:n],
    st.sampled_from(["a", "insulin pen ", "💊", "مرحبا ", " ", "\x00"]),
    st.integers(MAX_QUERY_CHARS - 5, 20_000),
)
TURNS = st.one_of(ANY_TEXT, DOMAINISH, LONG)


def check(r: RetrievalResult, s: Settings) -> None:
    """The invariants every result must satisfy, whatever the turn and the controls."""
    assert r.hybrid_path in HYBRID_PATHS and isinstance(r.reason, str) and r.reason
    bm25, dense = [h.chunk_id for h in r.bm25.hits], [h.chunk_id for h in r.dense.hits]
    fused, final = [h.chunk_id for h in r.fused], [h.chunk_id for h in r.final]
    for hits in (r.bm25.hits, r.dense.hits, r.fused, r.reranked, r.final):
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    for ids in (bm25, dense, fused, [h.chunk_id for h in r.reranked]):
        assert len(ids) == len(set(ids))
    assert set(final) <= set(fused) <= set(bm25) | set(dense)
    assert set(fused) == {c for b in (r.bm25, r.dense) if b.usable for c in (h.chunk_id for h in b.hits)}
    assert {h.chunk_id for h in r.reranked} <= set(fused)
    parents = [h.parent_id for h in r.final] + [h.parent_id for h in r.cut]
    assert len(parents) == len(set(parents)), "a card appears twice after parent dedup"
    assert len(r.final) <= s.top_k and all(h.kept for h in r.final) and not any(h.kept for h in r.cut)
    if cosine_cut_skipped(r.refusal, s):  # answered across languages, English embedder: the cut is not applied
        assert "MIN_SIMILARITY not applied" in r.reason
    else:
        assert all(h.similarity is None or h.similarity >= s.min_similarity for h in r.final)
    both = r.bm25.usable and r.dense.usable
    expected = {
        "full": both and bool(r.reranked),
        "rrf_only": both and not r.reranked,
        "dense_only": r.dense.usable and not r.bm25.usable,
        "bm25_only": r.bm25.usable and not r.dense.usable,
        "no_match": not r.final,
    }
    assert expected[r.hybrid_path], (r.hybrid_path, r.bm25.status, r.dense.status, r.reason)
    assert bool(r.final) == (r.hybrid_path != "no_match")
    assert len(r.query) <= MAX_QUERY_CHARS
    assert not any(unicodedata.category(ch) in {"Cc", "Cs"} for ch in r.query)
    json.dumps(r.to_dict(), ensure_ascii=False, allow_nan=False).encode("utf-8")


@PROPERTY
@given(text=TURNS)
@example(text="")
@example(text="   \n\t  ")
@example(text="\x00\x01\x1f\x7f")
@example(text="x" * 20_000)
@example(text="ما معنى الخطأ E-07 في جهاز GS-40؟")
@example(text="💊💉🩸 GS-40 E-07 ❄️")
@example(text="<script>alert('E-07')</script><img src=x onerror=alert(1)>")
@example(text="\ud800 GS-40 \udfff")
def test_any_turn_is_answered_and_coherent(mini, mini_settings, text):
    check(mini.retrieve(text, mini_settings), mini_settings)


CONTROLS = st.fixed_dictionaries(
    {
        "rrf_k": st.integers(1, 1000),
        "bm25_weight": st.floats(0, 10),
        "dense_weight": st.floats(0, 10),
        "top_k": st.integers(1, 8),
        "candidate_multiplier": st.integers(1, 6),
        "min_similarity": st.floats(-1, 1),
        "reranker_max_input": st.integers(0, 8),
        "hybrid_enabled": st.booleans(),
        "fusion": st.sampled_from(["rrf", "convex"]),
        "rerank_mode": st.sampled_from(["replace", "rrf"]),
        "query_weighting": st.sampled_from(["off", "auto"]),
        "bm25_tokenizer": st.sampled_from(["plain", "snowball"]),
        "simulate_reranker_failure": st.booleans(),
        "simulate_empty_bm25": st.booleans(),
    }
).filter(lambda c: c["bm25_weight"] > 0 or c["dense_weight"] > 0 or not c["hybrid_enabled"])


@PROPERTY
@given(
    controls=CONTROLS,
    text=st.sampled_from(
        [
            "GlucoSense GS-40 error E-07",
            "my insulin pen got warm",
            "olvidé una dosis",
            "meter too cold",
            "who won the 1998 world cup",
        ]
    ),
)
def test_any_valid_controls_keep_the_invariants(mini, mini_settings, controls, text):
    s = mini_settings.replace(**controls)
    check(mini.retrieve(text, s), s)
