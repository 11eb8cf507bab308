"""An executed turn as the page shows it: the badge and the four columns, the charts, the explained document, the
context and the export below them, a streamed turn's partial step, and the blank view of a turn that did not run."""

from __future__ import annotations

from typing import Any, NamedTuple

import gradio as gr
import plotly.graph_objects as go

from inspector import badge, figures, map_view, render, turn_notes
from inspector.exports import export_turn
from inspector.hit_rows import Stage
from inspector.turn import Turn
from retrieval.corpus_entries import SHIPPED
from retrieval.pipeline import HybridRetriever


class TurnView(NamedTuple):
    """Everything the page shows for one turn, in the UI's output order."""

    message: str
    status: str
    bm25: str
    dense: str
    rrf: str
    reranked: str
    rank_flow: go.Figure
    contributions: go.Figure
    k_sensitivity: go.Figure
    turn_map: go.Figure  # the map below the columns (inspector.map_view)
    explain_doc: Any
    explain: str
    context: str
    export: Any
    last_turn: dict[str, Any] | None


def idle_view(message: str) -> TurnView:
    blank = figures.message_figure("Run a turn to draw this chart.")
    return TurnView(
        message=render.render_message(message),
        status=badge.status_placeholder("Not run: fix the turn or settings."),
        bm25=render.placeholder("bm25"),
        dense=render.placeholder("dense"),
        rrf=render.placeholder("rrf"),
        reranked=render.placeholder("reranked"),
        rank_flow=blank,
        contributions=blank,
        k_sensitivity=blank,
        turn_map=map_view.idle_figure(),
        explain_doc=gr.Dropdown(choices=[], value=None),
        explain=render.render_explain_placeholder(),
        context=render.render_message("No context: the turn was not run.", "info"),
        export=None,
        last_turn=None,
    )


STAGES: tuple[Stage, ...] = ("bm25", "dense", "rrf", "reranked")


def columns_html(turn: Turn, stages: tuple[str, ...] = STAGES, *, status: bool = True) -> dict[str, str]:
    """The level badge (``status``) and the HTML of the columns in ``stages``, for an executed turn."""
    result, chunks = turn.result, turn.retriever.by_id
    colors = render.doc_colors(result)
    terms, common = _terms(turn)
    make = {
        "bm25": lambda: render.render_branch(result, "bm25", chunks, colors, terms, common),
        "dense": lambda: render.render_branch(result, "dense", chunks, colors, terms, common),
        "rrf": lambda: render.render_fused(result, chunks, colors, terms, common),
        "reranked": lambda: render.render_final(result, chunks, colors, terms, turn.refusal, common),
    }
    out = {stage: make[stage]() for stage in stages}
    if status:
        out["status"] = badge.render_status(result, terms, common)
    return out


def _terms(turn: Turn) -> tuple[frozenset[str], frozenset[str]]:
    """The turn's BM25 query terms and those of them common in the corpus (highlighted faintly)."""
    terms = render.query_terms(turn.result.query, turn.settings.bm25_tokenizer)
    return terms, common_terms(turn.retriever, terms, turn.settings.bm25_tokenizer)


def render_turn(turn: Turn, explain_id: str | None = None) -> TurnView:
    """Render-ready values for an executed turn."""
    values: dict[str, Any] = {**columns_html(turn), **render_details(turn, explain_id)}
    return TurnView(message=turn_notes.calibration_note(turn.corpus), **values)


# The page streams a turn's badge and columns (``COLUMNS``), then fills everything below them (``DETAILS``) in an
# event of its own: the charts' figures are large, and Gradio copies every output of an event each time the
# event's status changes (on the click too), which delayed the fused list.
COLUMNS = ("message", "status", *(f for f in TurnView._fields if f in ("bm25", "dense", "rrf", "reranked")))
DETAILS = tuple(f for f in TurnView._fields if f not in COLUMNS)


def render_details(turn: Turn, explain_id: str | None = None) -> dict[str, Any]:
    """The charts, the explained document, the context, the export and ``last_turn`` of an executed turn."""
    result, chunks = turn.result, turn.retriever.by_id
    choices = render.explain_choices(result, chunks)
    ids = [cid for _, cid in choices]
    if explain_id not in ids:
        explain_id = result.final[0].chunk_id if result.final else (ids[0] if ids else None)
    rank_flow, contrib, k_sens = figures.all_figures(result, chunks)
    export = export_turn(turn)
    return dict(
        rank_flow=rank_flow,
        contributions=contrib,
        k_sensitivity=k_sens,
        turn_map=map_view.for_turn(turn.retriever, result, turn.corpus or SHIPPED),
        explain_doc=gr.Dropdown(choices=choices, value=explain_id),
        explain=render.render_explain(result, explain_id or "", chunks),
        context=render.render_context(turn.context),
        export=export,
        last_turn={
            "query": turn.query,
            "controls": turn.controls,
            "export": export,
            **({"corpus": turn.corpus} if turn.corpus else {}),
        },
    )


def only(view: TurnView | tuple[Any, ...], fields: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(view, f) if isinstance(view, TurnView) else view[TurnView._fields.index(f)] for f in fields)


def common_terms(retriever: HybridRetriever, terms: frozenset[str], tokenizer: str) -> frozenset[str]:
    """Query terms found in more than ``render.COMMON_SHARE`` of the indexed sub-chunks (low IDF)."""
    index = retriever.bm25_index(tokenizer) if hasattr(retriever, "bm25_index") else retriever.bm25
    total = len(index)
    if not total:
        return frozenset()
    return frozenset(t for t in terms if index.document_frequency(t) > render.COMMON_SHARE * total)


def partial_view(turn: Turn, pairs: int) -> tuple[Any, ...]:
    """A streamed turn's first step: the badge so far, BM25, dense and fused columns, the reranked column waiting;
    everything below the columns is left as it is until the whole turn arrives."""
    return stream_step(
        message=turn_notes.calibration_note(turn.corpus),
        **columns_html(turn, ("bm25", "dense", "rrf"), status=False),
        status=badge.render_pending_status(turn.result, pairs, *_terms(turn)),
        reranked=badge.pending_column(pairs),
    )


def stream_step(**values: Any) -> tuple[Any, ...]:
    """A step of a streamed turn: ``values`` by TurnView field, every other output left as it is."""
    return tuple(values.get(name, gr.skip()) for name in TurnView._fields)
