"""Judging from the page: who may change what, and what a session sees (the layout is in ``why_view``).

- A session that may change the corpus (it uploaded or attached it: ``CorpusEntry.may_delete`` with its owner token)
  changes the corpus's labels: everyone's Evaluation, A vs B and Tune score against them.
- Any other session, and every session on the shipped cards (whose labels are read-only from the page), keeps its
  grades as its own marks: shown to it, never merged into anyone's scores.
- Each change records who made it (the SHA-256 of the session's owner token, never a name); Undo takes back the
  session's latest change on this turn.

The owner token is the one the Data tab gives a session on its first upload (``gr.State``, never shown); a session
that judges before uploading gets one here. Every value that reaches HTML is escaped.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from inspector import handlers
from inspector.html_text import esc
from inspector.render import render_message
from retrieval.corpora import Registry
from retrieval.corpus_entries import SHIPPED, CorpusData, owner_hash
from retrieval.judgments import LABEL, Judgment, JudgmentStore, check_grade, corpus_identity, mark_scope
from retrieval.query import QueryError, clean_query

log = logging.getLogger(__name__)


def scope_for(data: CorpusData, token: str | None) -> str:
    """Where this session's grades go: the corpus's labels if it may change the corpus, else its own marks."""
    if token and data.entry.may_delete(token):
        return LABEL
    return mark_scope(owner_hash(token) if token else "")


def _who(j: Judgment, me: str) -> str:
    if j.scope != LABEL:
        return "your mark (counts for no one else)"
    if me and j.by == me:
        return "label, by you"
    return "label, by the command line" if j.by == "cli" else "label, by the corpus's owner"


def render_judged(rows: Sequence[Judgment], titles: Mapping[str, str], me: str = "", note: str = "") -> str:
    """This turn's labels and the session's own marks, with who made each (escaped)."""
    lead = f"<div class='verdict'>{esc(note)}</div>" if note else ""
    if not rows:
        return lead + render_message("No judgment for this turn yet: pick a card and a grade, then Save.", "info")
    items = "".join(
        f"<tr><td>{esc(titles.get(j.card_id, j.card_id))} ({esc(j.card_id)})</td><td>{esc(j.grade)}</td>"
        f"<td>{esc(_who(j, me))}</td><td>{esc(j.made_at)}</td></tr>"
        for j in rows
    )
    return (
        f"<div class='why-box'>{lead}<table><tr><th>card</th><th>grade</th><th>whose</th><th>made (UTC)</th></tr>"
        f"{items}</table></div>"
    )


def turn_rows(data: CorpusData, query: str, token: str | None) -> list[Judgment]:
    """The turn's labels, then this session's marks on it (two records read by id)."""
    store = JudgmentStore(handlers.base_settings())
    ident = corpus_identity(data)
    rows = store.turn_judgments(ident, query, LABEL)
    if token and scope_for(data, token) != LABEL:
        rows += store.turn_judgments(ident, query, mark_scope(owner_hash(token)))
    return rows


def judged_html(query: str, corpus: str | None, titles: Mapping[str, str], token: str | None, note: str = "") -> str:
    try:
        data = Registry(handlers.base_settings()).open(corpus or SHIPPED)
        rows = turn_rows(data, query, token)
    except Exception as exc:
        log.warning("judgments unavailable: %s", exc)
        return render_message(f"Judgments are unavailable ({type(exc).__name__}): the store cannot be read.")
    return render_judged(rows, titles, owner_hash(token) if token else "", note)


def _saved_note(scope: str, data: CorpusData) -> str:
    if scope == LABEL:
        return f"Saved as a label of {data.entry.name}: everyone's evaluation of it uses it (Undo takes it back)."
    why = (
        "the shipped set's labels are read-only from the page"
        if data.key is None
        else "only the session that uploaded this corpus changes its labels"
    )
    return f"Saved as your own mark: it counts for no one else ({why})."


def save(query: str, card: str | None, grade: Any, corpus: str | None, token: str | None) -> tuple[str, str]:
    """Record a grade for (turn, card) as a label or this session's mark; (the turn's judgments, the token)."""
    from retrieval.corpus import fingerprint
    from retrieval.corpus_turns import turn_corpus
    from retrieval.why import cards_of, find_card

    token = token or secrets.token_urlsafe(24)
    try:
        if not card:
            raise ValueError("pick a card to judge (from the four columns or the Why not…? box).")
        if grade is None or grade == "":
            raise ValueError("pick a grade: 0 not relevant, 1 somewhat, 2 relevant, 3 perfectly relevant.")
        settings = handlers.base_settings()
        data = Registry(settings).open(corpus or SHIPPED)
        retriever, _ = turn_corpus(corpus, settings)
        card_id, turn, scope = find_card(retriever, card), clean_query(query), scope_for(data, token)
        JudgmentStore(settings).put(
            corpus_identity(data),
            turn,
            card_id,
            check_grade(grade),
            fingerprint=fingerprint(retriever.chunks),
            by=owner_hash(token),
            scope=scope,
        )
        return judged_html(turn, corpus, cards_of(retriever), token, _saved_note(scope, data)), token
    except (QueryError, ValueError) as exc:
        return render_message(str(exc)), token
    except Exception as exc:
        log.exception("saving a judgment failed")
        return render_message(f"The judgment was not saved ({type(exc).__name__}); see the server log."), token


def undo(query: str, corpus: str | None, token: str | None) -> str:
    """Take back this session's latest change on this turn (a label it set as the owner, or its own mark)."""
    from retrieval.corpus_turns import turn_corpus
    from retrieval.why import cards_of

    if not token:
        return render_message("Nothing to undo: this session has not judged anything.", "info")
    try:
        settings = handlers.base_settings()
        data = Registry(settings).open(corpus or SHIPPED)
        turn = clean_query(query)
        card = JudgmentStore(settings).undo(
            corpus_identity(data), turn, by=owner_hash(token), scope=scope_for(data, token)
        )
        note = f"Undid your latest change to {card}." if card else "Nothing of yours to undo on this turn."
        return judged_html(turn, corpus, cards_of(turn_corpus(corpus, settings)[0]), token, note)
    except (QueryError, ValueError) as exc:
        return render_message(str(exc))
    except Exception as exc:
        log.exception("undoing a judgment failed")
        return render_message(f"Nothing was undone ({type(exc).__name__}); see the server log.")
