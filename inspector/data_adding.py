"""Adding a corpus from the Data tab: an uploaded file validated, registered and indexed, or a collection of the
store made elsewhere attached; either is owned by the session that added it."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

import gradio as gr

from inspector import controls, uploads
from inspector.data_panels import begin, get_registry, get_settings, message_html, picker_choices, progress_html
from retrieval import quotas
from retrieval.corpus_entries import owner_hash
from retrieval.formats import Limits, LoadError

log = logging.getLogger(__name__)


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
            message_html(
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
            message_html("That is not an uploaded file: choose a file in the upload box, then press Add."),
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
            message_html(
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
        data, new = get_registry().add(
            os.fspath(path), (name or "").strip() or None, display=shown, copy=True, owner=token, address=address
        )
    except (LoadError, ValueError) as exc:
        return message_html(str(exc)), progress_html(None), current, None, gr.Timer(active=False), keep_picker
    except Exception as exc:
        log.exception("upload %r failed", shown)
        return (
            message_html(f"{shown}: could not be read ({type(exc).__name__}: {exc})."),
            progress_html(None),
            current,
            None,
            gr.Timer(active=False),
            keep_picker,
        )
    finally:  # adopted (its cards read into the store) or refused: the upload itself is not kept
        uploads.discard(path)
    out = begin(data.entry.name, current)
    note = "" if new else f" (same content as {data.entry.name}, indexed before: reused)"
    message = message_html(
        f"{shown}: {data.entry.cards:,} cards, {data.entry.chunks:,} sub-chunks, "
        f"{data.entry.turns} labeled turns{note}. "
        + ("Indexing..." if out[3] else "Ready.")
        + "".join(f"\n{n}" for n in data.notes),
        "info",
    )
    return (message, *out[1:], gr.Dropdown(choices=picker_choices(data.entry.name), value=data.entry.name))


def attachable_choices() -> list[str]:
    """The store's collections made elsewhere, for the Attach picker (none if the store cannot be listed)."""
    from retrieval.attach import attachable

    if quotas.attach_refusal(get_settings()):
        return []
    try:
        return attachable(get_settings())
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
        refused = quotas.attach_refusal(get_settings())
        if refused:
            raise ValueError(refused)
        if not collection:
            raise ValueError("Pick a collection of the store to attach.")
        if model and model not in controls.model_choices():  # a name or path a client sent: never loaded
            raise ValueError(
                f"embedding model {str(model)[:80]!r} is not available here: choose one of "
                f"{', '.join(controls.model_choices())}."
            )
        settings = get_settings().replace(embedding_model=model) if model else get_settings()
        quotas.check_own(settings, get_registry()._records(strict=True), owner_hash(token), "")
        data, new = attach(settings, collection, text_field=(text_field or "").strip(), owner=token)
    except (LoadError, ValueError) as exc:
        return (message_html(str(exc)), *keep)
    except Exception as exc:
        log.exception("attaching %r failed", collection)
        return (message_html(f"Could not attach {collection!r} ({type(exc).__name__}: {exc})."), *keep)
    out = begin(data.entry.name, current)
    note = "attached" if new else "attached before: reused"
    return (
        message_html(
            f"{collection}: {data.entry.chunks:,} sub-chunks, {note}; its vectors match {data.entry.model}.", "info"
        ),
        *out[1:],
        gr.Dropdown(choices=picker_choices(data.entry.name), value=data.entry.name),
        token,
    )
