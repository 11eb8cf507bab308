"""Layout and wiring of the inspector. No retrieval logic: every event calls a function of ``inspector.handlers``.

``build_app()`` returns the Blocks; launch it with ``launch_options()`` (CSS and theme moved to ``launch()`` in
Gradio 6), as ``app.py`` does.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.helpers import Examples

from inspector import (
    badge,
    compare_eval,
    compare_view,
    corpus_words,
    data_tab,
    exercise_tab,
    guard,
    handlers,
    jobs,
    map_view,
    presenter,
    render,
    share_link,
    turn_end,
    uploads,
    why_view,
)
from inspector.classroom import build_classroom_tab
from inspector.evaluation_tab import build_evaluation_tab
from retrieval.formats import Limits
from retrieval.knobs import Knob

log = logging.getLogger(__name__)

CSS = (Path(__file__).with_name("style.css")).read_text(encoding="utf-8")
# Container queries and rules on <body> survive only outside Gradio's CSS processing: a <style> in the head.
HEAD = "<style>" + (Path(__file__).with_name("head.css")).read_text(encoding="utf-8") + "</style>"
# Enter in a slider's number box applies the value (enter_applies.js): a script of the page's head, run once.
HEAD += "<script>" + (Path(__file__).with_name("enter_applies.js")).read_text(encoding="utf-8") + "</script>"


# Gradio's cache: every DELETE_CACHE[0] s, files this app made that are older than DELETE_CACHE[1] s are deleted (and
# all of them when the server stops). Exports live in one unguessable folder per session, removed when the page
# closes, capped at handlers.EXPORT_KEEP_SESSION per session and handlers.EXPORT_KEEP in all, and never copied.
DELETE_CACHE = (3600, 86400)
# The Data tab's upload is the only control that takes a file: Gradio refuses anything larger than the corpus upload
# limit (MAX_UPLOAD_MB) before it reaches the cache; the microphone route stays refused (RefuseUploads).
MAX_FILE_SIZE = f"{Limits.from_env().max_upload_mb:g}mb"
UPLOAD_ROUTES = ("/process_recording",)


class RefuseUploads:
    """ASGI middleware: upload routes no control uses answer 403, so no anonymous file lands in the cache; the one
    upload route a control uses keeps what clients leave there bounded (``uploads.bounded_upload``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/").endswith(uploads.UPLOAD_ROUTE):
            await uploads.bounded_upload(self.app, scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"].rstrip("/").endswith(UPLOAD_ROUTES):
            from starlette.responses import PlainTextResponse

            response = PlainTextResponse("This app takes no file uploads.", status_code=403)
            await response(scope, receive, send)
            return
        if scope["type"] == "http":
            await guard.guarded(self.app, scope, receive, send)  # bounded bodies, listeners, one heavy job each
            return
        await self.app(scope, receive, send)


def launch_options() -> dict[str, Any]:
    """Keyword arguments for ``Blocks.launch``: the inspector's CSS, a theme with local fonts only, the upload
    limit and the middleware that refuses uploads."""
    from starlette.middleware import Middleware

    theme = gr.themes.Default(
        primary_hue="blue",
        neutral_hue="slate",
        font=["ui-sans-serif", "system-ui", "sans-serif"],
        font_mono=["ui-monospace", "Consolas", "monospace"],
    )
    # run_history=False: Gradio 6 otherwise keeps every run's inputs, outputs and component configs in the
    # browser's localStorage (up to 100 runs), re-reading and re-writing the whole list on every message of every
    # run: each turn's ~250 KB of columns and charts made every later turn slower (fused list 180 -> 650 ms over 30
    # turns, not reset by a reload), and it left the turns typed on a shared screen readable by the next person.
    return {
        "css": CSS,
        "theme": theme,
        "max_file_size": MAX_FILE_SIZE,
        "js": presenter.KEYS_JS,
        "head": HEAD + map_view.MAP_JS,  # the map's click and hover hooks
        "run_history": False,
        "app_kwargs": {"middleware": [Middleware(RefuseUploads)]},
    }


def build_app() -> gr.Blocks:
    """The whole page: the Inspector tab, the RRF classroom and the Evaluation tab."""
    with gr.Blocks(
        title="Hybrid retrieval inspector", fill_width=True, analytics_enabled=False, delete_cache=DELETE_CACHE
    ) as app:
        # kept in presenter mode, reduced to its warning: the projected cards look medical (head.css)
        banner = gr.HTML(corpus_words.banner(corpus_words.words_for(None)), elem_id="banner")
        # The session's active corpus (Data tab): hidden, per browser session, the run_turn API's `corpus`.
        corpus = gr.Textbox("", visible=False, elem_id="corpus", label="corpus")
        owner = gr.State(None)  # the session's owner token (its uploads, its judgments): made on first use, never shown
        ab_kept = compare_eval.browser_copy()  # the browser's last A vs B: Back from a turn shows the table again
        turn_exercise = exercise_tab.TurnExercise()  # "make an exercise from this turn": placed in the Inspector
        with gr.Tabs():  # no event outputs them (exercise_tab.SELECT_TAB_JS says why)
            with gr.Tab("Inspector", id="inspector", elem_id="inspector-tab"):
                restore_links = build_inspector_tab(corpus, banner, turn_exercise, owner)
            with gr.Tab("Data", id="data"):
                data_tab.build_data_tab(corpus, owner)
            with gr.Tab("RRF classroom", id="classroom", elem_id="classroom-tab"):
                room = build_classroom_tab()
            with gr.Tab("Evaluation", id="evaluation"):
                build_evaluation_tab(corpus=corpus, ab_kept=ab_kept)
        restore_links(app, search := share_link.page_search(app))  # a share link restores its state, runs the turn
        exercise_tab.wire_app(app, room, search, turn_exercise)  # class links (?exercise=...), the turn's exercise
        app.unload(handlers.end_session)  # the page closed: its exports go with it
        app.unload(jobs.end_session)  # and its heavy job (a live evaluation, A vs B) stops
        app.unload(why_view.end_session)  # and the card it picked to judge
        for forget in (handlers.end_session, jobs.end_session, why_view.end_session):
            guard.on_expire(forget)  # the same for a session that never opened a page and went quiet
    return app


# ------------------------------------------------------------------------------------------------ the tab
def build_inspector_tab(
    corpus: gr.Textbox | None = None,
    banner: gr.HTML | None = None,
    turn_exercise: exercise_tab.TurnExercise | None = None,
    owner: gr.State | None = None,
) -> Callable[[gr.Blocks, gr.Textbox], None]:
    """Create and wire the inspector inside the current Blocks/Tab context; returns what wires the share links
    to the page's query string (``share_link.page_search``). ``corpus`` holds the session's active corpus (the
    Data tab sets it); ``banner``, the page's banner, follows it.

    The answer comes first: the turn row (its label names the corpus; the three headline controls beside it), the
    link's warning, the level badge and the four columns fill the first screen; every other control sits in a drawer
    (a Gradio Sidebar, closed by default), grouped; compare mode, charts, explain, context and export follow below."""
    words = corpus_words.words_for(None)
    sidebar, drawer = _drawer()
    query, run, headline, present, open_controls = _turn_row(words)
    open_controls.click(lambda: gr.Sidebar(open=True), None, sidebar, api_visibility="private")
    controls = {name: {**headline, **drawer}[name] for name in handlers.CONTROLS}
    with gr.Row(elem_id="examples-row", elem_classes=["no-present"]):
        examples = _examples(query, words)
        if corpus is not None:
            data_tab.turn_picker(query, corpus)  # the active corpus's labeled turns, when it has some
    hint = gr.HTML(corpus_words.hint_html(words), elem_id="examples-hint", elem_classes=["no-present"])
    outputs_hint = {"hint": hint}
    tour = _tour_bar(words)
    link_message = gr.HTML("", elem_id="link-message")  # a link's problems, at the top where they are seen
    outputs = {**_results(), **outputs_hint}
    outputs["turn_map"] = map_view.build_panel()  # the map, right below the columns (presenter mode keeps it)
    with gr.Column(elem_id="compare-area", elem_classes=["no-present"]):
        panel = compare_view.build_panel(control_widget, link_message)  # compare mode (off by default), link
    _details(outputs)
    if turn_exercise is not None:  # the classroom's button, below the context and the export (exercise_tab wires it)
        turn_exercise.place(outputs["last_turn"])
    end = _wire(query, run, examples, controls, outputs, corpus, tour)
    compare_view.wire(panel, query, controls, outputs, end, corpus)
    presenter.wire(tour, present)
    if corpus is not None:
        # One read of the corpus's words for everything that speaks them (the banner too, when the page has one).
        changed = [examples.dataset, query, hint, tour["index"], tour["caption"], *([banner] if banner else [])]
        corpus.change(
            functools.partial(_corpus_changed, with_banner=banner is not None),
            corpus,
            changed,
            api_visibility="private",
        )

    with gr.Column(elem_id="why-area", elem_classes=["no-present"]):
        apply_tune = why_view.attach(query, controls, panel, outputs, end, corpus, owner)  # + judgments
    end.wire(**TURN_QUEUE)  # one event after each turn: details, compare, link, judgments

    def finish(app: gr.Blocks, search: gr.Textbox) -> None:
        compare_view.wire_load(app, panel, query, controls, outputs, corpus, search)
        apply_tune(app)  # the Evaluation tab's Tune / Apply sets A and B here
        presenter.wire_load(app, present)

    return finish


# The three controls a presenter turns in front of people stay next to the turn; the rest sit in the drawer, grouped.
HEADLINE = ("rrf_k", "hybrid_enabled", "simulate_reranker_failure")
HEADLINE_LAYOUT = {
    "rrf_k": dict(scale=2, min_width=170, label="RRF k"),
    "hybrid_enabled": dict(scale=0, min_width=110, label="Hybrid on"),
    "simulate_reranker_failure": dict(scale=0, min_width=156, label="Reranker fails (simulated)"),
}
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Branches and fusion",
        ("top_k", "candidate_multiplier", "bm25_weight", "dense_weight", "fusion", "query_weighting", "bm25_tokenizer"),
    ),
    ("Reranker", ("reranker_max_input", "rerank_mode", "rerank_weight")),
    ("Refusal and context", ("min_similarity", "context_token_budget")),
    ("Failure simulation", ("simulate_empty_bm25",)),
    ("Model", ("embedding_model",)),
)


