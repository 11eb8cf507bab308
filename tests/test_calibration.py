"""Per-corpus refusal calibration: synthetic answerable turns, the threshold search on hand-made evidence, and one
real run on the mini corpus (real models, real Chroma) that is stored, read back and used by the pipeline."""

from __future__ import annotations

import json

import pytest

from retrieval import calibration, near_negatives
from retrieval.corpus import load_cards
from retrieval.refusal_evidence import RefusalEvidence, lexical_evidence
from retrieval.refusal_thresholds import RefusalThresholds
from retrieval.refusal_turn import thresholds_for
from retrieval.refusal_vocabulary import Vocabulary
from tests.conftest import MINI_CARDS

VOCAB_TEXTS = ["GlucoSense GS-40 error E-07\nThe strip was removed too early.", "Insulin pens\nKeep them cold."]
VOCAB = Vocabulary.from_texts(VOCAB_TEXTS)


def ev(ce: float, cos: float = 0.5, turn: str = "error strip") -> RefusalEvidence:
    return RefusalEvidence(
        "full", best_cross_encoder=ce, best_cosine=cos, lexical=lexical_evidence(turn, VOCAB_TEXTS[0], VOCAB)
    )


def test_synthetic_turns_come_from_titles_and_first_sentences():
    cards = load_cards(MINI_CARDS)
    turns = calibration.synthetic_turns(cards, Vocabulary.from_texts(c.text for c in cards), 10)
    assert 3 <= len(turns) <= 10 and len(set(turns)) == len(turns)
    sources = " ".join(f"{c.title} {c.text}" for c in cards)
    assert all(all(w in sources for w in t.split()) for t in turns)  # every word from the cards


def test_the_search_refuses_most_negatives_within_the_false_refusal_budget_and_one_step_of_margin():
    positives = [ev(-1.0), ev(0.5), ev(2.0), ev(-2.1)]
    negatives = [ev(-9.0), ev(-6.0), ev(-3.0), ev(-2.2)]
    start = RefusalThresholds(min_cross_encoder=-10.0, min_rescue_cosine=0.9)  # no rescue at cosine 0.5
    th = calibration.choose([(positives, 0)], negatives, "full", start)
    # -2.75 and -2.5 refuse the three lowest negatives; -2.25 would too, but one grid step stricter (-2.0) refuses
    # the -2.1 positive: not chosen. Of the plateau, the most lenient value.
    assert th.min_cross_encoder == -2.75
    assert sum(calibration.refused(e, th) for e in positives) == 0
    assert sum(calibration.refused(e, th) for e in negatives) == 3
    th = calibration.choose([(positives, 1)], negatives, "full", start)
    assert sum(calibration.refused(e, th) for e in positives) <= 1


@pytest.fixture()
def pool(tmp_path):
    rows = [
        ("what is the capital of Peru", "dev"),
        ("hello there", "dev"),
        ("asdf qwer zxcv", "dev"),
        ("how do I bake sourdough bread", "test"),
        ("who won the 1998 world cup", "test"),
    ]
    path = tmp_path / "pool.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "text": t, "lang": "en", "category": "no_match", "relevant": {}, "split": s})
            + "\n"
            for i, (t, s) in enumerate(rows)
        )
    )
    return path


def test_a_cjk_corpus_calibrated_by_the_whole_run_tokenizer_is_not_reused():
    """The key of a corpus with CJK text names the bigram analysis (its words were counted otherwise before); an
    English corpus keeps the key it had, so its stored calibration still applies."""
    from retrieval.corpus import fingerprint
    from retrieval.settings import Settings
    from retrieval.types import Chunk

    s = Settings()
    english = [Chunk("a#0", "a", "Storage", "en", "Keep insulin in the refrigerator.")]
    japanese = [*english, Chunk("b#0", "b", "保管", "en", "冷蔵庫で保管してください。")]
    assert calibration.calibration_key(english, s) == fingerprint(english, s.embedding_model, s.reranker_model)
    assert calibration.calibration_key(japanese, s) != fingerprint(japanese, s.embedding_model, s.reranker_model)


