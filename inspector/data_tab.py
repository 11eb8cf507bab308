"""The Data tab: its layout, and picking the session's active corpus (the shipped cards, corpora indexed before, BEIR
folders under the data root), watching its indexing progress, cancelling, deleting (adding a corpus:
``inspector.data_adding``; the refusal panel: ``inspector.data_refusal``).

No retrieval logic: loading, validation, the registry and the indexing jobs live in ``retrieval.corpora`` and
``retrieval.formats``. The active corpus is per browser session: a hidden ``corpus`` box built in ``ui.build_app``
that the inspector's turns read; a session switches only once its corpus is indexed, and a failed upload changes
nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr

from inspector import render
from inspector.data_adding import attach_collection, attachable_choices, upload_corpus
from inspector.data_panels import (
    active_html,
    begin,
    get_registry,
    get_settings,
    map_html,
    map_poll,
    message_html,
    picker_choices,
    progress_html,
)
from inspector.data_refusal import calibration_html, recalibrate, refusal_of, save_refusal
from retrieval.corpus_entries import SHIPPED
from retrieval.encoders import BUNDLED_EMBEDDERS
from retrieval.formats import Limits, LoadError
from retrieval.index_jobs import job_for

log = logging.getLogger(__name__)

UPLOAD_TYPES = [".jsonl", ".json", ".csv", ".tsv", ".zip"]
POLL_S = 1.0


def open_corpus(name: str | None, current: str | None) -> tuple:
    """The picker's Open: (message, progress, corpus, pending, timer)."""
    try:
        if not name:
            raise ValueError("Pick a corpus first.")
        return begin(name, current)
    except (LoadError, ValueError, OSError) as exc:
        return message_html(str(exc)), progress_html(None), current, None, gr.Timer(active=False)
    except Exception as exc:  # never a stack trace in the page; the log keeps it
        log.exception("opening corpus %r failed", name)
        return (
            message_html(f"Could not open {name!r} ({type(exc).__name__}: {exc})."),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
        )


def poll(pending: str | None, current: str | None) -> tuple:
    """The timer's tick while a job runs: (message, progress, corpus, pending, timer)."""
    if not pending:
        return gr.skip(), gr.skip(), current, None, gr.Timer(active=False)
    try:
        data = get_registry().open(pending)
    except Exception as exc:
        return message_html(str(exc)), progress_html(None), current, None, gr.Timer(active=False)
    job = job_for(data, get_settings())
    if job is None:
        return (
            message_html(f"No indexing job for {pending!r}."),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
        )
    snap = job.snapshot()
    if snap["status"] == "running":
        return gr.skip(), progress_html(snap), current, pending, gr.Timer(active=True)
    if snap["status"] == "done":
        return (
            message_html(f"Active corpus: {data.entry.label()}.", "info"),
            progress_html(snap),
            pending,
            None,
            gr.Timer(active=False),
        )
    return (
        message_html(
            f"Indexing {pending} {snap['status']} at {snap['done']:,} of {snap['total']:,}: {snap['error']}. "
            "What was embedded is kept: press Open to resume."
        ),
        progress_html(snap),
        current,
        None,
        gr.Timer(active=False),
    )


def cancel(pending: str | None) -> str:
    if not pending:
        return message_html("No indexing job to cancel.", "info")
    try:
        job = job_for(get_registry().open(pending), get_settings())
    except (LoadError, ValueError, OSError) as exc:  # deleted meanwhile (its Delete leaves the pending job's name)
        return message_html(f"{pending} is not being indexed: {exc}", "info")
    if job is not None and job.running:
        job.cancel.set()
        return message_html(
            f"Cancelling {pending}: what is embedded so far is kept, and opening it again resumes.", "info"
        )
    return message_html(f"{pending} is not being indexed.", "info")