def _turn_row(words: corpus_words.CorpusWords) -> tuple[gr.Textbox, gr.Button, dict[str, Any], gr.Checkbox, gr.Button]:
    """The turn box, Run, the headline controls, the presenter toggle and the button that opens the drawer."""
    d = handlers.default_controls()
    # kept in presenter mode as its compact bar (head.css), the presenter toggle and the drawer's button aside
    with gr.Row(equal_height=True, elem_id="turn-row"):
        query = gr.Textbox(
            label=corpus_words.turn_label(words),
            elem_id="query",
            lines=1,
            max_lines=3,
            scale=5,
            min_width=220,
            autofocus=True,
            placeholder=words.placeholder,
        )
        run = gr.Button("Run ▶", variant="primary", elem_id="run", scale=0, min_width=90)
        headline = {
            name: control_widget(handlers.KNOBS[name], d[name], **HEADLINE_LAYOUT.get(name, {})) for name in HEADLINE
        }
        with gr.Column(scale=0, min_width=120, elem_id="turn-row-end", elem_classes=["no-present"]):
            present = gr.Checkbox(False, label="Presenter mode", elem_id="present-on")
            open_controls = gr.Button("⚙ All controls", elem_id="open-controls", size="sm")
    return query, run, headline, present, open_controls


def _drawer() -> tuple[gr.Sidebar, dict[str, gr.components.Component]]:
    """Every control but the headline ones, in the drawer (closed at first), grouped (``GROUPS``)."""
    d = handlers.default_controls()
    c: dict[str, gr.components.Component] = {}
    with gr.Sidebar(open=False, label="Controls", elem_id="controls-drawer", width=340) as sidebar:
        gr.Markdown(
            "**Controls**: each change re-runs the turn from cache (no model runs unless a list changes).",
            elem_id="drawer-help",
        )
        for title, names in GROUPS:
            with gr.Accordion(title, open=True, elem_id="group-" + title.lower().replace(" ", "-")):
                for name in names:
                    c[name] = control_widget(handlers.KNOBS[name], d[name])
    missing = set(handlers.CONTROLS) - set(c) - set(HEADLINE)
    if missing:
        raise RuntimeError(f"no widget placed for {sorted(missing)}")
    return sidebar, c


