"""Compare mode and share links in the inspector: configuration B beside A through all four stages, a diff mark on
every row, the summary in words, relevance marks with each list's metrics, and a link that reopens the case.

No retrieval logic: the diff and the summary are ``retrieval.compare``'s, the metrics the evaluator's
(``retrieval.evaluation.compare``), each side runs through ``inspector.handlers.execute`` (the core's per-turn
cache answers whatever did not change). A side re-runs only when its own turn or controls changed; the other is
kept from the session's state. Everything reaching HTML is escaped (``render.esc``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import gradio as gr

from inspector import handlers, render, state
from retrieval.compare import PRESETS, STAGES, ListDiff, diff_results, preset_values, summarize
from retrieval.corpora import Registry
from retrieval.corpus import CorpusError
from retrieval.corpus_entries import SHIPPED
from retrieval.corpus_retrievers import is_indexed, is_ready
from retrieval.corpus_turns import labels_by_turn, open_within, turn_key
from retrieval.encoders import canonical_embedder
from retrieval.evaluation.compare import stage_metrics
from retrieval.formats import LoadError
from retrieval.judgments import corpus_identity, judged_turn
from retrieval.query import QueryError, clean_query
from retrieval.settings import CONTROLS
from retrieval.types import RetrievalResult

log = logging.getLogger(__name__)

ROWS = 10  # rows shown per column (the diff is over the whole lists)
LINK_WAIT_S = 30.0  # how long opening a link waits for its corpus's store to open (a store on disk takes seconds)
STAGE_TITLES = {"bm25": "BM25", "dense": "Dense", "rrf": "RRF fused", "final": "Final (reranked cards)"}
CSS = """
#compare-view .cmp-summary {font-size: 15px; line-height: 1.45; padding: 8px 12px; border-left: 4px solid #0b5cad;
  background: #f4f8fd; margin-bottom: 8px}
#compare-view .cmp-levels {display: flex; gap: 12px; margin: 6px 0}
#compare-view .cmp-level {border: 2px solid; border-radius: 8px; padding: 2px 8px}
#compare-view .cmp-level .badge {color: #fff; border-radius: 6px; padding: 1px 8px; font-weight: 700}
#compare-view .cmp-stage {margin: 10px 0}
#compare-view .cmp-pair {display: grid; grid-template-columns: 1fr 1fr; gap: 10px}
#compare-view .cmp-col {border: 1px solid #d0d7de; border-radius: 8px; padding: 6px}
#compare-view .cmp-head {font-weight: 700; margin-bottom: 4px}
#compare-view .cmp-metrics {font-weight: 400; color: #334155; font-variant-numeric: tabular-nums}
#compare-view .cmp-row {display: grid; grid-template-columns: 2.2em 4.2em 1.2em 1fr; gap: 4px; padding: 2px 0;
  border-bottom: 1px solid #eef1f4; font-size: 13px}
