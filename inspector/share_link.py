"""The link that reopens a case: ``share_link`` encodes the turn, A, B, compare mode, the explained document and
the session's corpus; ``restore`` puts a link's state back into the widgets, ``link_corpus`` reopens its corpus."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import gradio as gr

from inspector import handlers, render, state
from retrieval.corpora import Registry
from retrieval.corpus import CorpusError
from retrieval.corpus_turns import open_within
from retrieval.formats import LoadError
from retrieval.settings import CONTROLS

LINK_WAIT_S = 30.0  # how long opening a link waits for its corpus's store to open (a store on disk takes seconds)


COPY_JS = """(link) => {
  const text = link || "";
  if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text); }
  else { const t = document.querySelector('#share-link textarea, #share-link input');
         if (t) { t.select(); document.execCommand('copy'); } }
  return [];
}"""


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


def restore(request: gr.Request) -> list[Any]:
    """A page opened with a query string: the link's state into the widgets (turn, A, compare, B, the session's
    corpus), problems into the message area (the page's base address is ``page_base``'s, on every page).

    Returns, in order: the turn, A's controls, compare on/off, B's controls, the panel's visibility, the
    message, the document to explain, the session's corpus and B's preset."""
    referer = (dict(request.headers or {}) if request is not None else {}).get("referer") or ""
    if "?" in referer:
        params = state.parse_query_string(urlsplit(referer).query)
    else:
        params = list(dict(request.query_params or {}).items()) if request is not None else []
    params = [(k, v) for k, v in params if not k.startswith("__")]  # gradio's own (e.g. __theme)
    if not params:
        return [gr.skip()] * (2 + 2 * len(CONTROLS)) + [gr.skip(), "", None, gr.skip(), gr.skip()]
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


def page_search(app: gr.Blocks) -> gr.Textbox:
    """A hidden box that a script fills with the page's query string once the page has loaded: the events that read
    a link (its state, a class link) follow its change, so a page opened without a query string runs none of them.
    Every output of an event that ran stays in Gradio 6's list of components with a status for the page's life,
    and the page deep-copies each of them at every status change of any later event: the link's three events
    alone put 61 components there, copied ~11 times per turn."""
    search = gr.Textbox("", visible=False, elem_id="page-search")
    app.load(None, None, search, js="() => window.location.search")
    return search


def page_base(request: gr.Request) -> str:
    """Page load: the page's address without its query string (what a share link starts with)."""
    return _base(dict(request.headers or {}) if request is not None else {})


def _base(headers: Mapping[str, str]) -> str:
    """The page's address without its query string, from the request's Referer (else its Host)."""
    referer = headers.get("referer") or ""
    if referer.startswith(("http://", "https://")):
        return referer.split("?", 1)[0].split("#", 1)[0]
    host = headers.get("host")
    return f"http://{host}/" if host else ""
