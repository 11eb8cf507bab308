"""Tune (retrieval/evaluation/tune.py): the grid's rankings are the pipeline's own, the held-out guard, and a corpus
with too few turns gets no suggestion."""

from __future__ import annotations

import dataclasses
import json

import pytest

from retrieval.corpus import load_shipped
from retrieval.evaluation import tune
from tests.conftest import SHIPPED_CARDS


def test_three_labeled_turns_cannot_tell_and_suggest_nothing(tmp_path, capsys):
    from retrieval.cli import main
    from retrieval.evaluation.cli import register

    folder = tmp_path / "three"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"text {i}"}) + "\n" for i in range(5))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"turn {i}"}) + "\n" for i in range(3))
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(3))
    )
    assert main(["tune", "--beir", str(folder), "--json"], registrars=(register,)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["suggestion"] is None and report["held_out"] is None
    assert report["answerable_turns"] == 3 and report["minimum_turns"] == 12
    assert "cannot tell" in report["verdict"] and "2/2^n" in report["verdict"]


POINTS = [
    {
        "candidate_multiplier": 4,
        "bm25_tokenizer": "plain",
        "fusion": "convex",
        "rrf_k": 10,
        "dense_weight": 1.0,
        "reranker_max_input": 10,
        "rerank_mode": "replace",
        "rerank_weight": 0.5,
    },
    {
        "candidate_multiplier": 20,
        "bm25_tokenizer": "snowball",
        "fusion": "rrf",
        "rrf_k": 60,
        "dense_weight": 0.5,
        "reranker_max_input": 20,
        "rerank_mode": "rrf",
        "rerank_weight": 1.0,
    },
    {
        "candidate_multiplier": 10,
        "bm25_tokenizer": "snowball",
        "fusion": "rrf",
        "rrf_k": 5,
        "dense_weight": 3.0,
        "reranker_max_input": 0,
        "rerank_mode": "rrf",
        "rerank_weight": 0.5,
    },
]


def test_the_grid_ranks_cards_as_the_pipeline_does(shipped, shipped_settings):
    dataset = load_shipped(SHIPPED_CARDS)
    dataset = dataclasses.replace(dataset, queries=dataset.queries[:4])
    turns = tune.gather(dataset, shipped, shipped_settings)
    for point in POINTS:
        s = shipped_settings.replace(**point)
        table = tune.score_grid(turns, [point], shipped_settings, shipped)
        for t, turn in enumerate(turns):
            fused = tune._fused(turn, s, shipped)
            logits = tune._logits(turn, {h.chunk_id for h in fused[: s.reranker_max_input]}, shipped, s)
            grid_order = tune._ranked(fused, s, logits)
            real = shipped.retrieve(turn.query.text, s.replace(min_similarity=-1.0, refusal_rule="cosine"))
            assert grid_order[: s.top_k] == [h.parent_id for h in real.final], (point, turn.query.id)
            assert 0.0 <= table[0][t] <= 1.0


def test_held_out_guard_on_the_shipped_set(shipped, shipped_settings):
    dataset = load_shipped(SHIPPED_CARDS)
    dataset = dataclasses.replace(dataset, queries=dataset.queries[:14])
    report = tune.tune(dataset, shipped, shipped_settings, seed=3, resamples=1000)
    assert report["split"]["tune"] == 7 and report["split"]["held_out"] == 7
    means = report["held_out"]["means"]
    assert set(means) == {"suggested", "defaults", "bm25", "dense"}
    if report["suggestion"] is not None:
        assert means["suggested"] > max(means["defaults"], means["bm25"], means["dense"])
        assert set(report["suggestion"]["settings"]) <= set(tune.TUNED)
    else:
        assert "nothing" in report["verdict"]
    again = tune.tune(dataset, shipped, shipped_settings, seed=3, resamples=1000)
    assert again["held_out"] == report["held_out"] and again["split"] == report["split"]
    # Another seed, another held-out half. The split is drawn before any grid point is scored, so the fusion-only
    # run reports it as a full one would, at a tenth of the points and a third of the new pairs to score.
    fusion = tune.tune(dataset, shipped, shipped_settings, seed=4, resamples=1000, fusion_only=True)
    assert fusion["split"]["held_out_ids"] != report["split"]["held_out_ids"]
    assert fusion["grid"]["points"] == len(tune.fusion_points(shipped_settings))
    assert all(fusion["best_on_tune"]["settings"][k] == getattr(shipped_settings, k) for k in tune.RERANK_GRID)


@pytest.mark.parametrize("n", [0, 11])
def test_the_minimum_is_stated(n):
    assert f"{n} labeled turn" in tune.cannot_tell(n) and "at least 12" in tune.cannot_tell(n)
