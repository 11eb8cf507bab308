"""The refusal rule: each branch of the rule on hand-made evidence, its messages and boundaries, and the real
pipeline on the shipped corpus (gibberish and chit-chat refused, answerable turns answered)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from retrieval.refusal import decide, needs_multilingual
from retrieval.refusal_evidence import (
    AgreementEvidence,
    Candidate,
    RefusalEvidence,
    agreement_evidence,
    gather,
    lexical_evidence,
)
from retrieval.refusal_thresholds import DEFAULT_THRESHOLDS, RefusalThresholds
from retrieval.refusal_vocabulary import Vocabulary, content_words, identifiers, language

TEXTS = [
    "GlucoSense GS-40: error E-07\nThe strip was used or inserted upside down.",
    "GlucoSense GS-60: error E-07\nThe meter does not recognise the strips.",
    "PillPal PP-200 dispenser\nAlarm A-15 means the carousel is jammed.",
    "Storing insulin\nKeep unopened insulin pens in the refrigerator.",
]
VOCAB = Vocabulary.from_texts(TEXTS)
T = RefusalThresholds(
    min_cross_encoder=-3.0, min_rescue_cosine=0.65, min_fallback_cosine=0.6, min_dense_only_cosine=0.6
)


def lex(turn: str, top: int | None = 0) -> object:
    return lexical_evidence(turn, TEXTS[top] if top is not None else None, VOCAB)


def agree(top_in_both: bool) -> AgreementEvidence:
    return AgreementEvidence(overlap=3 if top_in_both else 0, depth=10, top_in_both=top_in_both)


# ------------------------------------------------------------------------------------------------ vocabulary
def test_vocabulary_counts_documents_and_identifier_families():
    assert VOCAB.n_docs == 4
    assert VOCAB.df["glucosense"] == 2 and VOCAB.df["insulin"] == 1 and "hello" not in VOCAB.df
    assert {"gs40", "gs60", "e7", "pp200", "a15"} <= VOCAB.identifiers
    assert VOCAB.families["gs"] == ("GS-40", "GS-60")
    assert VOCAB.families["e"] == ("E-07",)
    assert VOCAB.idf("insulin") == pytest.approx(math.log(1 + (4 - 1 + 0.5) / (1 + 0.5)))
    assert VOCAB.idf("never-seen") == pytest.approx(math.log(1 + 4.5 / 0.5))


def test_identifiers_are_normalised_and_quantities_are_not_identifiers():
    assert [n for _, n, _ in identifiers("GS-40 E-07 e7 E07 Err-4 T112")] == ["gs40", "e7", "e7", "e7", "err4", "t112"]
    assert [f for _, _, f in identifiers("GS-40 E-07 12AB")] == ["gs", "e", "ab"]
    assert identifiers("Vasquora 5mg at 3pm, my 2nd dose, 500 mg") == []


def test_content_words_drop_stop_words_of_every_language_and_keep_brands():
    assert content_words("¿Puedo tomar jugo de toronja con Lipoquell?") == [
        "puedo",
        "tomar",
        "jugo",
        "toronja",
        "lipoquell",
    ]
    assert content_words("who are you?") == []
    assert content_words("?") == []


def test_lexical_evidence_known_matched_and_unknown_identifiers():
    ev = lex("GlucoSense GS-90 error E-77 on my meter", top=0)
    assert ev.words == ("glucosense", "gs", "90", "error", "77", "meter")  # "e" is a stop word (es, pt: "and")
    assert ev.known == ("glucosense", "gs", "error", "meter")
    assert ev.matched == ("glucosense", "gs", "error")
    assert ev.unknown_identifiers == ("GS-90", "E-77")
    assert ev.known_family_members == ("GS-40", "GS-60", "E-07")
    assert ev.fraction_matched == pytest.approx(3 / 6)
    assert ev.max_matched_idf == pytest.approx(math.log(1 + 2.5 / 2.5))  # each matched word is in 2 of 4 docs
    # A family the cards never use is not judged: VP-3 could be anything.
    assert lex("VitaPump VP-3 alarm").unknown_identifiers == ()
    # Known identifiers, written differently, are known.
    assert lex("gs40 e7").unknown_identifiers == ()
    assert lex("hello", top=None).matched == ()


def test_a_plural_or_other_form_of_a_word_counts_as_the_word():
    ev = lexical_evidence("refrigerators for insulins", TEXTS[3], VOCAB)  # the card says refrigerator, insulin
    assert ev.known == ("refrigerators", "insulins") and ev.matched == ("refrigerators", "insulins")
    assert lexical_evidence("insulins", TEXTS[0], VOCAB).matched == ()


def test_agreement_counts_distinct_cards_in_each_top():
    a = agreement_evidence(["a", "a", "b", "c"], ["c", "b", "d"], "b", depth=2)
    assert (a.overlap, a.depth, a.top_in_both) == (1, 2, True)  # tops [a, b] and [c, b]
    a = agreement_evidence(["a", "a", "b", "c"], ["c", "d", "b"], "b", depth=2)
    assert (a.overlap, a.top_in_both) == (0, False)  # tops [a, b] and [c, d]: b is third in dense
    a = agreement_evidence(["a", "b"], ["c", "d"], "a", depth=2)
    assert (a.overlap, a.top_in_both) == (0, False)
    assert agreement_evidence([], [], None).top_in_both is False


def test_gather_takes_best_scores_and_drops_agreement_without_both_branches():
    cands = [
        Candidate("p1", "p1#0", TEXTS[0], cosine=0.61, cross_encoder=None),
        Candidate("p2", "p2#0", TEXTS[1], cosine=0.70, cross_encoder=-4.0),
        Candidate("p3", "p3#0", TEXTS[2], cosine=None, cross_encoder=2.5),
    ]
    ev = gather("GS-40 E-07", "full", cands, VOCAB, ["p1", "p2"], ["p2", "p1"])
    assert (ev.best_cross_encoder, ev.best_cosine) == (2.5, 0.70)
    assert ev.lexical.matched == ("gs", "40", "07")  # matched against the top candidate's text (p1)
    assert ev.agreement.top_in_both is True
    ev = gather("GS-40", "dense_only", cands[:1], VOCAB, None, ["p1"])
    assert ev.agreement is None and ev.best_cross_encoder is None
    assert gather("x", "full", [], None).lexical is None
    empty = gather("x", "dense_only", cands[:1], Vocabulary.from_texts(["...", "-"]))
    assert empty.lexical is None and empty.missing == {"vocabulary": "the cards have no words"}


# ---------------------------------------------------------------------------------- languages, unexplained words
ES_TEXTS = ["Olvidé una dosis diaria\nSi olvida una dosis, tómela cuando se acuerde el mismo día."]


@pytest.mark.parametrize(
    "text, lang",
    [
        ("¿Puedo tomar jugo de toronja con Lipoquell?", "es"),
        ("Esqueci a dose de ontem, posso tomar duas hoje?", "pt"),
        ("my car battery is low, how do I replace it", "en"),
        ("GS-40 E-09", ""),
        ("Lipoquell", ""),
    ],
)
def test_the_language_of_a_turn_is_told_by_the_stop_words_only_it_has(text, lang):
    assert language(text) == lang


def test_the_cards_speak_a_language_when_enough_of_them_are_written_in_it():
    assert VOCAB.languages.get("en", 0) >= 2 and not VOCAB.speaks("es") and VOCAB.speaks("en") and VOCAB.speaks("")
    mixed = Vocabulary.from_texts(TEXTS + ES_TEXTS * 3)
    assert mixed.speaks("es") and mixed.speaks("en")


def test_unexplained_words_are_content_words_no_card_uses():
    ev = lex("the printer shows error E-07, how do I fix it")
    assert ev.unexplained == ("printer", "shows", "fix") and ev.language == "en" and ev.judged
    assert lex("insulin pens in the refrigerator").unexplained == ()  # every word in some card (plural counts)
    assert lex("GS-90 error").unexplained == ()  # a code is judged by the identifier test, not here


def test_too_many_unexplained_words_refuse_unless_the_cross_encoder_is_sure():
    th = RefusalThresholds(min_cross_encoder=-3.0, max_unexplained_words=1, min_cross_encoder_unexplained=5.0)
    ev = RefusalEvidence("full", best_cross_encoder=1.0, best_cosine=0.7, lexical=lex("the printer shows error E-07"))
    d = decide(ev, th)
    assert d.refused and [t.name for t in d.failed] == ["unexplained words"]
    assert d.reason == (
        "2 words no card uses ('printer', 'shows'), more than 1 allowed, and the best cross-encoder score 1.0 < 5.0"
    )
    unexplained = next(t for t in d.tests if t.name == "unexplained words")
    assert (unexplained.value, unexplained.threshold) == (2.0, 1.0)
    assert not decide(replace(ev, best_cross_encoder=5.0), th).refused  # sure enough: answered
    assert not decide(ev, replace(th, max_unexplained_words=2)).refused
    # Off by default (99): not a test, but the words are named in the decision's notes (shown on the page), so an
    # answered near miss can be seen for what it is.
    off = decide(ev, T)
    assert "unexplained words" not in [t.name for t in off.tests] and not off.refused
    assert off.notes == (
        "2 words no card uses ('printer', 'shows'): not judged (REFUSAL_MAX_UNEXPLAINED_WORDS is "
        "off: paraphrases use as many as near misses)",
    )
    assert decide(replace(ev, lexical=lex("insulin pens in the refrigerator")), T).notes == ()
    assert decide(ev, th).notes == ()  # judged: a test, not a note


def test_a_turn_in_a_language_few_cards_use_is_not_judged_by_its_words():
    # English cards, a Spanish turn about them: no word is known, none is a miss.
    ev = lexical_evidence("¿Qué hago si mi medidor muestra un mensaje?", TEXTS[0], VOCAB)
    assert ev.language == "es" and ev.top_language == "en" and ev.foreign and not ev.judged
    th = RefusalThresholds(min_cross_encoder=-3.0, min_cross_encoder_foreign=-6.0, max_unexplained_words=0)
    d = decide(RefusalEvidence("full", best_cross_encoder=-5.0, best_cosine=0.5, lexical=ev), th)
    assert not d.refused
    assert [t.name for t in d.tests] == ["known words", "unknown identifiers", "cross-encoder"]
    assert d.tests[0].passed and d.tests[0].sentence.startswith("not compared: the turn is in Spanish")
    assert (
        d.tests[2].sentence == "best cross-encoder score -5.0 >= -6.0 (Spanish turn, cards mostly in another language)"
    )
    # Below the foreign threshold, the cosine rescues without a shared word (none can be shared across languages).
    d = decide(
        RefusalEvidence("full", best_cross_encoder=-7.0, best_cosine=0.7, lexical=ev),
        replace(th, min_rescue_cosine=0.65),
    )
    assert not d.refused and d.rule == "cross-encoder, rescued by cosine (turn and cards in different languages)"
    # With multilingual-e5's cosine (asked by the pipeline only for such a turn below the foreign threshold), it
    # decides instead of the English cosine.
    low = RefusalEvidence("full", best_cross_encoder=-7.0, best_cosine=0.7, lexical=ev)
    assert needs_multilingual(low, th) and not needs_multilingual(replace(low, best_cross_encoder=-5.0), th)
    assert not needs_multilingual(low, replace(th, languages=False))
    d = decide(replace(low, multilingual_cosine=0.78), th)
    assert d.refused and d.reason.endswith("multilingual-e5 cosine with the top card 0.78 < 0.8")
    assert not decide(replace(low, multilingual_cosine=0.81), th).refused
    # The rule before issue 23 ignored languages: the English threshold and a shared word for the rescue.
    d = decide(
        RefusalEvidence("full", best_cross_encoder=-5.0, best_cosine=0.7, lexical=ev),
        replace(th, languages=False, max_unexplained_words=99, min_rescue_cosine=0.65),
    )
    assert d.refused and [(t.name, t.threshold) for t in d.failed] == [
        ("known words", 1.0),
        ("cross-encoder", -3.0),
        ("lexical support", 1.0),
    ]


JA_TEXTS = [
    "インスリンの保管\nインスリンは冷蔵庫で保管してください。",
    "飲み忘れ\n薬を飲み忘れたときはすぐ飲んでください。",
    "エラーE-07\nGS-40のエラーE-07は試験紙の不良です。",
]


@pytest.mark.parametrize(
    "text, lang",
    [
        ("糖尿病の薬を飲み忘れた", "ja"),
        ("忘记吃药了怎么办", "zh"),
        ("인슐린을 냉장고에 보관하세요", "ko"),
        ("GS-40の", ""),
        ("what does the word 薬 mean", "en"),
    ],
)
def test_chinese_japanese_and_korean_turns_are_told_by_their_script(text, lang):
    assert language(text) == lang


def test_cjk_turns_are_judged_by_their_bigrams():
    ja = Vocabulary.from_texts(JA_TEXTS)
    assert ja.languages == {"ja": 3} and ja.speaks("ja") and not ja.speaks("en")
    ev = lexical_evidence("冷蔵庫の温度は？", JA_TEXTS[0], ja)  # no card holds the run, they hold 冷蔵 and 蔵庫
    assert ev.language == "ja" and ev.judged and {"冷蔵", "蔵庫"} <= set(ev.known) <= set(ev.matched)
    # a two-character CJK word no card uses is unexplained (a Latin word needs three letters); a lone one is not
    assert set(ev.unexplained) == {"温度", "度は", "庫の", "の温"}
    assert lexical_evidence("GS-40の printer", JA_TEXTS[2], ja).unexplained == ("printer",)
    # A Japanese turn about English cards is a turn in another language (judged by scores), not unknown words.
    foreign = lexical_evidence("血糖測定器のエラー", TEXTS[0], VOCAB)
    assert foreign.language == "ja" and foreign.foreign and not foreign.judged


@pytest.mark.parametrize(
    "text, lang",
    [
        ("Как хранить инсулин?", "cyrl"),
        ("كيف أحفظ الأنسولين؟", "arab"),
        ("Πώς αποθηκεύω την ινσουλίνη;", "grek"),
        ("मैं इंसुलिन कैसे रखूँ?", "deva"),
        ("שָׁלוֹם, איך שומרים אינסולין?", "hebr"),
        ("ลืมกินยา", "thai"),
        ("Ինչպես պահել ինսուլինը", "armn"),
        ("როგორ შევინახო ინსულინი", "geor"),
        ("இன்சுலினை எப்படி சேமிப்பது", "taml"),
        ("Как хранить Lipoquell?", "cyrl"),  # a brand in Latin letters, most letters Cyrillic
        ("what does Хорошо mean on the GS-40 screen", "en"),  # one Russian word in an English turn
        ("Ω", ""),
        ("GS-40 E-09", ""),
    ],
)
def test_a_turn_mostly_in_another_script_is_told_by_it(text, lang):
    assert language(text) == lang


def test_a_turn_in_another_script_about_english_cards_is_judged_by_scores_and_cards_in_it_by_words():
    """A Russian turn about English cards shares no word with them by nature: it is in another language (its
    script's ISO 15924 code), judged by multilingual-e5, not refused as "none of the turn's words occurs in any
    card". Cards written in Cyrillic judge a Russian turn by its words, and by e5 again: the English cross-encoder
    reads no Cyrillic (it gave +7 to +8.5 to off-topic Russian turns against Russian cards)."""
    ev = lexical_evidence("Как хранить инсулин?", TEXTS[0], VOCAB)
    assert ev.language == "cyrl" and ev.foreign and ev.unreadable and not ev.judged
    assert ev.words == ("как", "хранить", "инсулин")
    low = RefusalEvidence("full", best_cross_encoder=-9.0, best_cosine=0.4, lexical=ev)
    assert needs_multilingual(low) and needs_multilingual(replace(low, best_cross_encoder=5.0))
    d = decide(replace(low, multilingual_cosine=0.83))
    assert not d.refused and d.tests[0].passed and d.rule == "multilingual cosine (the cross-encoder reads no Cyrillic)"
    assert d.tests[0].sentence.startswith("not compared: the turn is in Cyrillic, a script few cards are written in")
    assert d.notes[0].startswith("cross-encoder score -9.0 not used: the MS MARCO model reads English")
    assert decide(replace(low, multilingual_cosine=0.70)).refused
    # without e5 (its wheel missing), the foreign cross-encoder threshold and the rescue judge, as for Spanish
    d = decide(low)
    assert d.refused and "(Cyrillic-script turn, cards mostly in another script)" in d.reason
    russian = Vocabulary.from_texts(
        ["Храните инсулин в холодильнике.", "Пропущенная доза метформина: примите её.", "Storage of insulin pens"]
    )
    assert russian.languages == {"cyrl": 2, "en": 1} and russian.speaks("cyrl")
    ev = lexical_evidence("Как хранить инсулин?", "Храните инсулин в холодильнике.", russian)
    assert ev.judged and not ev.foreign and ev.known == ("инсулин",) and ev.matched == ("инсулин",)
    off = decide(
        RefusalEvidence("full", best_cross_encoder=8.0, lexical=lexical_evidence("Столица Франции", None, russian))
    )
    assert off.refused and off.reason == "none of the turn's words occurs in any card ('столица', 'франции')"
    # a word known ("в"), a high cross-encoder score: e5 decides, not the score of a model that cannot read it
    weather = RefusalEvidence(
        "full",
        best_cross_encoder=8.1,
        best_cosine=0.6,
        lexical=lexical_evidence("Какая погода в Москве?", "Храните инсулин в холодильнике.", russian),
    )
    assert needs_multilingual(weather)
    assert not needs_multilingual(weather, replace(DEFAULT_THRESHOLDS, languages=False))
    d = decide(replace(weather, multilingual_cosine=0.767))
    assert d.refused and d.reason == "multilingual-e5 cosine with the top card 0.767 < 0.8"
    assert not decide(replace(weather, multilingual_cosine=0.93)).refused


def test_thresholds_round_trip_and_validate_the_new_fields():
    th = RefusalThresholds(min_cross_encoder_foreign=-6.5, max_unexplained_words=2, source="calibrated for x")
    assert RefusalThresholds.from_dict(th.to_dict()) == th
    assert RefusalThresholds.from_dict({**th.to_dict(), "unknown": 1}, source="y").source == "y"
    with pytest.raises(ValueError, match="max_unexplained_words must be a whole number"):
        RefusalThresholds(max_unexplained_words=-1)
    with pytest.raises(ValueError, match="languages must be true or false"):
        RefusalThresholds(languages="yes")


# --------------------------------------------------------------------------------------------- the rule
def test_cross_encoder_above_threshold_answers():
    d = decide(RefusalEvidence("full", best_cross_encoder=6.9, best_cosine=0.64, lexical=lex("GS-40 error E-07")), T)
    assert not d.refused
    assert d.rule == "cross-encoder"
    assert [t.name for t in d.tests] == ["known words", "unknown identifiers", "cross-encoder"]
    assert d.reason == "best cross-encoder score 6.9 >= -3.0"
    assert d.unavailable == ()


def test_low_cross_encoder_refuses_and_says_which_tests_failed():
    d = decide(RefusalEvidence("full", best_cross_encoder=-7.2, best_cosine=0.58, lexical=lex("meter beeps", 1)), T)
    assert d.refused
    assert d.reason.startswith("best cross-encoder score -7.2 < -3.0; best cosine 0.58 < 0.65")
    assert [t.name for t in d.failed] == ["cross-encoder", "cosine rescue"]
    ce = d.tests[2]
    assert (ce.value, ce.threshold, ce.passed) == (-7.2, -3.0, False)


def test_low_cross_encoder_is_rescued_by_high_cosine_with_a_shared_word():
    ev = RefusalEvidence("full", best_cross_encoder=-8.6, best_cosine=0.70, lexical=lex("my insulin pens", 3))
    d = decide(ev, T)
    assert not d.refused
    assert d.rule == "cross-encoder, rescued by cosine and lexical support"
    assert d.reason == (
        "best cross-encoder score -8.6 < -3.0, but best cosine 0.7 >= 0.65; 2 of the turn's words "
        "in the top card ('insulin', 'pens'; rarest 'pens')"
    )  # both in 1 of 4 docs: ties by name


def test_rescue_needs_a_word_of_the_turn_in_the_top_card():
    ev = RefusalEvidence("full", best_cross_encoder=-8.6, best_cosine=0.70, lexical=lex("meter beeps", 3))
    d = decide(ev, T)
    assert d.refused
    assert [t.name for t in d.failed] == ["cross-encoder", "lexical support"]
    assert "no word of the turn occurs in the top card" in d.reason


@pytest.mark.parametrize(
    "turn, reason",
    [
        ("?", "the turn has no word to search for (only stop words, punctuation or single letters)"),
        ("hello", "none of the turn's words occurs in any card ('hello')"),
        ("GlucoSense GS-90 error E-77", "GS-90, E-77 are not in the cards (they know GS-40, GS-60, E-07)"),
        ("PP-200 alarm A-99", "A-99 is not in the cards (they know A-15)"),
    ],
)
def test_vocabulary_tests_refuse_even_a_high_cross_encoder_score(turn, reason):
    # "?" scores 2.6 and "GS-90 E-77" 4.9 with the real cross-encoder on the shipped cards.
    d = decide(RefusalEvidence("full", best_cross_encoder=4.9, best_cosine=0.75, lexical=lex(turn)), T)
    assert d.refused
    assert d.reason == reason


def test_the_identifier_test_can_be_switched_off_for_open_text():
    ev = RefusalEvidence("full", best_cross_encoder=4.9, best_cosine=0.75, lexical=lex("GlucoSense GS-90 error"))
    assert decide(ev, T).refused
    d = decide(ev, RefusalThresholds(check_identifiers=False))
    assert not d.refused and [t.name for t in d.tests] == ["known words", "cross-encoder"]
    with pytest.raises(ValueError, match="check_identifiers must be true or false"):
        RefusalThresholds(check_identifiers="no")


def test_rrf_only_falls_back_to_cosine_lexical_and_agreement():
    missing = {"cross-encoder": "reranker load failure (simulated)"}
    ev = RefusalEvidence(
        "rrf_only", best_cosine=0.62, lexical=lex("refrigerator", 0), agreement=agree(True), missing=missing
    )
    d = decide(ev, T)
    assert not d.refused  # no shared word, but the top card is in both branches' top 10
    assert d.reason == (
        "no word of the turn occurs in the top card, but best cosine 0.62 >= 0.6; the top card is "
        "in both branches' top 10 (3 cards shared)"
    )
    assert d.rule == "cosine + lexical support or branch agreement (no cross-encoder)"
    assert d.unavailable == (
        "cross-encoder unavailable (reranker load failure (simulated)): using cosine, "
        "lexical and agreement evidence only",
    )
    assert decide(
        RefusalEvidence(
            "rrf_only", best_cosine=0.62, lexical=lex("refrigerator", 0), agreement=agree(False), missing=missing
        ),
        T,
    ).refused
    low = decide(RefusalEvidence("rrf_only", best_cosine=0.59, lexical=lex("GS-40", 0), agreement=agree(True)), T)
    assert low.refused and low.reason == "best cosine 0.59 < 0.6"


def test_dense_only_falls_back_to_cosine_and_says_so():
    ev = RefusalEvidence(
        "dense_only",
        best_cosine=0.61,
        lexical=lex("insulin", 3),
        missing={"cross-encoder": "no reranking on the dense-only path"},
    )
    d = decide(ev, T)
    assert not d.refused and d.rule == "cosine (dense only)"
    assert d.unavailable == (
        "cross-encoder unavailable (no reranking on the dense-only path): using cosine evidence only",
        "branch agreement unavailable: only one branch ran",
    )
    assert decide(RefusalEvidence("dense_only", best_cosine=0.599, lexical=lex("insulin", 3)), T).refused
    # Without a vocabulary, the cosine alone decides, and the decision says what was not checked.
    d = decide(RefusalEvidence("dense_only", best_cosine=0.61), T)
    assert not d.refused
    assert d.unavailable[0] == ("vocabulary unavailable: gibberish and unknown codes are judged by the scores alone")


def test_bm25_only_has_no_cosine_to_rescue_a_low_cross_encoder_score():
    d = decide(
        RefusalEvidence(
            "bm25_only", best_cross_encoder=-5.0, lexical=lex("GS-40", 0), missing={"cosine": "the dense branch failed"}
        ),
        T,
    )
    assert d.refused
    assert (
        "cosine unavailable (the dense branch failed): a low cross-encoder score cannot be rescued by the "
        "cosine" in d.unavailable
    )
    assert not decide(RefusalEvidence("bm25_only", best_cross_encoder=-2.0, lexical=lex("GS-40", 0)), T).refused


def test_without_any_score_only_lexical_support_is_left():
    d = decide(RefusalEvidence("bm25_only", lexical=lex("GS-40 strip", 0)), T)
    assert not d.refused and d.rule == "lexical support only (no cross-encoder, no cosine)"
    assert decide(RefusalEvidence("bm25_only", lexical=lex("insulin", 0)), T).refused
    nothing = decide(RefusalEvidence("bm25_only"), T)
    assert nothing.refused and nothing.reason == "no evidence at all to judge the turn"


@pytest.mark.parametrize(
    "ce, refused, shown",
    [
        (-3.0, False, "best cross-encoder score -3.0 >= -3.0"),
        (-3.0001, True, "best cross-encoder score -3.0001 < -3.0"),
        (-2.96, False, "best cross-encoder score -2.96 >= -3.0"),
    ],
)
def test_cross_encoder_threshold_boundary_is_inclusive_and_printed_consistently(ce, refused, shown):
    d = decide(RefusalEvidence("full", best_cross_encoder=ce, best_cosine=0.5, lexical=lex("GS-40 E-07")), T)
    assert d.refused is refused
    assert d.tests[2].sentence == shown


@pytest.mark.parametrize("cos, refused", [(0.65, False), (0.6499, True)])
def test_rescue_cosine_boundary(cos, refused):
    d = decide(RefusalEvidence("full", best_cross_encoder=-9.0, best_cosine=cos, lexical=lex("insulin pens", 3)), T)
    assert d.refused is refused
    assert d.tests[3].sentence == ("best cosine 0.65 >= 0.65" if not refused else "best cosine 0.6499 < 0.65")


def test_thresholds_are_parameters_and_validated():
    ev = RefusalEvidence("full", best_cross_encoder=-4.0, best_cosine=0.5, lexical=lex("GS-40 E-07"))
    assert decide(ev, T).refused
    assert not decide(ev, RefusalThresholds(min_cross_encoder=-5.0)).refused
    assert decide(ev).refused is decide(ev, DEFAULT_THRESHOLDS).refused
    with pytest.raises(ValueError, match="min_cross_encoder must be a finite number"):
        RefusalThresholds(min_cross_encoder=float("nan"))
    with pytest.raises(ValueError, match="min_known_words must be a whole number >= 0"):
        RefusalThresholds(min_known_words=-1)
    with pytest.raises(ValueError, match="min_rescue_cosine"):
        RefusalThresholds(min_rescue_cosine=True)


def test_decision_is_json_ready():
    d = decide(RefusalEvidence("full", best_cross_encoder=-7.2, best_cosine=0.6, lexical=lex("hello")), T)
    data = json.loads(json.dumps(d.to_dict()))
    assert data["refused"] is True
    assert data["tests"][0]["name"] == "known words" and data["tests"][0]["passed"] is False


# ------------------------------------------------------------------------------------- the real pipeline
@pytest.mark.parametrize(
    "turn, refused",
    [
        ("asdfghjkl qwertyuiop", True),
        ("hello", True),
        ("ok", True),
        ("?", True),
        ("GS-40 E-09", False),
        ("my belly has gone lumpy where I always do my insulin", False),
        ("Rosvarin 10 mg", False),
    ],
)
def test_real_pipeline_refuses_gibberish_and_chit_chat_and_answers_real_turns(shipped, turn, refused):
    r = shipped.retrieve(turn)
    assert r.refusal is not None and r.refusal.rule.startswith("cross-encoder")  # the reranker ran
    assert r.refusal.refused is refused, r.refusal.reason
    assert (r.hybrid_path == "no_match") is refused


def test_real_pipeline_reports_the_failed_test_on_the_result_and_the_cut_cards(shipped):
    turn = "GlucoSense GS-90 error E-77"  # the cross-encoder likes the GS-60 E-07 card (logit ~ +4.9)
    r = shipped.retrieve(turn)
    assert r.hybrid_path == "no_match" and r.final == ()
    why = "GS-90, E-77 are not in the cards (they know GS-40, GS-60, E-03, E-07, E-09)"
    assert r.reason == f"no answer, the assistant refuses: refused by the evidence rule: {why}"
    assert r.cut[0].cut_reason == f"refused: {why}"
    # (issue 23: the out-of-domain example test now comes before the cross-encoder's, so it is found by name)
    assert next(t for t in r.refusal.tests if t.name == "cross-encoder").passed
    data = json.loads(json.dumps(r.to_dict()))
    assert data["refusal"]["refused"] is True and data["refusal"]["reason"] == why
    # Without the reranker the rule falls back, and says so; today's cosine rule is one setting away.
    degraded = shipped.retrieve(turn, shipped.settings.replace(simulate_reranker_failure=True))
    assert degraded.refusal.unavailable == (
        "cross-encoder unavailable (reranker load failure (simulated)): "
        "using cosine, lexical and agreement evidence only",
    )
    legacy = shipped.retrieve(turn, shipped.settings.replace(refusal_rule="cosine"))
    assert legacy.refusal is None and legacy.hybrid_path == "full"


def test_unknown_codes_are_not_judged_in_open_text_with_hundreds_of_code_families():
    from retrieval.refusal_thresholds import MAX_CODE_FAMILIES

    names = [chr(65 + i // 26) + chr(65 + i % 26) for i in range(MAX_CODE_FAMILIES + 1)]  # AA, AB, ...
    texts = [f"The protein {name}-{i} binds CD4" for i, name in enumerate(names)]
    vocab = Vocabulary.from_texts(texts)
    assert len(vocab.families) > MAX_CODE_FAMILIES
    ev = lexical_evidence("Does CD9999 bind AA-7?", texts[0], vocab)
    assert ev.unknown_identifiers == ("CD9999", "AA-7") and ev.code_families == len(vocab.families)
    old = decide(
        RefusalEvidence("full", best_cross_encoder=5.0, best_cosine=0.7, lexical=ev),
        replace(T, max_code_families=10**9),
    )  # the rule before issue 23 judged them anyway
    assert old.refused and old.failed[0].name == "unknown identifiers"
    d = decide(RefusalEvidence("full", best_cross_encoder=5.0, best_cosine=0.7, lexical=ev), T)
    codes = next(t for t in d.tests if t.name == "unknown identifiers")
    assert codes.passed and codes.sentence.startswith(f"not judged: the cards use {len(vocab.families)} code families")


def test_a_turn_nearer_an_out_of_domain_example_than_any_card_is_refused():
    th = T  # max_ood_margin 0.0 by default
    ev = RefusalEvidence(
        "full",
        best_cross_encoder=4.5,
        best_cosine=0.69,
        lexical=lex("the vending machine carousel"),
        ood=("the vending machine ate my coins", 0.74, 0.69),
    )
    d = decide(ev, th)
    assert d.refused and d.failed[0].name == "out-of-domain example"
    assert d.reason == (
        "closest out-of-domain example 'the vending machine ate my coins' at cosine 0.740, closest "
        "card 0.690: margin +0.050 >= 0.0"
    )
    assert not decide(replace(ev, ood=("x", 0.60, 0.69)), th).refused  # the card is nearer
    assert not decide(ev, replace(T, max_ood_margin=1.0)).refused  # 1.0: off
    # A turn in another language than the cards is judged by e5, not by English cosines to the examples.
    spanish = lexical_evidence("¿Qué hago si mi medidor muestra un mensaje?", TEXTS[0], VOCAB)
    assert not decide(replace(ev, lexical=spanish), th).failed


def test_the_closest_example_leaves_the_turn_itself_out():
    import numpy as np

    from retrieval import ood_examples

    class Embedder:
        name = "test-embedder-2d"

        def embed_query(self, text):
            return np.array([1.0, 0.0] if "printer" in text else [0.0, 1.0], dtype=np.float32)

    texts = ["my printer is jammed", "what is the capital of Peru"]
    ood_examples._EXAMPLES[Embedder.name] = (texts, np.stack([Embedder().embed_query(t) for t in texts]))
    try:
        vec = Embedder().embed_query("printer")
        assert ood_examples.nearest(Embedder(), vec, "the printer again") == ("my printer is jammed", 1.0)
        assert ood_examples.nearest(Embedder(), vec, "my printer is jammed") == ("what is the capital of Peru", 0.0)
    finally:
        ood_examples._EXAMPLES.pop(Embedder.name, None)


SPANISH_CARDS = Path(__file__).parent / "data" / "spanish_cards.jsonl"


@pytest.mark.parametrize(
    "turn, card",
    [
        ("can I drink grapefruit juice with my statin?", "es-pomelo"),
        ("where do I throw away used needles?", "es-agujas"),
        ("what is the capital of France?", None),
    ],
)
def test_an_english_turn_about_spanish_cards_is_not_cut_by_the_english_cosine(chroma_dir, turn, card):
    """Issue 23, the reverse direction: English turns about Spanish cards. bge-small's cosine between them sits
    below MIN_SIMILARITY (0.55) even for the card that answers, so the cut refused every such turn the rule had
    answered by multilingual-e5. The cut is not applied to a turn the rule answered across languages (and says so);
    an out-of-domain English turn is still refused by the rule."""
    from retrieval.corpus import load_cards, split_cards
    from retrieval.pipeline import HybridRetriever
    from retrieval.settings import Settings

    s = Settings.from_env({}, corpus_path=str(SPANISH_CARDS), chroma_path=str(chroma_dir / "spanish"))
    retriever = HybridRetriever(s, chunks=split_cards(load_cards(SPANISH_CARDS), 400), progress=lambda d, t: None)
    out = retriever.retrieve(turn, s)
    assert out.refusal is not None and out.refusal.cross_language
    if card is None:
        assert out.hybrid_path == "no_match" and out.refusal.refused
        return
    assert out.hybrid_path == "full" and out.final[0].parent_id == card, out.reason
    assert out.final[0].similarity < s.min_similarity  # the cut would have refused it for its language
    assert "MIN_SIMILARITY not applied: the turn is in another language than most cards" in out.reason
    from retrieval.why import explain  # "Why not...?" agrees: the threshold did not cut it

    why = explain(retriever, turn, card, s, search=False)
    threshold = next(st for st in why.stages if st["stage"] == "threshold")
    assert threshold["passed"] and "MIN_SIMILARITY not applied" in threshold["note"] and why.lost_at is None
    # with a multilingual embedder the cosine compares languages, and the cut applies as usual
    from retrieval.refusal_turn import final_cards

    assert final_cards(out.refusal, [], lambda cid: 0.0, s)[2]
    assert not final_cards(out.refusal, [], lambda cid: 0.0, s.replace(embedding_model="multilingual-e5-small"))[2]


def test_with_multilingual_e5_as_the_embedder_spanish_cards_answer_english_and_portuguese_turns(chroma_dir):
    """What the README advises for a corpus written in Spanish: multilingual-e5-small as the embedding model ranks
    the card that answers first for turns bge-small ranks wrong (the English and Portuguese forgotten-dose turns)."""
    from retrieval.corpus import load_cards, split_cards
    from retrieval.pipeline import HybridRetriever
    from retrieval.settings import Settings

    s = Settings.from_env(
        {},
        corpus_path=str(SPANISH_CARDS),
        chroma_path=str(chroma_dir / "spanish-e5"),
        embedding_model="multilingual-e5-small",
    )
    retriever = HybridRetriever(s, chunks=split_cards(load_cards(SPANISH_CARDS), 400), progress=lambda d, t: None)
    for turn in ("I forgot my daily pill, should I take two tomorrow?", "esqueci o remédio de hoje, tomo dois amanhã?"):
        out = retriever.retrieve(turn, s)
        assert out.hybrid_path == "full" and out.final[0].parent_id == "es-olvido", (turn, out.reason)


RUSSIAN_CARDS = Path(__file__).parent / "data" / "russian_cards.jsonl"


def test_russian_cards_judge_russian_turns_by_their_words_and_e5_not_the_english_cross_encoder(chroma_dir):
    """Six synthetic Russian cards, the real pipeline: a Russian turn about them is answered with its card; an
    off-topic one sharing the function word "в" with a card was answered by the MS MARCO score (+8.1, it reads no
    Cyrillic) and is refused by multilingual-e5's cosine; one sharing no word is refused by its words."""
    from retrieval.corpus import load_cards, split_cards
    from retrieval.pipeline import HybridRetriever
    from retrieval.settings import Settings

    s = Settings.from_env({}, corpus_path=str(RUSSIAN_CARDS), chroma_path=str(chroma_dir / "russian"))
    retriever = HybridRetriever(s, chunks=split_cards(load_cards(RUSSIAN_CARDS), 400), progress=lambda d, t: None)
    assert retriever.refusal_vocabulary().languages == {"cyrl": 6}
    out = retriever.retrieve("Как хранить инсулин?", s)
    assert not out.refusal.refused and out.final[0].parent_id == "ru-insulin", out.reason
    assert out.refusal.rule == "multilingual cosine (the cross-encoder reads no Cyrillic)"
    out = retriever.retrieve("Какая погода в Москве?", s)
    assert out.refusal.refused and out.refusal.reason.startswith("multilingual-e5 cosine with the top card"), out.reason
    assert retriever.retrieve("Какая столица Франции?", s).refusal.reason.startswith("none of the turn's words")