def delete(name: str | None, current: str | None, token: str | None = None) -> tuple:
    """Delete the picked corpus and its store, if this session uploaded it: (message, corpus, picker)."""
    try:
        if not name:
            raise ValueError("Pick a corpus to delete.")
        done = get_registry().delete(name, token=token, page=True)
    except (ValueError, LoadError) as exc:
        return message_html(str(exc)), current, gr.Dropdown()
    except Exception as exc:  # the store went away mid-way: a message, never a stack trace
        log.exception("deleting corpus %r failed", name)
        return message_html(f"Could not delete {name!r} ({type(exc).__name__}: {exc})."), current, gr.Dropdown()
    now = SHIPPED if current == name else current
    return (
        message_html(done[:1].upper() + done[1:] + ".", "info"),
        now,
        gr.Dropdown(choices=picker_choices(), value=SHIPPED),
    )


def turn_choices(corpus: str | None) -> Any:
    """The inspector's example turns: the labeled turns of the session's corpus (hidden when it has none)."""
    try:
        data = get_registry().open(corpus)
    except Exception:
        return gr.Dropdown(choices=[], value=None, visible=False)
    turns = [(f"{q.id}: {q.text[:90]}", q.text) for q in data.queries[:500]]
    return gr.Dropdown(
        choices=turns,
        value=None,
        visible=bool(turns),
        label=f"Labeled turns of {data.entry.name} ({len(data.queries)})",
    )


# ------------------------------------------------------------------------------------------------ layout
def turn_picker(query: gr.Textbox, corpus: gr.Textbox) -> gr.Dropdown:
    """In the inspector tab: a dropdown of the active corpus's labeled turns; picking one fills the turn box."""
    picker = gr.Dropdown(
        choices=[],
        value=None,
        label="Labeled turns of the active corpus",
        visible=False,
        elem_id="corpus-turns",
        interactive=True,
    )
    corpus.change(turn_choices, corpus, picker, api_visibility="private")
    picker.input(lambda text: text or gr.skip(), picker, query, api_visibility="private")
    return picker


