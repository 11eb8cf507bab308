"""Metric functions: hand-worked values, edge cases, and agreement with ranx (an independent implementation)."""

import math
import random
import warnings

import pytest

from retrieval.evaluation.metrics import METRICS, dcg_at_k, mrr_at_k, ndcg_at_k, recall_at_k, score_turn


def test_ndcg_by_hand_graded_gains_log2_discount():
    qrels = {"a": 2, "b": 1, "c": 0}
    ranked = ["b", "x", "a"]
    dcg = 1 / math.log2(2) + 2 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert dcg_at_k(ranked, qrels, 10) == pytest.approx(dcg)
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(["a", "b"], qrels, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["a"], qrels, 1) == pytest.approx(1.0)  # the ideal is cut at k too
    assert ndcg_at_k(["b", "a"], qrels, 1) == pytest.approx(1 / 2)


def test_ndcg_ideal_counts_unretrieved_relevant_docs():
    assert ndcg_at_k(["a"], {"a": 1, "b": 1}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_recall_and_mrr_by_hand():
    qrels = {"a": 2, "b": 1, "c": 0}
    assert recall_at_k(["c", "b", "x"], qrels, 10) == pytest.approx(1 / 2)
    assert recall_at_k(["x", "b", "a"], qrels, 2) == pytest.approx(1 / 2)
    assert mrr_at_k(["c", "x", "a"], qrels, 10) == pytest.approx(1 / 3)  # grade 0 is not relevant
    assert mrr_at_k(["c", "x", "a"], qrels, 2) == 0.0


@pytest.mark.parametrize("ranked", [[], ["x", "y"]])
@pytest.mark.parametrize("qrels", [{}, {"a": 0}])
def test_no_relevant_or_nothing_found_scores_zero(ranked, qrels):
    for fn in (ndcg_at_k, recall_at_k, mrr_at_k):
        assert fn(ranked, qrels, 10) == 0.0
    assert ndcg_at_k([], {"a": 1}, 10) == recall_at_k([], {"a": 1}, 10) == mrr_at_k([], {"a": 1}, 10) == 0.0


def test_bad_inputs_say_how_to_fix():
    with pytest.raises(ValueError, match="positive integer"):
        ndcg_at_k(["a"], {"a": 1}, 0)
    with pytest.raises(ValueError, match="lists 'a' twice: dedup"):
        recall_at_k(["a", "a"], {"a": 1}, 10)
    with pytest.raises(TypeError, match="not a string"):
        mrr_at_k("abc", {"a": 1}, 10)
    with pytest.raises(TypeError, match="grades must be integers"):
        ndcg_at_k(["a"], {"a": 1.5}, 10)
    with pytest.raises(ValueError, match="unknown metrics"):
        score_turn(["a"], {"a": 1}, ["map"])


def random_case(rng: random.Random, n_queries: int = 60):
    """Random runs and graded qrels over a small vocabulary, so hits, misses and ties of grades all happen."""
    docs = [f"d{i}" for i in range(40)]
    runs, qrels = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(1, 8))
        qrels[qid] = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
        qrels[qid][judged[0]] = rng.randint(1, 3)  # at least one relevant
        runs[qid] = rng.sample(docs, rng.randint(0, 30))
    return runs, qrels


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_agrees_with_ranx_on_random_runs(seed):
    ranx = pytest.importorskip("ranx")
    runs, qrels = random_case(random.Random(seed))
    runs = {q: r for q, r in runs.items() if r}  # ranx needs at least one retrieved id per query
    ranx_run = ranx.Run({q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in runs.items()})
    ranx_qrels = ranx.Qrels({q: qrels[q] for q in runs})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ranx.evaluate(ranx_qrels, ranx_run, list(METRICS), return_mean=False)
    order = list(ranx_run.keys())
    assert set(order) == set(runs)
    for metric in METRICS:
        ours = [METRICS[metric](runs[q], qrels[q]) for q in order]
        assert ours == pytest.approx(list(theirs[metric]), abs=1e-12), metric
