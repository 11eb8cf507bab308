"""What a corpus is to the page and the CLI: its entry (name, kind, source, counts, refusal text, owner), the corpus
loaded (cards, sub-chunks, labeled turns), and the names and entries of the shipped cards, store records and BEIR
folders."""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.context import REFUSAL
from retrieval.corpus import DEFAULT_CHUNK_WORDS, CorpusError, Dataset, LabeledQuery, load_cards
from retrieval.settings import PROJECT_ROOT
from retrieval.types import Card, Chunk

SHIPPED = "shipped"
NEUTRAL_REFUSAL = (
    "I could not find this in the documents I have, so I will not guess. Could you rephrase, or ask "
    "about something they cover?"
)
MAX_REFUSAL_CHARS = 1000
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
STORED = ("indexed", "attached")  # the kinds kept in the store


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus the page and the CLI can open."""

    name: str
    kind: str  # "shipped", "indexed" (uploaded or `index`ed, kept in the store), "attached", "beir" (data root)
    source: str  # the file or folder it is read from; for a corpus in the store, where it came from
    format: str
    fingerprint: str = ""  # of its sub-chunks (ids, titles, texts) and the chunker; "" until first loaded
    cards: int = 0
    chunks: int = 0
    turns: int = 0
    added: str = ""
    refusal: str = NEUTRAL_REFUSAL  # what the assistant says when it refuses a turn on this corpus
    origin: str = ""  # "page" (uploaded from the page), "cli" (`python -m retrieval index`), "attach"
    owner: str = ""  # sha256 of the token of the browser session that uploaded it ("" = none may delete it)
    model: str = ""  # the embedding model it was added with (attached: the one of its collection, the only one)
    collection: str = ""  # attached: the Chroma collection it opens; else its record collection

    def label(self) -> str:
        size = f"{self.chunks:,} sub-chunks" if self.chunks else "not loaded yet"
        turns = f", {self.turns} labeled turns" if self.turns else ""
        return f"{self.name} ({self.kind}, {self.format}, {size}{turns})"

    def may_delete(self, token: str | None) -> bool:
        """True if the browser session holding ``token`` uploaded this corpus (the page may delete only those)."""
        return (
            self.kind in STORED
            and self.origin in ("page", "attach")
            and bool(self.owner)
            and owner_hash(token) == self.owner
        )


def owner_hash(token: str | None) -> str:
    """What the store keeps of a session's owner token: its SHA-256 (the token itself stays in the session)."""
    return hashlib.sha256(token.encode()).hexdigest() if token else ""


@dataclass(frozen=True)
class CorpusData:
    """A corpus loaded: its cards, sub-chunks (split exactly as the shipped cards) and labeled turns."""

    entry: CorpusEntry
    cards: tuple[Card, ...]
    chunks: tuple[Chunk, ...]
    queries: tuple[LabeledQuery, ...]
    notes: tuple[str, ...] = ()  # what reading the file skipped (``Loaded.notes``): set by ``Registry.add`` only

    @property
    def key(self) -> str | None:
        """The corpus identity in the retriever key (None for the shipped cards: the CORPUS_PATH key as before)."""
        if self.entry.kind == SHIPPED:
            return None
        if self.entry.kind == "attached":
            return f"attach:{self.entry.collection}:{self.entry.fingerprint}"
        # the time it was added too: a corpus deleted and added again (perhaps by another process) gets a new
        # retriever, never one holding the dropped collection
        return f"corpus:{self.entry.fingerprint}" + (f"@{self.entry.added}" if self.entry.added else "")

    def dataset(self) -> Dataset:
        return Dataset(name=self.entry.name, cards=self.cards, queries=self.queries, chunk_words=DEFAULT_CHUNK_WORDS)


def sanitise(name: str, fallback: str = "corpus") -> str:
    """A file-system, display- and Chroma-safe name: letters, digits, ``.``, ``_`` and ``-``, no ``..``, at most 60
    characters."""
    clean = re.sub(r"\.{2,}", ".", _NAME.sub("-", name)).strip(".-_")[:60].strip(".-_")
    return clean or fallback


def medication_cards(path: str | Path) -> bool:
    """Whether the cards at ``path`` (CORPUS_PATH) are medication cards: the bundled set, or cards whose topics
    (besides ``general``) are all among the bundled set's and at least one is. They keep the medication wording
    (``REFUSAL``, the page's banner, examples and placeholder); someone else's cards put at CORPUS_PATH get the
    neutral wording of any other corpus. An unreadable file keeps the medication wording (the turn says why)."""
    try:
        return _medication_cards(str(Path(path).resolve()), Path(path).stat().st_mtime_ns)
    except (OSError, CorpusError):
        return True


@functools.lru_cache(maxsize=8)
def _medication_cards(path: str, _mtime_ns: int) -> bool:
    bundled = PROJECT_ROOT / "corpus" / "cards.jsonl"
    if path == str(bundled.resolve()):
        return True
    known = {c.topic for c in load_cards(bundled)} - {"general"}
    topics = {c.topic for c in load_cards(path)} - {"general"}
    return bool(topics) and topics <= known


def shipped_refusal(path: str | Path) -> str:
    """What the assistant says when it refuses a turn on the cards at CORPUS_PATH (``medication_cards``)."""
    return REFUSAL if medication_cards(path) else NEUTRAL_REFUSAL


def entry_of(row: dict[str, Any]) -> CorpusEntry:
    """The entry of a record's metadata (``corpus_store.records``)."""
    attached = row.get("origin") == "attach"
    return CorpusEntry(
        name=str(row["name"]),
        kind="attached" if attached else "indexed",
        source=str(row.get("source", "")),
        format=str(row.get("format", "")),
        fingerprint=str(row.get("fingerprint", "")),
        cards=int(row.get("cards", 0)),
        chunks=int(row.get("chunks", 0)),
        turns=int(row.get("turns", 0)),
        added=str(row.get("added", "")),
        refusal=str(row.get("refusal") or NEUTRAL_REFUSAL),
        origin=str(row.get("origin", "")),
        owner=str(row.get("owner", "")),
        model=str(row.get("model", "")),
        collection=str(row.get("attached") if attached else row["collection"]),
    )


def beir_folders(data_root: Path | None, stored: list[CorpusEntry]) -> list[CorpusEntry]:
    """The BEIR folders under the data root (not indexed into the store), named apart from ``stored``."""
    if not (data_root and data_root.is_dir()):
        return []
    known = {e.source for e in stored if e.source}
    names = {SHIPPED, *(e.name for e in stored)}
    found: list[CorpusEntry] = []
    for folder in sorted(data_root.iterdir()):
        if (folder / "corpus.jsonl").is_file() and str(folder.resolve()) not in known:
            name = folder.name if folder.name not in names else f"{folder.name}-beir"
            found.append(CorpusEntry(name, "beir", str(folder), "beir"))
    return found
