"""Compare mode's panel in the inspector: compare on/off, the share link and its Copy button, B's preset and
controls, the relevance marks and the view, and the events that keep A vs B, the link and the export current.

The callbacks are ``inspector.compare_callbacks``', the view's HTML ``inspector.compare_render``'s, the link
``inspector.share_link``'s.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from inspector import handlers
from inspector.compare_callbacks import apply_preset, refresh, tick
from inspector.compare_render import CSS, compare_message
from inspector.share_link import COPY_JS, page_base, restore
from inspector.turn_end import TurnEnd
from retrieval.compare import PRESETS
from retrieval.settings import CONTROLS


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


def refresh_event(
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
    # preprocess=False, as the turn events (ui._wire): refresh types every control itself (compare_callbacks._typed,
    # build_settings), so "NaN", "abc" or a list sent to a slider gets a message instead of Gradio's processing error
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
    end: TurnEnd,
    corpus: Any,
) -> None:
    """Compare and link events. Every turn event (Run, Enter, an example, an A control) is followed by a refresh:
    A vs B re-rendered (only A re-runs, from the cache), the link, and the export stamped with that link. A B
    control or a preset re-runs only B, a tick only the marks; the link follows every change."""
    common = refresh_event(p, query, controls, outputs, corpus)
    again = dict(common, trigger_mode="always_last")
    end.follow(refresh, common["inputs"], common["outputs"])  # in the turn's own last event, on its new last_turn
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
    app: gr.Blocks,
    p: dict[str, Any],
    query: Any,
    controls: dict[str, Any],
    outputs: dict[str, Any],
    corpus: Any,
    search: gr.Textbox,
) -> None:
    """Opening a link restores the page's state (the session's corpus included), runs the turn (A) on it and, in
    compare mode, B.

    Only a page opened with a query string restores anything: the restore follows a change of ``search`` (the
    page's query string, ``share_link.page_search``), so a page without one runs none of its three events."""
    a_list, b_list = list(controls.values()), list(p["b"].values())
    app.load(page_base, None, p["base"], api_visibility="private")  # the share link's address, on every page
    restored = search.change(
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
    ).then(**refresh_event(p, query, controls, outputs, corpus, p["pending_doc"]))
