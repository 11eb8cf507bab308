"""Event handlers: widget values -> Settings -> one pipeline call -> render-ready values.

No retrieval logic lives here. Every handler goes through ``get_retriever`` with Settings built on the same base,
so the core's per-turn caches (branch lists, query embeddings, cross-encoder scores) are hit when a control that
does not change a branch list moves. Handlers never raise: a bad turn or a bad setting becomes a message.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import inspect
import itertools
import json
import logging
import math
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import gradio as gr
import plotly.graph_objects as go

from inspector import badge, figures, map_view, render, state, turn_notes
from retrieval.context import REFUSAL, Context, build_context
from retrieval.corpus_turns import turn_corpus
from retrieval.encoders import BUNDLED_EMBEDDERS, canonical_embedder
from retrieval.pipeline import HybridRetriever
from retrieval.query import QueryError, clean_query
from retrieval.rerank import needs_model
from retrieval.retriever_cache import get_retriever
from retrieval.settings import CONTROLS, DEFAULT_MIN_SIMILARITY, Settings
from retrieval.types import RetrievalResult

log = logging.getLogger(__name__)

# The bundled embedders. Their cosine scales differ, so switching model in the UI moves the threshold slider to
# that model's default (retrieval.settings.DEFAULT_MIN_SIMILARITY); the cosine is shown on every final card.
EMBEDDING_MODELS: tuple[str, ...] = tuple(BUNDLED_EMBEDDERS)

# The controls (retrieval.settings.CONTROLS), in the order the UI passes them and ``run_turn`` takes them; their
# types, ranges, choices and labels are Settings' own field metadata (``Settings.knobs()``).
KNOBS = Settings.knobs()
CHOICES: dict[str, tuple[str, ...]] = {name: KNOBS[name].choices for name in CONTROLS if KNOBS[name].choices}

_BASE: Settings | None = None
_BASE_LOCK = threading.Lock()
EXPORT_KEEP = 200  # newest exports kept on disk (the whole process, every session together)
EXPORT_KEEP_SESSION = 20  # newest exports kept per session
EXPORT_IDLE_S = 2 * 3600  # a session folder with no new export for this long goes (a client that never said bye)
_EXPORT_DIR: Path | None = None
_EXPORT_LOCK = threading.Lock()
_EXPORT_SEQ = itertools.count(1)
_SESSION_DIRS: dict[str | None, tuple[Path, float]] = {}  # session hash -> (its export folder, last export time)


def page_text(value: Any) -> str | None:
    """A page value that should be text: itself, or None when it is empty or not text (a client may send anything)."""
    return value if isinstance(value, str) and value else None


def base_settings() -> Settings:
    """The process-wide base Settings (from the environment on first use); the UI only overrides controls."""
    global _BASE
    with _BASE_LOCK:
        if _BASE is None:
            _BASE = Settings.from_env()
        return _BASE


def use_base_settings(settings: Settings | None) -> None:
    """Replace the base Settings (tests, or an app embedding the inspector); None re-reads the environment."""
    global _BASE
    with _BASE_LOCK:
        _BASE = settings


def default_controls() -> dict[str, Any]:
    """Initial widget values: the base Settings' values for every control."""
    s = base_settings()
    return {name: getattr(s, name) for name in CONTROLS}


def model_choices() -> list[str]:
    """The embedding models the UI offers: the bundled ones, plus the configured one if it is not bundled."""
    configured = base_settings().embedding_model
    bundled = list(EMBEDDING_MODELS)
    return bundled if canonical_embedder(configured) in bundled else [*bundled, configured]


def suggested_min_similarity(model: str) -> float:
    """The threshold to preselect for an embedding model: the base setting for the configured model, else that
    model's default on its own cosine scale (``DEFAULT_MIN_SIMILARITY``)."""
    s = base_settings()
    if canonical_embedder(model) == canonical_embedder(s.embedding_model):
        return s.min_similarity
    return DEFAULT_MIN_SIMILARITY.get(canonical_embedder(model), s.min_similarity)