def _examples(query: gr.Textbox, words: corpus_words.CorpusWords) -> Examples:
    """The active corpus's example turns (the curated ones on the shipped cards; its labeled turns otherwise)."""
    samples, labels = corpus_words.example_samples(words)
    return gr.Examples(
        examples=samples or [[""]],
        inputs=[query],
        label="Examples (click to run)",
        example_labels=labels or ["(none)"],
        elem_id="examples",
        examples_per_page=corpus_words.MAX_EXAMPLES,
    )


def _corpus_changed(corpus: str | None, with_banner: bool = False) -> tuple[Any, ...]:
    """The session's corpus changed (Data tab, link): the turn box's label naming it and its placeholder, the
    examples, the hint, the tour and (``with_banner``) the banner, from one read of its words."""
    words = corpus_words.words_for(corpus)
    samples, labels = corpus_words.example_samples(words)
    return (
        gr.Dataset(samples=samples, sample_labels=labels or None),
        gr.Textbox(placeholder=words.placeholder, label=corpus_words.turn_label(words)),
        corpus_words.hint_html(words),
        *presenter.reset(words),
        *([corpus_words.banner(words)] if with_banner else []),
    )


def _tour_bar(words: corpus_words.CorpusWords) -> dict[str, Any]:
    """Presenter mode's tour: previous / the caption of this step / next (keys: ← → or PageUp / PageDown)."""
    t: dict[str, Any] = {}
    with gr.Row(equal_height=True, elem_id="tour-bar"):
        t["prev"] = gr.Button("◀ Back", elem_id="tour-prev", scale=0, min_width=90)
        t["caption"] = gr.HTML(
            presenter.caption_html(None, -1, len(presenter.tour_steps(words))), elem_id="tour-caption"
        )
        t["next"] = gr.Button("Next ▶", elem_id="tour-next", scale=0, min_width=90)
        t["exit"] = gr.Button("✕ Exit", elem_id="tour-exit", scale=0, min_width=80)
        # what the − and + keys click (never shown: head.css)
        t["k_down"] = gr.Button("RRF k −", elem_id="rrf-k-down", elem_classes=["key-only"], scale=0, min_width=0)
        t["k_up"] = gr.Button("RRF k +", elem_id="rrf-k-up", elem_classes=["key-only"], scale=0, min_width=0)
    t["index"] = gr.State(-1)
    return t


