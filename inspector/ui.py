"""Layout and wiring of the inspector. No retrieval logic: every event calls a function of ``inspector.handlers``.

``build_app()`` returns the Blocks; launch it with ``launch_options()`` (CSS and theme moved to ``launch()`` in
Gradio 6), as ``app.py`` does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.context import get_blocks_context
from gradio.events import EventListenerMethod
from gradio.utils import get_cancelled_fn_indices

from inspector import compare_view, data_tab, handlers, render, why_view
from inspector.classroom import build_classroom_tab
from inspector.evaluation_tab import build_evaluation_tab
from inspector.examples import EXAMPLES
from retrieval.formats import Limits
from retrieval.settings import Knob

log = logging.getLogger(__name__)

CSS = (Path(__file__).with_name("style.css")).read_text(encoding="utf-8")
HEADER = ('<div class="banner"><h1>Hybrid retrieval inspector</h1>'
          '<span class="warn">100% synthetic data · not a medical device · not medical advice</span>'
          '<span class="sub">BM25 + dense (Chroma) → Reciprocal Rank Fusion → cross-encoder rerank, one turn at a '
          "time (ADR-0022)</span></div>")


# Gradio's cache: every DELETE_CACHE[0] s, files this app made that are older than DELETE_CACHE[1] s are deleted (and
# all of them when the server stops). Exports live in one unguessable folder per session, removed when the page
# closes, capped at handlers.EXPORT_KEEP_SESSION per session and handlers.EXPORT_KEEP in all, and never copied.
DELETE_CACHE = (3600, 86400)
# The Data tab's upload is the only control that takes a file: Gradio refuses anything larger than the corpus upload
# limit (MAX_UPLOAD_MB) before it reaches the cache; the microphone route stays refused (RefuseUploads).
MAX_FILE_SIZE = f"{Limits.from_env().max_upload_mb:g}mb"
UPLOAD_ROUTES = ("/process_recording",)


class RefuseUploads:
    """ASGI middleware: upload routes no control uses answer 403, so no anonymous file lands in the cache."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/").endswith(UPLOAD_ROUTES):
            from starlette.responses import PlainTextResponse

            response = PlainTextResponse("This app takes no file uploads.", status_code=403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def launch_options() -> dict[str, Any]:
    """Keyword arguments for ``Blocks.launch``: the inspector's CSS, a theme with local fonts only, the upload
    limit and the middleware that refuses uploads."""
    from starlette.middleware import Middleware

    theme = gr.themes.Default(primary_hue="blue", neutral_hue="slate",
                              font=["ui-sans-serif", "system-ui", "sans-serif"],
                              font_mono=["ui-monospace", "Consolas", "monospace"])
    return {"css": CSS, "theme": theme, "max_file_size": MAX_FILE_SIZE,
            "app_kwargs": {"middleware": [Middleware(RefuseUploads)]}}


def build_app() -> gr.Blocks:
    """The whole page: the Inspector tab, the RRF classroom and the Evaluation tab."""
    with gr.Blocks(title="Hybrid retrieval inspector", fill_width=True, analytics_enabled=False,
                   delete_cache=DELETE_CACHE) as app:
        gr.HTML(HEADER, elem_id="banner")
        # The session's active corpus (Data tab): hidden, per browser session, the run_turn API's `corpus`.
        corpus = gr.Textbox("", visible=False, elem_id="corpus", label="corpus")
        with gr.Tabs():
            with gr.Tab("Inspector", id="inspector"):
                restore_links = build_inspector_tab(corpus)
            with gr.Tab("Data", id="data"):
                data_tab.build_data_tab(corpus)
            with gr.Tab("RRF classroom", id="classroom"):
                build_classroom_tab()
            with gr.Tab("Evaluation", id="evaluation"):
                build_evaluation_tab(corpus=corpus)
        restore_links(app)  # opening a share link restores its state and runs the turn
        app.unload(handlers.end_session)  # the page closed: its exports go with it
    return app


# ------------------------------------------------------------------------------------------------ the tab
def build_inspector_tab(corpus: gr.Textbox | None = None) -> Callable[[gr.Blocks], None]:
    """Create and wire the inspector inside the current Blocks/Tab context; returns what wires the share links
    to the app's load event. ``corpus`` holds the session's active corpus (the Data tab sets it)."""
    query, run = _turn_row()
    if corpus is not None:
        data_tab.turn_picker(query, corpus)  # the active corpus's labeled turns, when it has some
    examples = _examples(query)
    controls = _controls()
    panel = compare_view.build_panel(control_widget)  # compare mode (off by default) and the share link
    outputs = _results()
    slots, turn_events = _wire(query, run, examples, controls, outputs, corpus)
    compare_view.wire(panel, query, controls, outputs, turn_events, corpus)
    apply_tune = why_view.attach(query, controls, panel, outputs, turn_events, corpus)  # Why not…? + judgments

    def finish(app: gr.Blocks) -> None:
        compare_view.wire_load(app, panel, query, controls, outputs, corpus)
        apply_tune(app)  # the Evaluation tab's Tune / Apply sets A and B here
        _newest_wins(app, slots, [outputs["status"], panel["link"]])

    return finish


def _turn_row() -> tuple[gr.Textbox, gr.Button]:
    with gr.Row(equal_height=True):
        query = gr.Textbox(label="User turn", elem_id="query", lines=1, max_lines=3, scale=6, autofocus=True,
                           placeholder="e.g. What does error E-07 on my GlucoSense GS-40 mean?")
        run = gr.Button("Run ▶", variant="primary", elem_id="run", scale=1, min_width=120)
    return query, run


def _examples(query: gr.Textbox) -> gr.Examples:
    examples = gr.Examples(examples=[[e.text] for e in EXAMPLES], inputs=[query], label="Examples (click to run)",
                           example_labels=[e.label for e in EXAMPLES], elem_id="examples",
                           examples_per_page=len(EXAMPLES))
    with gr.Accordion("What each example shows", open=False):
        gr.HTML("<ul>" + "".join(f"<li><b>{render.esc(e.label)}</b> — <i>{render.esc(e.text)}</i>: "
                                 f"{render.esc(e.shows)}</li>" for e in EXAMPLES) + "</ul>",
                elem_id="examples-help")
    return examples


# Controls whose range is too wide for a slider get a number box; the rest follow their Knob's kind.
NUMBER_BOX_STEPS = 2000
ELEM_IDS = {"context_token_budget": "context-budget"}


def control_widget(spec: Knob, value: Any) -> gr.components.Component:
    """The widget for one control, with the type, range, choices and label of its Settings field."""
    elem_id = ELEM_IDS.get(spec.name, spec.name.replace("_", "-"))
    common = dict(value=value, label=spec.label, elem_id=elem_id)
    if spec.name == "embedding_model":
        return gr.Dropdown(handlers.model_choices(), **common)
    if spec.kind == "bool":
        return gr.Checkbox(**common)
    if spec.kind == "choice":
        return gr.Radio(list(spec.choices), **common)
    if spec.kind in {"int", "float"}:
        if (spec.hi - spec.lo) / (spec.step or 1) > NUMBER_BOX_STEPS:
            return gr.Number(minimum=spec.lo, maximum=spec.hi, step=spec.step, precision=0 if spec.kind == "int"
                             else None, **common)
        return gr.Slider(spec.lo, spec.hi, step=spec.step, **common)
    raise ValueError(f"no widget for control {spec.name!r} of kind {spec.kind!r}")


def _controls() -> dict[str, gr.components.Component]:
    """Every control of ``handlers.CONTROLS``, grouped by widget kind: sliders, then model and number boxes, then
    the failure toggles, then the quality levers' choices."""
    d = handlers.default_controls()
    specs = [handlers.KNOBS[name] for name in handlers.CONTROLS]
    sliders = [s for s in specs if s.kind in {"int", "float"} and s.name not in _boxed(specs)]
    groups = (sliders[:5], sliders[5:], [s for s in specs if s.name == "embedding_model" or s.name in _boxed(specs)],
              [s for s in specs if s.kind == "bool"], [s for s in specs if s.kind == "choice"])
    c: dict[str, gr.components.Component] = {}
    with gr.Accordion("Controls (changes re-run the turn from cache: no model runs unless a branch list changes)",
                      open=True):
        for group in groups:
            with gr.Row():
                for spec in group:
                    c[spec.name] = control_widget(spec, d[spec.name])
    missing = set(handlers.CONTROLS) - set(c)
    if missing:
        raise RuntimeError(f"no widget placed for {sorted(missing)}")
    return {name: c[name] for name in handlers.CONTROLS}


def _boxed(specs: list[Knob]) -> set[str]:
    return {s.name for s in specs if s.kind in {"int", "float"} and (s.hi - s.lo) / (s.step or 1) > NUMBER_BOX_STEPS}


def _results() -> dict[str, Any]:
    o: dict[str, Any] = {}
    o["message"] = gr.HTML("", elem_id="message")
    o["status"] = gr.HTML(render.status_placeholder(), elem_id="hybrid-path")
    with gr.Row(elem_id="columns", equal_height=False):
        for stage in ("bm25", "dense", "rrf", "reranked"):
            o[stage] = gr.HTML(render.placeholder(stage), elem_id=f"list-{stage}", min_width=240)
    with gr.Row(equal_height=True):
        o["rank_flow"] = gr.Plot(label="Rank flow", elem_id="chart-rank-flow")
        o["contributions"] = gr.Plot(label="RRF contributions", elem_id="chart-contributions")
    with gr.Row():
        o["k_sensitivity"] = gr.Plot(label="k sensitivity", elem_id="chart-k-sensitivity")
        with gr.Column():
            gr.Markdown("### Explain one document")
            o["explain_doc"] = gr.Dropdown(choices=[], value=None, label="Document (sub-chunk)",
                                           elem_id="explain-doc", interactive=True)
            o["explain"] = gr.HTML(render.render_explain_placeholder(), elem_id="explain")
    gr.Markdown("### Context handed to the language model")
    o["context"] = gr.HTML(render.render_message("Run a turn to build the context.", "info"), elem_id="context")
    o["export"] = gr.DownloadButton("⬇ Export this turn (JSON)", value=None, elem_id="export", variant="secondary")
    o["last_turn"] = gr.State(None)
    missing = set(handlers.TurnView._fields) - set(o)
    if missing:
        raise RuntimeError(f"ui outputs missing for {sorted(missing)}")
    return o


def _cancel_slot(trigger: Any = None, after: Any = None) -> Any:
    """A cancel event on ``trigger`` (e.g. ``run.click``) or after the event ``after``, placed before the turn event
    there; ``_newest_wins`` fills in what it cancels once every event exists.

    The page dispatches a trigger's events in order and waits for each one's run to finish before the next: the
    separate cancel event Gradio's own ``cancels=`` adds after a listener fires only once that listener's run is
    over, too late for a race. This is the same cancel event, placed first.
    """
    if trigger is not None:
        targets, trigger_after = [EventListenerMethod(trigger.__self__, trigger.event_name)], None
    else:
        targets, trigger_after = [EventListenerMethod(None, "then")], get_cancelled_fn_indices([after])[0]
    block_fn, _ = get_blocks_context().set_event_trigger(
        targets, fn=None, inputs=None, outputs=None, queue=False, preprocess=False, api_visibility="private",
        is_cancel_function=True, trigger_after=trigger_after)
    return block_fn


def _newest_wins(app: gr.Blocks, slots: list[Any], marks: list[Any]) -> None:
    """The newest action wins (issue 13, defect 2): every cancel slot cancels all the events that write the turn's
    outputs or the compare view (found by the level badge or the share link among their outputs, a share link's
    restore included), so an older result that is slower to compute can never arrive after a newer one and replace
    it. A cancelled run's model scores still land in the per-turn cache; only its result is dropped."""
    writers = sorted(i for i, fn in app.fns.items() if fn.fn is not None and any(m in fn.outputs for m in marks))
    for slot in slots:
        slot.cancels = writers


def _wire(query: gr.Textbox, run: gr.Button, examples: gr.Examples, controls: dict[str, Any],
          o: dict[str, Any], corpus: gr.Textbox | None = None) -> tuple[list[Any], list[Any]]:
    """Wire the turn events; returns the cancel slots (see ``_newest_wins``) and the turn events, after each of which
    compare mode and the share link refresh."""
    inputs = [query, *controls.values()]
    tail = [corpus] if corpus is not None else []
    outputs = [o[name] for name in handlers.TurnView._fields]
    turn = dict(inputs=[*inputs, *tail], outputs=outputs, concurrency_id="turn", concurrency_limit=4)
    slots: list[Any] = []  # a cancel before each event that writes the turn's outputs (see _newest_wins)
    events: list[Any] = []

    def newest(trigger: Any, fn: Any, **kw: Any) -> Any:
        slots.append(_cancel_slot(trigger))
        events.append(trigger(fn, **kw))
        return events[-1]

    newest(run.click, handlers.run_turn, api_name="run_turn", **turn)
    newest(query.submit, handlers.run_turn, api_visibility="private", **turn)
    slots.append(_cancel_slot(after=examples.load_input_event))
    events.append(examples.load_input_event.then(handlers.run_turn, api_visibility="private", **turn))
    rerun = dict(turn, inputs=[*inputs, o["explain_doc"], *tail], api_visibility="private",
                 trigger_mode="always_last")
    for name, component in controls.items():
        if name == "embedding_model":
            changed = newest(component.input, handlers.on_model_change, inputs=component,
                             outputs=controls["min_similarity"], api_visibility="private")
            events[-1] = changed.then(handlers.rerun_turn, **rerun)
        elif isinstance(component, gr.Slider):
            newest(component.release, handlers.rerun_turn, **rerun)  # on release: dragging stays smooth
        elif isinstance(component, gr.Number):
            newest(component.submit, handlers.rerun_turn, **rerun)
            newest(component.blur, handlers.rerun_turn, **rerun)
        else:
            newest(component.input, handlers.rerun_turn, **rerun)
    o["explain_doc"].input(handlers.explain, [o["last_turn"], o["explain_doc"]], o["explain"],
                           api_visibility="private")
    return slots, events
