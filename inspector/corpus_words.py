"""What the page says about the session's active corpus: its name line, the banner, the turn box's placeholder, the
example turns and presenter mode's tour.

The shipped cards keep their curated examples (``inspector.examples``), their GlucoSense placeholder and the
"100% synthetic, not medical advice" banner. Any other corpus speaks its own words: its labeled turns are the
examples and the tour (sampled across its categories, seeded, so a tour is the same every time), and a corpus
without labeled turns gets no examples and a hint that names a few of its own card titles. Nothing here retrieves;
everything that reaches HTML is escaped.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from inspector import render
from inspector.examples import EXAMPLES
from retrieval.corpora import Registry
from retrieval.corpus import LabeledQuery
from retrieval.corpus_entries import SHIPPED, CorpusData, medication_cards

log = logging.getLogger(__name__)

MAX_EXAMPLES = 8  # example buttons under the turn box (a corpus's labeled turns are sampled down to this)
MAX_TOUR = 12  # steps of presenter mode's tour on a corpus with labeled turns
SHIPPED_PLACEHOLDER = "e.g. What does error E-07 on my GlucoSense GS-40 mean?"
SEED = 0


@dataclass(frozen=True)
class Step:
    """One step of presenter mode's tour: the turn, its one-line caption, the card to watch (or None) with its
    title as the cards show it, and the headline controls the step sets (none: their defaults)."""

    label: str
    text: str
    caption: str
    card: str | None
    title: str | None = None
    settings: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class CorpusWords:
    """Everything the page says about one corpus."""

    name: str
    shipped: bool
    cards: int
    chunks: int
    placeholder: str
    steps: tuple[Step, ...]  # the examples and the tour, in order
    hint: str  # shown when the corpus has no example turns ("" otherwise)


def _registry() -> Registry:
    from inspector import handlers  # the process's base Settings (data folder, data root, corpus path)

    return Registry(handlers.base_settings())


def words_for(corpus: str | None) -> CorpusWords:
    """The words for the session's corpus (a registry name; None or "" = the shipped cards). A corpus that cannot be
    read gets its name and an explanation instead of examples; this never raises."""
    name = (corpus.strip() if isinstance(corpus, str) else "") or SHIPPED  # a page value: anything may come
    try:
        data = _registry().open(name)
    except Exception as exc:  # unknown, deleted meanwhile, unreadable: say so, keep the page working
        log.warning("corpus %r: %s", name, exc)
        shown = name[:80]  # a hostile name is not echoed whole into the banner, label and hint
        return CorpusWords(
            shown,
            False,
            0,
            0,
            "Type a turn about this corpus",
            (),
            f"The corpus {shown!r} could not be read ({exc}). Open another in the Data tab.",
        )
    return _words(data)


def _words(data: CorpusData) -> CorpusWords:
    entry = data.entry
    shipped = entry.kind == SHIPPED and medication_cards(entry.source)  # CORPUS_PATH may hold someone else's
    if shipped:
        titles = {c.id: c.title for c in data.cards}
        steps = tuple(Step(e.label, e.text, e.shows, e.card, titles.get(e.card or "") or None) for e in EXAMPLES)
        return CorpusWords(entry.name, True, len(data.cards), len(data.chunks), SHIPPED_PLACEHOLDER, steps, "")
    steps = _labeled_steps(data, MAX_TOUR)
    first_titles = [c.title for c in data.cards[:3] if c.title]
    about = "; ".join(t[:60] for t in first_titles)
    placeholder = (
        f"e.g. {steps[0].text[:80]}"
        if steps
        else f"Type a question about {entry.name}" + (f" (cards such as: {about[:120]})" if about else "")
    )
    hint = (
        ""
        if steps
        else (
            f"{entry.name} has no labeled turns, so there are no example turns: type your own "
            f"question about its cards"
            + (f", e.g. about {about}." if about else ".")
            + " Labeled turns (BEIR queries.jsonl + qrels) become the examples and the tour."
        )
    )
    return CorpusWords(entry.name, False, len(data.cards), len(data.chunks), placeholder, steps, hint)


def _labeled_steps(data: CorpusData, limit: int) -> tuple[Step, ...]:
    """Up to ``limit`` labeled turns that have a relevant card, every category represented (round robin over the
    categories, each shuffled with a fixed seed), each captioned with the card to watch."""
    titles = {c.id: c.title for c in data.cards}
    by_category: dict[str, list] = {}
    for q in data.queries:
        if q.relevant and any(g > 0 for g in q.relevant.values()):
            by_category.setdefault(q.category or "turns", []).append(q)
    rng = random.Random(SEED)
    pools: list[list[LabeledQuery]] = []
    for category in sorted(by_category):
        pool = list(by_category[category])
        rng.shuffle(pool)
        pools.append(pool)
    picked: list[LabeledQuery] = []
    while len(picked) < limit and any(pools):
        for pool in pools:
            if pool and len(picked) < limit:
                picked.append(pool.pop(0))
    steps = []
    for q in picked:
        card = max(q.relevant, key=lambda d: (q.relevant[d], d))
        title = titles.get(card, card)
        caption = (
            f"{q.category or 'labeled'} turn {q.id}: the card judged relevant is “{title[:80]}”; "
            f"watch where each branch ranks it."
        )
        steps.append(Step(f"{q.id}: {q.text[:40]}", q.text, caption, card, title))
    return tuple(steps)


# ------------------------------------------------------------------------------------------------------ HTML
def turn_label(words: CorpusWords) -> str:
    """The turn box's label: it names the corpus the turn searches (plain text: Gradio escapes labels)."""
    size = f"{words.cards:,} cards · {words.chunks:,} sub-chunks" if words.cards else "not readable"
    return f"User turn · corpus: {words.name} ({size})"


def banner(words: CorpusWords) -> str:
    """The page's banner: the shipped cards carry the synthetic-data and not-medical-advice warning."""
    warn = (
        '<span class="warn">100% synthetic data · not a medical device · not medical advice</span>'
        if words.shipped
        else f'<span class="warn other">corpus: {render.esc(words.name)}</span>'
    )
    return (
        '<div class="banner"><h1>Hybrid retrieval inspector</h1>'
        + warn
        + '<span class="sub">BM25 + dense (Chroma) → RRF → cross-encoder, one turn at a time (ADR-0022)</span>'
        "</div>"
    )


def hint_html(words: CorpusWords) -> str:
    return f'<div class="examples-hint">{render.esc(words.hint)}</div>' if words.hint else ""


def caption_for(query: str, corpus: str | None = None) -> str:
    """After an example is clicked: what it shows, in the hint area (the corpus's own hint when it is none)."""
    words = words_for(corpus)
    step = next((s for s in words.steps if s.text == query), None)
    if step is None:
        return hint_html(words)
    return (
        f'<div class="examples-hint shows"><b>{render.esc(step.label)}</b>: {render.esc(step.caption)}'
        + (f" · watch <b>{render.esc(step.title or step.card)}</b>" if step.card else "")
        + "</div>"
    )


def example_samples(words: CorpusWords) -> tuple[list[list[str]], list[str]]:
    """``gr.Examples``/``gr.Dataset`` samples and their labels for the corpus (at most ``MAX_EXAMPLES``)."""
    steps = words.steps[:MAX_EXAMPLES]
    return [[s.text] for s in steps], [s.label for s in steps]