# Controls whose range is too wide for a slider get a number box; the rest follow their Knob's kind.
NUMBER_BOX_STEPS = 2000
ELEM_IDS = {"context_token_budget": "context-budget"}


def control_widget(spec: Knob, value: Any, **layout: Any) -> gr.components.Component:
    """The widget for one control, with the type, range, choices and label of its Settings field (``layout``:
    Gradio's scale / min_width)."""
    elem_id = ELEM_IDS.get(spec.name, spec.name.replace("_", "-"))
    common = dict(value=value, label=spec.label, elem_id=elem_id)
    common.update(layout)
    if spec.name == "embedding_model":
        return gr.Dropdown(handlers.model_choices(), **common)
    if spec.kind == "bool":
        return gr.Checkbox(**common)
    if spec.kind == "choice":
        return gr.Radio(list(spec.choices), **common)
    if spec.kind in {"int", "float"}:
        lo, hi = spec.bounds()
        step = spec.step or 1
        if (hi - lo) / step > NUMBER_BOX_STEPS:
            return gr.Number(minimum=lo, maximum=hi, step=step, precision=0 if spec.kind == "int" else None, **common)
        return gr.Slider(lo, hi, step=spec.step, **common)
    raise ValueError(f"no widget for control {spec.name!r} of kind {spec.kind!r}")


