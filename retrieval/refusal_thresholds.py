"""The refusal rule's thresholds (``RefusalThresholds``) and their defaults, tuned for bge-small and MS MARCO on the
shipped cards' dev splits (``scripts/tune_refusal.py``); a corpus gets its own from ``retrieval.calibration``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

# Defaults for bge-small-en-v1.5 + ms-marco-MiniLM-L-12-v2, chosen by scripts/tune_refusal.py on the dev split:
# most dev turns refused with at most 1 of the 61 answerable turns refused, also one grid step stricter.
DEFAULT_MIN_CROSS_ENCODER = -3.25
DEFAULT_MIN_RESCUE_COSINE = 0.64
DEFAULT_MIN_FALLBACK_COSINE = 0.59
DEFAULT_MIN_DENSE_ONLY_COSINE = 0.59
DEFAULT_MIN_KNOWN_WORDS = 1
DEFAULT_MIN_MATCHED_WORDS = 1
# Issue 23's, chosen by scripts/refusal_report.py on the dev sets (crosslang_dev, near_dev, ood_dev, paraphrase_dev
# and the shipped turns): at most 5% of the es/pt dev turns refused, the English ones no more than before.
DEFAULT_MIN_CROSS_ENCODER_FOREIGN = -6.5
DEFAULT_MAX_UNEXPLAINED_WORDS = 99  # off unless a corpus's calibration (or the tuning) finds it pays
DEFAULT_MIN_CROSS_ENCODER_UNEXPLAINED = 50.0
DEFAULT_MIN_MULTILINGUAL_COSINE = 0.80
DEFAULT_MAX_OOD_MARGIN = 0.0  # refuse a turn nearer an out-of-domain example than any card
DEFAULT_MIN_MULTILINGUAL_Z = 2.0  # e5's cosine in standard deviations above the turn's to out-of-domain examples
MULTILINGUAL_Z_OFF = -99.0
DEFAULT_MIN_ANSWERABILITY = 0.5  # an answerability model's (REFUSAL_MODEL) best score that answers; refusal_gates
OOD_MARGIN_OFF = 1.0  # a margin of cosines never reaches 1
# Version of the rule for a turn in a script the cross-encoder does not read (``LexicalEvidence.unreadable``):
# a calibration of a corpus written in one (``calibration.calibration_key``) counted on the cross-encoder's score.
SCRIPT_RULE = "script-e5-1"
# Cards that use more code families than this are open text (abstracts name hundreds of genes and proteins: CD4,
# IL-6, NF2), not a catalogue of model numbers and error codes: an unknown member of a family is normal there.
MAX_CODE_FAMILIES = 100


@dataclass(frozen=True)
class RefusalThresholds:
    """The rule's thresholds (future Settings fields; the defaults are the module constants).

    Attributes:
        min_cross_encoder: a best cross-encoder logit at or above this answers the turn.
        min_rescue_cosine: below ``min_cross_encoder``, a cosine at or above this (with lexical support) still
            answers: the cross-encoder misjudges casual paraphrases.
        min_fallback_cosine: without the cross-encoder (``rrf_only``), the cosine the turn needs, with lexical
            support or the branches' agreement.
        min_dense_only_cosine: the cosine a ``dense_only`` turn needs.
        min_known_words: turn words that must occur somewhere in the cards.
        min_matched_words: turn words that must occur in the top card for "lexical support".
        check_identifiers: refuse a turn naming an unknown member of an identifier family the cards use (GS-90
            when they know GS-40 and GS-60). Right for a catalogue of codes; in open scientific text a gene name
            the abstracts do not spell out (NF2) would be refused too.
        min_cross_encoder_foreign: ``min_cross_encoder`` for a turn written in another language than its top card
            (the English cross-encoder scores a Spanish turn lower).
        max_unexplained_words: content words no card uses that a turn may have; with more it is refused unless its
            best cross-encoder score reaches ``min_cross_encoder_unexplained``.
        min_multilingual_cosine: below ``min_cross_encoder_foreign``, a turn in another language is still answered
            when multilingual-e5's cosine with its top card reaches this.
        max_ood_margin: refuse a turn (not one in another language) whose closest out-of-domain example
            (``retrieval.ood_examples``) is this much nearer, or more, than its closest card (1.0: off).
        max_code_families: unknown identifiers are judged only in cards using at most this many code families (a
            catalogue); above it the cards are open text (abstracts name hundreds of genes) and they are not.
        languages: judge a turn's language against the cards' (True); False compares words whatever the language
            (the rule before issue 23: a Spanish turn's words count as misses against English cards).
        source: where the thresholds come from ("defaults", or the corpus calibration that chose them).
    """

    min_cross_encoder: float = DEFAULT_MIN_CROSS_ENCODER
    min_rescue_cosine: float = DEFAULT_MIN_RESCUE_COSINE
    min_fallback_cosine: float = DEFAULT_MIN_FALLBACK_COSINE
    min_dense_only_cosine: float = DEFAULT_MIN_DENSE_ONLY_COSINE
    min_known_words: int = DEFAULT_MIN_KNOWN_WORDS
    min_matched_words: int = DEFAULT_MIN_MATCHED_WORDS
    check_identifiers: bool = True
    min_cross_encoder_foreign: float = DEFAULT_MIN_CROSS_ENCODER_FOREIGN
    max_unexplained_words: int = DEFAULT_MAX_UNEXPLAINED_WORDS
    min_cross_encoder_unexplained: float = DEFAULT_MIN_CROSS_ENCODER_UNEXPLAINED
    min_multilingual_cosine: float = DEFAULT_MIN_MULTILINGUAL_COSINE
    max_code_families: int = MAX_CODE_FAMILIES
    max_ood_margin: float = DEFAULT_MAX_OOD_MARGIN
    min_multilingual_z: float = DEFAULT_MIN_MULTILINGUAL_Z  # the gates of retrieval.refusal_gates
    min_answerability: float = DEFAULT_MIN_ANSWERABILITY
    languages: bool = True
    source: str = "defaults"

    def __post_init__(self) -> None:
        for name in (
            "min_cross_encoder",
            "min_rescue_cosine",
            "min_fallback_cosine",
            "min_dense_only_cosine",
            "min_cross_encoder_foreign",
            "min_cross_encoder_unexplained",
            "min_multilingual_cosine",
            "max_ood_margin",
            "min_multilingual_z",
            "min_answerability",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}.")
        for name in ("min_known_words", "min_matched_words", "max_unexplained_words", "max_code_families"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}.")
        for name in ("check_identifiers", "languages"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str | None = None) -> RefusalThresholds:
        """Thresholds from ``to_dict``'s output (unknown keys ignored, missing ones default); ValueError if bad."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if source is not None:
            values["source"] = source
        return cls(**values)


DEFAULT_THRESHOLDS = RefusalThresholds()
