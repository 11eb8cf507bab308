"""The Data tab: pick the session's active corpus (the shipped cards, corpora indexed before, BEIR folders under the
data root), upload one (validated before anything is indexed), watch its indexing progress, cancel, delete.

No retrieval logic: loading, validation, the registry and the indexing jobs live in ``retrieval.corpora`` and
``retrieval.formats``. The active corpus is per browser session: a hidden ``corpus`` box built in ``ui.build_app``
that the inspector's turns read; a session switches only once its corpus is indexed, and a failed upload changes
nothing.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

import gradio as gr

from inspector import handlers, render, uploads
from retrieval import quotas
from retrieval.corpora import Registry
from retrieval.corpus_entries import SHIPPED, owner_hash
from retrieval.corpus_retrievers import is_ready
from retrieval.encoders import BUNDLED_EMBEDDERS
from retrieval.formats import Limits, LoadError
from retrieval.index_jobs import job_for, start_index

log = logging.getLogger(__name__)

UPLOAD_TYPES = [".jsonl", ".json", ".csv", ".tsv", ".zip"]
POLL_S = 1.0


def _registry() -> Registry:
    return Registry(handlers.base_settings())


def _settings():
    return handlers.base_settings()


def picker_choices(active: str | None = None) -> list[tuple[str, str]]:
    """The picker's (label, name) of every corpus. The shipped cards and the session's ``active`` corpus are in use,
    so loaded (cached): their labels give their size, never "not loaded yet"."""
    registry = _registry()
    out = []
    for entry in registry.entries():
        if not entry.chunks and entry.name in {SHIPPED, active or SHIPPED}:
            try:
                entry = registry.load(entry).entry
            except Exception:  # the label stays as the registry gives it; opening it reports the problem
                log.debug("corpus %s not loaded for its label", entry.name, exc_info=True)
        out.append((entry.label(), entry.name))
    return out


def _message(text: str, kind: str = "error") -> str:
    """A message panel; multi-line problem lists keep their lines (escaped)."""
    lines = str(text).splitlines() or [""]
    head, rest = lines[0], lines[1:]
    body = render.esc(head) + (
        "<ul class='problems'>" + "".join(f"<li>{render.esc(x)}</li>" for x in rest) + "</ul>" if rest else ""
    )
    return f'<div class="message {kind}" role="status">{body}</div>'


def progress_html(snap: dict[str, Any] | None) -> str:
    """The progress bar: sub-chunks embedded / total, rate, time left and the job's status."""
    if not snap:
        return '<div class="index-progress idle">No indexing job running.</div>'
    pct = 100.0 * snap["fraction"]
    eta = f" · {snap['eta_s']:.0f} s left" if snap.get("eta_s") is not None and snap["status"] == "running" else ""
    rate = f" · {snap['rate']:.1f} sub-chunks/s" if snap.get("rate") else ""
    status = {"running": "indexing", "done": "ready", "cancelled": "cancelled", "failed": "failed"}[snap["status"]]
    return (
        f'<div class="index-progress {render.esc(snap["status"])}">'
        f'<progress max="{snap["total"]}" value="{snap["done"]}"></progress> '
        f'<span class="pct">{pct:.0f}%</span> <b>{render.esc(snap["name"])}</b>: {status}, '
        f"{snap['done']:,}/{snap['total']:,} sub-chunks embedded{rate}{eta}</div>"
    )


def active_html(name: str | None) -> str:
    return f'<div class="active-corpus">Active corpus in this session: <b>{render.esc(name or SHIPPED)}</b></div>'


# ------------------------------------------------------------------------------------------------ handlers
def _begin(name: str, current: str | None) -> tuple:
    """Load (validate) a corpus and start or join its indexing job; switch at once if it is ready."""
    data = _registry().open(name)
    quotas.touch(_settings(), data.entry)  # opened: an upload no one opens for UPLOAD_IDLE_HOURS may give its place up
    if data.key is None or is_ready(data, _settings()):
        return (
            _message(f"Active corpus: {data.entry.label()}.", "info"),
            progress_html(None),
            name,
            None,
            gr.Timer(active=False),
        )
    job = start_index(data, _settings())
    return (
        _message(f"Indexing {data.entry.label()}; the inspector switches to it when the bar reaches 100%.", "info"),
        progress_html(job.snapshot()),
        current,
        name,
        gr.Timer(active=True),
    )