#compare-view .cmp-row .id, #compare-view .cmp-row .score {color: #64748b; font-size: 11px}
#compare-view .mark {font-weight: 700; text-align: center; border-radius: 4px}
#compare-view .mark-entered .mark {background: #dcfce7; color: #166534}
#compare-view .mark-left .mark {background: #fee2e2; color: #991b1b}
#compare-view .mark-up .mark {color: #166534} #compare-view .mark-down .mark {color: #b45309}
#compare-view .rel {color: #047857; font-weight: 800}
#compare-view .cmp-empty {color: #64748b; font-style: italic}
"""


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


# ---------------------------------------------------------------------------------------------- rendering
def _metrics_html(m: Mapping[str, Any] | None) -> str:
    if m is None:
        return ""
    first = f"#{m['first_relevant']}" if m["first_relevant"] else "none listed"
    return (
        f'<span class="cmp-metrics"> · nDCG@10 {m["ndcg@10"]:.3f} · Recall@10 {m["recall@10"]:.3f} · '
        f"first relevant {first}</span>"
    )


def _scores(result: RetrievalResult, stage: str) -> dict[str, float]:
    """Each row's score in its stage's own units (BM25, cosine, fused score, final score)."""
    hits = {"bm25": result.bm25.hits, "dense": result.dense.hits, "rrf": result.fused}.get(stage)
    if hits is None:
        return {h.parent_id: h.score for h in result.final}
    return {h.chunk_id: h.score for h in hits}


def _row(
    doc: str,
    rank: int,
    diff: ListDiff,
    side: str,
    titles: Mapping[str, str],
    relevant: set[str],
    score: float | None = None,
) -> str:
    mark = diff.marks[doc]
    if side == "b":
        kind, label = mark.kind, mark.label
    else:
        kind, label = ("left", "left") if mark.b_rank is None else (mark.kind, f"B #{mark.b_rank}")
    parent = doc.split("#")[0]
    rel = '<span class="rel" title="relevant">✓</span>' if parent in relevant else "<span></span>"
    return (
        f'<div class="cmp-row mark-{kind}" data-id="{render.esc(doc)}" data-kind="{kind}" '
        f'data-a-rank="{mark.a_rank or ""}" data-b-rank="{mark.b_rank or ""}">'
        f'<span class="rank">{rank}</span><span class="mark">{render.esc(label)}</span>{rel}'
        f'<span><span class="title">{render.esc(titles.get(parent, parent))}</span> '
        f'<span class="id">{render.esc(doc)}</span>'
        + (f' <span class="score">{score:.5g}</span>' if score is not None else "")
        + "</span></div>"
    )


def _column(
    stage: str,
    side: str,
    diff: ListDiff,
    titles: Mapping[str, str],
    relevant: set[str],
    metrics: Mapping[str, Any] | None,
    scores: Mapping[str, float],
) -> str:
    ids = diff.a if side == "a" else diff.b
    rows = "".join(
        _row(doc, i, diff, side, titles, relevant, scores.get(doc)) for i, doc in enumerate(ids[:ROWS], start=1)
    )
    more = f'<div class="cmp-empty">… {len(ids) - ROWS} more</div>' if len(ids) > ROWS else ""
    return (
        f'<div class="cmp-col" id="cmp-{stage}-{side}"><div class="cmp-head">{side.upper()} · '
        f"{STAGE_TITLES[stage]} ({len(ids)}){_metrics_html(metrics)}</div>"
        f"{rows or '<div class=cmp-empty>empty list</div>'}{more}</div>"
    )


def render_compare(
    a: RetrievalResult,
    b: RetrievalResult,
    titles: Mapping[str, str],
    qrels: Mapping[str, int],
    source: str = "the corpus's labels",
) -> str:
    """Both levels, the summary, and per stage A and B side by side with a diff mark on every row."""
    diffs = diff_results(a, b)
    relevant = {d for d, g in qrels.items() if g > 0}
    ma, mb = stage_metrics(a, qrels), stage_metrics(b, qrels)
    levels = "".join(
        f'<span class="cmp-level level-{render.esc(r.hybrid_path)}" id="cmp-level-{side}">{side.upper()}'
        f' <span class="badge">{render.esc(r.hybrid_path)}</span></span>'
        for side, r in (("a", a), ("b", b))
    )
    note = (
        f"relevant cards marked ✓ ({source}); metrics over each list deduped to cards"
        if relevant
        else "no relevance marks for this turn (not a labeled turn, nothing ticked): no metric shown"
    )
    stages = "".join(
        f'<div class="cmp-stage" data-stage="{stage}"><div class="cmp-pair">'
        f"{_column(stage, 'a', diffs[stage], titles, relevant, ma[stage], _scores(a, stage))}"
        f"{_column(stage, 'b', diffs[stage], titles, relevant, mb[stage], _scores(b, stage))}"
        "</div></div>"
        for stage in STAGES
    )
    return (
        f"<div class='cmp-levels'>{levels}</div>"
        f'<div class="cmp-summary" id="cmp-summary">{render.esc(summarize(a, b, titles))}</div>'
        f'<div class="cmp-note">{render.esc(note)}</div>{stages}'
    )


def compare_message(text: str) -> str:
    return f"<div class='cmp-empty'>{render.esc(text)}</div>"


# ----------------------------------------------------------------------------------------------- handlers
def _typed(values: Sequence[Any]) -> dict[str, Any]:
    """Widget values by control name, typed by their knobs where they parse (sliders send floats)."""
    out = {}
    for name, value in zip(CONTROLS, values):
        try:
            out[name] = handlers.KNOBS[name].coerce(value)
        except (ValueError, TypeError):
            out[name] = value
    return out


def share_link(
    base: str,
    query: str,
    compare_on: bool,
    doc: str | None,
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    corpus: str | None = None,
    preset: str | None = None,
) -> str:
    """The link that reopens this case: ``base`` (the page's address) + the encoded state (the session's corpus
    included unless it is the shipped cards; B's preset named when B started from one)."""
    text = handlers.page_text
    page = state.PageState(
        query=text(query) or "",
        a=dict(a),
        b=dict(b),
        compare=bool(compare_on),
        doc=text(doc),
        corpus=text(corpus),
        preset=text(preset),
    )
    return (base or "") + state.encode(page, handlers.default_controls())


def _side(
    query: str, controls: dict[str, Any], kept: Mapping[str, Any] | None, corpus: str | None = None
) -> dict[str, Any]:
    """One side's result on the session's corpus: the kept one if its turn, controls and corpus are unchanged, else
    a fresh (cached) run."""
    key = repr((query, sorted(controls.items()), corpus or ""))
    if kept and kept.get("key") == key:
        return dict(kept)
    turn = handlers.execute(query, controls, corpus or None)
    ids = {
        h.parent_id for h in (*turn.result.bm25.hits, *turn.result.dense.hits, *turn.result.fused, *turn.result.final)
    }
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


def _export(kept: dict, last_turn: Mapping[str, Any] | None, link: str) -> Any:
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


def restore(request: gr.Request) -> list[Any]:
    """Page load: the link's state into the widgets (turn, A, compare, B, the session's corpus), problems into the
    message area.

    Returns, in order: the turn, A's controls, compare on/off, B's controls, the panel's visibility, the
    message, the document to explain, the page's base address (for links), the session's corpus and B's preset."""
    headers = dict(request.headers or {}) if request is not None else {}
    referer = headers.get("referer") or ""
    if "?" in referer:
        params = state.parse_query_string(urlsplit(referer).query)
    else:
        params = list(dict(request.query_params or {}).items()) if request is not None else []
    params = [(k, v) for k, v in params if not k.startswith("__")]  # gradio's own (e.g. __theme)
    base = _base(headers)
    if not params:
        return [gr.skip()] * (2 + 2 * len(CONTROLS)) + [gr.skip(), "", None, base, gr.skip(), gr.skip()]
    allowed = {"embedding_model": handlers.model_choices()}
    page, problems = state.decode(params, handlers.default_controls(), allowed)
    corpus, problem = link_corpus(page.corpus)
    problems += [problem] if problem else []
    message = render.render_message("This link had problems: " + " ".join(problems)) if problems else ""
    return [
        page.query,
        *(page.a[n] for n in CONTROLS),
        page.compare,
        *(page.b[n] for n in CONTROLS),
        gr.Column(visible=page.compare),
        message,
        page.doc,
        base,
        corpus,
        page.preset,
    ]


def link_corpus(name: str | None) -> tuple[Any, str | None]:
    """The session's corpus a link asks for: (the value for the hidden corpus box, the problem in words or None).

    Only names the Data tab lists are opened (never a path); a store on disk reopens within ``LINK_WAIT_S``; a corpus
    still being indexed, unknown or broken leaves the session on the shipped cards and says so."""
    if not name:
        return gr.skip(), None
    shown = repr(name[:80])
    registry = Registry(handlers.base_settings())
    try:
        entry = registry.get(name)
    except ValueError:  # its message lists every corpus on the server: a link's reader is told only of its own
        return gr.skip(), f"no corpus named {shown} here. The shipped cards are shown instead."
    try:
        data = registry.load(entry)
        snap = open_within(data, handlers.base_settings(), LINK_WAIT_S)
    except (LoadError, CorpusError, ValueError, OSError) as exc:
        return gr.skip(), f"corpus={shown}: {exc} The shipped cards are shown instead."
    if snap is None:
        return ("" if data.key is None else data.entry.name), None
    if snap["status"] == "running":
        return gr.skip(), (
            f"corpus={shown} is still being indexed here ({snap['done']:,}/{snap['total']:,} "
            "sub-chunks): the Data tab shows its progress; open this link again when it is ready. The "
            "shipped cards are shown meanwhile."
        )
    return gr.skip(), (
        f"corpus={shown} could not be opened ({snap['status']}: {snap['error']}). The shipped cards are shown instead."
    )


def _base(headers: Mapping[str, str]) -> str:
    """The page's address without its query string, from the request's Referer (else its Host)."""
    referer = headers.get("referer") or ""
    if referer.startswith(("http://", "https://")):
        return referer.split("?", 1)[0].split("#", 1)[0]
    host = headers.get("host")
    return f"http://{host}/" if host else ""


# ------------------------------------------------------------------------------------------------- layout
COPY_JS = """(link) => {
  const text = link || "";
  if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text); }
  else { const t = document.querySelector('#share-link textarea, #share-link input');
         if (t) { t.select(); document.execCommand('copy'); } }
  return [];
}"""


def build_panel(control_widget, link_message: Any = None) -> dict[str, Any]:
    """Compare on/off, the share link and its Copy button, the link's message area (``link_message``, placed by
    the caller where it is seen first, else here), and the compare panel (B's preset and controls, the relevance
    marks, the view), in the current Gradio context."""
    p: dict[str, Any] = {}
    gr.HTML(f"<style>{CSS}</style>", elem_id="compare-style")
    with gr.Row(equal_height=True, elem_id="compare-share"):
        p["compare_on"] = gr.Checkbox(
            False, label="Compare mode: A (the page's controls) vs B", elem_id="compare-on", scale=1
        )
        p["link"] = gr.Textbox(
            "",
            label="Link to this case (turn, controls, compare, explained document)",
            elem_id="share-link",
            interactive=False,
            scale=4,
        )
        p["copy"] = gr.Button("Copy link", elem_id="copy-link", scale=0, min_width=110)
    p["link_message"] = link_message if link_message is not None else gr.HTML("", elem_id="link-message")
    defaults = handlers.default_controls()
    with gr.Column(visible=False, elem_id="compare-panel") as p["panel"]:
        with gr.Row():
            p["preset"] = gr.Dropdown(list(PRESETS), value=None, label="B from a preset", elem_id="b-preset", scale=1)
            p["relevant"] = gr.CheckboxGroup(
                [],
                value=[],
                label="Relevant cards for this turn (tick to mark; kept for this session)",
                elem_id="relevant-cards",
                scale=3,
            )
        b: dict[str, Any] = {}
        with gr.Accordion("Configuration B (same controls as A)", open=True, elem_id="b-controls"):
            for row in range(0, len(CONTROLS), 6):
                with gr.Row():
                    for name in CONTROLS[row : row + 6]:
                        widget = control_widget(handlers.KNOBS[name], defaults[name])
                        widget.elem_id = "b-" + (widget.elem_id or name.replace("_", "-"))
                        b[name] = widget
        p["b"] = b
        p["view"] = gr.HTML(compare_message("Run a turn to compare A and B."), elem_id="compare-view")
    p["kept"] = gr.State({})
    p["ticked"] = gr.State({})
    p["base"] = gr.State("")
    p["pending_doc"] = gr.State(None)
    return p


def _events(component: Any) -> list[Any]:
    """The events after which a control's new value is final (as the single-configuration page uses them)."""
    if isinstance(component, gr.Slider):
        return [component.release]
    if isinstance(component, gr.Number):
        return [component.submit, component.blur]
    return [component.input]


def _refresh_event(
    p: dict[str, Any], query: Any, controls: dict[str, Any], outputs: dict[str, Any], corpus: Any, doc: Any = None
) -> dict[str, Any]:
    """The keyword arguments of an event that runs ``refresh`` (``doc``: where the explained document is read)."""
    inputs = [
        query,
        p["compare_on"],
        p["ticked"],
        p["kept"],
        doc or outputs["explain_doc"],
        p["base"],
        *controls.values(),
        *p["b"].values(),
        corpus,
        outputs["last_turn"],
        p["preset"],
    ]
    # preprocess=False, as the turn events (ui._wire): refresh types every control itself (_typed, build_settings),
    # so "NaN", "abc" or a list sent to a slider gets a message instead of Gradio's processing error
    return dict(
        fn=refresh,
        inputs=inputs,
        outputs=[p["view"], p["relevant"], p["kept"], p["link"], outputs["export"]],
        api_visibility="private",
        concurrency_id="compare",
        concurrency_limit=4,
        preprocess=False,
    )


def wire(
    p: dict[str, Any],
    query: Any,
    controls: dict[str, Any],
    outputs: dict[str, Any],
    turn_events: list[Any],
    corpus: Any,
) -> None:
    """Compare and link events. Every turn event (Run, Enter, an example, an A control) is followed by a refresh:
    A vs B re-rendered (only A re-runs, from the cache), the link, and the export stamped with that link. A B
    control or a preset re-runs only B, a tick only the marks; the link follows every change."""
    common = _refresh_event(p, query, controls, outputs, corpus)
    again = dict(common, trigger_mode="always_last")
    for event in turn_events:  # after the turn: its last_turn and export are the ones refresh stamps
        event.then(**common)
    for name, component in p["b"].items():
        if name == "embedding_model":
            component.input(
                handlers.on_model_change, component, p["b"]["min_similarity"], api_visibility="private"
            ).then(**again)
        else:
            for event in _events(component):
                event(**again)
    a_list, b_list = list(controls.values()), list(p["b"].values())
    p["compare_on"].input(lambda on: gr.Column(visible=on), p["compare_on"], p["panel"], api_visibility="private").then(
        **common
    )
    p["preset"].input(apply_preset, [p["preset"], *a_list], b_list, api_visibility="private", preprocess=False).then(
        **common
    )  # apply_preset types A's values itself
    p["relevant"].input(
        tick,
        [query, p["relevant"], p["ticked"]],
        p["ticked"],  # tick keeps only text marks
        api_visibility="private",
        preprocess=False,
    ).then(**common)
    outputs["explain_doc"].input(**again)
    p["copy"].click(None, [p["link"]], None, js=COPY_JS)


def wire_load(
    app: gr.Blocks, p: dict[str, Any], query: Any, controls: dict[str, Any], outputs: dict[str, Any], corpus: Any
) -> None:
    """Opening a link restores the page's state (the session's corpus included), runs the turn (A) on it and, in
    compare mode, B."""
    a_list, b_list = list(controls.values()), list(p["b"].values())
    restored = app.load(
        restore,
        None,
        [
            query,
            *a_list,
            p["compare_on"],
            *b_list,
            p["panel"],
            p["link_message"],
            p["pending_doc"],
            p["base"],
            corpus,
            p["preset"],
        ],
        api_visibility="private",
    )
    turn_outputs = [outputs[name] for name in handlers.TurnView._fields]
    restored.then(
        handlers.rerun_turn,
        [query, *a_list, p["pending_doc"], corpus],
        turn_outputs,  # it types them
        api_visibility="private",
        preprocess=False,
    ).then(**_refresh_event(p, query, controls, outputs, corpus, p["pending_doc"]))
