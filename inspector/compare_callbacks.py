"""Compare mode's callbacks: each side's run (re-run only when its own turn or controls changed), the relevance
marks, the re-rendered view, the export stamped with the page's link, B's presets.

No retrieval logic: the diff and the summary are ``retrieval.compare``'s, the metrics the evaluator's
(``retrieval.evaluation.compare``), each side runs through ``inspector.handlers.execute`` (the core's per-turn
cache answers whatever did not change).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import gradio as gr

from inspector import handlers
from inspector.compare_render import ROWS, compare_message, render_compare
from inspector.share_link import share_link
from retrieval.compare import PRESETS, preset_values
from retrieval.corpora import Registry
from retrieval.corpus import CorpusError
from retrieval.corpus_entries import SHIPPED
from retrieval.corpus_retrievers import is_indexed, is_ready
from retrieval.corpus_turns import labels_by_turn, turn_key
from retrieval.encoders import canonical_embedder
from retrieval.formats import LoadError
from retrieval.judgments import corpus_identity, judged_turn
from retrieval.query import QueryError, clean_query
from retrieval.settings import CONTROLS
from retrieval.types import FinalHit, FusedHit, Hit

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- relevance
def _corpus_data(corpus: str | None):
    """The session's corpus loaded from the registry (a name; None = the shipped cards)."""
    return Registry(handlers.base_settings()).open(corpus)


def labeled_qrels(query: str, corpus: str | None = None) -> dict[str, int]:
    """The judgements of ``query`` if it is one of the labeled turns of the session's corpus (a registry name;
    None = the shipped cards), matched without case or extra spaces; else {}."""
    try:
        data = _corpus_data(corpus)
    except (LoadError, CorpusError, ValueError, OSError) as exc:
        log.warning("no labeled turns for corpus %r: %s", corpus, exc)
        return {}
    judged = judged_turn(handlers.base_settings(), corpus_identity(data), query) if str(query or "").strip() else {}
    return {**labels_by_turn(data).get(turn_key(query), {}), **judged}  # judgments win (retrieval.judgments.merge)


def session_qrels(query: str, corpus: str | None, ticked: Mapping[str, Sequence[str]] | None) -> dict[str, int]:
    """The user's ticks for this turn when there are any (grades kept from the labels), else the labels."""
    labels = labeled_qrels(query, corpus)
    key = turn_key(query)
    if ticked and key in ticked:
        return {doc: labels.get(doc, 1) or 1 for doc in ticked[key]}
    return labels


# ----------------------------------------------------------------------------------------------- handlers
def _typed(values: Sequence[Any]) -> dict[str, Any]:
    """Widget values by control name, typed by their knobs where they parse (sliders send floats)."""
    out = {}
    for name, value in zip(CONTROLS, values, strict=False):
        try:
            out[name] = handlers.KNOBS[name].coerce(value)
        except (ValueError, TypeError):
            out[name] = value
    return out


def _side(
    query: str, controls: dict[str, Any], kept: Mapping[str, Any] | None, corpus: str | None = None
) -> dict[str, Any]:
    """One side's result on the session's corpus: the kept one if its turn, controls and corpus are unchanged, else
    a fresh (cached) run."""
    key = repr((query, sorted(controls.items()), corpus or ""))
    if kept and kept.get("key") == key:
        return dict(kept)
    turn = handlers.execute(query, controls, corpus or None)
    r = turn.result
    hits: list[Hit | FusedHit | FinalHit] = [*r.bm25.hits, *r.dense.hits, *r.fused, *r.final]
    ids = {h.parent_id for h in hits}
    titles = {c.parent_id: c.title for c in turn.retriever.by_id.values() if c.parent_id in ids}
    return {"key": key, "result": turn.result, "titles": titles, "corpus": corpus or None}