def open_corpus(name: str | None, current: str | None) -> tuple:
    """The picker's Open: (message, progress, corpus, pending, timer)."""
    try:
        if not name:
            raise ValueError("Pick a corpus first.")
        return _begin(name, current)
    except (LoadError, ValueError, OSError) as exc:
        return _message(str(exc)), progress_html(None), current, None, gr.Timer(active=False)
    except Exception as exc:  # never a stack trace in the page; the log keeps it
        log.exception("opening corpus %r failed", name)
        return (
            _message(f"Could not open {name!r} ({type(exc).__name__}: {exc})."),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
        )


def upload_corpus(
    file: Any, name: str | None, current: str | None, token: str | None = None, request: gr.Request | None = None
) -> tuple:
    """Validate and register an uploaded file, then index it: (message, progress, corpus, pending, timer, picker,
    upload box emptied for the next file, the session's owner token). A file that does not validate changes nothing
    (the active corpus stays).

    The session's owner token (a secret made on its first upload, kept in its state, never shown) is stored hashed
    with the corpus: only this session may delete it (or change its refusal text) from the page."""
    token = token or secrets.token_urlsafe(24)
    address = getattr(getattr(request, "client", None), "host", None)
    return (*_upload(file, name, current, token, address), gr.File(value=None), token)


def _upload(file: Any, name: str | None, current: str | None, token: str, address: str | None = None) -> tuple:
    path = getattr(file, "name", file)
    keep_picker = gr.Dropdown()
    if not path:
        return (
            _message(
                "Choose a file to upload first. If you just chose one, wait until the box shows it "
                "uploaded (no 'Uploading' left), then press Add."
            ),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
            keep_picker,
        )
    if not isinstance(path, (str, os.PathLike)):  # a client may send anything: only an uploaded file's path is one
        return (
            _message("That is not an uploaded file: choose a file in the upload box, then press Add."),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
            keep_picker,
        )
    shown = Path(getattr(file, "orig_name", None) or path).name
    try:
        found = Path(path).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        found = False
    if not found:
        return (
            _message(
                f"{shown} is no longer on the server: an upload not indexed within "
                f"{Limits.from_env().upload_unused_s:g} s is deleted. Upload it again."
            ),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
            keep_picker,
        )
    try:
        data, new = _registry().add(
            path, (name or "").strip() or None, display=shown, copy=True, owner=token, address=address
        )
    except (LoadError, ValueError) as exc:
        return _message(str(exc)), progress_html(None), current, None, gr.Timer(active=False), keep_picker
    except Exception as exc:
        log.exception("upload %r failed", shown)
        return (
            _message(f"{shown}: could not be read ({type(exc).__name__}: {exc})."),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
            keep_picker,
        )
    finally:  # adopted (its cards read into the store) or refused: the upload itself is not kept
        uploads.discard(path)
    out = _begin(data.entry.name, current)
    note = "" if new else f" (same content as {data.entry.name}, indexed before: reused)"
    message = _message(
        f"{shown}: {data.entry.cards:,} cards, {data.entry.chunks:,} sub-chunks, "
        f"{data.entry.turns} labeled turns{note}. "
        + ("Indexing..." if out[3] else "Ready.")
        + "".join(f"\n{n}" for n in data.notes),
        "info",
    )
    return (message, *out[1:], gr.Dropdown(choices=picker_choices(data.entry.name), value=data.entry.name))


