"""The pieces every ranked column is made of: one hit as a row (title and snippet highlighted, score, marks), the
column's head with its chip, and the empty-list line. Every string is escaped (``term_marks.highlight``, ``esc``)."""

from __future__ import annotations

from typing import Literal

from inspector.html_text import esc, plural
from inspector.term_marks import highlight
from retrieval.types import BranchResult, Chunk, RetrievalResult

Stage = Literal["bm25", "dense", "rrf", "reranked"]

STAGE_TITLES = {
    "bm25": "BM25 (lexical)",
    "dense": "Dense (embeddings)",
    "rrf": "RRF fused",
    "reranked": "Reranked → final",
}
SNIPPET_CHARS = 160


def hit_row(
    *,
    rank: str,
    chunk: Chunk | None,
    chunk_id: str,
    parent_id: str,
    color: str,
    score_html: str,
    terms: frozenset[str],
    tokenizer: str,
    consensus: bool,
    cut: str = "",
    common: frozenset[str] = frozenset(),
    mark: str = "",
    extra: bool = False,
) -> str:
    """One ranked sub-chunk: rank, highlighted title and snippet, ``score_html`` (already escaped), the ★ of a
    consensus hit, ``mark`` (an escaped rank move), why it was cut; ``extra``: ranked past top_k."""
    title = chunk.title if chunk else parent_id
    lang = chunk.lang if chunk else "en"
    title_html = highlight(title, terms, tokenizer=tokenizer, lang=lang, common=common)
    snippet = (
        highlight(chunk.text, terms, tokenizer=tokenizer, lang=lang, window=SNIPPET_CHARS, common=common)
        if chunk
        else ""
    )
    classes = "hit" + (" consensus" if consensus else "") + (" cut" if cut else "") + (" extra" if extra else "")
    badge = '<span class="both" title="found by BM25 and dense">★ both</span>' if consensus else ""
    cut_html = f'<div class="why">✂ {esc(cut)}</div>' if cut else ""
    return (
        f'<div class="{classes}" style="--doc:{color}" data-chunk="{esc(chunk_id)}" '
        f'data-parent="{esc(parent_id)}">'
        f'<div class="hit-head"><span class="rank">{esc(rank)}</span>'
        f'<span class="title">{title_html}</span>{badge}{mark}</div>'
        f'<div class="hit-id">{esc(chunk_id)}</div>'
        f'<div class="snippet">{snippet}</div>'
        f'<div class="score">{score_html}</div>{cut_html}</div>'
    )


def column_head(stage: Stage, chip: str, chip_class: str) -> str:
    """A column's title and its chip (``chip``: already escaped HTML)."""
    return (
        f'<div class="col-head"><span class="col-title">{esc(STAGE_TITLES[stage])}</span>'
        f'<span class="chip {chip_class}">{chip}</span></div>'
    )


def branch_chip(branch: BranchResult) -> tuple[str, str]:
    """A branch column's chip (escaped) and its class: hits and time, or the branch's status."""
    if branch.status == "ok":  # 0 ms: answered from the per-turn cache (a moved control, a streamed turn's end)
        return f"{plural(len(branch.hits), 'hit')} · {f'{branch.ms:.1f} ms' if branch.ms > 0 else 'cached'}", "ok"
    return esc(branch.status), "bad"


def top_k_of(result: RetrievalResult) -> int:
    """The turn's top_k (rows ranked past it are marked extra); unbounded when the settings do not say."""
    try:
        return int(result.settings.get("top_k", 10**9))
    except (TypeError, ValueError):
        return 10**9


def empty_list(message: str) -> str:
    """The line a column (or the explain panel) shows instead of rows."""
    return f'<div class="empty">{esc(message)}</div>'
