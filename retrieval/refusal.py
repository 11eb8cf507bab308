"""The no-match decision with its evidence: refuse a turn the cards cannot answer, and say which test failed.

A cosine threshold alone cannot tell an unrelated turn from a paraphrase: with bge-small, "hello" or a question
about mortgages reaches cosines of 0.55-0.65 against medication cards, as high as some real questions. This module
combines the evidence a turn leaves behind into one explainable decision:

- **vocabulary** (needs only the chunk texts): at least one of the turn's words occurs in some card, and no
  identifier in the turn is an unknown member of a family the cards use (``GS-90`` when the cards know ``GS-40``
  and ``GS-60``). These two tests refuse gibberish, chit-chat and invented model numbers or error codes.
- **cross-encoder** (when the reranker ran): the best logit among the top_k cards. Below ``min_cross_encoder``
  the turn is still answered when the cosine is high *and* the top card shares a word with the turn (a
  paraphrase the MS MARCO cross-encoder misjudges), otherwise refused.
- **unexplained words**: the turn's content words that no card uses at all (``printer`` in "the printer shows
  error E-09"): more than ``max_unexplained_words`` of them refuse the turn unless the cross-encoder is sure
  (``min_cross_encoder_unexplained``). Judged only for a turn written in a language most cards use: a Spanish
  turn about English cards is normal (ADR-0022), and its words are not misses.
- **language**: a turn in a language few cards use is judged by ``min_cross_encoder_foreign`` (the English MS
  MARCO cross-encoder scores a Spanish turn low) and may be rescued by the cosine without a shared word. A turn
  mostly in a script the cross-encoder does not read (Cyrillic, Greek, Arabic, Devanagari...) is judged by
  multilingual-e5's cosine instead of its score, whatever the cards' language.
- **without the cross-encoder**: ``rrf_only`` falls back to the cosine with lexical support (a word of the turn
  in the top card) or the branches' agreement; ``dense_only`` to the cosine; ``bm25_only`` without its reranker
  to lexical support alone. The vocabulary tests apply at every level. The decision lists the evidence that
  was unavailable and why.

The default thresholds were chosen on the shipped answerable turns and the dev splits (``scripts/tune_refusal.py``;
corpus/README.md describes the splits); a corpus gets its own from ``retrieval.calibration``. Pure functions, no
model imports. This module holds the decision; the thresholds are in ``retrieval.refusal_thresholds``, the
evidence in ``retrieval.refusal_evidence`` (the words in ``retrieval.refusal_vocabulary``), each test in
``retrieval.refusal_tests``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from retrieval.refusal_evidence import RefusalEvidence
from retrieval.refusal_tests import (
    RefusalTest,
    cosine_test,
    cross_encoder_tests,
    matched_test,
    multilingual_test,
    ood_test,
    unexplained_test,
    vocabulary_tests,
)
from retrieval.refusal_thresholds import (
    DEFAULT_MAX_UNEXPLAINED_WORDS,
    DEFAULT_THRESHOLDS,
    OOD_MARGIN_OFF,
    RefusalThresholds,
)
from retrieval.refusal_words import _num, _quote
from retrieval.tokenize import SCRIPT_NAMES


@dataclass(frozen=True)
class RefusalDecision:
    """Refuse or answer, with every test that was run and the evidence that was unavailable.

    ``reason`` is one sentence for a badge: the first failing test when refused, what carried the turn when not.
    """

    refused: bool
    rule: str
    tests: tuple[RefusalTest, ...]
    unavailable: tuple[str, ...]
    reason: str
    thresholds: str = "defaults"  # where the thresholds came from (a corpus calibration names itself)
    notes: tuple[str, ...] = ()  # evidence shown but not judged (words no card uses, when that test is off)
    cross_language: bool = False  # the turn is in a language few cards use (judged by scores, not by its words)

    @property
    def failed(self) -> tuple[RefusalTest, ...]:
        return tuple(t for t in self.tests if not t.passed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(evidence: RefusalEvidence, thresholds: RefusalThresholds = DEFAULT_THRESHOLDS) -> RefusalDecision:
    """Refuse or answer one turn from its evidence; every test run is in the decision, with its numbers.

    The rule, by the evidence available:

    1. vocabulary (whenever ``lexical`` is given): refuse if fewer than ``min_known_words`` of the turn's words
       occur in any card (not judged for a turn in a language few cards use), or the turn names an unknown
       identifier of a family the cards use; refuse if more than ``max_unexplained_words`` of its words occur in
       no card, unless the best cross-encoder score reaches ``min_cross_encoder_unexplained``.
    2. cross-encoder ran (``full``, ``bm25_only``): answer if its best logit >= ``min_cross_encoder`` (for a turn in
       another language than its top card: ``min_cross_encoder_foreign``); otherwise answer only if the best cosine
       >= ``min_rescue_cosine`` and the top card shares a word with the turn (a turn in another language need not).
       A turn in a script the cross-encoder does not read is judged by ``multilingual_cosine`` instead, when given.
    3. no cross-encoder, both branches (``rrf_only``): answer if the best cosine >= ``min_fallback_cosine`` and the
       top card shares a word with the turn or is in both branches' top ``AGREEMENT_DEPTH``.
    4. no cross-encoder, one branch with a cosine (``dense_only``): answer if the best cosine >=
       ``min_dense_only_cosine``.
    5. neither a cross-encoder score nor a cosine (``bm25_only`` with the reranker down): lexical support alone.
    """
    t = thresholds
    ev = evidence
    tests: list[RefusalTest] = []
    unavailable: list[str] = []
    notes: list[str] = []
    lex = ev.lexical
    if lex is not None and not t.languages:  # words compared whatever the language (the rule before issue 23)
        lex = replace(lex, judged=True, language="", top_language="")
        ev = replace(ev, lexical=lex)

    def note(name: str, consequence: str) -> None:
        why = ev.missing.get(name, "")
        unavailable.append(f"{name} unavailable{f' ({why})' if why else ''}: {consequence}")

    if lex is None:
        note("vocabulary", "gibberish and unknown codes are judged by the scores alone")
    else:
        tests.extend(vocabulary_tests(lex, t))
        if t.max_unexplained_words < DEFAULT_MAX_UNEXPLAINED_WORDS and lex.judged:
            tests.append(unexplained_test(lex, ev.best_cross_encoder, t))
        elif lex.judged and lex.unexplained:  # shown, so that a near miss answered ("printer") can be seen
            n = len(lex.unexplained)
            notes.append(
                f"{n} word{'s' if n > 1 else ''} no card uses ({_quote(lex.unexplained)}): not judged "
                "(REFUSAL_MAX_UNEXPLAINED_WORDS is off: paraphrases use as many as near misses)"
            )
    if ev.ood is not None and t.max_ood_margin < OOD_MARGIN_OFF and lex is not None and not lex.foreign:
        tests.append(ood_test(ev.ood, t))  # (cards without words: a degenerate corpus, judged by scores alone)
    vocabulary_ok = all(test.passed for test in tests)
    rule, scores_ok = _score_tests(ev, t, tests, notes, note)
    answered = vocabulary_ok and scores_ok
    return RefusalDecision(
        refused=not answered,
        rule=rule,
        tests=tuple(tests),
        unavailable=tuple(unavailable),
        reason=_reason(tests, answered),
        thresholds=t.source,
        notes=tuple(notes),
        cross_language=lex is not None and lex.foreign,
    )


def _score_tests(
    ev: RefusalEvidence,
    t: RefusalThresholds,
    tests: list[RefusalTest],
    notes: list[str],
    note: Callable[[str, str], None],
) -> tuple[str, bool]:
    """The model scores' tests by the evidence available (points 2 to 5 of ``decide``): (the rule's name, answered)."""
    lex = ev.lexical
    ce, cos = ev.best_cross_encoder, ev.best_cosine
    unreadable = lex is not None and lex.unreadable and ev.multilingual_cosine is not None
    if ce is not None and not unreadable:
        rule, scores_ok = cross_encoder_tests(ev, t, tests, note)
    elif lex is not None and (lex.foreign or unreadable) and ev.multilingual_cosine is not None:
        if ce is not None:
            rule = f"multilingual cosine (the cross-encoder reads no {SCRIPT_NAMES[lex.language]})"
            notes.append(
                f"cross-encoder score {_num(ce, 1)} not used: the MS MARCO model reads English, not "
                f"{SCRIPT_NAMES[lex.language]} script (it scores such text high or low whatever it says)"
            )
        else:
            rule = "multilingual cosine (no cross-encoder; turn and cards in different languages)"
            note("cross-encoder", "using multilingual-e5's cosine: the English cosine cannot judge another language")
        tests.append(multilingual_test(ev.multilingual_cosine, t))
        scores_ok = tests[-1].passed
    elif cos is not None and ev.agreement is not None:
        rule = "cosine + lexical support or branch agreement (no cross-encoder)"
        note("cross-encoder", "using cosine, lexical and agreement evidence only")
        cos_test = cosine_test("cosine", cos, t.min_fallback_cosine)
        tests.append(cos_test)
        agree = ev.agreement
        agree_test = RefusalTest(
            "branch agreement",
            float(agree.top_in_both),
            1.0,
            agree.top_in_both,
            f"the top card is {'in both' if agree.top_in_both else 'not in both'} branches' top {agree.depth} "
            f"({agree.overlap} cards shared)",
        )
        support = [agree_test]
        if lex is not None:
            support.insert(0, matched_test(lex, t))
        tests.extend(support)
        scores_ok = cos_test.passed and any(s.passed for s in support)
    elif cos is not None:
        rule = "cosine (dense only)"
        note("cross-encoder", "using cosine evidence only")
        if ev.agreement is None:
            note("branch agreement", "only one branch ran")
        cos_test = cosine_test("cosine", cos, t.min_dense_only_cosine)
        tests.append(cos_test)
        scores_ok = cos_test.passed
    else:
        rule = "lexical support only (no cross-encoder, no cosine)"
        note("cross-encoder", "no model score to judge the turn")
        note("cosine", "no model score to judge the turn")
        if lex is None:
            tests.append(RefusalTest("any evidence", None, 1.0, False, "no evidence at all to judge the turn"))
            scores_ok = False
        else:
            matched = matched_test(lex, t)
            tests.append(matched)
            scores_ok = matched.passed
    return rule, scores_ok


def needs_multilingual(evidence: RefusalEvidence, thresholds: RefusalThresholds = DEFAULT_THRESHOLDS) -> bool:
    """True when the rule would use multilingual-e5's cosine for this turn: written in a language few cards use,
    with a cross-encoder score below ``min_cross_encoder_foreign`` or no cross-encoder at all; or written in a
    script the cross-encoder does not read (``LexicalEvidence.unreadable``), whatever the cards' language (the
    pipeline asks e5 only then)."""
    lex, ce = evidence.lexical, evidence.best_cross_encoder
    return (
        thresholds.languages
        and lex is not None
        and evidence.multilingual_cosine is None
        and (lex.unreadable or (lex.foreign and (ce is None or ce < thresholds.min_cross_encoder_foreign)))
    )


_GATES = {"known words", "unknown identifiers", "unexplained words", "out-of-domain example"}


def _reason(tests: Sequence[RefusalTest], answered: bool) -> str:
    """One sentence for the badge: the first failing test when refused, what carried the turn when not."""
    failed = [x for x in tests if not x.passed]
    if not answered:
        # The first failure that decided it: a vocabulary gate, else the score test and what could not rescue it.
        reason = failed[0].sentence
        if len(failed) > 1 and failed[0].name not in _GATES:
            reason += "; " + "; ".join(x.sentence for x in failed[1:])
        return reason
    carried = [x for x in tests if x.passed and x.name not in _GATES]
    reason = "; ".join(x.sentence for x in carried) or "all tests passed"
    if failed:  # answered although a score test failed: say what rescued it
        reason = f"{'; '.join(x.sentence for x in failed)}, but {reason}"
    return reason
