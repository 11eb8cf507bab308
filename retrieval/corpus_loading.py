"""Loading a corpus: its cards, sub-chunks and labeled turns read from the store (page by page) or from its file or
folder, validated, and kept in a small cache shared by every session of the process."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from retrieval import corpus_store
from retrieval.corpus import DEFAULT_CHUNK_WORDS, LabeledQuery, fingerprint, load_shipped, split_cards
from retrieval.corpus_entries import SHIPPED, STORED, CorpusData, CorpusEntry
from retrieval.formats import Limits, LoadError, load_any
from retrieval.settings import Settings
from retrieval.types import Card, Chunk

log = logging.getLogger(__name__)

_CACHE_LOCK = threading.Lock()  # the loaded corpora: never held while the store is read or written
_LOADED: dict[tuple, CorpusData] = {}  # (source or record, stamp) -> loaded corpus, shared by every session
_LOADED_KEEP = 8


def load(settings: Settings, limits: Limits, entry: CorpusEntry) -> CorpusData:
    """The entry's cards, sub-chunks and labeled turns (validated; cached while the source is unchanged): a corpus
    in the store is read from it page by page, anything else from its file or folder (``Registry.load``)."""
    if entry.kind in STORED:
        return _load_stored(settings, entry)
    source = Path(entry.source)
    try:
        stamp = source.stat().st_mtime
    except OSError:
        raise LoadError([f"{entry.name}: its source {source} is gone."]) from None
    cache_key = (str(source), stamp)
    cached = _cached(cache_key)
    if cached is not None and cached.entry.name == entry.name:
        return cached
    cards, queries, fmt = _read(entry.kind, source, limits)
    chunks = tuple(split_cards(cards, DEFAULT_CHUNK_WORDS))
    entry = dataclasses.replace(
        entry, format=fmt, fingerprint=fingerprint(chunks), cards=len(cards), chunks=len(chunks), turns=len(queries)
    )
    return remember(cache_key, CorpusData(entry, tuple(cards), chunks, tuple(queries)))


def stored_key(settings: Settings, name: str, fp: str, added: str) -> tuple:
    """The cache key of a corpus kept in the store."""
    return ("store", settings.chroma_host or settings.chroma_path, name, fp, added)


def _load_stored(settings: Settings, entry: CorpusEntry) -> CorpusData:
    cache_key = stored_key(settings, entry.name, entry.fingerprint, entry.added)
    cached = _cached(cache_key)
    if cached is not None:
        return dataclasses.replace(cached, entry=entry)  # the refusal text may have changed since
    if entry.kind == "attached":
        from retrieval.attach import read_attached

        chunks, cards = read_attached(settings, entry)
        queries: list[LabeledQuery] = []
    else:
        try:
            _, cards, queries = corpus_store.read(settings, entry.name)
        except KeyError:
            raise ValueError(
                f"corpus {entry.name!r} has been deleted (perhaps from another page or app "
                "process): pick another in the Data tab."
            ) from None
        chunks = split_cards(cards, DEFAULT_CHUNK_WORDS)
        if fingerprint(chunks) != entry.fingerprint:
            entry = _resplit(settings, entry, cards, chunks)
    return remember(cache_key, CorpusData(entry, tuple(cards), tuple(chunks), tuple(queries)))


def _resplit(settings: Settings, entry: CorpusEntry, cards: Sequence[Card], chunks: Sequence[Chunk]) -> CorpusEntry:
    """A stored corpus whose sub-chunks today's chunker splits differently (CJK sentence ends, long sentences cut
    since 2026-12-02): its cards are intact if the chunker before gives the recorded fingerprint; the record then
    takes today's (its dense collection, named by it, is built anew). Anything else is damage."""
    now = fingerprint(chunks)
    if fingerprint(split_cards(cards, DEFAULT_CHUNK_WORDS, legacy=True)) != entry.fingerprint:
        raise LoadError(
            [
                f"{entry.name}: the cards kept in {corpus_store.where(settings)} do not give the "
                f"fingerprint recorded with them ({now} != {entry.fingerprint}): delete the corpus and "
                "upload it again."
            ]
        )
    log.warning(
        "corpus %s: its sub-chunks are split anew by today's chunker (%s -> %s, %d sub-chunks)",
        entry.name,
        entry.fingerprint,
        now,
        len(chunks),
    )
    try:
        corpus_store.update(settings, entry.name, fingerprint=now, chunks=len(chunks))
    except Exception:  # a read-only or unreachable store: this process uses the new split all the same
        log.exception("corpus %s: could not record its new fingerprint", entry.name)
    return dataclasses.replace(entry, fingerprint=now, chunks=len(chunks))


def _cached(key: tuple) -> CorpusData | None:
    with _CACHE_LOCK:
        return _LOADED.get(key)


def remember(key: tuple, data: CorpusData) -> CorpusData:
    with _CACHE_LOCK:
        if len(_LOADED) >= _LOADED_KEEP:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = data
    return data


def _read(kind: str, source: Path, limits: Limits) -> tuple[Sequence[Card], Sequence[LabeledQuery], str]:
    """A source's cards, labeled turns and format: the shipped cards with their queries when they load (a
    CORPUS_PATH without labeled turns beside it still opens), anything else through ``load_any``."""
    if kind == SHIPPED:
        try:
            ds = load_shipped(source)
            return ds.cards, ds.queries, "cards-jsonl"
        except Exception:
            pass
    loaded = load_any(source, limits)
    return loaded.cards, loaded.queries, loaded.format
