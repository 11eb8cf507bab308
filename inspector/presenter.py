"""Presenter mode: for a projector or a shared screen. Large type, the level badge and the four columns only (top_k
rows each, the consensus ★ and the rerank moves ▲▼ in large marks), and the active corpus's example turns as a
tour: → / PageDown / n steps forward, ← / PageUp / p back, Esc leaves; each step shows its one-line caption and
outlines the card to watch in every column. ``?present=1`` in a link opens the page in presenter mode.

The mode is a class on the page's ``<body>`` (``present``), set by the toggle in the browser: no server round trip,
and the page's state (turn, controls, compare, link) is untouched. The tour's steps come from
``inspector.corpus_words`` (the curated examples on the shipped cards, the labeled turns on any other corpus).
"""

from __future__ import annotations

import re
from typing import Any

import gradio as gr

from inspector import corpus_words, render
from inspector.corpus_words import Step

PRESENT_PARAM = "present"

# The toggle (and the link's ``present=1`` on load) set the body class; focus leaves the hidden turn box so the
# keys reach the tour.
TOGGLE_JS = """(on) => {
  document.body.classList.toggle('present', !!on);
  if (on && document.activeElement) { document.activeElement.blur(); }
  return [];
}"""
FROM_LINK_JS = """() => {
  const v = (new URLSearchParams(window.location.search).get('present') || '').toLowerCase();
  return ['1', 'true', 'yes', 'on'].includes(v);
}"""
EXIT_JS = "() => { document.body.classList.remove('present'); return false; }"
# Installed once per page (``launch(js=...)``): the tour's keys, only in presenter mode and never while typing.
KEYS_JS = """() => {
  document.addEventListener('keydown', (e) => {
    if (!document.body.classList.contains('present') || e.altKey || e.ctrlKey || e.metaKey) { return; }
    const t = e.target;
    const typing = t && (t.isContentEditable || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' ||
      (t.tagName === 'INPUT' && !['checkbox', 'radio', 'button'].includes((t.type || '').toLowerCase())));
    if (typing) { return; }
    const keys = {ArrowRight: 'tour-next', PageDown: 'tour-next', n: 'tour-next', ArrowLeft: 'tour-prev',
                  PageUp: 'tour-prev', p: 'tour-prev', Escape: 'tour-exit'};
    const button = keys[e.key] && document.getElementById(keys[e.key]);
    if (button) { e.preventDefault(); button.click(); }
  });
}"""

_CSS_SAFE_ID = re.compile(r"[A-Za-z0-9._:#-]{1,200}")


def caption_html(step: Step | None, index: int = -1, total: int = 0) -> str:
    """The tour's caption: which step, its one-line caption, and a style rule outlining the card to watch."""
    if step is None:
        if total:
            return (
                f'<div class="tour-caption">Presenter mode: press → (or Next) to start the tour of {total} '
                f"example turns · ← back · Esc leaves</div>"
            )
        return (
            '<div class="tour-caption">This corpus has no example turns to tour: type a turn and press Run '
            "(labeled turns become the tour).</div>"
        )
    watch = ""
    if step.card and _CSS_SAFE_ID.fullmatch(step.card):  # the id is data: only a plain id goes into a selector
        watch = (
            f'<style>#columns .hit[data-parent="{step.card}"] {{ outline: 5px solid #ffb000; '
            f"outline-offset: 1px; }}</style>"
        )
        card = f' · watch <b class="watch">{render.esc(step.card)}</b>'
    else:
        card = ""
    return (
        f'<div class="tour-caption" data-step="{index + 1}"><span class="tour-count">{index + 1}/{total}</span> '
        f"<b>{render.esc(step.label)}</b>: {render.esc(step.caption)}{card}</div>{watch}"
    )


def step(direction: int, index: Any, corpus: str | None = None) -> tuple[int, Any, str]:
    """One step of the tour from ``index`` (-1 = not started) in ``direction`` (+1 or -1), wrapping around: the new
    index, the turn for the turn box (which the page then runs) and the caption."""
    steps = corpus_words.words_for(corpus).steps
    if not steps:
        return -1, gr.skip(), caption_html(None)
    current = index if isinstance(index, int) else -1
    new = (current + direction) % len(steps) if current >= 0 else (0 if direction > 0 else len(steps) - 1)
    return new, steps[new].text, caption_html(steps[new], new, len(steps))


def reset(words: corpus_words.CorpusWords) -> tuple[int, str]:
    """The corpus changed (its ``words`` read once by the caller): the tour starts again from its first step."""
    return -1, caption_html(None, -1, len(words.steps))


def wire(tour: dict[str, Any], present: gr.Checkbox) -> None:
    """The toggle and the Exit button (the steps are turn events, wired with the page's turn events)."""
    present.change(None, present, None, js=TOGGLE_JS)
    tour["exit"].click(None, None, present, js=EXIT_JS)


def wire_load(app: gr.Blocks, present: gr.Checkbox) -> None:
    """``?present=1`` in the page's address opens presenter mode."""
    app.load(None, None, present, js=FROM_LINK_JS)
