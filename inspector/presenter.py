"""Presenter mode: for a projector or a shared screen. Large type; a compact bar with the turn box, Run and the three
headline controls (RRF k, Hybrid on, Reranker fails); the level badge and the four columns (top_k rows each, the
consensus ★ and the rerank moves ▲▼ in large marks); and the active corpus's example turns as a tour, with two
steps that switch hybrid off (``dense_only``) and simulate the reranker failure (``rrf_only``) and a step that
restores them. Each step shows its one-line caption, names the card to watch by its title and outlines it in every
column. ``?present=1`` in a link opens the page in presenter mode.

Keys (``KEYS``, shown in the tour bar; ignored while typing in a box): → / PageDown / n next step, ← / PageUp / p
previous, h Hybrid on/off, f Reranker fails on/off, + / − the next RRF k of ``K_STOPS``, / the turn box, r Run,
Esc leaves.

The mode is a class on the page's ``<body>`` (``present``), set by the toggle in the browser: no server round trip,
and the page's state (turn, controls, compare, link) is untouched. The tour's steps come from
``inspector.corpus_words`` (the curated examples on the shipped cards, the labeled turns on any other corpus).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
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
# Installed once per page (``launch(js=...)``): the keys, only in presenter mode and never while typing. A key clicks
# the page's own control (a checkbox, Run, a tour button, a hidden RRF k button), so it runs what a click runs.
KEYS_JS = """() => {
  document.addEventListener('keydown', (e) => {
    if (!document.body.classList.contains('present') || e.altKey || e.ctrlKey || e.metaKey) { return; }
    const t = e.target;
    const typing = t && (t.isContentEditable || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' ||
      (t.tagName === 'INPUT' && !['checkbox', 'radio', 'button', 'range'].includes((t.type || '').toLowerCase())));
    if (typing) { return; }
    const keys = {ArrowRight: '#tour-next', PageDown: '#tour-next', n: '#tour-next', ArrowLeft: '#tour-prev',
                  PageUp: '#tour-prev', p: '#tour-prev', Escape: '#tour-exit', h: '#hybrid-enabled input',
                  f: '#simulate-reranker-failure input', '+': '#rrf-k-up', '=': '#rrf-k-up', '-': '#rrf-k-down',
                  '_': '#rrf-k-down', r: '#run', '/': '#query textarea'};
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    const target = keys[key] && document.querySelector(keys[key]);
    if (!target) { return; }
    e.preventDefault();
    if (key === '/') { target.focus(); } else { target.click(); }
  });
  // The columns share the first screen with the map (head.css, section 4): on a screen at least 640 px tall each
  // column is capped at --col-cap, the screen left after a peek of the map (30% of it, at least 230 px), never less
  // than the column's first card (its rank and title) needs; the rest of a column scrolls inside it.
  const fit = () => {
    const grid = document.querySelector('#columns');
    if (!grid || !document.body.classList.contains('present') || window.innerHeight < 640) { return; }
    const top = grid.getBoundingClientRect().top + window.scrollY;
    const firsts = [...grid.querySelectorAll('.col')].map((col) => {
      const head = col.querySelector('.rows > :first-child .hit-head') || col.querySelector('.rows > :first-child');
      const rows = head && head.closest('.rows');
      return head ? head.getBoundingClientRect().bottom - col.getBoundingClientRect().top + rows.scrollTop + 8 : 0;
    });
    const peek = Math.max(230, 0.3 * window.innerHeight);
    const cap = Math.round(Math.max(window.innerHeight - top - peek, 160, ...firsts)) + 'px';
    const root = document.documentElement.style;
    if (root.getPropertyValue('--col-cap') !== cap) { root.setProperty('--col-cap', cap); }
  };
  window.addEventListener('resize', fit);
  new MutationObserver(fit).observe(document.body, {attributes: true, attributeFilter: ['class']});
  // The card the caption asks to watch stays on screen: a new step starts at the top of the page; a column that
  // holds that card below its cap scrolls it to the column's top; when the step's columns arrive with that card
  // below the screen everywhere, the page scrolls just enough to show it (the bar stays on top, the badge in view).
  let step = null;
  new MutationObserver(() => {
    if (!document.body.classList.contains('present')) { return; }
    fit();
    const caption = document.querySelector('#tour-caption .tour-caption');
    const now = caption ? caption.dataset.step || null : null;
    if (now !== step) { step = now; if (now) { window.scrollTo(0, 0); } }
    const card = caption && caption.dataset.watch;
    if (!card) { return; }
    const hits = [...document.querySelectorAll('#columns .hit')].filter(h => h.dataset.parent === card);
    for (const hit of hits.filter(h => !h.dataset.shown)) {  // once per rendered card: a presenter may scroll on
      hit.dataset.shown = '1';
      const rows = hit.closest('.rows'), r = hit.getBoundingClientRect(), b = rows.getBoundingClientRect();
      if (r.top < b.top || r.bottom > b.bottom) { rows.scrollTop += r.top - b.top - 8; }
    }
    const heads = hits.map(h => h.querySelector('.hit-head').getBoundingClientRect());
    if (!heads.length || heads.some(r => r.bottom <= window.innerHeight)) { return; }
    const below = Math.min(...heads.map(r => r.bottom)) - window.innerHeight + 16;
    if (below > 0) { window.scrollBy(0, below); }
  }).observe(document.body, {subtree: true, childList: true});
}"""
# What the keys do, in the tour bar (the page documents its keys).
KEYS = (
    ("→ ←", "tour"),
    ("h", "Hybrid on/off"),
    ("f", "Reranker fails"),
    ("− +", "RRF k"),
    ("/", "turn box"),
    ("r", "Run"),
    ("Esc", "leave"),
)
KEYS_HTML = (
    '<div class="tour-keys">Keys (not while typing): '
    + " · ".join(f"<kbd>{render.esc(k)}</kbd> {render.esc(what)}" for k, what in KEYS)
    + "</div>"
)
# The RRF k values + and − step through: the ones worth showing a room, from "rank 1 dominates" to "flat".
K_STOPS = (1, 2, 5, 10, 20, 30, 60, 100, 200, 500, 1000)
# The headline controls a step sets (a step that names none sets their defaults, so a step restores them).
STEP_CONTROLS = ("hybrid_enabled", "simulate_reranker_failure")

_CSS_SAFE_ID = re.compile(r"[A-Za-z0-9._:#-]{1,200}")


def caption_html(step: Step | None, index: int = -1, total: int = 0) -> str:
    """The tour's caption: which step, its one-line caption, the card to watch by its title, a style rule outlining
    that card, and the keys."""
    if step is None:
        if total:
            return (
                f'<div class="tour-caption">Presenter mode: press → (or Next) to start the tour of {total} '
                f"steps · ← back · Esc leaves</div>{KEYS_HTML}"
            )
        return (
            '<div class="tour-caption">This corpus has no example turns to tour: type a turn and press Run '
            f"(labeled turns become the tour).</div>{KEYS_HTML}"
        )
    watch, watch_attr = "", ""
    if step.card and _CSS_SAFE_ID.fullmatch(step.card):  # the id is data: only a plain id goes into a selector
        watch_attr = f' data-watch="{render.esc(step.card)}"'  # KEYS_JS keeps that card on screen
        watch = (
            f'<style>#columns .hit[data-parent="{step.card}"] {{ outline: 5px solid #ffb000; '
            f"outline-offset: 1px; }}</style>"
        )
    card = f' · watch <b class="watch">{render.esc(step.title or step.card)}</b>' if step.card else ""
    return (
        f'<div class="tour-caption" data-step="{index + 1}"{watch_attr}>'
        f'<span class="tour-count">{index + 1}/{total}</span> '
        f"<b>{render.esc(step.label)}</b>: {render.esc(step.caption)}{card}</div>{watch}{KEYS_HTML}"
    )


def tour_steps(words: corpus_words.CorpusWords) -> tuple[Step, ...]:
    """The tour: the corpus's example turns, with two steps after the first one that has a card to watch: the same
    turn with hybrid off (``dense_only``), then with the reranker's failure simulated (``rrf_only``); the step after
    them restores both (every step sets the two controls, to its own values or their defaults)."""
    steps = words.steps
    first = next((s for s in steps if s.card), steps[0] if steps else None)
    if first is None:
        return ()
    at = steps.index(first) + 1
    off = Step(
        "Hybrid off",
        first.text,
        "the same turn on the legacy dense-only path (level dense_only): no BM25, no fusion, no reranker.",
        first.card,
        first.title,
        (("hybrid_enabled", False), ("simulate_reranker_failure", False)),
    )
    fails = Step(
        "Reranker fails (simulated)",
        first.text,
        "hybrid back on, the cross-encoder fails: the fused RRF order is the answer (level rrf_only).",
        first.card,
        first.title,
        (("hybrid_enabled", True), ("simulate_reranker_failure", True)),
    )
    rest = list(steps[at:])
    if rest:
        rest[0] = replace(rest[0], caption="hybrid and the reranker are back on (level full). " + rest[0].caption)
    return (*steps[:at], off, fails, *rest)


def step_controls(step: Step) -> tuple[Any, ...]:
    """The values a step sets on ``STEP_CONTROLS``: its own, or the controls' defaults."""
    from inspector import handlers

    own, defaults = dict(step.settings), handlers.default_controls()
    return tuple(own.get(name, defaults[name]) for name in STEP_CONTROLS)


