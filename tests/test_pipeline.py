"""Every level reached through the real pipeline with the real bundled models, asserted on the span attribute."""

import pytest

from retrieval.pipeline import HybridRetriever
from retrieval.query import MAX_QUERY_CHARS
from retrieval.types import HYBRID_PATHS

LEXICAL = "GlucoSense GS-40 error E-07"


def level(spans) -> str:
    finished = [s for s in spans.get_finished_spans() if s.name == "retrieval.retrieve"]
    assert finished, "no retrieval.retrieve span was recorded"
    return finished[-1].attributes["agent.hybrid_path"]


def test_full(mini, spans):
    r = mini.retrieve(LEXICAL)
    assert r.hybrid_path == "full" == level(spans)
    assert r.final[0].parent_id == "gs40-e07"
    assert r.bm25.hits and r.dense.hits and r.fused and r.reranked
    assert "gs40-e07#0" in r.consensus
    assert set(r.timings_ms) >= {"bm25", "embed_query", "chroma_query", "fusion", "rerank", "dedup_threshold", "total"}


def test_rrf_only_when_reranker_fails_to_load(mini, mini_settings, spans):
    r = mini.retrieve(LEXICAL, mini_settings.replace(simulate_reranker_failure=True))
    assert r.hybrid_path == "rrf_only" == level(spans)
    assert "simulated" in r.reason and not r.reranked
    assert [h.parent_id for h in r.final][:1] == ["gs40-e07"]


def test_rrf_only_when_reranker_model_cannot_load(mini, mini_settings, spans, tmp_path):
    r = mini.retrieve(LEXICAL, mini_settings.replace(reranker_model=str(tmp_path / "no-such-model")))
    assert r.hybrid_path == "rrf_only" == level(spans)
    assert "could not be loaded" in r.reason


def test_dense_only_when_hybrid_disabled(mini, mini_settings, spans):
    r = mini.retrieve(LEXICAL, mini_settings.replace(hybrid_enabled=False))
    assert r.hybrid_path == "dense_only" == level(spans)
    assert r.bm25.status == "disabled" and "RETRIEVAL_HYBRID_ENABLED=false" in r.reason
    assert not r.reranked
    assert [h.chunk_id for h in r.fused] == [h.chunk_id for h in r.dense.hits]


def test_dense_only_when_bm25_index_empty(mini, mini_settings, spans):
    r = mini.retrieve(LEXICAL, mini_settings.replace(simulate_empty_bm25=True))
    assert r.hybrid_path == "dense_only" == level(spans)
    assert r.bm25.status == "empty" and "BM25 index is empty" in r.reason


def test_dense_only_on_a_really_empty_bm25_index(mini_settings, spans):
    """A corpus whose chunks have no indexable token gives an empty BM25 index."""
    from retrieval.types import Chunk

    chunks = [Chunk("x#0", "x", "", "en", "...")]
    r = HybridRetriever(
        mini_settings.replace(chroma_path=mini_settings.chroma_path + "-empty", min_similarity=-1),
        chunks=chunks,
        progress=lambda d, t: None,
    ).retrieve("anything")
    assert r.hybrid_path == "dense_only" == level(spans)


def test_bm25_only_when_dense_store_unreachable(mini_settings, spans):
    s = mini_settings.replace(chroma_host="127.0.0.1", chroma_port=9)  # nothing listens on the discard port
    retriever = HybridRetriever(s, progress=lambda d, t: None)
    r = retriever.retrieve(LEXICAL, s)
    assert r.hybrid_path == "bm25_only" == level(spans)
    assert "Chroma server 127.0.0.1:9 unavailable" in r.reason
    assert r.final[0].parent_id == "gs40-e07" and r.reranked


def test_no_match_refusal_below_threshold(mini, mini_settings, spans):
    r = mini.retrieve("who won the football world cup in 1998", mini_settings.replace(min_similarity=0.6))
    assert r.hybrid_path == "no_match" == level(spans)
    assert not r.final and r.cut and all("MIN_SIMILARITY" in h.cut_reason for h in r.cut)


