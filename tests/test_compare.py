"""Compare two configurations: row diffs on hand-made lists, the summary's attribution on hand-made results,
presets, and the per-list relevance metrics against the evaluator's own."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from retrieval.compare import PRESETS, changed_settings, diff_lists, diff_results, preset_values, stage_ids, summarize
from retrieval.evaluation.compare import fixed_and_broken, list_metrics, stage_metrics
from retrieval.evaluation.metrics import score_turn
from retrieval.evaluation.turn_runs import ranked_parents
from retrieval.settings import ADR_RECIPE, Settings
from retrieval.types import BranchResult, FinalHit, FusedHit, Hit, RerankedHit, RetrievalResult


# ------------------------------------------------------------------------------------------------------ diff
def test_diff_marks_entered_left_moved_and_same():
    d = diff_lists(["a", "b", "c", "d"], ["c", "b", "e", "a"])
    assert d.marks["c"].kind == "up" and d.marks["c"].moved == 2 and d.marks["c"].label == "↑2"
    assert d.marks["b"].kind == "same" and d.marks["b"].label == "="
    assert d.marks["a"].kind == "down" and d.marks["a"].moved == -3 and d.marks["a"].label == "↓3"
    assert d.marks["e"].kind == "entered" and d.marks["e"].label == "new" and d.marks["e"].a_rank is None
    assert d.marks["d"].kind == "left" and d.marks["d"].b_rank is None
    assert d.ids("entered") == ["e"] and d.ids("left") == ["d"] and d.ids("up") == ["c"] and d.ids("down") == ["a"]
    assert d.counts() == {"entered": 1, "left": 1, "up": 1, "down": 1, "same": 1}
    assert not d.unchanged


def test_diff_of_equal_and_disjoint_and_empty_lists():
    same = diff_lists(["x", "y"], ["x", "y"])
    assert same.unchanged and {m.kind for m in same.marks.values()} == {"same"}
    apart = diff_lists(["x"], ["y"])
    assert apart.counts() == {"entered": 1, "left": 1, "up": 0, "down": 0, "same": 0}
    assert diff_lists([], ["y"]).ids("entered") == ["y"] and diff_lists(["x"], []).ids("left") == ["x"]
    with pytest.raises(ValueError, match="twice"):
        diff_lists(["x", "x"], [])


def test_diff_matches_positions_on_random_lists():
    rng = random.Random(7)
    for _ in range(200):
        pool = [f"d{i}" for i in range(12)]
        a, b = rng.sample(pool, rng.randint(0, 8)), rng.sample(pool, rng.randint(0, 8))
        d = diff_lists(a, b)
        assert set(d.marks) == set(a) | set(b)
        for doc, mark in d.marks.items():
            assert mark.a_rank == (a.index(doc) + 1 if doc in a else None)
            assert mark.b_rank == (b.index(doc) + 1 if doc in b else None)


# ------------------------------------------------------------------------------------------- hand-made results
def fused(cid: str, rank: int, bm25: int | None, dense: int | None, w: dict[str, float], k: int) -> FusedHit:
    ranks = {"bm25": bm25, "dense": dense}
    contrib = {br: w[br] / (k + r) for br, r in ranks.items() if r is not None}
    return FusedHit(cid, cid.split("#")[0], rank, sum(contrib.values()), ranks, contrib)


def result(
    settings: Settings,
    bm25: list[str],
    dense: list[str],
    k: int,
    w: dict[str, float],
    reranked: list[tuple[str, int]] = (),
    path: str = "full",
) -> RetrievalResult:
    ranks = {br: {c: i for i, c in enumerate(lst, 1)} for br, lst in (("bm25", bm25), ("dense", dense))}
    ids = sorted(
        set(bm25) | set(dense), key=lambda c: -sum(w[br] / (k + ranks[br][c]) for br in ranks if c in ranks[br])
    )
    fz = tuple(fused(c, i, ranks["bm25"].get(c), ranks["dense"].get(c), w, k) for i, c in enumerate(ids, 1))
    rr = tuple(RerankedHit(c, c.split("#")[0], i, 1.0 - i / 10, fr) for i, (c, fr) in enumerate(reranked, 1))
    order = [c for c, _ in reranked] + [c for c in ids if c not in dict(reranked)]
    final = tuple(FinalHit(c, c.split("#")[0], i, 0.0, 0.9) for i, c in enumerate(order[:3], 1))
    return RetrievalResult(
        query="q",
        hybrid_path=path,
        reason="why",
        bm25=BranchResult("bm25", tuple(Hit(c, c.split("#")[0], i, 1.0) for i, c in enumerate(bm25, 1))),
        dense=BranchResult("dense", tuple(Hit(c, c.split("#")[0], i, 1.0) for i, c in enumerate(dense, 1))),
        fused=fz,
        reranked=rr,
        final=final,
        cut=(),
        consensus=(),
        timings_ms={},
        settings=settings.to_dict(),
        weights=w,
    )


BM25 = ["y#0", "x#0", "z#0"]
DENSE = ["z#0", "y#0", "w#0"]


def test_summary_attributes_the_new_first_card_to_the_dense_weight():
    a_s = Settings(rrf_k=10, bm25_weight=1.0, dense_weight=1.0, reranker_max_input=0)
    b_s = a_s.replace(dense_weight=3.0)
    a = result(a_s, BM25, DENSE, 10, {"bm25": 1.0, "dense": 1.0})
    b = result(b_s, BM25, DENSE, 10, {"bm25": 1.0, "dense": 3.0})
    assert stage_ids(a, "final")[0] == "y" and stage_ids(b, "final")[0] == "z"  # the hand-made lists say so
    text = summarize(a, b, {"z": "Zeta card"})
    assert "dense_weight 1 → 3" in text
    assert "B ranks Zeta card (z) first (A ranks it #2)" in text
    assert "its dense weight is 3, and it is dense's #1" in text
    assert "A weighs BM25 1 and dense 1" in text and "B weighs them 1 and 3" in text
    assert "Both run at level full." in text
    assert "the fused list:" in text and "BM25" not in text.split("Changes per stage:")[1]


def test_summary_attributes_each_side_s_weights_to_its_own_weighting():
    """A's turn weighting (auto: a long turn, dense x3) against B's (off): each reason goes with its own side."""
    a_s = Settings(rrf_k=10, bm25_weight=1.0, dense_weight=1.0, reranker_max_input=0, query_weighting="auto")
    b_s = a_s.replace(query_weighting="off")
    a = replace(
        result(a_s, BM25, DENSE, 10, {"bm25": 1.0, "dense": 3.0}),
        weight_reason="long plain-language turn: dense weight x3",
    )
    b = replace(
        result(b_s, BM25, DENSE, 10, {"bm25": 1.0, "dense": 1.0}), weight_reason="fixed weights (QUERY_WEIGHTING=off)"
    )
    assert stage_ids(a, "final")[0] == "z" and stage_ids(b, "final")[0] == "y"
    text = summarize(a, b)
    assert "query_weighting auto → off" in text and "its BM25 weight is 1, and it is BM25's #1" in text
    assert (
        "A weighs BM25 1 and dense 3 (long plain-language turn: dense weight x3); B weighs them 1 and 1 "
        "(fixed weights (QUERY_WEIGHTING=off))"
    ) in text


def test_summary_tells_a_shortened_or_lengthened_list_from_a_changed_one():
    s = Settings(rrf_k=10, reranker_max_input=0)
    long_bm25, long_dense = ["a#0", "b#0", "c#0", "d#0", "e#0"], ["c#0", "a#0", "f#0", "g#0"]
    a = result(s, long_bm25, long_dense, 10, {"bm25": 1.0, "dense": 1.0})
    b = result(s.replace(candidate_multiplier=1), long_bm25[:3], ["c#0", "f#0", "a#0"], 10, {"bm25": 1.0, "dense": 1.0})
    text = summarize(a, b).split("Changes per stage: ")[1]
    assert "BM25: B keeps 3 of A's 5: the same order, cut at 3" in text
    assert "dense: 0 entered, 1 left, 2 moved (A lists 4, B 3)" in text
    text = summarize(b, a).split("Changes per stage: ")[1]
    assert "BM25: B lists A's 3 in the same order, then 2 more" in text
    assert "entered" not in text.split(";")[0]


def test_summary_attributes_to_the_cross_encoder_and_to_the_level():
    s = Settings(rrf_k=10, bm25_weight=1.0, dense_weight=1.0)
    a = result(s.replace(reranker_max_input=0), BM25, DENSE, 10, {"bm25": 1.0, "dense": 1.0}, path="rrf_only")
    b = result(s, BM25, DENSE, 10, {"bm25": 1.0, "dense": 1.0}, reranked=[("w#0", 4), ("y#0", 1)])
    text = summarize(a, b)
    assert f"reranker_max_input 0 → {s.reranker_max_input}" in text
    assert "A runs at level rrf_only, B at level full" in text
    assert "B ranks w first (A does not return it): the cross-encoder moved it from fused #4 to the top" in text
    assert f"(rerank mode {s.rerank_mode} in B; B changes reranker_max_input)" in text


def test_summary_of_identical_results_says_so():
    s = Settings(rrf_k=10)
    a = result(s, BM25, DENSE, 10, {"bm25": 1.0, "dense": 2.0})
    text = summarize(a, a)
    assert "A and B have the same settings." in text and "Every stage lists the same rows" in text
    assert all(d.unchanged for d in diff_results(a, a).values())


def test_changed_settings_and_presets():
    a = Settings(rrf_k=10).to_dict()
    assert changed_settings(a, {**a, "rrf_k": 60}) == [("rrf_k", 10, 60)]
    defaults = {
        "rrf_k": 10,
        "reranker_max_input": 20,
        "hybrid_enabled": True,
        "bm25_tokenizer": "snowball",
        "dense_weight": 2.0,
    }
    mine = {**defaults, "rrf_k": 3, "dense_weight": 5.0}
    assert preset_values("tuned defaults", mine, defaults) == defaults
    assert preset_values("k=60", mine, defaults) == {**mine, "rrf_k": 60}
    assert preset_values("no reranker", mine, defaults)["reranker_max_input"] == 0
    assert preset_values("hybrid off", mine, defaults)["hybrid_enabled"] is False
    adr = preset_values("ADR recipe", mine, defaults)
    assert adr["rrf_k"] == ADR_RECIPE["rrf_k"] and adr["dense_weight"] == ADR_RECIPE["dense_weight"]
    assert set(PRESETS) == {"tuned defaults", "ADR recipe", "no reranker", "hybrid off", "k=60"}
    with pytest.raises(ValueError, match="choose one of"):
        preset_values("bogus", mine, defaults)


# ------------------------------------------------------------------------------------------- per-list metrics
def test_list_metrics_equal_the_evaluators_on_random_lists():
    rng = random.Random(3)
    for _ in range(300):
        pool = [f"c{i}" for i in range(25)]
        ranked = rng.sample(pool, rng.randint(0, 20))
        qrels = {d: rng.choice([0, 1, 2]) for d in rng.sample(pool, rng.randint(1, 6))}
        got = list_metrics(ranked, qrels)
        if not any(g > 0 for g in qrels.values()):
            assert got is None
            continue
        want = score_turn(ranked, qrels)
        assert got["ndcg@10"] == want["ndcg@10"] and got["recall@10"] == want["recall@10"]
        first = got["first_relevant"]
        assert want["mrr@10"] == 0 if first is None or first > 10 else want["mrr@10"] == pytest.approx(1 / first)


def test_unlabeled_lists_have_no_metric_not_a_zero():
    assert list_metrics(["a", "b"], {}) is None and list_metrics(["a"], {"a": 0}) is None
    assert list_metrics(["a", "b"], {"b": 1})["first_relevant"] == 2
    assert list_metrics(["a"], {"b": 1})["first_relevant"] is None


def test_stage_metrics_score_the_evaluators_parent_lists():
    s = Settings(rrf_k=10)
    r = result(s, BM25, DENSE, 10, {"bm25": 1.0, "dense": 2.0})
    got = stage_metrics(r, {"z": 2, "y": 1})
    for stage, config in (("bm25", "bm25"), ("dense", "dense"), ("rrf", "rrf"), ("final", "full")):
        assert got[stage]["ndcg@10"] == score_turn(ranked_parents(r, config), {"z": 2, "y": 1})["ndcg@10"]
    assert got["dense"]["first_relevant"] == 1 and got["bm25"]["first_relevant"] == 1
    assert stage_metrics(r, {"z": 2})["bm25"]["first_relevant"] == 3


def test_fixed_and_broken_sorts_by_the_change():
    report = {
        "turns": [
            {"id": "q1", "delta": 0.5},
            {"id": "q2", "delta": -0.25},
            {"id": "q3", "delta": 0.0},
            {"id": "q4", "delta": None},
            {"id": "q5", "delta": -0.75},
        ]
    }
    assert [t["id"] for t in fixed_and_broken(report)] == ["q5", "q2", "q1"]
    assert [t["id"] for t in fixed_and_broken(report, "-delta")] == ["q1", "q2", "q5"]