def step(direction: int, index: Any, corpus: str | None = None) -> tuple[Any, ...]:
    """One step of the tour from ``index`` (-1 = not started) in ``direction`` (+1 or -1), wrapping around: the new
    index, the turn for the turn box (which the page then runs), the caption and the values of ``STEP_CONTROLS``."""
    steps = tour_steps(corpus_words.words_for(corpus))
    if not steps:
        return -1, gr.skip(), caption_html(None), *(gr.skip() for _ in STEP_CONTROLS)
    current = index if isinstance(index, int) and 0 <= index < len(steps) else -1
    new = (current + direction) % len(steps) if current >= 0 else (0 if direction > 0 else len(steps) - 1)
    return new, steps[new].text, caption_html(steps[new], new, len(steps)), *step_controls(steps[new])


def nudge_k(k: Any, direction: int) -> int:
    """The RRF k the + (``direction`` 1) or − (-1) key sets: the next of ``K_STOPS`` above or below ``k`` (a value
    that is no number starts from the default)."""
    from inspector import handlers

    try:
        current = float(k)
    except (TypeError, ValueError):
        current = math.nan
    if math.isnan(current):
        current = float(handlers.default_controls()["rrf_k"])
    if direction > 0:
        return next((s for s in K_STOPS if s > current), K_STOPS[-1])
    return next((s for s in reversed(K_STOPS) if s < current), K_STOPS[0])


def reset(words: corpus_words.CorpusWords) -> tuple[int, str]:
    """The corpus changed (its ``words`` read once by the caller): the tour starts again from its first step."""
    return -1, caption_html(None, -1, len(tour_steps(words)))


def wire(tour: dict[str, Any], present: gr.Checkbox) -> None:
    """The toggle and the Exit button (the steps are turn events, wired with the page's turn events)."""
    present.change(None, present, None, js=TOGGLE_JS)
    tour["exit"].click(None, None, present, js=EXIT_JS)


def wire_load(app: gr.Blocks, present: gr.Checkbox) -> None:
    """``?present=1`` in the page's address opens presenter mode."""
    app.load(None, None, present, js=FROM_LINK_JS)