def build_data_tab(corpus: gr.Textbox, owner: gr.State | None = None) -> None:
    """The Data tab's layout and wiring; ``corpus`` is the session's active corpus and ``owner`` its owner token
    (both built in ``ui.build_app``)."""
    limits = Limits.from_env()
    gr.Markdown(
        "### Your own data\nPick the corpus this browser session inspects, or upload one: cards JSONL "
        "(`id`, `text`; `title`, `lang`, `topic` optional), a BEIR `corpus.jsonl` or a .zip of a BEIR "
        "folder (with `queries.jsonl` + `qrels/` its labeled turns appear as examples), CSV/TSV with "
        "`id`, `text` (`title` optional) columns, separated by `,` or `;`, or a .zip of .txt/.md files (one "
        "card per file). UTF-8 (a byte-order mark is fine). Limits: " + render.esc(limits.describe()) + "."
    )
    active = gr.HTML(active_html(None), elem_id="active-corpus")
    pending = gr.State(None)
    owner = owner if owner is not None else gr.State(None)  # the session's owner token: made on first use, never shown
    with gr.Row(equal_height=True):
        picker = gr.Dropdown(
            choices=picker_choices(),
            value=SHIPPED,
            label="Corpus (pick, or type a name)",
            elem_id="corpus-picker",
            scale=4,
            interactive=True,
            allow_custom_value=True,
        )
        open_btn = gr.Button("Open", variant="primary", elem_id="corpus-open", scale=1)
        refresh = gr.Button("↻ Refresh list", elem_id="corpus-refresh", scale=1)
        delete_btn = gr.Button("Delete corpus and its store", variant="stop", elem_id="corpus-delete", scale=1)
    with gr.Row(equal_height=True):
        upload = gr.File(label="Upload a corpus", file_types=UPLOAD_TYPES, elem_id="corpus-upload", scale=4)
        with gr.Column(scale=2):
            with gr.Row(equal_height=True):
                name = gr.Textbox(label="Name (optional)", elem_id="corpus-name", max_lines=1, scale=3, min_width=120)
                add = gr.Button("Validate and index", variant="primary", elem_id="corpus-add", scale=2, min_width=120)
            # Where one looks after dropping a file: its validation errors, the indexing progress and the success,
            # beside the drop zone, in the first screen at 1280x720 (they were at y=990, below the calibration).
            message = gr.HTML("", elem_id="data-message")
            progress = gr.HTML(progress_html(None), elem_id="index-progress")
            # the map is built after indexing (retrieval.projection): its state for the session's corpus
            map_state = gr.HTML(map_html(None, SHIPPED), elem_id="map-progress")
            cancel_btn = gr.Button("Cancel indexing", elem_id="index-cancel", size="sm")
    with gr.Row(equal_height=True):
        refusal = gr.Textbox(
            label="Refusal text of the picked corpus (what the assistant says when it finds nothing)",
            elem_id="corpus-refusal",
            max_lines=3,
            scale=4,
            value=refusal_of(SHIPPED),
            max_length=2000,
        )
        refusal_btn = gr.Button("Save refusal text", elem_id="corpus-refusal-save", scale=1)
    with gr.Row(equal_height=True):
        calibration = gr.HTML(calibration_html(SHIPPED), elem_id="corpus-calibration")
        with gr.Column(scale=0, min_width=200):
            calibrate_btn = gr.Button("Re-run refusal calibration", elem_id="corpus-calibrate")
            calibration_refresh = gr.Button("↻ Refusal report", elem_id="corpus-calibration-refresh")
    with gr.Accordion(
        "Attach a collection of the store made elsewhere (its vectors are checked, never rewritten)", open=False
    ):
        with gr.Row(equal_height=True):
            collections = gr.Dropdown(
                choices=[], label="Collection", elem_id="attach-collection", scale=3, interactive=True
            )
            model = gr.Dropdown(
                choices=list(BUNDLED_EMBEDDERS),
                value=get_settings().embedding_model,
                label="Its embedding model",
                elem_id="attach-model",
                scale=2,
                interactive=True,
                allow_custom_value=True,
            )
            text_field = gr.Textbox(
                label="Text field (default: documents)", elem_id="attach-text-field", max_lines=1, scale=2
            )
            attach_btn = gr.Button("Attach", elem_id="attach-go", scale=1)
    timer = gr.Timer(POLL_S, active=False)
    map_timer = gr.Timer(POLL_S, active=False)  # on while the session's corpus's map is queued or being built
    private: dict[str, Any] = dict(api_visibility="private")
    state_out = [message, progress, corpus, pending, timer]
    open_btn.click(open_corpus, [picker, corpus], state_out, **private)
    add.click(
        upload_corpus,
        [upload, name, corpus, owner],
        [*state_out, picker, upload, owner],
        concurrency_limit=2,
        **private,
    )
    timer.tick(poll, [pending, corpus], state_out, **private).then(map_poll, corpus, [map_state, map_timer], **private)
    map_timer.tick(map_poll, corpus, [map_state, map_timer], **private)
    cancel_btn.click(cancel, pending, message, **private)
    delete_btn.click(delete, [picker, corpus, owner], [message, corpus, picker], **private)
    picker.change(refusal_of, picker, refusal, **private)
    picker.change(calibration_html, picker, calibration, **private)
    calibrate_btn.click(recalibrate, [picker, owner], calibration, **private)
    calibration_refresh.click(calibration_html, picker, calibration, **private)
    attach_btn.click(
        attach_collection, [collections, model, text_field, corpus, owner], [*state_out, picker, owner], **private
    )
    refusal_btn.click(save_refusal, [picker, refusal, owner], [message, refusal], **private)
    refresh.click(
        lambda active: (gr.Dropdown(choices=picker_choices(active)), gr.Dropdown(choices=attachable_choices())),
        corpus,
        [picker, collections],
        **private,
    )
    corpus.change(active_html, corpus, active, **private)
    corpus.change(map_poll, corpus, [map_state, map_timer], **private)
    # the corpus now in use is loaded: the picker gives its size (it said "not loaded yet" for the corpus in use)
    corpus.change(lambda c: gr.Dropdown(choices=picker_choices(c)), corpus, picker, **private)
    root = gr.context.Context.root_block  # each page load lists the corpora indexed since the app started
    if root is not None:
        root.load(
            lambda: (gr.Dropdown(choices=picker_choices()), gr.Dropdown(choices=attachable_choices())),
            None,
            [picker, collections],
            **private,
        )
        root.load(map_poll, corpus, [map_state, map_timer], **private)
