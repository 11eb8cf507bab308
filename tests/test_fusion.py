import random
from decimal import ROUND_HALF_UP, Decimal

import pytest

from retrieval.fusion import reciprocal_rank_fusion, rrf_terms

BM25 = ["A", "B", "C", "D"]
DENSE = ["C", "A", "E", "B"]


def test_classroom_example_exact():
    fused = dict(reciprocal_rank_fusion([BM25, DENSE], k=60))
    assert fused["A"] == 1 / (60 + 1) + 1 / (60 + 2)
    assert fused["C"] == 1 / (60 + 3) + 1 / (60 + 1)
    assert fused["B"] == 1 / (60 + 2) + 1 / (60 + 4)
    assert fused["E"] == 1 / (60 + 3)
    assert fused["D"] == 1 / (60 + 4)


def test_classroom_example_order_and_rounding():
    fused = reciprocal_rank_fusion([BM25, DENSE], k=60)
    assert [d for d, _ in fused] == ["A", "C", "B", "E", "D"]
    # The class rounds half up (D = 1/64 = 0.015625 -> 0.01563).
    rounded = [float(Decimal(s).quantize(Decimal("0.00001"), rounding=ROUND_HALF_UP)) for _, s in fused]
    assert rounded == [0.03252, 0.03227, 0.03175, 0.01587, 0.01563]


def test_named_rankings_and_weights():
    fused = dict(reciprocal_rank_fusion({"bm25": BM25, "dense": DENSE}, k=10, weights={"bm25": 0.5, "dense": 2.0}))
    assert fused["A"] == 0.5 / (10 + 1) + 2.0 / (10 + 2)
    assert fused["E"] == 2.0 / (10 + 3)


def test_ties_broken_by_id():
    fused = reciprocal_rank_fusion([["b", "a"], ["a", "b"]], k=60)
    assert [d for d, _ in fused] == ["a", "b"]
    assert fused[0][1] == fused[1][1]


@pytest.mark.parametrize("rankings", [[], [[]], [[], []]])
def test_empty_inputs(rankings):
    assert reciprocal_rank_fusion(rankings) == []


def test_one_empty_ranking_is_the_other_ranking():
    assert [d for d, _ in reciprocal_rank_fusion([[], ["x", "y"]])] == ["x", "y"]


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_invalid_k(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        reciprocal_rank_fusion([BM25], k=k)


def test_invalid_weights():
    with pytest.raises(ValueError, match="one weight per ranking"):
        reciprocal_rank_fusion([BM25, DENSE], weights=[1.0])
    with pytest.raises(ValueError, match=">= 0"):
        reciprocal_rank_fusion([BM25, DENSE], weights=[1.0, -1.0])


def test_duplicate_id_in_a_ranking_is_an_error():
    with pytest.raises(ValueError, match="twice"):
        reciprocal_rank_fusion([["a", "a"]])


def test_terms_explain_the_sum():
    terms = rrf_terms({"bm25": BM25, "dense": DENSE}, k=60)
    assert terms["A"] == {"bm25": (1, 1 / 61), "dense": (2, 1 / 62)}
    assert terms["D"]["dense"] == (None, 0.0)


@pytest.mark.parametrize("seed", range(5))
def test_matches_ranx(seed):
    """ranx is an independent RRF implementation: same scores on random runs."""
    from ranx import Run, fuse

    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(30)]
    lists = [rng.sample(docs, rng.randint(1, 20)) for _ in range(3)]
    k = rng.choice([1, 10, 60])
    ours = dict(reciprocal_rank_fusion(lists, k=k))
    runs = [Run({"q": {d: float(len(lst) - i) for i, d in enumerate(lst)}}) for lst in lists]
    theirs = fuse(runs, method="rrf", params={"k": k}).to_dict()["q"]
    assert set(ours) == set(theirs)
    for doc, score in ours.items():
        assert score == pytest.approx(theirs[doc], rel=1e-9)


def test_convex_fusion_is_a_weighted_sum_of_min_max_scores():
    from retrieval.fusion import convex_fusion

    fused = dict(
        convex_fusion(
            {"bm25": [("A", 12.0), ("B", 7.0), ("C", 2.0)], "dense": [("C", 0.9), ("A", 0.7), ("E", 0.5)]},
            {"bm25": 1.0, "dense": 3.0},
        )
    )
    assert fused["A"] == pytest.approx((1.0 * 1.0 + 3.0 * 0.5) / 4)
    assert fused["C"] == pytest.approx((1.0 * 0.0 + 3.0 * 1.0) / 4)
    assert fused["B"] == pytest.approx(1.0 * 0.5 / 4)
    assert fused["E"] == 0.0


def test_min_max_edge_cases():
    from retrieval.fusion import min_max

    assert min_max([]) == [] and min_max([3.0]) == [1.0] and min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