def build_settings(controls: dict[str, Any]) -> Settings:
    """Settings = base + control values (sliders send floats: whole-number controls are rounded).

    Raises:
        ValueError: a value is out of range or of the wrong type; the message names the setting.
    """
    changes: dict[str, Any] = {}
    for name in CONTROLS:
        value = controls.get(name)
        if value is None:
            continue
        if name == "embedding_model" and value not in model_choices():
            raise ValueError(
                f"embedding model {value!r} is not available here: choose one of {', '.join(model_choices())}."
            )
        changes[name] = KNOBS[name].coerce(value)
    return base_settings().replace(**changes)


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


def _idle_view(message: str) -> TurnView:
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


STAGES = ("bm25", "dense", "rrf", "reranked")


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
    return TurnView(
        message=turn_notes.calibration_note(turn.corpus), **columns_html(turn), **render_details(turn, explain_id)
    )


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
        turn_map=map_view.for_turn(turn.retriever, result),
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


def _only(view: TurnView | tuple[Any, ...], fields: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(view, f) if isinstance(view, TurnView) else view[TurnView._fields.index(f)] for f in fields)


def common_terms(retriever: HybridRetriever, terms: frozenset[str], tokenizer: str) -> frozenset[str]:
    """Query terms found in more than ``render.COMMON_SHARE`` of the indexed sub-chunks (low IDF)."""
    index = retriever.bm25_index(tokenizer) if hasattr(retriever, "bm25_index") else retriever.bm25
    total = len(index)
    if not total:
        return frozenset()
    return frozenset(t for t in terms if index.document_frequency(t) > render.COMMON_SHARE * total)


