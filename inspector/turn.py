"""One executed turn: the widget values validated into Settings, the pipeline run once on the session's corpus."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inspector.controls import build_settings
from retrieval.context import REFUSAL, Context, build_context
from retrieval.corpus_turns import turn_corpus
from retrieval.pipeline import HybridRetriever
from retrieval.query import clean_query
from retrieval.settings import CONTROLS, Settings
from retrieval.types import RetrievalResult


@dataclass(frozen=True)
class Turn:
    """One executed turn: what was asked, with which settings, what came back, and its context."""

    query: str
    controls: dict[str, Any]
    settings: Settings
    retriever: HybridRetriever
    result: RetrievalResult
    context: Context
    corpus: str = ""  # the session's active corpus ("" = the shipped cards at CORPUS_PATH)
    refusal: str = REFUSAL  # what the assistant says on a refused turn: the corpus's own text


def execute(query: str, controls: dict[str, Any], corpus: str | None = None) -> Turn:
    """Validate, build Settings and run the pipeline once (cached stages are reused), on the session's corpus.

    Raises:
        QueryError: the turn is empty, too long, or not text.
        ValueError: a control value is out of range, or the corpus is unknown or not indexed yet.
    """
    text = clean_query(query)
    settings = build_settings(controls)
    retriever, refusal = turn_corpus(corpus, settings)
    result = retriever.retrieve(query, settings)  # as typed: the result notes what normalising changed
    ctx = build_context(result, retriever.by_id, settings.context_token_budget, refusal)
    effective = {name: getattr(settings, name) for name in CONTROLS}  # None -> the base value actually used
    return Turn(text, effective, settings, retriever, result, ctx, corpus or "", refusal)
