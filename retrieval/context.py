"""The context block an assistant hands to its language model: the final cards of one turn, each in a
structured delimiter it can cite, within a token budget.

Format (one block per kept card, best first, blank line between blocks)::

    <card id="device-gs40-e09" title="GlucoSense GS-40: meter too cold or too hot">
    ...the whole parent card text...
    </card>

Attribute values and text are XML-escaped (``& < > " '``), so a card whose text contains ``</card>`` or a
quote cannot close its delimiter or forge another card. Control characters are replaced by spaces.

Token counting is deliberately simple and documented: ``ceil(whitespace-separated words * 1.3)`` per block,
tags included (English averages about 1.3 subword tokens per word for BERT/GPT-style tokenizers); Chinese,
Japanese and Korean are written without spaces, so each of their characters counts as a word. Cards are
packed in rank order; a card that does not fit the remaining budget is dropped (and listed with why), and a
later, shorter card may still fit. A turn at level ``no_match``, or one where no card fits, yields the refusal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any
from xml.sax.saxutils import escape

from retrieval.tokenize import count_cjk, has_cjk
from retrieval.types import Chunk, RetrievalResult

# What the assistant says at level no_match (ADR-0022): it refuses instead of answering from an unrelated card.
REFUSAL = (
    "I could not find this in the medication cards I have, so I will not guess. "
    "Please ask your pharmacist or care team."
)

TOKENS_PER_WORD_X10 = 13  # 1.3 tokens per whitespace word, kept as an integer ratio (no float rounding surprises)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ATTR_ENTITIES = {'"': "&quot;", "'": "&apos;"}


def count_tokens(text: str) -> int:
    """Approximate LLM tokens of ``text``: whitespace-separated words x 1.3, rounded up (0 for blank text); a word
    holding Chinese, Japanese or Korean characters counts one per character (a CJK card of 3,000 characters without
    a space was one word, 2 tokens, and fit any budget)."""
    words = sum(max(1, count_cjk(word)) for word in text.split()) if has_cjk(text) else len(text.split())
    return (words * TOKENS_PER_WORD_X10 + 9) // 10


def escape_text(text: str) -> str:
    """Card text safe inside ``<card>...</card>``: control characters -> spaces, ``& < >`` escaped."""
    return escape(_CONTROL.sub(" ", text))


def escape_attr(value: str) -> str:
    """An attribute value safe inside double quotes: newlines and controls -> spaces, ``& < > " '`` escaped."""
    return escape(_CONTROL.sub(" ", value).replace("\n", " ").replace("\r", " ").replace("\t", " "), _ATTR_ENTITIES)


def card_block(card_id: str, title: str, text: str) -> str:
    """One card wrapped in its delimiter."""
    return f'<card id="{escape_attr(card_id)}" title="{escape_attr(title)}">\n{escape_text(text)}\n</card>'


@dataclass(frozen=True)
class ContextCard:
    """A card that made it into the context."""

    card_id: str
    title: str
    chunk_id: str
    rank: int
    tokens: int
    block: str


@dataclass(frozen=True)
class DroppedCard:
    """A final card left out of the context, and why."""

    card_id: str
    title: str
    rank: int
    tokens: int
    reason: str


@dataclass(frozen=True)
class Context:
    """What the language model receives for one turn.

    Attributes:
        text: the exact context string (card blocks, or the refusal).
        cards: the cards included, best first.
        dropped: final cards that did not fit the budget.
        tokens: approximate tokens of ``text`` (see ``count_tokens``).
        budget: the token budget applied.
        refused: True when the assistant must answer with the refusal instead of citing cards.
        reason: why the context was refused (empty otherwise).
    """

    text: str
    cards: tuple[ContextCard, ...]
    dropped: tuple[DroppedCard, ...]
    tokens: int
    budget: int
    refused: bool
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parent_texts(chunks: Iterable[Chunk]) -> dict[str, tuple[str, str]]:
    """``parent_id -> (title, full card text)`` rebuilt from its sub-chunks in chunk order."""
    parts: dict[str, list[tuple[int, Chunk]]] = {}
    for chunk in chunks:
        _, _, n = chunk.chunk_id.rpartition("#")
        parts.setdefault(chunk.parent_id, []).append((int(n) if n.isdigit() else 0, chunk))
    out = {}
    for parent, numbered in parts.items():
        numbered.sort(key=lambda item: item[0])
        out[parent] = (numbered[0][1].title, " ".join(c.text for _, c in numbered))
    return out


def build_context(
    result: RetrievalResult, chunks: Iterable[Chunk] | Mapping[str, Chunk], budget: int, refusal: str = REFUSAL
) -> Context:
    """The context for ``result``'s kept final cards, packed in rank order within ``budget`` tokens.

    Args:
        result: one turn from ``HybridRetriever.retrieve``.
        chunks: the retriever's sub-chunks (a sequence, or a ``chunk_id -> Chunk`` mapping); each final card's
            full text is rebuilt from all of its sub-chunks.
        budget: maximum approximate tokens (``CONTEXT_TOKEN_BUDGET``), at least 1.
        refusal: what the assistant says when it refuses: the corpus's own text (the medication wording for the
            shipped cards; see ``retrieval.corpora.CorpusEntry.refusal``).

    Raises:
        ValueError: ``budget`` is not a positive integer, or a final card has no sub-chunk in ``chunks``.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive whole number of tokens (CONTEXT_TOKEN_BUDGET), got {budget!r}.")
    if result.refused or not result.final:
        return _refusal(budget, "the turn is at level no_match" if result.refused else "no final card", refusal)
    values = chunks.values() if isinstance(chunks, Mapping) else chunks
    cards = parent_texts(values)
    kept: list[ContextCard] = []
    dropped: list[DroppedCard] = []
    used = 0
    for hit in result.final:
        if hit.parent_id not in cards:
            raise ValueError(
                f"final card {hit.parent_id!r} has no sub-chunk in the chunks given: pass the "
                "retriever's chunks (HybridRetriever.chunks) for the corpus that produced the result."
            )
        title, text = cards[hit.parent_id]
        block = card_block(hit.parent_id, title, text)
        tokens = count_tokens(block)
        if used + tokens <= budget:
            kept.append(ContextCard(hit.parent_id, title, hit.chunk_id, hit.rank, tokens, block))
            used += tokens
        else:
            dropped.append(
                DroppedCard(
                    hit.parent_id, title, hit.rank, tokens, f"needs {tokens} tokens, {budget - used} of {budget} left"
                )
            )
    if not kept:
        ctx = _refusal(budget, f"no final card fits the budget of {budget} tokens", refusal)
        return Context(ctx.text, (), tuple(dropped), ctx.tokens, budget, True, ctx.reason)
    text = "\n\n".join(c.block for c in kept)
    return Context(text, tuple(kept), tuple(dropped), count_tokens(text), budget, False)


def _refusal(budget: int, reason: str, text: str = REFUSAL) -> Context:
    return Context(text, (), (), count_tokens(text), budget, True, reason)
