"""The refusal rule on one turn: its thresholds (the settings', or the corpus's calibration), the evidence gathered
from every branch (``refusal_decision``), and the cards its decision and the MIN_SIMILARITY cut leave
(``final_cards``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from retrieval import crosslingual, gate_evidence, ood_examples
from retrieval.cache import Stage
from retrieval.encoders import Embedder
from retrieval.parents import best_per_parent, cosine_cut_skipped, finalize
from retrieval.refusal import RefusalDecision, needs_multilingual
from retrieval.refusal_evidence import Candidate, gather
from retrieval.refusal_gates import judge, unavailable
from retrieval.refusal_thresholds import OOD_MARGIN_OFF, RefusalThresholds
from retrieval.refusal_vocabulary import Vocabulary
from retrieval.settings import Settings
from retrieval.types import BranchResult, Chunk, FinalHit, FusedHit, Hit, RerankedHit


class Corpus(Protocol):
    """What the refusal rule reads of the retriever (``retrieval.pipeline.HybridRetriever``)."""

    by_id: dict[str, Chunk]

    @property
    def embedder(self) -> Embedder | None: ...

    def embed_query(self, query: str) -> Stage: ...

    def refusal_vocabulary(self) -> Vocabulary: ...


def refusal_decision(
    retriever: Corpus,
    query: str,
    path: str,
    candidates: Sequence[Hit | FusedHit | RerankedHit],
    reranked: Sequence[RerankedHit],
    bm25: BranchResult,
    dense: BranchResult,
    similarity: Callable[[str], float] | None,
    missing: dict[str, str],
    s: Settings,
) -> RefusalDecision:
    """The refusal rule (``retrieval.refusal``) on the top_k cards before the cosine cut, with every branch's
    evidence; ``missing`` says why the cross-encoder or the cosine is unavailable."""
    logits = {h.chunk_id: h.score for h in reranked}
    cards = [
        Candidate(
            h.parent_id,
            h.chunk_id,
            retriever.by_id[h.chunk_id].indexed_text,
            similarity(h.chunk_id) if similarity is not None else None,
            logits.get(h.chunk_id),
        )
        for h in best_per_parent(candidates)[: s.top_k]
    ]
    both = bm25.usable and dense.usable
    # the corpus's stored refusal calibration, when retrieval.corpora (or a test) set one on the retriever
    thresholds = thresholds_for(getattr(retriever, "calibration", None), s)
    ood = None
    if thresholds.max_ood_margin < OOD_MARGIN_OFF and dense.usable and dense.hits and retriever.embedder is not None:
        near = ood_examples.nearest(
            retriever.embedder,
            retriever.embed_query(query).value,
            query,
            getattr(retriever, "ood_covered", frozenset()),
        )
        ood = (near[0], near[1], dense.hits[0].score) if near else None
    evidence = gather(
        query,
        path,
        cards,
        retriever.refusal_vocabulary(),
        [h.parent_id for h in bm25.hits] if both else None,
        [h.parent_id for h in dense.hits] if both else None,
        {name: why for name, why in missing.items() if why},
        ood=ood,
    )
    if cards and needs_multilingual(evidence, thresholds):  # another language, a low score: ask e5 (only then)
        try:
            evidence = replace(evidence, multilingual_cosine=crosslingual.cosine(query, cards[0].text))
        except Exception as exc:  # the wheel missing or the model failing: the English cosine judges instead
            evidence = replace(
                evidence, missing={**evidence.missing, "multilingual cosine": f"{type(exc).__name__}: {exc}"}
            )
    evidence, absent = gate_evidence.fill(evidence, thresholds, query, [c.text for c in cards], s)
    decision = judge(evidence, thresholds)
    for what, why in absent:
        decision = unavailable(decision, what, why)
    return decision


def thresholds_for(calibration: Any, s: Settings) -> RefusalThresholds:
    """The corpus's calibrated thresholds when it has them for these models and ``REFUSAL_CALIBRATION`` is on,
    else the settings' (``refusal_thresholds``)."""
    if (
        s.refusal_calibration
        and calibration is not None
        and calibration.report.get("embedder") == s.embedding_model
        and calibration.report.get("reranker") == s.reranker_model
    ):
        if calibration.report.get("refusal_model") != s.refusal_model:  # chosen for another answerability model
            return replace(calibration.thresholds, min_answerability=s.refusal_min_answerability)
        return calibration.thresholds
    return refusal_thresholds(s)


def refusal_thresholds(s: Settings) -> RefusalThresholds:
    """The refusal rule's thresholds from the settings: the cosine ones are MIN_SIMILARITY plus a margin, so they
    follow the embedding model's cosine scale."""
    return RefusalThresholds(
        min_cross_encoder=s.refusal_min_cross_encoder,
        min_rescue_cosine=round(s.min_similarity + s.refusal_rescue_margin, 6),
        min_fallback_cosine=round(s.min_similarity + s.refusal_fallback_margin, 6),
        min_dense_only_cosine=round(s.min_similarity + s.refusal_fallback_margin, 6),
        check_identifiers=s.refusal_unknown_codes,
        min_cross_encoder_foreign=s.refusal_min_cross_encoder_foreign,
        max_unexplained_words=s.refusal_max_unexplained_words,
        min_cross_encoder_unexplained=s.refusal_min_cross_encoder_unexplained,
        min_multilingual_cosine=s.refusal_min_multilingual_cosine,
        max_ood_margin=s.refusal_max_ood_margin,
        min_multilingual_z=s.refusal_min_multilingual_z,
        min_answerability=s.refusal_min_answerability,
    )


NO_CUT_ACROSS_LANGUAGES = (
    "MIN_SIMILARITY not applied: the turn is in another language than most cards, which "
    "{model}'s cosine does not compare (the refusal rule judged it)"
)


def final_cards(
    decision: RefusalDecision | None,
    candidates: Sequence[Hit | FusedHit | RerankedHit],
    similarity: Callable[[str], float] | None,
    s: Settings,
) -> tuple[list[FinalHit], list[FinalHit], str]:
    """Parent dedup -> top_k -> the MIN_SIMILARITY cut, then what the refusal rule's decision leaves of it (nothing
    when refused: each cut card says why), and a note for the level's reason. For a turn the rule answered across
    languages (a Spanish turn about English cards, or the reverse) with an English embedder, the cut is not applied:
    it would cut the cards for their language, not their content."""
    across = similarity is not None and cosine_cut_skipped(decision, s)
    final, cut = finalize(candidates, s.top_k, s.min_similarity, similarity, cut_below=not across)
    if decision is not None and decision.refused:
        return [], [replace(h, rank=0, kept=False, cut_reason=f"refused: {decision.reason}") for h in final] + cut, ""
    return final, cut, NO_CUT_ACROSS_LANGUAGES.format(model=s.embedding_model) if across else ""