def test_a_corpus_whose_tokens_or_rule_changed_is_not_reused_and_others_keep_their_key():
    """Hindi (vowel signs), Arabic with harakat or decomposed Latin were counted as words cut at every mark: the key
    names the analysis (``MARK_ANALYSIS``), so such a calibration is not reused; a card mostly in Cyrillic (Russian
    turns now judged by e5, not the cross-encoder) names the rule (``SCRIPT_RULE``). English, Spanish and
    Portuguese in NFC keep their key, Greek letters in English text too, so their stored calibrations still apply."""
    import unicodedata

    from retrieval.corpus import fingerprint
    from retrieval.settings import Settings
    from retrieval.types import Chunk

    s = Settings()

    def key_kept(*texts: str) -> bool:
        chunks = [Chunk(f"c{n}#0", f"c{n}", "", "en", text) for n, text in enumerate(texts)]
        return calibration.calibration_key(chunks, s) == fingerprint(chunks, s.embedding_model, s.reranker_model)

    assert key_kept(
        "Keep insulin in the refrigerator.",
        "Olvidé la dosis, ¿qué hago?",
        "Não congele a insulina.",
        "β-blockers and α-glucosidase inhibitors",
    )
    assert not key_kept("Keep insulin in the refrigerator.", "Храните инсулин в холодильнике.")
    assert not key_kept("Keep insulin in the refrigerator.", "इंसुलिन को फ्रिज में रखें।")
    assert not key_kept("Keep insulin in the refrigerator.", "كَيْفَ أَحْفَظُ")
    assert not key_kept(unicodedata.normalize("NFD", "Olvidé la dosis, ¿qué hago?"))


def test_a_calibration_runs_on_a_small_corpus_is_stored_read_back_and_used(mini, mini_settings, pool, monkeypatch):
    monkeypatch.setattr(calibration, "MAX_POSITIVES", 6)
    monkeypatch.setattr(near_negatives, "MAX_TURNS", 4)
    cards = load_cards(MINI_CARDS)
    seen = []
    result = calibration.calibrate(
        mini, [], cards, mini_settings, name="mini", pool=pool, progress=lambda done, total: seen.append((done, total))
    )
    r = result.report
    assert r["answerable_origin"] == "synthetic" and r["turns"] == seen[-1][1] == seen[-1][0]
    assert set(r["levels"]) == {"full", "rrf_only", "dense_only"}
    full = r["levels"]["full"]
    assert full["ood_fit"][1] == 3 and full["ood_held"][1] == 2
    assert full["answerable_fit"][0] == 0  # the budget on the fitting half: no synthetic turn refused
    assert result.thresholds.source.startswith("calibrated for mini on ")
    assert "held-out out-of-domain turns refused" in calibration.describe(result)
    # Near-topic turns made from the corpus's title words: run, reported per side, with what the floor kept.
    assert full["near_fit"][1] + full["near_held"][1] == 4
    assert set(r["without_near_floor"]) == {"full", "rrf_only", "dense_only"} and "near_floor_kept" in r
    assert "near-topic turns refused" in calibration.describe(result)

    assert calibration.load(mini_settings, mini.chunks) is None
    calibration.save(mini_settings, mini.chunks, result)
    back = calibration.load(mini_settings, mini.chunks)
    assert back == result
    other = mini_settings.replace(embedding_model="all-MiniLM-L6-v2")  # another model: another calibration
    assert calibration.load(other, mini.chunks) is None

    # The pipeline uses it when REFUSAL_CALIBRATION is on and the models match, and says so on the decision.
    assert thresholds_for(back, mini_settings) == back.thresholds
    assert thresholds_for(back, mini_settings.replace(refusal_calibration=False)).source == "defaults"
    assert thresholds_for(back, other).source == "defaults"
    mini.calibration = back
    try:
        out = mini.retrieve("asdf qwer zxcv", mini_settings)
        assert out.refusal is not None and out.refusal.thresholds == back.thresholds.source
    finally:
        mini.calibration = None


