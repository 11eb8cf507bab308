"""Event handlers: the page's turn events (run, re-run, streamed, the details below the columns, explain), each
going from widget values to one pipeline call to render-ready values.

No retrieval logic lives here. Every handler goes through ``get_retriever`` with Settings built on the same base,
so the core's per-turn caches (branch lists, query embeddings, cross-encoder scores) are hit when a control that
does not change a branch list moves. Handlers never raise: a bad turn or a bad setting becomes a message.

The page's handler API as the tabs, app.py and scripts call it (``handlers.X``) is re-exported here (``X as X``):
the controls, the turn, its view, its export and the newest-turn events live in modules of their own.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Iterator
from typing import Any

import gradio as gr

from inspector import badge, exports, map_view, newest_turn, render, turn_notes
from inspector.controls import KNOBS as KNOBS
from inspector.controls import base_settings as base_settings
from inspector.controls import build_settings as build_settings
from inspector.controls import default_controls as default_controls
from inspector.controls import model_choices as model_choices
from inspector.controls import on_model_change as on_model_change
from inspector.controls import page_text as page_text
from inspector.controls import use_base_settings as use_base_settings
from inspector.exports import EXPORT_KEEP as EXPORT_KEEP
from inspector.exports import EXPORT_KEEP_SESSION as EXPORT_KEEP_SESSION
from inspector.exports import current_session as current_session
from inspector.exports import export_last_turn as export_last_turn
from inspector.exports import session_export_dir as session_export_dir
from inspector.newest_turn import newest_details as newest_details
from inspector.newest_turn import newest_only as newest_only
from inspector.turn import execute as execute
from inspector.turn_view import COLUMNS as COLUMNS
from inspector.turn_view import DETAILS as DETAILS
from inspector.turn_view import STAGES as STAGES
from inspector.turn_view import TurnView as TurnView
from inspector.turn_view import (
    columns_html,
    idle_view,
    only,
    partial_view,
    render_details,
    render_turn,
    stream_step,
)
from retrieval.corpus_entries import SHIPPED
from retrieval.query import QueryError, clean_query
from retrieval.rerank import needs_model
from retrieval.retriever_cache import get_retriever
from retrieval.settings import CONTROLS as CONTROLS
from retrieval.types import RetrievalResult

log = logging.getLogger(__name__)


def run_turn(query: str, *values: Any, **named: Any) -> TurnView:
    """The Run handler (api_name ``run_turn``): the turn text, then each control in ``CONTROLS`` order (or by
    name), then optionally ``corpus``: the corpus to run on (a name from the Data tab; None = the shipped cards).

    A control left at None keeps the base value (the environment's Settings). Never raises: a bad turn or a bad
    setting becomes the message panel (and a toast in the page).
    """
    corpus = named.pop("corpus", None)
    if len(values) == len(CONTROLS) + 1:
        *rest, corpus = values
        values = tuple(rest)
    unknown = sorted(set(named) - set(CONTROLS))
    if unknown or len(values) > len(CONTROLS):
        return idle_view(
            f"run_turn takes the turn, at most {len(CONTROLS)} controls ({', '.join(CONTROLS)}) and "
            f"the corpus; got {len(values)} positional values and unknown names {unknown}."
        )
    return _run(query, {**dict(zip(CONTROLS, values)), **named}, corpus=corpus)


# Gradio names the API's parameters after the signature: the turn, one per control, then the corpus; all optional.
run_turn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("query", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
    + [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for name in CONTROLS]
    + [inspect.Parameter("corpus", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
)


def _run(query: Any, controls: dict[str, Any], explain_id: str | None = None, corpus: str | None = None) -> TurnView:
    return _guarded(lambda: render_turn(execute(query, controls, corpus or None), explain_id))


def _guarded(make: Any) -> TurnView:
    """``make()``, or the view of its error in words: a handler never raises."""
    try:
        return make()
    except (QueryError, ValueError, TypeError) as exc:
        _toast(str(exc))
        return idle_view(str(exc))
    except Exception as exc:  # the page must survive anything; the log keeps the traceback
        log.exception("run_turn failed")
        message = f"Something went wrong while running this turn ({type(exc).__name__}: {exc})."
        _toast(message)
        return idle_view(message)


def rerun_turn(query: str, *values: Any) -> TurnView | tuple[Any, ...]:
    """A control moved: re-run the current turn (cached stages make it fast), keeping the explained document.

    ``values`` are the controls in ``CONTROLS`` order, then optionally the explained sub-chunk id and the
    session's corpus. Does nothing while the turn box is empty.
    """
    if not isinstance(query, str) or not query.strip():
        return tuple(gr.skip() for _ in TurnView._fields)
    return _run(query, *_rerun_values(values))


def _rerun_values(values: tuple[Any, ...]) -> tuple[dict[str, Any], str | None, str | None]:
    """A re-run's ``values`` (the controls in ``CONTROLS`` order, then optionally the explained sub-chunk id and the
    session's corpus) as (controls, explain_id, corpus)."""
    n = len(CONTROLS)
    return (
        dict(zip(CONTROLS, values[:n])),
        values[n] if len(values) > n else None,
        values[n + 1] if len(values) > n + 1 else None,
    )


# ------------------------------------------------------------------------------------------- a streamed turn
def stream_turn(query: Any, *values: Any, **named: Any) -> Iterator[tuple[Any, ...]]:
    """The Run handler of the page (same parameters as ``run_turn``), streamed, the badge and the four columns
    only (``COLUMNS``; ``turn_details`` fills the rest after it): BM25, dense and the fused list as soon as they
    exist, the badge saying the level so far and the pairs being scored, then the reranked column once the
    cross-encoder is done. A turn that needs no reranking, or whose pairs are cached, is shown once. Never raises."""
    corpus = named.pop("corpus", None)
    if len(values) == len(CONTROLS) + 1:
        *rest, corpus = values
        values = tuple(rest)
    if set(named) - set(CONTROLS) or len(values) > len(CONTROLS):
        yield only(run_turn(query, *values, **named), COLUMNS)  # the same message as the unstreamed call
        return
    yield from _stream(query, {**dict(zip(CONTROLS, values)), **named}, corpus)


def stream_rerun(query: str, *values: Any) -> Iterator[tuple[Any, ...]]:
    """``rerun_turn``'s badge and columns, streamed like ``stream_turn`` (a control that brings new pairs into the
    reranker's head); ``values`` as ``rerun_turn`` takes them."""
    if not isinstance(query, str) or not query.strip():
        yield newest_turn.unchanged_columns()
        return
    controls, _, corpus = _rerun_values(values)
    yield from _stream(query, controls, corpus)


def turn_details(query: Any, *values: Any) -> tuple[Any, ...]:
    """What the page shows below the columns (``DETAILS``), after a streamed turn: the turn is re-run from the
    cache (no model call). ``values`` as ``rerun_turn`` takes them. A turn that could not run leaves blank charts;
    its message is already on the page (no second toast). Never raises."""
    if not isinstance(query, str) or not query.strip():
        return only(idle_view(""), DETAILS)
    controls, explain_id, corpus = _rerun_values(values)
    try:
        turn = execute(query, controls, corpus or None)
        drawn = render_details(turn, explain_id)  # once: it draws every chart (it was drawn once per output)
        return tuple(drawn[f] for f in DETAILS)
    except Exception:  # the columns' event reported it
        log.debug("turn details not rendered", exc_info=True)
        return only(idle_view(""), DETAILS)


def _stream(query: Any, controls: dict[str, Any], corpus: str | None) -> Iterator[tuple[Any, ...]]:
    try:
        settings = build_settings(controls)
        clean_query(query)
    except (QueryError, ValueError, TypeError):
        yield only(_run(query, controls, None, corpus), COLUMNS)  # the message, as an unstreamed turn gives it
        return
    if not settings.hybrid_enabled or settings.simulate_reranker_failure or settings.reranker_max_input == 0:
        yield only(_guarded_columns(query, controls, corpus), COLUMNS)
        return
    try:
        fused = execute(query, {**controls, "reranker_max_input": 0}, corpus or None)
    except Exception:  # whatever it is, the whole turn reports it
        yield only(_guarded_columns(query, controls, corpus), COLUMNS)
        return
    result, chunks = fused.result, fused.retriever.by_id
    if result.hybrid_path != "dense_only" and needs_model(
        result.query, result.fused, settings, lambda cid: chunks[cid].indexed_text
    ):
        # The fused list goes out before the cross-encoder starts: its two threads would take both cores from the
        # message that carries it. A turn whose pairs are all cached (most control changes) is shown once.
        yield only(partial_view(fused, min(settings.reranker_max_input, len(result.fused))), COLUMNS)
    yield only(_guarded_columns(query, controls, corpus, first=result), COLUMNS)


def _guarded_columns(
    query: Any, controls: dict[str, Any], corpus: str | None, first: RetrievalResult | None = None
) -> TurnView | tuple[Any, ...]:
    """The badge and the four columns of the whole turn (other outputs skipped), or its error in words. ``first``:
    the streamed turn's first step, whose branch times the whole turn reports (it reads them from the cache)."""

    def make() -> tuple[Any, ...]:
        turn = execute(query, controls, corpus or None)
        if first is not None:
            turn = dataclasses.replace(turn, result=badge.carry_timings(turn.result, first))
        return stream_step(message=turn_notes.calibration_note(corpus), **columns_html(turn))

    return _guarded(make)


def explain(last_turn: dict[str, Any] | None, chunk_id: str | None) -> str:
    """The explain panel for one sub-chunk of the last turn (re-run from cache: no model is called again)."""
    if not last_turn:
        return render.render_explain_placeholder()
    try:
        turn = execute(last_turn["query"], last_turn["controls"], last_turn.get("corpus") or None)
        return render.render_explain(turn.result, chunk_id or "", turn.retriever.by_id)
    except Exception as exc:
        log.exception("explain failed")
        return render.render_message(f"Could not explain this document ({type(exc).__name__}: {exc}).")


def end_session(request: gr.Request | None = None) -> None:
    """The session ended (its page closed: Gradio's ``unload``): forget its turns, remove its export folder and
    everything in it."""
    session = getattr(request, "session_hash", None) or exports.current_session()
    newest_turn.forget(session)
    exports.drop_session_dir(session)


def _toast(message: str) -> None:
    try:
        gr.Warning(message)
    except Exception:  # outside a request gradio may refuse: the message panel still shows it
        pass


def warm_up() -> None:
    """Build the retriever and load the models before the first turn (``make run`` shows indexing progress)."""
    settings = base_settings()
    retriever = get_retriever(settings)
    retriever.retrieve("warm-up turn", settings)
    if retriever.dense is not None:  # the map of the shipped corpus: loaded from the store, or fitted once
        map_view.projection.request(retriever.dense, SHIPPED)
