"""Query-aware branch weights: simple, explainable features of the turn shift weight between BM25 and dense.

A turn with exact identifiers (model numbers, error codes, strengths with units, quoted phrases) is where the
lexical branch is strong and the embedding blurs; a long plain-language turn is where dense is strong and BM25
only matches stop-word-like overlap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrieval.tokenize import word_count
from retrieval.types import BranchResult, Hit

if TYPE_CHECKING:
    from retrieval.bm25 import BM25Index
    from retrieval.settings import Settings

_CODE = re.compile(r"\b(?:[A-Za-z]{1,6}-?\d{1,5}[A-Za-z]?|\d{1,5}-?[A-Za-z]{1,3})\b")
_UNIT = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:mg|mcg|µg|ug|g|ml|mL|units?|unidades|iu|UI|%)(?!\w)", re.I)
_QUOTE = re.compile(r"[\"“”«»].+?[\"“”«»]")

LEXICAL_BOOST = 2.0
LONG_TURN_WORDS = 12
DENSE_BOOST = 1.5


@dataclass(frozen=True)
class TurnWeights:
    """The branch weights chosen for one turn and the features behind them."""

    bm25: float
    dense: float
    features: tuple[str, ...]
    reason: str
    evidence: dict[str, float | int | str | bool] = field(default_factory=dict)  # adaptive: the signals read

    def as_dict(self) -> dict[str, float]:
        return {"bm25": self.bm25, "dense": self.dense}


def turn_features(query: str) -> tuple[str, ...]:
    """The lexical signals found in a turn: ``code``, ``unit``, ``quote``; or ``long`` for a plain turn."""
    found = []
    if _CODE.search(query):
        found.append("code")
    if _UNIT.search(query):
        found.append("unit")
    if _QUOTE.search(query):
        found.append("quote")
    if not found and word_count(query) >= LONG_TURN_WORDS:  # a CJK run: about one word per two characters
        found.append("long")
    return tuple(found)


def choose_weights(
    query: str, bm25_weight: float, dense_weight: float, mode: str = "auto", evidence: BranchEvidence | None = None
) -> TurnWeights:
    """Branch weights for this turn: the configured ones, shifted by the turn's features when ``mode='auto'``;
    ``mode='adaptive'`` then moves them by what the branch lists say (``evidence``, see ``adapt_weights``)."""
    if mode == "off":
        return TurnWeights(bm25_weight, dense_weight, (), "fixed weights (QUERY_WEIGHTING=off)")
    if mode == "adaptive":
        base = choose_weights(query, bm25_weight, dense_weight, "auto")
        if evidence is None:
            return TurnWeights(
                base.bm25, base.dense, base.features, f"{base.reason}; no branch evidence (a branch did not run)"
            )
        return adapt_weights(base, evidence)
    features = turn_features(query)
    lexical = [f for f in features if f != "long"]
    if lexical:
        return TurnWeights(
            bm25_weight * LEXICAL_BOOST,
            dense_weight,
            features,
            f"exact tokens in the turn ({', '.join(lexical)}): BM25 weight x{LEXICAL_BOOST:g}",
        )
    if "long" in features:
        return TurnWeights(
            bm25_weight,
            dense_weight * DENSE_BOOST,
            features,
            f"long plain-language turn (>= {LONG_TURN_WORDS} words, no codes): dense weight x{DENSE_BOOST:g}",
        )
    return TurnWeights(bm25_weight, dense_weight, features, "no lexical signal: configured weights")


# ----------------------------------------------------------------------------------------- branch evidence
# QUERY_WEIGHTING=adaptive: after both branches ran, what their lists say about this turn moves the weights again.
# One rule, measured on the shipped set and SciFact (the README's ablation): when BM25's best chunk matches under
# LOW_COVERAGE of the turn's term weight, BM25 has little to say and its weight is halved. The other signals are
# observed and reported, not acted on: raising BM25 when coverage is high gained on SciFact train and lost as much
# on test, and raising it for a non-English turn (English-only embedder) lost on the shipped set.
LOW_COVERAGE = 0.30
EVIDENCE_DOWN = 0.5
TOP = 10  # the head of each list the gap and the overlap look at
ENGLISH_ONLY_EMBEDDERS = frozenset({"bge-small-en-v1.5", "all-MiniLM-L6-v2"})


@dataclass(frozen=True)
class BranchEvidence:
    """What the two branch lists say about one turn, observable at run time.

    ``coverage``: BM25's best score over the score of a chunk holding every turn term once at average length (the
    sum of the terms' idf), capped at 1: how much of the turn, weighted by rarity, BM25's best chunk matched.
    ``bm25_gap`` / ``dense_gap``: how far the top of each list stands out (BM25: relative drop from the 1st to the
    10th score; dense: cosine of the 1st minus the 10th). ``overlap``: cards the two top-10s share.
    ``language``: the turn's language (from its stop words); ``english_only``: the embedder reads English only.
    """

    terms: int
    matched: int
    coverage: float
    bm25_gap: float
    dense_gap: float
    overlap: int
    language: str
    english_only: bool

    def as_dict(self) -> dict[str, float | int | str | bool]:
        return {
            "terms": self.terms,
            "matched": self.matched,
            "coverage": round(self.coverage, 4),
            "bm25_gap": round(self.bm25_gap, 4),
            "dense_gap": round(self.dense_gap, 4),
            "overlap": self.overlap,
            "language": self.language,
            "english_only": self.english_only,
        }


def _top_parents(hits: Sequence[Hit], n: int = TOP) -> list[str]:
    seen: list[str] = []
    for h in hits:
        if h.parent_id not in seen:
            seen.append(h.parent_id)
            if len(seen) == n:
                break
    return seen


def branch_evidence(
    query: str,
    bm25_hits: Sequence[Hit],
    dense_hits: Sequence[Hit],
    index: BM25Index | None = None,
    embedding_model: str = "",
) -> BranchEvidence:
    """The signals of ``BranchEvidence`` from the branches' hits (best first) and the BM25 index they came from.

    ``index`` needs ``query_terms(text)``, ``document_frequency(term)`` and ``len()`` (``retrieval.bm25.BM25Index``);
    without one (BM25 did not run) the turn's terms are unknown and coverage is 0.
    """
    from retrieval.tokenize import detect_language

    terms: list[str] = []
    matched = 0
    coverage = 0.0
    if index is not None and len(index):
        n_docs = len(index)
        terms = list(dict.fromkeys(index.query_terms(query)))
        total = 0.0
        for term in terms:
            df = index.document_frequency(term)
            matched += df > 0
            # A term no chunk holds weighs as much as the rarest kind (df=1): BM25 cannot match it at all.
            total += max(0.0, math.log((n_docs - max(df, 1) + 0.5) / (max(df, 1) + 0.5)))
        if bm25_hits and total > 0:
            coverage = min(1.0, bm25_hits[0].score / total)
    bm25_gap = 0.0
    if bm25_hits and bm25_hits[0].score > 0:
        tenth = bm25_hits[min(TOP, len(bm25_hits)) - 1].score
        bm25_gap = (bm25_hits[0].score - tenth) / bm25_hits[0].score
    dense_gap = (dense_hits[0].score - dense_hits[min(TOP, len(dense_hits)) - 1].score) if dense_hits else 0.0
    overlap = len(set(_top_parents(bm25_hits)) & set(_top_parents(dense_hits)))
    return BranchEvidence(
        terms=len(terms),
        matched=matched,
        coverage=coverage,
        bm25_gap=bm25_gap,
        dense_gap=dense_gap,
        overlap=overlap,
        language=detect_language(query),
        english_only=embedding_model in ENGLISH_ONLY_EMBEDDERS,
    )


def adapt_weights(base: TurnWeights, ev: BranchEvidence) -> TurnWeights:
    """``base`` (the query-aware weights) moved by the branch evidence: BM25's best chunk covers less than
    ``LOW_COVERAGE`` of the turn's term weight -> BM25 x``EVIDENCE_DOWN``. The reason names the numbers."""
    if ev.terms and ev.coverage < LOW_COVERAGE:
        why = (
            f"BM25's best chunk covers {ev.coverage:.0%} of the turn's term weight (< {LOW_COVERAGE:.0%}; "
            f"{ev.matched}/{ev.terms} terms in the index): BM25 x{EVIDENCE_DOWN:g}"
        )
        return TurnWeights(
            base.bm25 * EVIDENCE_DOWN,
            base.dense,
            (*base.features, "low_coverage"),
            f"{base.reason}; then {why}",
            ev.as_dict(),
        )
    why = (
        f"branch evidence neutral (BM25 coverage {ev.coverage:.0%} >= {LOW_COVERAGE:.0%}, "
        f"top-{TOP} overlap {ev.overlap})"
    )
    return TurnWeights(base.bm25, base.dense, base.features, f"{base.reason}; then {why}", ev.as_dict())


def weigh_turn(
    query: str, s: Settings, bm25: BranchResult, dense: BranchResult, index_for: Callable[[str], BM25Index | None]
) -> TurnWeights:
    """The pipeline's entry point: ``choose_weights`` for settings ``s`` after the branches ran. Branch evidence is
    gathered only for ``QUERY_WEIGHTING=adaptive`` and only when both branches ran (one branch fuses to its own
    order); ``index_for(tokenizer)`` gives the BM25 index the BM25 list came from."""
    evidence = None
    if s.query_weighting == "adaptive" and bm25.usable and dense.usable:
        from retrieval.encoders import canonical_embedder

        evidence = branch_evidence(
            query, bm25.hits, dense.hits, index_for(s.bm25_tokenizer), canonical_embedder(s.embedding_model)
        )
    return choose_weights(query, s.bm25_weight, s.dense_weight, s.query_weighting, evidence)
