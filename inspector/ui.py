"""Layout and wiring of the inspector. No retrieval logic: every event calls a function of ``inspector.handlers``.

``build_app()`` returns the Blocks; launch it with ``launch_options()`` (CSS and theme moved to ``launch()`` in
Gradio 6), as ``app.py`` does.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from inspector import handlers, render
from inspector.examples import EXAMPLES

log = logging.getLogger(__name__)

CSS = (Path(__file__).with_name("style.css")).read_text(encoding="utf-8")
HEADER = ('<div class="banner"><h1>Hybrid retrieval inspector</h1>'
          '<span class="warn">100% synthetic data · not a medical device · not medical advice</span>'
          '<span class="sub">BM25 + dense (Chroma) → Reciprocal Rank Fusion → cross-encoder rerank, one turn at a '
          "time (ADR-0022)</span></div>")
# Tabs another engineer adds later: (tab title, module, builder). A module that does not exist yet is skipped.
OPTIONAL_TABS = (
    ("RRF classroom", "inspector.classroom", "build_classroom_tab"),
    ("Evaluation", "inspector.evaluation_tab", "build_evaluation_tab"),
)


def launch_options() -> dict[str, Any]:
    """Keyword arguments for ``Blocks.launch``: the inspector's CSS and a theme with local fonts only."""
    theme = gr.themes.Default(primary_hue="blue", neutral_hue="slate",
                              font=["ui-sans-serif", "system-ui", "sans-serif"],
                              font_mono=["ui-monospace", "Consolas", "monospace"])
    return {"css": CSS, "theme": theme}


def build_app() -> gr.Blocks:
    """The whole page: the Inspector tab, then the optional tabs whose modules exist."""
    with gr.Blocks(title="Hybrid retrieval inspector", fill_width=True, analytics_enabled=False) as app:
        gr.HTML(HEADER, elem_id="banner")
        with gr.Tabs():
            with gr.Tab("Inspector", id="inspector"):
                build_inspector_tab()
            for title, module, builder in OPTIONAL_TABS:
                _optional_tab(title, module, builder)
    return app