@pytest.mark.parametrize("turn", ["", "   \n\t", "x" * (MAX_QUERY_CHARS + 1)])
def test_bad_turns_are_refused_not_raised(mini, turn, spans):
    r = mini.retrieve(turn)
    assert r.hybrid_path == "no_match" == level(spans)
    assert "empty" in r.reason or "limit" in r.reason


def test_control_characters_are_cleaned(mini):
    r = mini.retrieve("GS-40\x00 error\x1b E-07\x07")
    assert r.query == "GS-40 error E-07" and r.hybrid_path == "full"


def test_recall_superset(mini, mini_settings):
    """Fused candidates include every dense candidate (ADR-0022: recall improves strictly over dense-only)."""
    for turn in [LEXICAL, "my insulin got warm", "olvidé tomar la pastilla", "meter too cold"]:
        r = mini.retrieve(turn)
        assert {h.chunk_id for h in r.dense.hits} <= {h.chunk_id for h in r.fused}
        assert {h.chunk_id for h in r.fused} == {h.chunk_id for h in r.dense.hits} | {h.chunk_id for h in r.bm25.hits}


def test_fused_rows_carry_their_arithmetic(mini, mini_settings):
    s = mini_settings.replace(rrf_k=10, bm25_weight=1.0, dense_weight=2.0, query_weighting="off")
    r = mini.retrieve(LEXICAL, s)
    weight = {"bm25": 1.0, "dense": 2.0}
    for h in r.fused:
        expected = sum(weight[b] / (10 + rank) for b, rank in h.branch_ranks.items() if rank is not None)
        assert h.score == pytest.approx(expected)
        assert sum(h.contributions.values()) == pytest.approx(h.score)


def test_parent_dedup_keeps_best_chunk_per_card(mini_settings, tmp_path):
    """A card split into several chunks appears once in the final list, via its best-ranked chunk."""
    from retrieval.types import Chunk

    chunks = [
        Chunk("a#0", "a", "Insulin", "en", "Keep insulin pens in the fridge."),
        Chunk("a#1", "a", "Insulin", "en", "Insulin pens in use stay at room temperature."),
        Chunk("b#0", "b", "Meter", "en", "The meter shows error E-07 when the strip is removed."),
    ]
    s = mini_settings.replace(chroma_path=str(tmp_path / "dedup"), min_similarity=-1.0)
    r = HybridRetriever(s, chunks=chunks, progress=lambda d, t: None).retrieve("insulin pens", s)
    assert [h.parent_id for h in r.final] == ["a", "b"]
    assert {h.chunk_id for h in r.reranked} == {"a#0", "a#1", "b#0"}
    best_a = next(h for h in r.reranked if h.parent_id == "a")
    assert r.final[0].chunk_id == best_a.chunk_id


def test_top_k_cut_is_kept_with_reason(mini, mini_settings):
    r = mini.retrieve("missed dose", mini_settings.replace(top_k=1, min_similarity=-1.0))
    assert len(r.final) == 1
    assert r.cut and all(h.cut_reason == "beyond top_k=1" for h in r.cut)


def test_cached_control_change_reuses_model_scores(mini, mini_settings):
    mini.retrieve("how to store insulin pens")
    again = mini.retrieve("how to store insulin pens", mini_settings.replace(rrf_k=5))
    assert again.timings_ms["bm25"] == 0.0 and again.timings_ms["embed_query"] == 0.0
    assert again.timings_ms["chroma_query"] == 0.0


def test_reranker_scores_one_sequence_per_call():
    """The int8 model quantizes per batch; one pair per call makes a score independent of its neighbours."""
    from retrieval.rerank import load_reranker

    scorer = load_reranker("ms-marco-MiniLM-L-12-v2")
    pair = ("GS-40 error E-07", "Error E-07 on the GlucoSense GS-40 means the strip was removed too early.")
    alone = scorer.score(*pair)
    others = ["Keep insulin in the fridge.", "x " * 300, "Take a missed dose with your next meal."]
    mixed = [scorer.score(pair[0], p) for p in others[:2]] + [scorer.score(*pair)] + [scorer.score(pair[0], others[2])]
    assert mixed[2] == alone