def _results() -> dict[str, Any]:
    """The first screen's results: the message, the level badge and the four columns (the rest: ``_details``)."""
    o: dict[str, Any] = {}
    o["message"] = gr.HTML("", elem_id="message")
    o["status"] = gr.HTML(badge.status_placeholder(), elem_id="hybrid-path")
    with gr.Column(elem_id="columns-wrap"):  # the container the columns' grid measures (style.css)
        with gr.Row(elem_id="columns", equal_height=False):
            for stage in handlers.STAGES:
                o[stage] = gr.HTML(render.placeholder(stage), elem_id=f"list-{stage}", min_width=0)
    return o


def _details(o: dict[str, Any]) -> None:
    """Below the columns: the charts, the explain view, the context and the export (added to ``o``)."""
    with gr.Column(elem_id="details", elem_classes=["no-present"]):
        with gr.Row(equal_height=True):
            o["rank_flow"] = gr.Plot(label="Rank flow", elem_id="chart-rank-flow")
            o["contributions"] = gr.Plot(label="RRF contributions", elem_id="chart-contributions")
        with gr.Row():
            o["k_sensitivity"] = gr.Plot(label="k sensitivity", elem_id="chart-k-sensitivity")
            with gr.Column():
                gr.Markdown("### Explain one document")
                o["explain_doc"] = gr.Dropdown(
                    choices=[], value=None, label="Document (sub-chunk)", elem_id="explain-doc", interactive=True
                )
                o["explain"] = gr.HTML(render.render_explain_placeholder(), elem_id="explain")
        gr.Markdown("### Context handed to the language model")
        o["context"] = gr.HTML(render.render_message("Run a turn to build the context.", "info"), elem_id="context")
        o["export"] = gr.DownloadButton("⬇ Export this turn (JSON)", value=None, elem_id="export", variant="secondary")
    o["last_turn"] = gr.State(None)
    missing = set(handlers.TurnView._fields) - set(o)
    if missing:
        raise RuntimeError(f"ui outputs missing for {sorted(missing)}")


def turn_seq_js(n: int) -> str:
    """The JS run in the page before a turn event with ``n`` inputs: its last input becomes the page's count of turn
    actions so far (``handlers.newest_only`` compares them). The function may also be given the outputs' values;
    only the first ``n`` are the inputs."""
    return (
        "(...values) => { window.__turnSeq = (window.__turnSeq || 0) + 1; "
        f"const inputs = values.slice(0, {n}); inputs[{n - 1}] = window.__turnSeq; return inputs; }}"
    )


# What every page event of a turn shares: one queue of four for turns (the streamed columns and the details below
# them), inputs typed by handlers.build_settings rather than Gradio, the badge's pending step as progress, no API.
TURN_QUEUE: dict[str, Any] = dict(
    concurrency_id="turn", concurrency_limit=4, preprocess=False, show_progress="hidden", api_visibility="private"
)


