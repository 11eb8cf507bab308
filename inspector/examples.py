"""Curated example turns, each picked from corpus/queries.jsonl because it shows one thing.

``tests/test_inspector_handlers.py`` runs every example against the shipped corpus and checks that it still
shows what ``kind`` claims, so this list cannot silently drift from the data:

- ``lexical``: BM25 puts the card first, dense ranks it lower or misses it, and the final answer is that card.
- ``semantic``: dense puts the card first, BM25 ranks it lower or misses it, and the final answer is that card.
- ``consensus``: the card's sub-chunk is in both branch lists, RRF ranks it first, and it is the final answer.
- ``multilingual``: a Spanish or Portuguese turn whose final answer is the card in that language.
- ``no_match``: an out-of-domain turn that ends in the refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["lexical", "semantic", "consensus", "multilingual", "no_match"]


@dataclass(frozen=True)
class Example:
    """One curated turn: what to click, what it is about, and what to look at."""

    kind: Kind
    label: str
    text: str
    card: str | None
    shows: str


EXAMPLES: tuple[Example, ...] = (
    Example(
        "lexical",
        "Lexical: part number LC-42",
        "do I need an LC-42",
        "device-bc5-err4",
        "The part number LC-42 appears only in the body of the BC-5 cuff card: BM25 matches it exactly and ranks "
        "the card first; dense, which blurs codes, ranks it lower.",
    ),
    Example(
        "semantic",
        "Semantic: paraphrase",
        "my belly has gone lumpy where I always do my insulin",
        "side-effect-injection-site",
        "Few shared words with the card on injection-site lumps: dense ranks it first, BM25 lower or not at all.",
    ),
    Example(
        "consensus",
        "Consensus: both agree",
        "I keep hacking with a tickly throat since I started my new pressure pill",
        "side-effect-ace-cough",
        "Both branches return the ACE-inhibitor cough card, so RRF puts it first (★ both).",
    ),
    Example(
        "multilingual",
        "Español: alarma A-15",
        "Mi PillPal PP-200 suena con la alarma A-15",
        "device-pp200-a15-es",
        "A Spanish turn: the code A-15 and the Spanish words lead to the Spanish card.",
    ),
    Example(
        "multilingual",
        "Português: erro E-07",
        "Meu glicosímetro GS-40 mostra erro E-07",
        "device-gs40-e07-pt",
        "A Portuguese turn: the model and error code plus Portuguese words lead to the Portuguese card.",
    ),
    Example(
        "no_match",
        "No match: banana bread",
        "give me a recipe for banana bread",
        None,
        "Out of domain: nothing passes the similarity threshold, so the assistant refuses.",
    ),
)


def by_kind(kind: Kind) -> list[Example]:
    """The examples of one kind."""
    return [e for e in EXAMPLES if e.kind == kind]