def refresh(
    query: str, compare_on: bool, ticked: dict | None, kept: dict | None, doc: str | None, base: str, *values: Any
) -> tuple[Any, Any, dict, str, Any]:
    """Re-render compare mode (each side re-run only if its own inputs changed), the share link, and the export
    stamped with that link.

    ``values`` are A's controls then B's, each in ``CONTROLS`` order, then optionally the session's corpus, the
    last turn (``TurnView.last_turn``) and B's preset (the dropdown's value). Returns the compare view, the
    relevance checkboxes, the kept results, the link and the export (the last turn's JSON recording this very
    link). Never raises: problems become the view's message.
    """
    n = len(CONTROLS)
    a, b = _typed(values[:n]), _typed(values[n : 2 * n])
    corpus = values[2 * n] if len(values) > 2 * n else None
    last_turn = values[2 * n + 1] if len(values) > 2 * n + 1 else None
    preset = values[2 * n + 2] if len(values) > 2 * n + 2 else None
    link = share_link(base, query, compare_on, doc, a, b, corpus, preset)
    kept = dict(kept or {})
    export = _export(kept, last_turn, link)
    if not compare_on:
        return gr.skip(), gr.skip(), kept, link, export
    try:
        text = clean_query(query)
    except QueryError as exc:
        return compare_message(str(exc)), gr.CheckboxGroup(choices=[], value=[]), kept, link, export
    for side, controls in (("a", a), ("b", b)):
        try:
            # as typed: the result notes what normalising changed
            kept[side] = _side(query, controls, kept.get(side), corpus)
        except (QueryError, ValueError, TypeError) as exc:
            kept.pop(side, None)
            return (
                compare_message(f"Configuration {side.upper()}: {exc}{_other_model_hint(controls, corpus)}"),
                gr.skip(),
                kept,
                link,
                export,
            )
        except Exception as exc:  # the page must survive anything; the log keeps the traceback
            log.exception("compare failed")
            kept.pop(side, None)
            return (
                compare_message(f"Configuration {side.upper()} failed ({type(exc).__name__}: {exc})."),
                gr.skip(),
                kept,
                link,
                export,
            )
    return (*_view(text, kept, ticked), kept, link, export)


def _other_model_hint(controls: Mapping[str, Any], corpus: str | None) -> str:
    """What to do when a side asks for another embedding model than the app's on a corpus of the Data tab that has
    no index of it: the Data tab indexes only for the app's model, so its own advice cannot help ("" otherwise)."""
    base = handlers.base_settings()
    model = controls.get("embedding_model")
    if (
        not corpus
        or corpus == SHIPPED
        or not model
        or canonical_embedder(model) == canonical_embedder(base.embedding_model)
    ):
        return ""
    try:
        data, settings = _corpus_data(corpus), handlers.build_settings(dict(controls))
        if is_ready(data, settings) or is_indexed(data, settings):
            return ""
    except Exception:  # the refusal itself already says what is wrong
        return ""
    return (
        f" The Data tab indexes a corpus for this app's model ({base.embedding_model}) only: A vs B in the "
        f"Evaluation tab builds an index of {model} for B, with its progress; or give this side "
        f"{base.embedding_model}."
    )


def _export(kept: dict, last_turn: dict[str, Any] | None, link: str) -> Any:
    """The last turn's export recording ``link`` (what the page's Link box shows: A, B, compare, the explained
    document, the corpus); rewritten only when the turn or the link changed."""
    if not last_turn:
        return gr.skip()
    key = repr((sorted(last_turn.items(), key=str), link))
    if kept.get("export_key") == key:
        return gr.skip()
    try:
        path = handlers.export_last_turn(last_turn, link)
    except Exception:  # the turn itself already rendered; its own export (configuration A) stays
        log.exception("export with the page's link failed")
        return gr.skip()
    kept["export_key"] = key
    return path


def _view(query: str, kept: Mapping[str, Any], ticked: Mapping[str, Sequence[str]] | None) -> tuple[str, Any]:
    ra, rb = kept["a"]["result"], kept["b"]["result"]
    qrels = session_qrels(query, kept["a"]["corpus"], ticked)
    source = "this session's marks" if ticked and turn_key(query) in ticked else "the corpus's labeled turn"
    titles = {**kept["a"]["titles"], **kept["b"]["titles"]}
    shown = []
    for r in (ra, rb):
        for h in (*r.final, *r.fused[:ROWS]):
            if h.parent_id not in shown:
                shown.append(h.parent_id)
    relevant = [d for d, g in qrels.items() if g > 0]
    choices = [(f"{titles.get(d, d)} ({d})", d) for d in [*relevant, *(s for s in shown if s not in relevant)]]
    return (render_compare(ra, rb, titles, qrels, source), gr.CheckboxGroup(choices=choices, value=relevant))


def tick(query: str, marks: list[str] | None, ticked: dict | None) -> dict:
    """The user ticked or unticked relevant cards for this turn (kept for the session)."""
    ticked = dict(ticked or {})
    marks = marks if isinstance(marks, (list, tuple)) else []  # a page value: anything may come
    ticked[turn_key(handlers.page_text(query) or "")] = [m for m in marks if isinstance(m, str)]
    return ticked


def apply_preset(preset: str | None, *a_values: Any) -> list[Any]:
    """B's controls for a preset (``retrieval.compare.PRESETS``)."""
    if not isinstance(preset, str) or preset not in PRESETS:
        return [gr.skip() for _ in CONTROLS]
    values = preset_values(preset, _typed(a_values), handlers.default_controls())
    return [values[name] for name in CONTROLS]