def poll(pending: str | None, current: str | None) -> tuple:
    """The timer's tick while a job runs: (message, progress, corpus, pending, timer)."""
    if not pending:
        return gr.skip(), gr.skip(), current, None, gr.Timer(active=False)
    try:
        data = _registry().open(pending)
    except Exception as exc:
        return _message(str(exc)), progress_html(None), current, None, gr.Timer(active=False)
    job = job_for(data, _settings())
    if job is None:
        return _message(f"No indexing job for {pending!r}."), progress_html(None), current, None, gr.Timer(active=False)
    snap = job.snapshot()
    if snap["status"] == "running":
        return gr.skip(), progress_html(snap), current, pending, gr.Timer(active=True)
    if snap["status"] == "done":
        return (
            _message(f"Active corpus: {data.entry.label()}.", "info"),
            progress_html(snap),
            pending,
            None,
            gr.Timer(active=False),
        )
    return (
        _message(
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
        return _message("No indexing job to cancel.", "info")
    try:
        job = job_for(_registry().open(pending), _settings())
    except (LoadError, ValueError, OSError) as exc:  # deleted meanwhile (its Delete leaves the pending job's name)
        return _message(f"{pending} is not being indexed: {exc}", "info")
    if job is not None and job.running:
        job.cancel.set()
        return _message(f"Cancelling {pending}: what is embedded so far is kept, and opening it again resumes.", "info")
    return _message(f"{pending} is not being indexed.", "info")


def delete(name: str | None, current: str | None, token: str | None = None) -> tuple:
    """Delete the picked corpus and its store, if this session uploaded it: (message, corpus, picker)."""
    try:
        if not name:
            raise ValueError("Pick a corpus to delete.")
        done = _registry().delete(name, token=token, page=True)
    except (ValueError, LoadError) as exc:
        return _message(str(exc)), current, gr.Dropdown()
    except Exception as exc:  # the store went away mid-way: a message, never a stack trace
        log.exception("deleting corpus %r failed", name)
        return _message(f"Could not delete {name!r} ({type(exc).__name__}: {exc})."), current, gr.Dropdown()
    now = SHIPPED if current == name else current
    return (
        _message(done[:1].upper() + done[1:] + ".", "info"),
        now,
        gr.Dropdown(choices=picker_choices(), value=SHIPPED),
    )


def attachable_choices() -> list[str]:
    """The store's collections made elsewhere, for the Attach picker (none if the store cannot be listed)."""
    from retrieval.attach import attachable

    if quotas.attach_refusal(_settings()):
        return []
    try:
        return attachable(_settings())
    except Exception as exc:
        log.warning("cannot list the store's collections: %s", exc)
        return []


def attach_collection(
    collection: str | None, model: str | None, text_field: str | None, current: str | None, token: str | None = None
) -> tuple:
    """Attach a collection made elsewhere (checked against the model; never written) and open it: (message,
    progress, corpus, pending, timer, picker, the session's owner token)."""
    from retrieval.corpora import attach

    token = token or secrets.token_urlsafe(24)
    keep = (progress_html(None), current, None, gr.Timer(active=False), gr.Dropdown(), token)
    try:
        refused = quotas.attach_refusal(_settings())
        if refused:
            raise ValueError(refused)
        if not collection:
            raise ValueError("Pick a collection of the store to attach.")
        if model and model not in handlers.model_choices():  # a name or path a client sent: never loaded
            raise ValueError(
                f"embedding model {str(model)[:80]!r} is not available here: choose one of "
                f"{', '.join(handlers.model_choices())}."
            )
        settings = _settings().replace(embedding_model=model) if model else _settings()
        quotas.check_own(settings, _registry()._records(strict=True), owner_hash(token), "")
        data, new = attach(settings, collection, text_field=(text_field or "").strip(), owner=token)
    except (LoadError, ValueError) as exc:
        return (_message(str(exc)), *keep)
    except Exception as exc:
        log.exception("attaching %r failed", collection)
        return (_message(f"Could not attach {collection!r} ({type(exc).__name__}: {exc})."), *keep)
    out = _begin(data.entry.name, current)
    note = "attached" if new else "attached before: reused"
    return (
        _message(
            f"{collection}: {data.entry.chunks:,} sub-chunks, {note}; its vectors match {data.entry.model}.", "info"
        ),
        *out[1:],
        gr.Dropdown(choices=picker_choices(data.entry.name), value=data.entry.name),
        token,
    )


def calibration_html(name: str | None) -> str:
    """The picked corpus's refusal calibration: its thresholds and what it refuses on held-out turns, per level
    (or that it runs, failed, or is not calibrated yet). Everything escaped."""
    from retrieval.corpus_retrievers import calibration_state

    try:
        data = _registry().open(name or SHIPPED)
        stored, job = calibration_state(data, _settings())
    except Exception as exc:
        return f'<div class="calibration">Refusal calibration: unavailable ({render.esc(str(exc))}).</div>'
    parts = []
    if job is not None and job.status == "queued":
        parts.append("<p>Waiting: another corpus is being calibrated (one at a time; press ↻ to update).</p>")
    elif job is not None and job.status == "running":
        parts.append(f"<p>Calibrating: {job.done}/{job.total or '?'} turns run (press ↻ to update).</p>")
    elif job is not None and job.status == "failed":
        parts.append(f"<p>The last calibration failed: {render.esc(job.error)}</p>")
    shown = stored or (job.result if job is not None and job.status == "done" else None)
    if shown is None:
        parts.append(
            "<p>"
            + (
                "The shipped cards use the defaults tuned on their dev sets (README, Refusal)."
                if data.key is None
                else "Not calibrated yet: the default thresholds apply."
            )
            + "</p>"
        )
    else:
        r = shown.report
        rows = "".join(
            f"<tr><td>{render.esc(level)}</td><td>{_frac(row['ood_held'])}</td><td>{_frac(row['answerable_held'])}"
            f"</td><td>{_frac(row['ood_fit'])}</td><td>{_frac(row['answerable_fit'])}</td></tr>"
            for level, row in r["levels"].items()
        )
        th = shown.thresholds.to_dict()
        knobs = ", ".join(f"{render.esc(k)}={render.esc(v)}" for k, v in th.items() if k != "source")
        note = " (a report only: the shipped cards keep their defaults)" if data.key is None else ""
        parts.append(
            f"<p>{render.esc(shown.thresholds.source)}{note}: {r['turns']} turns "
            f"({render.esc(r['answerable_origin'])} answerable turns and the out-of-domain pool), "
            f"{r['seconds']} s.</p><table><thead><tr><th>level</th><th>out-of-domain refused (held out)</th>"
            f"<th>false refusals (held out)</th><th>out-of-domain refused (fit)</th><th>false refusals "
            f"(fit)</th></tr></thead><tbody>{rows}</tbody></table><p class='thresholds'>{knobs}</p>"
        )
    return '<div class="calibration"><b>Refusal calibration</b>' + "".join(parts) + "</div>"


def _frac(pair: list[int]) -> str:
    k, n = pair
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "–"


def recalibrate(name: str | None, token: str | None = None) -> str:
    """Start calibrating the picked corpus again (in the background, one corpus at a time): only for a corpus this
    session uploaded or attached (``Registry.may_calibrate``); the panel says so."""
    from retrieval.corpus_retrievers import start_calibration

    try:
        registry = _registry()
        data = registry.load(registry.may_calibrate(name, token))
        if data.key is not None and not (is_ready(data, _settings())):
            raise ValueError(f"{data.entry.name} is not open in this app yet: open it (and let it index) first.")
        start_calibration(data, _settings())
    except (LoadError, ValueError) as exc:
        return _message(str(exc)) + calibration_html(name)
    except Exception as exc:
        log.exception("calibrating %r failed to start", name)
        return _message(f"Could not calibrate {name!r} ({type(exc).__name__}: {exc}).") + calibration_html(name)
    return calibration_html(name)


def refusal_of(name: str | None) -> str:
    """The refusal text kept with the picked corpus (the neutral default if none was set)."""
    try:
        return _registry().get(name).refusal
    except Exception:
        return ""


def save_refusal(name: str | None, text: str | None, token: str | None = None) -> tuple:
    """Keep the refusal text with the picked corpus, if this session uploaded it: (message, the text now kept)."""
    try:
        if not name:
            raise ValueError("Pick a corpus first.")
        done = _registry().set_refusal(name, text, token=token, page=True)
    except (ValueError, LoadError) as exc:
        return _message(str(exc)), gr.skip()
    except Exception as exc:
        log.exception("setting the refusal text of %r failed", name)
        return _message(f"Could not change {name!r} ({type(exc).__name__}: {exc})."), gr.skip()
    return _message(done[:1].upper() + done[1:] + ".", "info"), refusal_of(name)


def turn_choices(corpus: str | None) -> Any:
    """The inspector's example turns: the labeled turns of the session's corpus (hidden when it has none)."""
    try:
        data = _registry().open(corpus)
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
                value=_settings().embedding_model,
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
    timer.tick(poll, [pending, corpus], state_out, **private)
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
