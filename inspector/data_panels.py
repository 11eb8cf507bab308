"""What every part of the Data tab shares: the registry and Settings it works on, the message panel, the progress
bar, the map's build state, the active corpus line, the picker's choices, and opening a corpus (its indexing job
started or joined)."""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr

from inspector import controls, render
from retrieval import projection, quotas
from retrieval.corpora import Registry
from retrieval.corpus_entries import SHIPPED
from retrieval.corpus_retrievers import is_ready
from retrieval.index_jobs import start_index
from retrieval.settings import Settings

log = logging.getLogger(__name__)


def get_registry() -> Registry:
    return Registry(controls.base_settings())


def get_settings() -> Settings:
    return controls.base_settings()


def picker_choices(active: str | None = None) -> list[tuple[str, str]]:
    """The picker's (label, name) of every corpus. The shipped cards and the session's ``active`` corpus are in use,
    so loaded (cached): their labels give their size, never "not loaded yet"."""
    registry = get_registry()
    out = []
    for entry in registry.entries():
        if not entry.chunks and entry.name in {SHIPPED, active or SHIPPED}:
            try:
                entry = registry.load(entry).entry
            except Exception:  # the label stays as the registry gives it; opening it reports the problem
                log.debug("corpus %s not loaded for its label", entry.name, exc_info=True)
        out.append((entry.label(), entry.name))
    return out


def message_html(text: str, kind: str = "error") -> str:
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


def map_html(snap: projection.MapStatus | None, corpus: str) -> str:
    """The map's line under the progress bar: the active corpus's map queued, being built (its stage and the
    sub-chunks done), ready (its points, when it was fitted) or failed (the reason); every value escaped."""
    name = f"<b>{render.esc(corpus)}</b>"
    if snap is None:
        return (
            f'<div class="map-progress idle">Map of {name}: not asked for in this app process yet (it is made '
            "after indexing, or with the corpus's first turn).</div>"
        )
    state = render.esc(snap.state)
    if snap.state == projection.READY:
        how = "loaded from the store" if snap.loaded else f"fitted here in {snap.elapsed_s:.1f} s"
        when = f", fitted {render.esc(snap.when)}" if snap.when else ""
        text = f"ready: {snap.points:,} points{when} ({how}), {render.esc(snap.model)}"
    elif snap.state == projection.FAILED:
        text = f"failed: {render.esc(snap.error)}. The lists are unaffected; the corpus's next turn tries again"
    elif snap.state == projection.QUEUED:
        text = f"queued: waits for another corpus's map to finish ({snap.total:,} sub-chunks)"
    else:
        count = f", {snap.done:,}/{snap.total:,} sub-chunks ({snap.fraction:.0%})" if snap.done else ""
        text = (
            f'building <progress max="{snap.total}" value="{snap.done}"></progress> '
            f"{render.esc(snap.stage)}{count}, {snap.elapsed_s:.0f} s so far"
        )
    return f'<div class="map-progress {state}" role="status">Map of {name}: {text}.</div>'


def map_poll(corpus: str | None) -> tuple[str, Any]:
    """The map's line for the session's corpus, and its timer: on while that map is queued or being built (a
    look-up in ``retrieval.projection``, no store read)."""
    name = corpus if isinstance(corpus, str) and corpus else SHIPPED
    snap = projection.status(name)
    busy = snap is not None and snap.state in (projection.QUEUED, projection.BUILDING)
    return map_html(snap, name), gr.Timer(active=busy)


def active_html(name: str | None) -> str:
    return f'<div class="active-corpus">Active corpus in this session: <b>{render.esc(name or SHIPPED)}</b></div>'


def begin(name: str, current: str | None) -> tuple:
    """Load (validate) a corpus and start or join its indexing job; switch at once if it is ready."""
    data = get_registry().open(name)
    quotas.touch(
        get_settings(), data.entry
    )  # opened: an upload no one opens for UPLOAD_IDLE_HOURS may give its place up
    if data.key is None or is_ready(data, get_settings()):
        return (
            message_html(f"Active corpus: {data.entry.label()}.", "info"),
            progress_html(None),
            name,
            None,
            gr.Timer(active=False),
        )
    job = start_index(data, get_settings())
    return (
        message_html(f"Indexing {data.entry.label()}; the inspector switches to it when the bar reaches 100%.", "info"),
        progress_html(job.snapshot()),
        current,
        name,
        gr.Timer(active=True),
    )