def run_turn(query: str, *values: Any, **named: Any) -> TurnView:
    """The Run handler (api_name ``run_turn``): the turn text, then each control in ``CONTROLS`` order (or by
    name), then optionally ``corpus``: the corpus to run on (a name from the Data tab; None = the shipped cards).

    A control left at None keeps the base value (the environment's Settings). Never raises: a bad turn or a bad
    setting becomes the message panel (and a toast in the page).
    """
    corpus = named.pop("corpus", None)
    if len(values) == len(CONTROLS) + 1:
        *values, corpus = values
    unknown = sorted(set(named) - set(CONTROLS))
    if unknown or len(values) > len(CONTROLS):
        return _idle_view(
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
        return _idle_view(str(exc))
    except Exception as exc:  # the page must survive anything; the log keeps the traceback
        log.exception("run_turn failed")
        message = f"Something went wrong while running this turn ({type(exc).__name__}: {exc})."
        _toast(message)
        return _idle_view(message)


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
        *values, corpus = values
    if set(named) - set(CONTROLS) or len(values) > len(CONTROLS):
        yield _only(run_turn(query, *values, **named), COLUMNS)  # the same message as the unstreamed call
        return
    yield from _stream(query, {**dict(zip(CONTROLS, values)), **named}, corpus)


def stream_rerun(query: str, *values: Any) -> Iterator[tuple[Any, ...]]:
    """``rerun_turn``'s badge and columns, streamed like ``stream_turn`` (a control that brings new pairs into the
    reranker's head); ``values`` as ``rerun_turn`` takes them."""
    if not isinstance(query, str) or not query.strip():
        yield unchanged_columns()
        return
    controls, _, corpus = _rerun_values(values)
    yield from _stream(query, controls, corpus)


def turn_details(query: Any, *values: Any) -> tuple[Any, ...]:
    """What the page shows below the columns (``DETAILS``), after a streamed turn: the turn is re-run from the
    cache (no model call). ``values`` as ``rerun_turn`` takes them. A turn that could not run leaves blank charts;
    its message is already on the page (no second toast). Never raises."""
    if not isinstance(query, str) or not query.strip():
        return _only(_idle_view(""), DETAILS)
    controls, explain_id, corpus = _rerun_values(values)
    try:
        turn = execute(query, controls, corpus or None)
        return tuple(render_details(turn, explain_id)[f] for f in DETAILS)
    except Exception:  # the columns' event reported it
        log.debug("turn details not rendered", exc_info=True)
        return _only(_idle_view(""), DETAILS)


# The newest turn event of each browser session: "the newest action wins" (no Gradio cancels: see ui._wire). Each
# turn event carries the page's own count of turn actions (``ui.turn_seq_js`` stamps it as the event's last input,
# in the order the person acted); a streamed turn does not start, or drops its remaining steps, once a higher count
# of its session has reached the server, whichever of the two started first here. Its badge carries the count
# (``data-seq``) beside the settings it was computed with.
_NEWEST: dict[str, float] = {}
# What the newest turn of each session searched (its query, controls and corpus): the details event that follows a
# streamed turn fills the page below the columns only for that turn (``newest_details``).
_NEWEST_TURN: dict[str, str] = {}
# Steps an older turn yielded before the newer one arrived, not yet handed to the page: Gradio sends a yielded
# step, then asks the stream for the next, so a step counts until its stream resumes (or is closed). A newer turn
# waits for them before its own steps, so the page never receives an older step after a newer one (the race seen
# as an older turn's "scoring" step left on the badge over the newer turn, tests/test_e2e_race.py).
_IN_FLIGHT: dict[str, dict[float, int]] = {}
_NEWEST_LOCK = threading.Lock()
_HANDED_ON = threading.Condition(_NEWEST_LOCK)
# How long a newer step waits at most for an older one: Gradio hands a step on in milliseconds; a stream whose
# page went away may never be resumed, and then the newer turn goes on after this.
OLDER_STEP_WAIT_S = 3.0


def unchanged_columns() -> tuple[Any, ...]:
    """A step that changes none of the turn's columns. A dropped stream ends on it: Gradio's closing message of a
    stream repeats its last step (or, for a stream that yielded nothing, sets every output to None, which empties
    the badge), and that message can reach a page that has not yet cancelled the older event."""
    return tuple(gr.skip() for _ in COLUMNS)


def _turn_key(values: tuple[Any, ...] | list[Any], explained: bool) -> str:
    """A digest of (query, every control, corpus) of a page event's ``values``: ``stream_turn``'s (query, controls,
    corpus) or, ``explained``, ``stream_rerun``'s and ``turn_details``' (query, controls, explained sub-chunk,
    corpus). A digest, not the values: what a client sent (a turn of megabytes, refused as too long) is never kept."""
    n = len(CONTROLS) + 1
    tail = values[n + 1 :] if explained else values[n:]
    digest = hashlib.sha256()
    for value in (*values[:n], *tail):
        digest.update(repr(value).encode("utf-8", "surrogatepass") + b"\x00")
    return digest.hexdigest()


def newest_only(stream: Any, explained: bool = False) -> Any:
    """``stream`` (``stream_turn``, or ``stream_rerun`` with ``explained``) as a page event whose last input is the
    page's count of turn actions: every step it would show once a newer action of the same session has reached the
    server is dropped, and its steps go out only after any step of an older action that was already on its way."""

    def event(request: gr.Request, *values: Any) -> Iterator[tuple[Any, ...]]:
        *values, seq = values
        session = getattr(request, "session_hash", None)
        mine = seq if isinstance(seq, (int, float)) and not isinstance(seq, bool) and math.isfinite(seq) else None
        if not session or mine is None:
            yield from stream(*values)
            return
        with _NEWEST_LOCK:
            if mine >= _NEWEST.get(session, mine):
                _NEWEST[session] = mine
                _NEWEST_TURN[session] = _turn_key(values, explained)
        if _NEWEST.get(session, mine) > mine:  # a newer action arrived first: this one's work would be dropped
            yield unchanged_columns()
            return
        for step in stream(*values):
            step = stamp_seq(step, mine)
            with _HANDED_ON:
                _HANDED_ON.wait_for(
                    lambda: not any(s < mine for s in _IN_FLIGHT.get(session, {})), timeout=OLDER_STEP_WAIT_S
                )
                if _NEWEST.get(session, mine) > mine:
                    break
                flying = _IN_FLIGHT.setdefault(session, {})
                flying[mine] = flying.get(mine, 0) + 1
            try:
                yield step
            finally:
                with _HANDED_ON:
                    flying = _IN_FLIGHT.get(session, {})
                    flying[mine] = flying.get(mine, 1) - 1
                    if flying.get(mine, 0) <= 0:
                        flying.pop(mine, None)
                    if not flying:
                        _IN_FLIGHT.pop(session, None)
                    _HANDED_ON.notify_all()
        # Every stream ends on a step that changes nothing: Gradio's closing message repeats the last step, and
        # that repeat of an older turn could otherwise land after a newer turn's first step (see its docstring).
        yield unchanged_columns()

    event.__name__ = stream.__name__
    return event


def stamp_seq(step: tuple[Any, ...], seq: float) -> tuple[Any, ...]:
    """``step`` with the page's count of the action it answers on its badge (``data-seq``): a page, or a test,
    knows the badge shows the newest action's result when it equals the page's own count."""
    i = COLUMNS.index("status")
    status = step[i] if len(step) > i else None
    if not isinstance(status, str) or not status.startswith("<div"):
        return step
    stamped = f'<div data-seq="{int(seq)}"' + status[len("<div") :]
    return (*step[:i], stamped, *step[i + 1 :])


def newest_details(details: Any) -> Any:
    """``turn_details`` as the page event after a streamed turn: it fills the page below the columns only if its
    turn is still its session's newest (an older turn's stream that ended after a newer action arrived, because
    the page had not yet cancelled it, would otherwise put its charts and export under the newer turn's columns)."""

    def event(request: gr.Request, *values: Any) -> tuple[Any, ...]:
        session = getattr(request, "session_hash", None)
        with _NEWEST_LOCK:
            newest = _NEWEST_TURN.get(session) if session else None
        if newest is not None and newest != _turn_key(values, explained=True):
            return tuple(gr.skip() for _ in DETAILS)
        return details(*values)

    event.__name__ = details.__name__
    return event


def _stream(query: Any, controls: dict[str, Any], corpus: str | None) -> Iterator[tuple[Any, ...]]:
    try:
        settings = build_settings(controls)
        clean_query(query)
    except (QueryError, ValueError, TypeError):
        yield _only(_run(query, controls, None, corpus), COLUMNS)  # the message, as an unstreamed turn gives it
        return
    if not settings.hybrid_enabled or settings.simulate_reranker_failure or settings.reranker_max_input == 0:
        yield _only(_guarded_columns(query, controls, corpus), COLUMNS)
        return
    try:
        fused = execute(query, {**controls, "reranker_max_input": 0}, corpus or None)
    except Exception:  # whatever it is, the whole turn reports it
        yield _only(_guarded_columns(query, controls, corpus), COLUMNS)
        return
    result, chunks = fused.result, fused.retriever.by_id
    if result.hybrid_path != "dense_only" and needs_model(
        result.query, result.fused, settings, lambda cid: chunks[cid].indexed_text
    ):
        # The fused list goes out before the cross-encoder starts: its two threads would take both cores from the
        # message that carries it. A turn whose pairs are all cached (most control changes) is shown once.
        yield _only(partial_view(fused, min(settings.reranker_max_input, len(result.fused))), COLUMNS)
    yield _only(_guarded_columns(query, controls, corpus, first=result), COLUMNS)


def _guarded_columns(
    query: Any, controls: dict[str, Any], corpus: str | None, first: RetrievalResult | None = None
) -> TurnView | tuple[Any, ...]:
    """The badge and the four columns of the whole turn (other outputs skipped), or its error in words. ``first``:
    the streamed turn's first step, whose branch times the whole turn reports (it reads them from the cache)."""

    def make() -> tuple[Any, ...]:
        turn = execute(query, controls, corpus or None)
        if first is not None:
            turn = dataclasses.replace(turn, result=badge.carry_timings(turn.result, first))
        return _view(message=turn_notes.calibration_note(corpus), **columns_html(turn))

    return _guarded(make)


def partial_view(turn: Turn, pairs: int) -> tuple[Any, ...]:
    """A streamed turn's first step: the badge so far, BM25, dense and fused columns, the reranked column waiting;
    everything below the columns is left as it is until the whole turn arrives."""
    return _view(
        message=turn_notes.calibration_note(turn.corpus),
        **columns_html(turn, ("bm25", "dense", "rrf"), status=False),
        status=badge.render_pending_status(turn.result, pairs, *_terms(turn)),
        reranked=badge.pending_column(pairs),
    )


def _view(**values: Any) -> tuple[Any, ...]:
    """A step of a streamed turn: ``values`` by TurnView field, every other output left as it is."""
    return tuple(values.get(name, gr.skip()) for name in TurnView._fields)


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


def on_model_change(model: str) -> Any:
    """The embedding model changed: preselect its threshold (cosine scales differ between models); a value that is
    not a model name leaves the threshold as it is (the turn that follows says what is wrong with it)."""
    if not isinstance(model, str):
        return gr.skip()
    return suggested_min_similarity(model)


def turn_record(turn: Turn, link: str | None = None) -> dict[str, Any]:
    """The exported JSON: inputs, settings, every list, the level, the timings and the context. ``link`` is the
    page's share link (A, B, compare, the explained document, the corpus); without it, the turn's own (A)."""
    return {
        "app": "hybrid-retrieval-inspector",
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "inputs": {"query": turn.query, **turn.controls, **({"corpus": turn.corpus} if turn.corpus else {})},
        "link": link or share_query(turn),
        "settings": turn.settings.to_dict(),
        "hybrid_path": turn.result.hybrid_path,
        "reason": turn.result.reason,
        "timings_ms": turn.result.timings_ms,
        "result": turn.result.to_dict(),
        "context": turn.context.to_dict(),
    }


def export_dir() -> Path:
    """This process's private export folder: made by ``mkdtemp`` (0700: no other user can list or read it), once per
    process, removed at exit. It sits in Gradio's cache folder, so Gradio serves an export from there instead of
    keeping a second copy of every one. It holds one folder per session (``session_export_dir``), never a file."""
    global _EXPORT_DIR
    with _EXPORT_LOCK:
        if _EXPORT_DIR is None or not _EXPORT_DIR.is_dir():
            from gradio.utils import get_upload_folder

            try:
                cache = Path(get_upload_folder())
                cache.mkdir(parents=True, exist_ok=True)
                _EXPORT_DIR = Path(tempfile.mkdtemp(prefix="inspector-exports-", dir=cache))
            except OSError:  # Gradio's cache folder is not ours to write: a private folder in the system temp
                _EXPORT_DIR = Path(tempfile.mkdtemp(prefix="inspector-exports-"))
            atexit.register(shutil.rmtree, _EXPORT_DIR, ignore_errors=True)
            _SESSION_DIRS.clear()
        return _EXPORT_DIR


def current_session() -> str | None:
    """The browser (or API client) session of the event being handled; None outside an event (tests, the CLI)."""
    from gradio.context import LocalContext

    return getattr(LocalContext.request.get(None), "session_hash", None) or None


def session_export_dir(session: str | None) -> Path:
    """The session's own export folder: a 0700 folder under ``export_dir()`` named by 32 random bytes
    (``secrets.token_urlsafe``), nothing derived from the session, so no other visitor can guess it; Gradio serves
    files by path but never lists a folder. Made at the session's first export, removed when the session ends
    (``end_session``) or after ``EXPORT_IDLE_S`` without an export."""
    root = export_dir()
    with _EXPORT_LOCK:
        known = _SESSION_DIRS.get(session)
        if known is not None and known[0].is_dir():
            folder = known[0]
        else:
            folder = root / secrets.token_urlsafe(32)
            folder.mkdir(mode=0o700)
            os.chmod(folder, 0o700)  # whatever the umask
        _SESSION_DIRS[session] = (folder, time.time())
        return folder


def end_session(request: gr.Request | None = None) -> None:
    """The session ended (its page closed: Gradio's ``unload``): remove its export folder and everything in it."""
    session = getattr(request, "session_hash", None) or current_session()
    with _NEWEST_LOCK:
        _NEWEST.pop(session, None)
        _NEWEST_TURN.pop(session, None)
        _IN_FLIGHT.pop(session, None)
    with _EXPORT_LOCK:
        known = _SESSION_DIRS.pop(session, None)
    if known is not None:
        shutil.rmtree(known[0], ignore_errors=True)


def share_query(turn: Turn) -> str:
    """The share link's query string for this turn (configuration A; in compare mode the page's Link box also
    carries B): prefix it with the page's address to reopen the case."""
    page = state.PageState(query=turn.query, a=dict(turn.controls), corpus=turn.corpus or None)
    return state.encode(page, default_controls())


def export_turn(turn: Turn, link: str | None = None) -> str:
    """Write the turn's JSON to a new file (0600, in the session's own folder, ``session_export_dir``) and return its
    path for the download button.

    The name carries a time and a sequence number, nothing of the turn; each session keeps its newest
    ``EXPORT_KEEP_SESSION`` and the process its newest ``EXPORT_KEEP``.
    """
    folder = session_export_dir(current_session())
    path = folder / f"turn-{time.strftime('%Y%m%d-%H%M%S')}-{next(_EXPORT_SEQ):06d}.json"
    data = json.dumps(turn_record(turn, link), ensure_ascii=False, indent=2, default=str).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)  # whatever the umask
        handle.write(data)
    _prune_exports(folder)
    return str(path)


