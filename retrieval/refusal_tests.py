"""Each test of the refusal rule (``RefusalTest``): one piece of a turn's evidence against its threshold, with the
sentence that says how it went. ``retrieval.refusal.decide`` chooses which tests a turn's evidence gets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from retrieval.refusal_evidence import LexicalEvidence, RefusalEvidence
from retrieval.refusal_thresholds import RefusalThresholds
from retrieval.refusal_words import _compare, _language_name, _num, _quote
from retrieval.tokenize import SCRIPT_NAMES


@dataclass(frozen=True)
class RefusalTest:
    """One test of the rule: its value, threshold, outcome, and a sentence saying so."""

    name: str
    value: float | None
    threshold: float
    passed: bool
    sentence: str


def vocabulary_tests(lex: LexicalEvidence, t: RefusalThresholds) -> list[RefusalTest]:
    n_known = len(lex.known)
    if not lex.judged:
        known_sentence = (
            f"not compared: the turn is in {_language_name(lex.language)}, a "
            f"{'script' if lex.language in SCRIPT_NAMES else 'language'} few cards are written in "
            "(a turn in another language is not a miss)"
        )
    elif not lex.words:
        known_sentence = "the turn has no word to search for (only stop words, punctuation or single letters)"
    elif n_known >= t.min_known_words:
        known_sentence = f"{n_known} of the turn's {len(lex.words)} words occur in the cards ({_quote(lex.known)})"
    elif n_known == 0:
        known_sentence = f"none of the turn's words occurs in any card ({_quote(lex.words)})"
    else:
        known_sentence = (
            f"only {n_known} of the turn's words occur in the cards ({_quote(lex.known)}), fewer "
            f"than {t.min_known_words}"
        )
    tests = [
        RefusalTest(
            "known words",
            float(n_known),
            float(t.min_known_words),
            n_known >= t.min_known_words or not lex.judged,
            known_sentence,
        )
    ]
    if not t.check_identifiers:
        return tests
    open_text = lex.code_families > t.max_code_families
    unknown = () if open_text else lex.unknown_identifiers
    if unknown:
        sentence = (
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the cards "
            f"(they know {', '.join(lex.known_family_members)})"
        )
    elif open_text:
        sentence = (
            f"not judged: the cards use {lex.code_families} code families, open text where an unknown name is normal"
        )
    else:
        sentence = "no unknown model number or code in the turn"
    tests.append(RefusalTest("unknown identifiers", float(len(unknown)), 0.0, not unknown, sentence))
    return tests


def unexplained_test(lex: LexicalEvidence, ce: float | None, t: RefusalThresholds) -> RefusalTest:
    """More than ``max_unexplained_words`` words no card uses refuse, unless the cross-encoder is sure."""
    n = len(lex.unexplained)
    within = n <= t.max_unexplained_words
    sure = ce is not None and ce >= t.min_cross_encoder_unexplained
    if not n:
        sentence = "every content word of the turn occurs in some card"
    else:
        sentence = f"{n} word{'s' if n > 1 else ''} no card uses ({_quote(lex.unexplained)})"
        sentence += f", {'at most' if within else 'more than'} {t.max_unexplained_words} allowed"
        if not within:
            sentence += (
                f", and the best cross-encoder score {_compare(ce, t.min_cross_encoder_unexplained, sure, 1)}"
                if ce is not None
                else ", and no cross-encoder score to overrule them"
            )
    return RefusalTest("unexplained words", float(n), float(t.max_unexplained_words), within or sure, sentence)


def matched_test(lex: LexicalEvidence, t: RefusalThresholds) -> RefusalTest:
    n = len(lex.matched)
    passed = n >= t.min_matched_words
    if n:
        best = max(zip(lex.matched_idf, lex.matched))[1] if lex.matched_idf else lex.matched[0]
        sentence = f"{n} of the turn's words in the top card ({_quote(lex.matched)}; rarest '{best}')"
    else:
        sentence = "no word of the turn occurs in the top card"
    if not passed and n:
        sentence += f", fewer than {t.min_matched_words}"
    return RefusalTest("lexical support", float(n), float(t.min_matched_words), passed, sentence)


def cosine_test(name: str, cosine: float, threshold: float) -> RefusalTest:
    passed = cosine >= threshold
    return RefusalTest(name, cosine, threshold, passed, f"best cosine {_compare(cosine, threshold, passed, 3)}")


def ood_test(ood: tuple[str, float, float], t: RefusalThresholds) -> RefusalTest:
    example, near, card = ood
    margin = near - card
    ok = margin < t.max_ood_margin
    shown = example if len(example) <= 60 else example[:57] + "..."
    return RefusalTest(
        "out-of-domain example",
        margin,
        t.max_ood_margin,
        ok,
        f"closest out-of-domain example '{shown}' at cosine {near:.3f}, closest card {card:.3f}: "
        f"margin {margin:+.3f} {'<' if ok else '>='} {_num(t.max_ood_margin, 3)}",
    )


def cross_encoder_tests(
    ev: RefusalEvidence, t: RefusalThresholds, tests: list[RefusalTest], note: Callable[[str, str], None]
) -> tuple[str, bool]:
    """The cross-encoder test and, below its threshold, the cosine rescue: (the rule's name, answered)."""
    lex, ce, cos = ev.lexical, ev.best_cross_encoder, ev.best_cosine
    assert ce is not None
    foreign = lex is not None and lex.foreign
    rule = "cross-encoder"
    limit = t.min_cross_encoder_foreign if foreign else t.min_cross_encoder
    ce_ok = ce >= limit
    where = ""
    if foreign and lex:
        kind = "script" if lex.language in SCRIPT_NAMES else "language"
        where = (
            f" ({_language_name(lex.language)}{'-script' if kind == 'script' else ''} turn, cards mostly in "
            f"another {kind})"
        )
    tests.append(
        RefusalTest(
            "cross-encoder", ce, limit, ce_ok, f"best cross-encoder score {_compare(ce, limit, ce_ok, 1)}{where}"
        )
    )
    if cos is None:
        note("cosine", "a low cross-encoder score cannot be rescued by the cosine")
    if ce_ok or cos is None:
        return rule, ce_ok
    if foreign and ev.multilingual_cosine is not None:
        tests.append(multilingual_test(ev.multilingual_cosine, t))
        return "cross-encoder, rescued by the multilingual cosine (turn and cards in different languages)", tests[
            -1
        ].passed
    rule = "cross-encoder, rescued by cosine and lexical support"
    rescue = [cosine_test("cosine rescue", cos, t.min_rescue_cosine)]
    if lex is not None and not foreign:
        rescue.append(matched_test(lex, t))
    elif foreign:
        rule = "cross-encoder, rescued by cosine (turn and cards in different languages)"
        if "multilingual cosine" in ev.missing:
            note("multilingual cosine", "the English cosine judges the turn in another language")
    tests.extend(rescue)
    return rule, all(x.passed for x in rescue)


def multilingual_test(m: float, t: RefusalThresholds) -> RefusalTest:
    ok = m >= t.min_multilingual_cosine
    return RefusalTest(
        "multilingual cosine",
        m,
        t.min_multilingual_cosine,
        ok,
        f"multilingual-e5 cosine with the top card {_compare(m, t.min_multilingual_cosine, ok, 3)}",
    )
