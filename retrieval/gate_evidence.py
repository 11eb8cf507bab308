"""The evidence of the refusal gates (``retrieval.refusal_gates``) for one turn: multilingual-e5's null
distribution for a turn in another language, and the answerability model's score when ``REFUSAL_MODEL`` is set.
Models are asked only when a gate would judge; a model that cannot be had is named, and the rule judges without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from retrieval.refusal_evidence import RefusalEvidence
from retrieval.refusal_gates import wants_null
from retrieval.refusal_thresholds import RefusalThresholds


def fill(
    evidence: RefusalEvidence, thresholds: RefusalThresholds, turn: str, texts: Sequence[str], settings: Any
) -> tuple[RefusalEvidence, list[tuple[str, str]]]:
    """``evidence`` with what the gates need for ``turn`` and its top_k cards' ``texts`` (best first), and the
    gates' evidence that could not be had as (what, why)."""
    absent: list[tuple[str, str]] = []
    if texts and evidence.multilingual_null is None and wants_null(evidence, thresholds):
        from retrieval import crosslingual

        try:
            cosine = evidence.multilingual_cosine
            cosine = crosslingual.cosine(turn, texts[0]) if cosine is None else cosine
            evidence = replace(evidence, multilingual_cosine=cosine, multilingual_null=crosslingual.null(turn, texts))
        except Exception as exc:  # noqa: BLE001  no e5: the rule judges without the gate
            absent.append(("multilingual null", f"{type(exc).__name__}: {exc}"))
    model = getattr(settings, "refusal_model", None)
    if model and texts and evidence.answerability is None:
        from retrieval import answerability

        try:
            evidence = replace(evidence, answerability=(model, answerability.best(model, turn, texts)))
        except answerability.ModelUnavailable as exc:
            absent.append(("answerability model", str(exc)))
    return evidence, absent


def with_model(found: dict[str, Any], turn: str, settings: Any) -> dict[str, Any]:
    """Each level's candidates (``calibration.LevelCandidates``) with the answerability model's best score against
    that level's top_k cards, when ``REFUSAL_MODEL`` is set and loads; unchanged otherwise."""
    model = getattr(settings, "refusal_model", None)
    if not model:
        return found
    from retrieval import answerability

    out = {}
    for level, c in found.items():
        texts = [x.text for x in c.candidates]
        try:
            out[level] = replace(c, answerability=(model, answerability.best(model, turn, texts))) if texts else c
        except answerability.ModelUnavailable:
            return found
    return out
