"""The answerability model's slot (REFUSAL_MODEL): a tiny random-weight CrossEncoder the tests build themselves
(a one-layer BERT and a tokenizer from a small vocabulary, saved with save_pretrained) loads once, scores in batches,
remembers pairs, and joins the refusal rule with its own threshold; a model that cannot load is named, never raised."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval import answerability
from retrieval.encoders import ModelUnavailable
from retrieval.refusal_evidence import RefusalEvidence
from retrieval.refusal_gates import judge
from retrieval.refusal_thresholds import RefusalThresholds
from retrieval.settings import Settings

WORDS = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "a",
    "my",
    "how",
    "do",
    "i",
    "when",
    "take",
    "insulin",
    "dose",
    "missed",
    "pen",
    "store",
    "keep",
    "fridge",
]


def build_cross_encoder(folder: Path, num_labels: int = 1) -> Path:
    """A tiny BERT sequence classifier with random weights and its tokenizer, as sentence-transformers loads one."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    if num_labels == 3:
        config.id2label = {0: "contradiction", 1: "entailment", 2: "neutral"}
        config.label2id = {v: k for k, v in config.id2label.items()}
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    answerability.clear()
    yield str(build_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder")))
    answerability.clear()


TEXTS = ["keep insulin pen in the fridge", "missed dose: take it when", "store the pen", "my dose", "the fridge"]


def test_the_model_loads_once_scores_in_batches_and_remembers_pairs(tiny, monkeypatch):
    loads = answerability.LOADS["count"]
    model = answerability.load(tiny)
    assert answerability.load(tiny) is model and answerability.LOADS["count"] == loads + 1
    calls = []
    real = model.predict
    monkeypatch.setattr(model, "predict", lambda pairs, **kw: calls.append((len(pairs), kw)) or real(pairs, **kw))
    got = answerability.scores(tiny, "when do i take my insulin", TEXTS, batch_size=2)
    assert len(got) == 5 and all(0.0 <= g <= 1.0 for g in got)  # a one-label model's sigmoid
    assert calls == [(5, {"batch_size": 2, "show_progress_bar": False})]
    # The same pairs again (and a repeated text) are answered from the cache: no new prediction.
    again = answerability.scores(tiny, "when do i take my insulin", [TEXTS[1], *TEXTS], batch_size=2)
    assert again == [got[1], *got] and len(calls) == 1
    assert answerability.best(tiny, "when do i take my insulin", TEXTS) == max(got)
    # Only the new pair is predicted.
    answerability.scores(tiny, "store insulin", TEXTS[:1] + ["a new card"])
    assert [n for n, _ in calls] == [5, 2]


def test_an_nli_model_gives_the_entailment_probability(tmp_path):
    folder = str(build_cross_encoder(tmp_path / "nli", num_labels=3))
    model = answerability.load(folder)
    raw = model.predict([("how do i store insulin", "keep insulin pen in the fridge")], show_progress_bar=False)[0]
    import numpy as np

    probs = np.exp(raw - raw.max()) / np.exp(raw - raw.max()).sum()
    assert answerability.scores(folder, "how do i store insulin", ["keep insulin pen in the fridge"])[0] == (
        pytest.approx(float(probs[1]))
    )


def test_its_threshold_decides_and_the_decision_names_the_model(tiny):
    score = answerability.best(tiny, "when do i take my insulin", TEXTS)
    base = RefusalEvidence(level="full", best_cross_encoder=5.0, best_cosine=0.8)
    assert not judge(base).refused  # the rule alone answers this evidence
    ev = RefusalEvidence(level="full", best_cross_encoder=5.0, best_cosine=0.8, answerability=(tiny, score))
    above = judge(ev, RefusalThresholds(min_answerability=round(score - 0.01, 4)))
    assert not above.refused and above.tests[-1].name == "answerability model" and above.tests[-1].passed
    below = judge(ev, RefusalThresholds(min_answerability=round(score + 0.01, 4)))
    assert below.refused and f"answerability model '{tiny}'" in below.reason
    assert below.rule.endswith(f"refused by {tiny}")
    assert below.to_dict()["tests"][-1]["name"] == "answerability model"  # the JSON names it
    # A turn the rule refused stays refused; the model only adds its judgement.
    low = RefusalEvidence(level="full", best_cross_encoder=-9.0, best_cosine=0.3, answerability=(tiny, 0.99))
    assert judge(low).refused


def test_a_model_that_cannot_load_is_named_and_the_rule_judges_without_it(tmp_path, mini, mini_settings):
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ModelUnavailable, match="REFUSAL_MODEL=.*could not be loaded.*save_pretrained"):
        answerability.load(missing)
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    with pytest.raises(ModelUnavailable, match="empty"):
        answerability.scores(str(not_a_model), "a turn", ["a card"])
    s = mini_settings.replace(refusal_model=missing)
    plain = mini.retrieve("how do I store insulin", mini_settings)
    out = mini.retrieve("how do I store insulin", s)
    assert out.refusal is not None and out.refusal.refused == plain.refusal.refused
    assert any("answerability model unavailable" in u and "could not be loaded" in u for u in out.refusal.unavailable)


def test_the_pipeline_adds_the_models_judgement_with_its_own_threshold(tiny, mini, mini_settings):
    turn = "how do I store insulin"
    plain = mini.retrieve(turn, mini_settings)
    assert plain.refusal is not None and not plain.refusal.refused
    strict = mini.retrieve(turn, mini_settings.replace(refusal_model=tiny, refusal_min_answerability=1.0))
    assert strict.refusal.refused and strict.hybrid_path == "no_match"
    assert f"answerability model '{tiny}'" in strict.refusal.reason
    lenient = mini.retrieve(turn, mini_settings.replace(refusal_model=tiny, refusal_min_answerability=0.0))
    assert not lenient.refusal.refused
    assert any(t.name == "answerability model" and t.passed for t in lenient.refusal.tests)


def test_the_setting_is_read_from_the_environment():
    s = Settings.from_env({"REFUSAL_MODEL": "/models/nli", "REFUSAL_MIN_ANSWERABILITY": "0.7"})
    assert s.refusal_model == "/models/nli" and s.refusal_min_answerability == 0.7
    assert Settings.from_env({}).refusal_model is None
    with pytest.raises(ValueError, match="REFUSAL_MIN_ANSWERABILITY"):
        Settings.from_env({"REFUSAL_MIN_ANSWERABILITY": "lots"})


def test_the_page_names_the_model_that_decided_escaped():
    from types import SimpleNamespace

    from inspector.badge import render_refusal

    name = "models/<b>nli</b>"
    ev = RefusalEvidence(level="full", best_cross_encoder=5.0, best_cosine=0.8, answerability=(name, 0.2))
    decision = judge(ev, RefusalThresholds(min_answerability=0.5))
    html = render_refusal(SimpleNamespace(refusal=decision, settings={}))
    assert "refused by models/&lt;b&gt;nli&lt;/b&gt;" in html
    assert "answerability model &#x27;models/&lt;b&gt;nli&lt;/b&gt;&#x27;: best score 0.2 &lt; 0.5" in html
    assert "<b>nli" not in html