def test_every_level_is_documented(mini):
    assert set(HYBRID_PATHS) == {"full", "rrf_only", "dense_only", "bm25_only", "no_match"}


def test_levers_are_reported(mini, mini_settings, spans):
    s = mini_settings.replace(bm25_tokenizer="snowball", fusion="convex", query_weighting="auto", rerank_mode="rrf")
    r = mini.retrieve(LEXICAL, s)
    assert r.hybrid_path == "full" and r.final[0].parent_id == "gs40-e07"
    assert r.weights["bm25"] == 2 * s.bm25_weight and "code" in r.weight_reason
    for h in r.fused:
        assert sum(h.contributions.values()) == pytest.approx(h.score)
    assert all(h.blend_score is not None for h in r.reranked)
    attrs = [x for x in spans.get_finished_spans() if x.name == "retrieval.retrieve"][-1].attributes
    assert attrs["retrieval.tokenizer"] == "snowball" and attrs["retrieval.fusion"] == "convex"
    assert attrs["retrieval.weights.bm25"] == 2 * s.bm25_weight


def test_rerank_rrf_mode_blends_cross_encoder_and_fused_order(mini, mini_settings):
    s = mini_settings.replace(rerank_mode="rrf", rerank_weight=1.0, rrf_k=60)
    r = mini.retrieve("how should I keep insulin pens", s)
    by_logit = [h.chunk_id for h in sorted(r.reranked, key=lambda h: (-h.score, h.fused_rank))]
    for h in r.reranked:
        expected = 1 / (60 + by_logit.index(h.chunk_id) + 1) + 1 / (60 + h.fused_rank)
        assert h.blend_score == pytest.approx(expected)
    assert [h.rank for h in sorted(r.reranked, key=lambda h: -h.blend_score)] == list(range(1, len(r.reranked) + 1))


def test_the_process_wide_retriever_cache_is_bounded_lru_and_never_evicts_one_in_use(
    mini_settings, tmp_path, monkeypatch
):
    """Issue 19, defect 8: one retriever per corpus and model was kept for ever. At most MAX_RETRIEVERS now, the
    least recently used first, and never one in use (a turn or an evaluation holds ``using()``)."""
    from retrieval import retriever_cache
    from retrieval.types import Chunk

    monkeypatch.setattr(retriever_cache, "_RETRIEVERS", retriever_cache.OrderedDict())
    monkeypatch.setattr(retriever_cache, "MAX_RETRIEVERS", 2)
    s = mini_settings.replace(chroma_path=str(tmp_path / "lru"))

    def open_corpus(name: str):
        chunks = [Chunk(f"{name}#0", name, name.title(), "en", f"The {name} card says something about {name}.")]
        return retriever_cache.get_retriever(s, chunks=chunks, corpus_key=f"test:{name}")

    a, b = open_corpus("alpha"), open_corpus("beta")
    assert open_corpus("alpha") is a  # a hit makes alpha the most recently used
    open_corpus("gamma")
    assert [k[0] for k in retriever_cache._RETRIEVERS] == ["test:alpha", "test:gamma"]  # beta, the least recent, went
    with a.using():
        open_corpus("delta")  # alpha is in use: gamma goes instead
        assert [k[0] for k in retriever_cache._RETRIEVERS] == ["test:alpha", "test:delta"]
        assert a.using.active
    assert not a.using.active and open_corpus("beta") is not b  # an evicted retriever is opened again from its store
    with pytest.raises(ValueError, match="MAX_RETRIEVERS='0'"):
        retriever_cache._max_retrievers({"MAX_RETRIEVERS": "0"})