def _optional_tab(title: str, module_name: str, builder_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return  # not built yet
        module, error = None, exc
    except Exception as exc:  # a broken extra tab must not take the inspector down
        module, error = None, exc
    with gr.Tab(title):
        try:
            if module is None:
                raise error
            builder: Callable[[], Any] = getattr(module, builder_name)
            builder()
        except Exception as exc:
            log.exception("tab %r failed to build", title)
            gr.HTML(render.render_message(f"The {title} tab could not be built ({type(exc).__name__}: {exc})."))


# ------------------------------------------------------------------------------------------------ the tab
def build_inspector_tab() -> None:
    """Create and wire the inspector inside the current Blocks/Tab context."""
    query, run = _turn_row()
    examples = _examples(query)
    controls = _controls()
    outputs = _results()
    _wire(query, run, examples, controls, outputs)


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


def _controls() -> dict[str, gr.components.Component]:
    d = handlers.default_controls()
    c: dict[str, gr.components.Component] = {}
    with gr.Accordion("Controls (changes re-run the turn from cache: no model runs unless a branch list changes)",
                      open=True):
        with gr.Row():
            c["rrf_k"] = gr.Slider(1, max(200, d["rrf_k"]), value=d["rrf_k"], step=1, label="RRF k: Σ w/(k+rank)",
                                   elem_id="rrf-k")
            c["top_k"] = gr.Slider(1, max(20, d["top_k"]), value=d["top_k"], step=1, label="top_k (cards)",
                                   elem_id="top-k")
            c["candidate_multiplier"] = gr.Slider(1, max(20, d["candidate_multiplier"]), step=1,
                                                  value=d["candidate_multiplier"], elem_id="candidate-multiplier",
                                                  label="Branch depth (× top_k)")
            c["reranker_max_input"] = gr.Slider(0, max(60, d["reranker_max_input"]), step=1,
                                                value=d["reranker_max_input"], elem_id="reranker-max-input",
                                                label="Rerank max input (0=off)")
            c["min_similarity"] = gr.Slider(-0.2, 1.0, step=0.01, value=d["min_similarity"],
                                            elem_id="min-similarity", label="Min similarity (cos)")
        with gr.Row():
            c["bm25_weight"] = gr.Slider(0, 5, step=0.1, value=d["bm25_weight"], label="BM25 weight",
                                         elem_id="bm25-weight")
            c["dense_weight"] = gr.Slider(0, 5, step=0.1, value=d["dense_weight"], label="Dense weight",
                                          elem_id="dense-weight")
            c["embedding_model"] = gr.Dropdown(handlers.model_choices(), value=d["embedding_model"],
                                               label="Embedding model (sets its own min similarity)",
                                               elem_id="embedding-model")
            c["context_token_budget"] = gr.Slider(50, max(3000, d["context_token_budget"]), step=50,
                                                  value=d["context_token_budget"], elem_id="context-budget",
                                                  label="Context token budget")
        with gr.Row():
            c["hybrid_enabled"] = gr.Checkbox(value=d["hybrid_enabled"], label="Hybrid on (off = legacy dense only)",
                                              elem_id="hybrid-enabled")
            c["simulate_reranker_failure"] = gr.Checkbox(value=d["simulate_reranker_failure"],
                                                         label="Simulate a reranker load failure",
                                                         elem_id="simulate-reranker-failure")
            c["simulate_empty_bm25"] = gr.Checkbox(value=d["simulate_empty_bm25"], label="Simulate an empty BM25 index",
                                                   elem_id="simulate-empty-bm25")
        with gr.Row():
            c["bm25_tokenizer"] = gr.Radio(list(handlers.CHOICES["bm25_tokenizer"]), value=d["bm25_tokenizer"],
                                           label="BM25 tokens (snowball = stemmed per language)",
                                           elem_id="bm25-tokenizer")
            c["fusion"] = gr.Radio(list(handlers.CHOICES["fusion"]), value=d["fusion"],
                                   label="Fusion (rrf = ranks; convex = min-max scores)", elem_id="fusion")
            c["query_weighting"] = gr.Radio(list(handlers.CHOICES["query_weighting"]), value=d["query_weighting"],
                                            label="Query-aware weights (codes/units lean to BM25)",
                                            elem_id="query-weighting")
            c["rerank_mode"] = gr.Radio(list(handlers.CHOICES["rerank_mode"]), value=d["rerank_mode"],
                                        label="Rerank (rrf = blend with fused order; replace)", elem_id="rerank-mode")
            c["rerank_weight"] = gr.Slider(0, 3, step=0.1, value=d["rerank_weight"], elem_id="rerank-weight",
                                           label="Cross-encoder weight in the blend")
    return {name: c[name] for name in handlers.CONTROLS}


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


def _wire(query: gr.Textbox, run: gr.Button, examples: gr.Examples, controls: dict[str, Any],
          o: dict[str, Any]) -> None:
    inputs = [query, *controls.values()]
    outputs = [o[name] for name in handlers.TurnView._fields]
    turn = dict(inputs=inputs, outputs=outputs, concurrency_id="turn", concurrency_limit=4)
    run.click(handlers.run_turn, api_name="run_turn", **turn)
    query.submit(handlers.run_turn, api_visibility="private", **turn)
    examples.load_input_event.then(handlers.run_turn, api_visibility="private", **turn)
    rerun = dict(turn, inputs=[*inputs, o["explain_doc"]], api_visibility="private", trigger_mode="always_last")
    for name, component in controls.items():
        if name == "embedding_model":
            component.input(handlers.on_model_change, component, controls["min_similarity"],
                            api_visibility="private").then(handlers.rerun_turn, **rerun)
        elif isinstance(component, gr.Slider):
            component.release(handlers.rerun_turn, **rerun)  # on release: dragging stays smooth
        else:
            component.input(handlers.rerun_turn, **rerun)
    o["explain_doc"].input(handlers.explain, [o["last_turn"], o["explain_doc"]], o["explain"],
                           api_visibility="private")
