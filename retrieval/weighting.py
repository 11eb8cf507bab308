"""Query-aware branch weights: simple, explainable features of the turn shift weight between BM25 and dense.

A turn with exact identifiers (model numbers, error codes, strengths with units, quoted phrases) is where the
lexical branch is strong and the embedding blurs; a long plain-language turn is where dense is strong and BM25
only matches stop-word-like overlap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval.tokenize import tokenize

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
    if not found and len(tokenize(query)) >= LONG_TURN_WORDS:
        found.append("long")
    return tuple(found)


def choose_weights(query: str, bm25_weight: float, dense_weight: float, mode: str = "auto") -> TurnWeights:
    """Branch weights for this turn: the configured ones, shifted by the turn's features when ``mode='auto'``."""
    if mode == "off":
        return TurnWeights(bm25_weight, dense_weight, (), "fixed weights (QUERY_WEIGHTING=off)")
    features = turn_features(query)
    lexical = [f for f in features if f != "long"]
    if lexical:
        return TurnWeights(bm25_weight * LEXICAL_BOOST, dense_weight, features,
                           f"exact tokens in the turn ({', '.join(lexical)}): BM25 weight x{LEXICAL_BOOST:g}")
    if "long" in features:
        return TurnWeights(bm25_weight, dense_weight * DENSE_BOOST, features,
                           f"long plain-language turn (>= {LONG_TURN_WORDS} words, no codes): "
                           f"dense weight x{DENSE_BOOST:g}")
    return TurnWeights(bm25_weight, dense_weight, features, "no lexical signal: configured weights")