def _wire(
    query: gr.Textbox,
    run: gr.Button,
    examples: Examples,
    controls: dict[str, Any],
    o: dict[str, Any],
    corpus: gr.Textbox | None = None,
    tour: dict[str, Any] | None = None,
) -> turn_end.TurnEnd:
    """Wire the turn events; returns the event that ends each turn (its details, ``turn_end.TurnEnd``), which compare
    mode, the share link and the judgments follow (``follow``); ``wire`` it once they have.

    The newest action wins on the server alone (``handlers.newest_only``), by the page's count of actions each turn
    event carries: no Gradio ``cancels``. The page's cancel is asynchronous: it awaits one POST /cancel per running
    event and looks the next event up only then, so a cancel put before a control's re-run cancelled that very
    re-run once it had been submitted meanwhile (typing a k, then clicking Hybrid on, ended on the k's older result
    with Hybrid unticked, about 1 time in 8); and an event not yet given its id by the server was answered 422.

    A turn is two events: the badge and the four columns, streamed (``handlers.stream_turn``), then everything
    below them (``handlers.turn_details``, from the cache, and the followers). The ``run_turn`` API gives the turn
    in one call."""
    inputs = [query, *controls.values()]
    tail = [corpus] if corpus is not None else []
    # preprocess=False: every input is plain text, a number or a bool, and each control is typed by its Knob in
    # handlers.build_settings, so "NaN", "inf" or a list sent to a slider through the API gets that message instead
    # of Gradio's own comparison failing with a traceback (issue 19, defect 8)
    # trigger_mode "multiple" on every turn event, a control's re-run included: each action runs at once (the
    # server drops an older one's steps). Gradio's default ("once") dropped a Run made while the previous one was
    # still running; "always_last" deferred a control's re-run until that control's previous run ended, and a
    # deferred re-run could then start after a newer Run and replace it (tests/test_e2e_race.py). No progress
    # overlay: the badge's pending step is the turn's progress.
    seq = gr.Number(0, visible=False, elem_id="turn-seq")  # stamped by turn_seq_js: see handlers.newest_only

    def streamed(fn: Any, turn_inputs: list[Any], explained: bool) -> dict[str, Any]:  # a turn event's arguments
        return dict(
            fn=handlers.newest_only(fn, explained),
            inputs=[*turn_inputs, seq],
            js=turn_seq_js(len(turn_inputs) + 1),
            outputs=[o[name] for name in handlers.COLUMNS],
            trigger_mode="multiple",
            **TURN_QUEUE,
        )

    turn = streamed(handlers.stream_turn, [*inputs, *tail], explained=False)
    rerun = streamed(handlers.stream_rerun, [*inputs, o["explain_doc"], *tail], explained=True)
    end = turn_end.TurnEnd(handlers.turn_details, [*inputs, o["explain_doc"], *tail], [o[n] for n in handlers.DETAILS])
    events = end.follows

    def newest(trigger: Any, kw: dict[str, Any]) -> None:
        events.append(trigger(**kw))

    def then_turn(event: Any) -> None:  # an event that fills the turn box, then the turn
        events.append(event.then(**turn))

    # The API: the whole turn in one call (a hidden button: the page's Run streams, below)
    api = gr.Button(visible=False, elem_id="run-turn-api")
    api.click(
        handlers.run_turn,
        [*inputs, *tail],
        [o[name] for name in handlers.TurnView._fields],
        api_name="run_turn",
        concurrency_id="turn",
        concurrency_limit=4,
        preprocess=False,
    )
    # Streamed: BM25, dense and the fused list first, then the reranked column (handlers.stream_turn).
    newest(run.click, turn)
    newest(query.submit, turn)
    examples.load_input_event.then(corpus_words.caption_for, [query, *tail], o["hint"], api_visibility="private")
    then_turn(examples.load_input_event)
    if tour is not None:  # presenter mode: a step sets the turn and the step's controls, then runs the turn
        step_outputs = [tour["index"], query, tour["caption"], *(controls[n] for n in presenter.STEP_CONTROLS)]
        for button, direction in ((tour["prev"], -1), (tour["next"], 1)):
            then_turn(
                button.click(
                    functools.partial(presenter.step, direction),
                    [tour["index"], *tail],
                    step_outputs,
                    api_visibility="private",
                )
            )
        for button, direction in ((tour["k_down"], -1), (tour["k_up"], 1)):  # the − and + keys: RRF k, re-run
            nudged = button.click(
                functools.partial(presenter.nudge_k, direction=direction),
                controls["rrf_k"],
                controls["rrf_k"],
                api_visibility="private",
            )
            events.append(nudged.then(**rerun))
    for name, component in controls.items():
        if name == "embedding_model":  # its threshold is preselected first, then the turn re-runs
            changed = component.input(
                handlers.on_model_change, inputs=component, outputs=controls["min_similarity"], api_visibility="private"
            )
            events.append(changed.then(**rerun))
        elif isinstance(component, gr.Slider):
            newest(component.release, rerun)  # on release: dragging stays smooth
        elif isinstance(component, gr.Number):
            newest(component.submit, rerun)
            newest(component.blur, rerun)
        else:
            newest(component.input, rerun)
    o["explain_doc"].input(handlers.explain, [o["last_turn"], o["explain_doc"]], o["explain"], api_visibility="private")
    return end
