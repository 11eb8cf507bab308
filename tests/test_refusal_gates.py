"""The gates after the refusal rule (multilingual-e5's null distribution for a turn in another language) and
calibration's near-topic negatives, which keep a corpus's calibration from opening the door to turns that borrow
its words in another domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval import calibration, near_negatives
from retrieval.corpus import load_cards, split_cards
from retrieval.refusal_evidence import RefusalEvidence, lexical_evidence
from retrieval.refusal_gates import judge, null_test
from retrieval.refusal_thresholds import MULTILINGUAL_Z_OFF, RefusalThresholds
from retrieval.refusal_vocabulary import Vocabulary

ROOT = Path(__file__).resolve().parent.parent
CARDS = ["Storing insulin\nKeep unopened insulin pens in the refrigerator.", "Missed dose\nTake it when you remember."]
VOCAB = Vocabulary.from_texts(CARDS)


def spanish(cosine: float, null: tuple[float, float, float, int] | None, ce: float = -9.0) -> RefusalEvidence:
    """A Spanish turn about English cards, judged by multilingual-e5 (its cross-encoder score is low)."""
    lex = lexical_evidence("¿Cuándo comenzó Francia a reconstruir su imperio?", CARDS[0], VOCAB)
    assert lex.foreign
    return RefusalEvidence(
        level="full", best_cross_encoder=ce, best_cosine=0.5, lexical=lex, multilingual_cosine=cosine,
        multilingual_null=null,
    )  # fmt: skip


def test_a_foreign_turn_whose_e5_cosine_does_not_stand_out_from_its_null_is_refused():
    # The cross-encoder answered it (-5.7 >= -6.5, as "¿Qué usan los cidípidos...?" was); e5's best cosine 0.78 is
    # below the fixed cut and only 1.4 sd above the turn's cosines to the examples.
    ev = spanish(0.78, (0.78, 0.752, 0.02, 228), ce=-5.7)
    assert not judge(spanish(0.78, None, ce=-5.7)).refused  # the rule alone (no null): answered, as before
    decision = judge(ev)
    assert decision.refused and decision.rule.endswith("refused by the multilingual null")
    test = decision.tests[-1]
    assert test.name == "multilingual null" and test.value == pytest.approx(1.4) and not test.passed
    assert decision.reason == (
        "multilingual-e5's best cosine with the top cards 0.78 < 0.8 and 1.4 < 2.0 standard deviations above the "
        "turn's cosines to 228 out-of-domain examples (0.752 ± 0.020)"
    )
    # A turn about the cards stands out: answered, the gate shown as passed.
    ok = judge(spanish(0.79, (0.79, 0.74, 0.02, 228), ce=-5.7))
    assert not ok.refused and ok.tests[-1].name == "multilingual null" and ok.tests[-1].passed
    # Above the fixed cut it needs no reference (a Spanish question about a blood pressure monitor, z < 1).
    high = judge(spanish(0.81, (0.81, 0.79, 0.02, 228), ce=-5.7))
    assert (
        not high.refused and high.tests[-1].sentence == "multilingual-e5's best cosine with the top cards 0.81 >= 0.8"
    )
    # Off, or for an English turn, the gate does not judge.
    assert not judge(ev, RefusalThresholds(min_multilingual_z=MULTILINGUAL_Z_OFF)).refused
    english = RefusalEvidence(
        level="full", best_cross_encoder=2.0, best_cosine=0.7,
        lexical=lexical_evidence("store insulin", CARDS[0], VOCAB),
        multilingual_cosine=0.80, multilingual_null=(0.80, 0.79, 0.02, 228),
    )  # fmt: skip
    assert all(t.name != "multilingual null" for t in judge(english).tests)


def test_the_null_test_at_its_boundary():
    assert null_test(0.75, (0.5, 0.125, 10), 2.0).passed  # exactly 2 sd
    assert not null_test(0.7499, (0.5, 0.125, 10), 2.0).passed
    assert not null_test(0.7, (0.7, 0.0, 10), 2.0, 0.8).passed  # no spread: no evidence that it stands out
    assert null_test(0.8, (0.8, 0.0, 10), 2.0, 0.8).passed  # at the fixed cut


# ------------------------------------------------------------------------------------------ near-topic negatives
BIKES = ROOT / "tests" / "data" / "bikes25_cards.jsonl"


def test_near_topic_turns_borrow_the_corpus_title_words_in_other_domains():
    cards = load_cards(BIKES)
    vocab = Vocabulary.from_texts(c.indexed_text for c in split_cards(cards, 120))
    words = near_negatives.corpus_words(vocab, [c.title for c in cards])
    assert {"brake", "chain", "wheel"} <= set(words)
    turns = near_negatives.near_turns(vocab, [c.title for c in cards])
    assert len(turns) == near_negatives.MAX_TURNS == len(set(turns))
    assert turns == near_negatives.near_turns(vocab, [c.title for c in cards])  # deterministic
    assert all(any(w in t for w in words) for t in turns)
    assert any("car engine" in t for t in turns) and any("motorbike" in t for t in turns)
    # A domain whose head word the cards use is their own: cards about car engines get no car-engine negatives.
    cars = Vocabulary.from_texts(["Car engine timing belt\nReplace the engine's timing belt every 100,000 km."])
    assert not any("car engine" in t for t in near_negatives.near_turns(cars, ["Car engine timing belt"]))


def ce_evidence(score: float) -> RefusalEvidence:
    return RefusalEvidence(level="full", best_cross_encoder=score, best_cosine=0.3)


def test_calibration_never_loosens_past_the_near_topic_turns():
    start = RefusalThresholds(min_cross_encoder=-3.25, min_rescue_cosine=0.9)
    positives = [ce_evidence(s) for s in (-6.9, -2.0, 1.0, 3.0)]  # synthetic turns: one needs -7.0
    far = [ce_evidence(-8.0)] * 5
    near = [ce_evidence(s) for s in (-5.0, -4.0, -6.0)]  # "timing belt on my car engine" against brake pads
    search = [("min_cross_encoder",)]
    loose = calibration.choose([(positives, 0)], far, "full", start, search, relax_only=True)
    # -7.25 answers the -6.9 turn with a grid step of margin and still refuses the far -8.0 ones: the door open
    assert loose.min_cross_encoder == -7.25
    kept = calibration.choose([(positives, 0)], far, "full", start, search, relax_only=True, near=near)
    # No value keeps the near turns refused and answers the -6.9 turn: the floor wins, the start is kept
    assert kept.min_cross_encoder == -3.25
    assert sum(calibration.refused(e, kept) for e in near) == 3
    # Loosening that lets no near turn pass is still allowed.
    near_far = [ce_evidence(-9.0)]
    assert (
        calibration.choose([(positives, 0)], far, "full", start, search, True, near=near_far).min_cross_encoder == -7.25
    )


def test_calibration_from_synthetic_turns_loosens_only_as_far_as_an_answerable_turn_needs():
    """On bikes25 no synthetic turn needed a looser cross-encoder threshold, yet ties to the most lenient value
    chose -7.75 (the pool's turns all sit below -8): hand-written near-topic turns at -6.4 and -6.6 that no
    generated turn represents were answered. Of equal values, the nearest the start is chosen."""
    start = RefusalThresholds(min_cross_encoder=-3.25, min_rescue_cosine=0.9)
    far = [ce_evidence(-8.0)] * 5
    unseen_near = [ce_evidence(-6.44), ce_evidence(-6.55)]  # not given to the search: a held-out check
    search = [("min_cross_encoder",)]
    easy = [ce_evidence(s) for s in (6.8, 7.4, 8.1)]  # every synthetic turn answered at the start
    kept = calibration.choose([(easy, 0)], far, "full", start, search, relax_only=True)
    assert kept.min_cross_encoder == -3.25
    assert all(calibration.refused(e, kept) for e in unseen_near)
    # One turn at -4.0 needs loosening: one grid step past it (-4.25, for the margin), no further.
    needs = calibration.choose([([*easy, ce_evidence(-4.0)], 0)], far, "full", start, search, relax_only=True)
    assert needs.min_cross_encoder == -4.25
    assert all(calibration.refused(e, needs) for e in unseen_near)
    # With labeled turns (relax_only off) the search is unchanged: ties go to the most lenient value.
    both = calibration.choose([(easy, 0)], far, "full", start, search)
    assert both.min_cross_encoder == -7.75


def test_the_bikes25_data_has_the_issue_turns():
    rows = [json.loads(x) for x in (ROOT / "tests/data/bikes25_queries.jsonl").read_text().splitlines() if x]
    texts = {r["text"] for r in rows if not r["relevant"]}
    assert {"How do I replace the timing belt on my car engine", "change the oil in my motorbike"} <= texts
    assert len(load_cards(BIKES)) == 25


# ------------------------------------------------------------------------------------------- the real pipeline
@pytest.mark.parametrize(
    ("turn", "refused"),
    [
        # General-knowledge questions the cross-encoder let through (-5.7, -6.4, -5.8 >= -6.5 for a foreign turn)
        ("¿Qué usan los cidípidos para capturar a sus presas?", True),
        ("¿Cuándo comenzó Francia en serio a reconstruir su imperio global?", True),
        ("Em que ano a independência do Brasil foi proclamada?", True),
        # Questions about the cards stay answered: one above e5's fixed cut (z < 1), one that stands out (z 2.1)
        ("mi tensiómetro ya no guarda más mediciones", False),
        ("vou ao dentista, paro o Coagvara antes?", False),
    ],
)
def test_far_questions_in_spanish_and_portuguese_are_refused_and_questions_about_the_cards_are_not(
    shipped, turn, refused
):
    r = shipped.retrieve(turn)
    assert r.refusal is not None and r.refusal.cross_language
    assert r.refusal.refused is refused, r.refusal.reason
    null = [t for t in r.refusal.tests if t.name == "multilingual null"]
    assert len(null) == 1 and null[0].passed is not refused
    if refused:
        assert r.refusal.rule.endswith("refused by the multilingual null") and r.hybrid_path == "no_match"