def export_last_turn(last_turn: dict[str, Any], link: str) -> str:
    """The page's last turn exported again, recording the page's own share link (compare mode's B included):
    re-run from the per-turn cache, so no model is called. Raises what ``execute`` raises."""
    turn = execute(last_turn["query"], last_turn["controls"], last_turn.get("corpus") or None)
    return export_turn(turn, link)


def _prune_exports(folder: Path) -> None:
    """Keep the session's newest ``EXPORT_KEEP_SESSION`` exports and the process's newest ``EXPORT_KEEP``; remove the
    folders of sessions idle for ``EXPORT_IDLE_S`` (an API client never closes a page, so no ``unload`` comes)."""
    now = time.time()
    with _EXPORT_LOCK:
        idle = [s for s, (path, used) in _SESSION_DIRS.items() if path != folder and now - used > EXPORT_IDLE_S]
        stale = [_SESSION_DIRS.pop(s)[0] for s in idle]
    for old in stale:
        shutil.rmtree(old, ignore_errors=True)
    _drop_oldest(folder.glob("turn-*.json"), EXPORT_KEEP_SESSION)
    _drop_oldest(folder.parent.glob("*/turn-*.json"), EXPORT_KEEP)


def _drop_oldest(paths: Any, keep: int) -> None:
    files = []
    for path in paths:
        try:
            files.append((path.stat().st_mtime_ns, path.name, path))
        except FileNotFoundError:  # a concurrent session pruned it meanwhile
            continue
    for *_, old in sorted(files)[:-keep]:
        old.unlink(missing_ok=True)


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
        map_view.projection.request(retriever.dense)