def test_the_data_tab_reports_a_stored_calibration_escaped(tmp_path, mini_settings):
    from inspector import data_refusal, handlers
    from retrieval.corpora import Registry

    settings = mini_settings.replace(chroma_path=str(tmp_path / "chroma"), data_dir=str(tmp_path / "data"))
    handlers.use_base_settings(settings)
    try:
        assert "defaults tuned on their dev sets" in data_refusal.calibration_html(None)
        data, _ = Registry(settings).add(MINI_CARDS, "mini-cal")
        assert "Not calibrated yet" in data_refusal.calibration_html("mini-cal")
        row = {"answerable_fit": [0, 4], "answerable_held": [1, 2], "ood_fit": [3, 3], "ood_held": [2, 2]}
        report = {
            "corpus": "mini-cal",
            "when": "now",
            "seconds": 1.5,
            "turns": 11,
            "answerable_origin": "synthetic",
            "embedder": settings.embedding_model,
            "reranker": settings.reranker_model,
            "levels": {"full": row},
        }
        stored = calibration.Calibration(RefusalThresholds(source="calibrated for <b>mini</b>"), report)
        calibration.save(settings, data.chunks, stored)
        html = data_refusal.calibration_html("mini-cal")
        assert "calibrated for &lt;b&gt;mini&lt;/b&gt;" in html and "<b>mini</b>" not in html
        assert "<td>2/2 (100%)</td><td>1/2 (50%)</td>" in html  # held out: out-of-domain refused, false refusals
    finally:
        handlers.use_base_settings(None)


def test_a_calibration_stored_by_another_process_reaches_this_ones_open_retriever(tmp_path, mini_settings, monkeypatch):
    """The CLI's ``calibrate`` (or another app process on the store) re-runs a calibration: this process's open
    retriever uses it from its next read (CALIBRATION_REREAD_S), not only after a restart. The writer is a real
    second process on the same embedded Chroma."""
    import subprocess
    import sys

    from retrieval import corpora, corpus_retrievers
    from retrieval.settings import PROJECT_ROOT

    settings = mini_settings.replace(chroma_path=str(tmp_path / "chroma"), data_dir=str(tmp_path / "data"))
    data, _ = corpora.Registry(settings).add(MINI_CARDS, "mini-reread")
    retriever = corpus_retrievers.retriever_for(data, settings)
    assert getattr(retriever, "calibration", None) is None
    writer = f"""
import sys
from retrieval import calibration, corpora
from retrieval.refusal_thresholds import RefusalThresholds
from retrieval.settings import Settings
s = Settings(corpus_path={str(MINI_CARDS)!r}, chroma_path={settings.chroma_path!r}, data_dir={settings.data_dir!r})
data = corpora.Registry(s).open("mini-reread")
report = {{"corpus": "mini-reread", "embedder": s.embedding_model, "reranker": s.reranker_model, "levels": {{}}}}
calibration.save(s, data.chunks, calibration.Calibration(
    RefusalThresholds(min_cross_encoder=-1.5, source="calibrated by another process"), report))
"""
    subprocess.run([sys.executable, "-c", writer], check=True, cwd=PROJECT_ROOT, timeout=120)
    monkeypatch.setattr(corpus_retrievers, "CALIBRATION_REREAD_S", 3600.0)
    assert (
        getattr(corpus_retrievers.retriever_for(data, settings), "calibration", None) is None
    )  # read within the interval
    monkeypatch.setattr(corpus_retrievers, "CALIBRATION_REREAD_S", 0.0)
    again = corpus_retrievers.retriever_for(data, settings)
    assert again is retriever and again.calibration.thresholds.source == "calibrated by another process"
    assert thresholds_for(again.calibration, settings).min_cross_encoder == -1.5
