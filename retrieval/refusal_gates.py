"""Gates after the refusal rule: evidence that can only refuse a turn ``retrieval.refusal.decide`` answered.

- **multilingual null** (a turn in a language few cards use, judged by multilingual-e5): e5's cosines sit in a
  narrow, high band (0.72-0.82 for a Spanish history question against medication cards, 0.82-0.91 for a Spanish
  question the cards answer), so a fixed cut in that band does not separate. The turn's best e5 cosine with its
  top_k cards (the ranking is English-minded: e5's closest card is often not the first) is compared with the turn's
  own cosines to the out-of-domain pool's examples (``retrieval.ood_examples``, embedded by e5):
  ``z = (cosine - mean) / sd``. A turn about the cards stands out from that null distribution; a general-knowledge
  question is about as close to the examples as to the cards. A turn whose best e5 cosine reaches the fixed cut
  (``min_multilingual_cosine``) passes: two Spanish questions about blood pressure monitors sit near the pool's
  appliance questions (z < 1) at e5 cosines above 0.80.
- **answerability model** (``REFUSAL_MODEL``, ``retrieval.answerability``): a cross-encoder the user trusts to
  judge whether a passage answers a question; its best score over the top_k cards must reach
  ``min_answerability``. The decision names the model when it decided.

``judge`` is ``decide`` followed by the gates; the pipeline, calibration and the reports all use it.
"""

from __future__ import annotations

from dataclasses import replace

from retrieval.refusal import RefusalDecision, decide
from retrieval.refusal_evidence import RefusalEvidence
from retrieval.refusal_tests import RefusalTest
from retrieval.refusal_thresholds import DEFAULT_THRESHOLDS, MULTILINGUAL_Z_OFF, RefusalThresholds
from retrieval.refusal_words import _compare


def judge(evidence: RefusalEvidence, thresholds: RefusalThresholds = DEFAULT_THRESHOLDS) -> RefusalDecision:
    """The rule's decision (``retrieval.refusal.decide``), then each gate whose evidence is there."""
    decision = decide(evidence, thresholds)
    for test, who in gate_tests(evidence, thresholds):
        decision = add_gate(decision, test, who)
    return decision


def wants_null(evidence: RefusalEvidence, thresholds: RefusalThresholds) -> bool:
    """True when the multilingual null gate would judge this turn (the pipeline then asks e5 for its numbers): a
    turn in a language few cards use, or a script the cross-encoder does not read, with the gate on."""
    lex = evidence.lexical
    return (
        thresholds.languages
        and thresholds.min_multilingual_z > MULTILINGUAL_Z_OFF
        and lex is not None
        and (lex.foreign or lex.unreadable)
    )


def gate_tests(evidence: RefusalEvidence, thresholds: RefusalThresholds) -> list[tuple[RefusalTest, str]]:
    """The gates' tests for this evidence, each with what decided (for the rule's name when it refuses)."""
    out = []
    null = evidence.multilingual_null
    if null is not None and wants_null(evidence, thresholds):
        test = null_test(null[0], null[1:], thresholds.min_multilingual_z, thresholds.min_multilingual_cosine)
        out.append((test, "the multilingual null"))
    if evidence.answerability is not None:
        name, score = evidence.answerability
        ok = score >= thresholds.min_answerability
        sentence = f"answerability model '{name}': best score {_compare(score, thresholds.min_answerability, ok, 3)}"
        out.append((RefusalTest("answerability model", score, thresholds.min_answerability, ok, sentence), name))
    return out


def null_test(cosine: float, null: tuple[float, float, int], threshold: float, cut: float = 1.0) -> RefusalTest:
    """e5's best cosine with the top_k cards in standard deviations above the turn's cosines to the examples: the
    turn passes when that reaches ``threshold``, or when the cosine itself reaches ``cut``
    (``min_multilingual_cosine``: above the band where unrelated texts sit, it needs no reference)."""
    mean, sd, n = null
    z = (cosine - mean) / sd if sd > 0 else 0.0
    ok = z >= threshold or cosine >= cut
    where = f"standard deviations above the turn's cosines to {n} out-of-domain examples ({mean:.3f} ± {sd:.3f})"
    if cosine >= cut:
        sentence = f"multilingual-e5's best cosine with the top cards {_compare(cosine, cut, True, 3)}"
    else:
        sentence = (
            f"multilingual-e5's best cosine with the top cards {_compare(cosine, cut, False, 3)} and "
            f"{_compare(z, threshold, ok, 2)} {where}"
        )
    return RefusalTest("multilingual null", z, threshold, ok, sentence)


def add_gate(decision: RefusalDecision, test: RefusalTest, who: str) -> RefusalDecision:
    """``decision`` with ``test`` among its tests; a failed gate refuses a turn the rule answered, and the rule's
    name and reason say which gate decided."""
    tests = (*decision.tests, test)
    if test.passed or decision.refused:
        return replace(decision, tests=tests)
    return replace(decision, tests=tests, refused=True, rule=f"{decision.rule}; refused by {who}", reason=test.sentence)


def unavailable(decision: RefusalDecision, what: str, why: str) -> RefusalDecision:
    """``decision`` noting that a gate's evidence could not be had (the rule judged without it)."""
    return replace(decision, unavailable=(*decision.unavailable, f"{what} unavailable ({why}): judged without it"))
