"""Query terms marked in corpus text: ``highlight`` escapes a title or a snippet and wraps every token BM25 would
match in ``<mark>`` (faintly for common terms), cut to a window around the first rare match."""

from __future__ import annotations

from functools import lru_cache

from inspector.html_text import esc
from retrieval.tokenize import analyze, spans


@lru_cache(maxsize=65536)
def _term(token: str, tokenizer: str, lang: str) -> str | None:
    if tokenizer == "plain":
        return token
    out = analyze(token, tokenizer, lang)
    return out[0] if out else None


def _merged(found: list[tuple[int, int, bool]]) -> list[tuple[int, int, bool]]:
    """Overlapping matches as one: CJK bigrams overlap ("冷蔵" and "蔵庫" in "冷蔵庫" are one mark over three
    characters, not two marks repeating "蔵"). Common only if every match in it is."""
    out: list[tuple[int, int, bool]] = []
    for a, b, is_common in found:
        if out and a < out[-1][1]:
            pa, pb, pc = out[-1]
            out[-1] = (pa, max(pb, b), pc and is_common)
        else:
            out.append((a, b, is_common))
    return out


def highlight(
    text: str,
    terms: frozenset[str],
    *,
    tokenizer: str = "plain",
    lang: str = "en",
    window: int | None = None,
    common: frozenset[str] = frozenset(),
) -> str:
    """Escaped ``text`` with every token BM25 would match wrapped in ``<mark>`` (overlapping CJK bigrams in one).

    Args:
        text: corpus text (not yet escaped).
        terms: ``query_terms(query, tokenizer)``.
        tokenizer / lang: how the index analysed this text (a chunk's own language for ``snowball``).
        window: if given, cut to about this many characters around the first match, with ellipses.
        common: terms found in many sub-chunks (low IDF): marked faintly, so the rare terms BM25 keys on stand out.
    """
    found = _merged(
        [
            (a, b, _term(tok, tokenizer, lang) in common)
            for a, b, tok in spans(text)
            if _term(tok, tokenizer, lang) in terms
        ]
    )
    rare = [f for f in found if not f[2]] or found
    start, end = 0, len(text)
    if window is not None and len(text) > window:
        first = rare[0][0] if rare else 0
        start = max(0, first - window // 4)
        if start:
            space = text.rfind(" ", 0, start)
            start = space + 1 if space >= 0 else start
        end = min(len(text), start + window)
        if end < len(text):
            space = text.rfind(" ", start, end)
            end = space if space > start else end
    out = ["…" if start > 0 else ""]
    pos = start
    for a, b, is_common in found:
        a, b = max(a, pos), min(b, end)  # a mark cut by the window keeps its visible part only
        if b <= a:
            continue
        out.append(esc(text[pos:a]))
        out.append(('<mark class="common">' if is_common else "<mark>") + f"{esc(text[a:b])}</mark>")
        pos = b
    out.append(esc(text[pos:end]))
    out.append("…" if end < len(text) else "")
    return "".join(out)
