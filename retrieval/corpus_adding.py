"""Adding a file or folder to the store: validated, matched against the corpora there already (the same cards and
labeled turns are reused), counted against the uploader's share, and kept as a record (``Registry.add``)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from retrieval import corpus_store, quotas
from retrieval.corpus import DEFAULT_CHUNK_WORDS, fingerprint, split_cards
from retrieval.corpus_changes import REGISTRY_LOCK, CorpusChanges, delete_corpus
from retrieval.corpus_entries import SHIPPED, CorpusData, beir_folders, entry_of, owner_hash, sanitise
from retrieval.corpus_loading import remember, stored_key
from retrieval.formats import LoadError, load_any


def add(
    registry: CorpusChanges,
    path: str | Path,
    name: str | None,
    *,
    display: str | None,
    copy: bool,
    owner: str | None,
    address: str | None,
) -> tuple[CorpusData, bool]:
    """``Registry.add``: the loaded corpus and whether it was new."""
    settings, limits = registry.settings, registry.limits
    path = Path(path)
    shown = display or path.name
    loaded = load_any(path, limits, display=shown if copy else None)
    chunks = split_cards(loaded.cards, DEFAULT_CHUNK_WORDS)
    fp = fingerprint(chunks)
    with REGISTRY_LOCK:
        rows = registry._records(writing=True, strict=True)
        for row in rows:
            if row.get("fingerprint") == fp and row.get("state") == "ready" and row.get("origin") != "attach":
                same = registry.load(entry_of(row))
                if same.queries == tuple(loaded.queries):  # the same cards with other labeled turns are new
                    return dataclasses.replace(same, notes=loaded.notes), False
        try:
            if copy:
                quotas.check_own(settings, rows, owner_hash(owner), quotas.address_hash(address))
            if len(rows) >= limits.max_corpora:
                rows = quotas.make_room(
                    settings,
                    rows,
                    limits.max_corpora,
                    lambda row: delete_corpus(registry, entry_of(row)),
                    owner_hash(owner) if copy else "",
                )
        except quotas.QuotaError as exc:
            raise LoadError([f"{shown}: {exc}"]) from None
        taken = {SHIPPED, *(e.name for e in beir_folders(registry.data_root, []))}
        meta: dict[str, Any] = {
            "format": loaded.format,
            "fingerprint": fp,
            "cards": len(loaded.cards),
            "chunks": len(chunks),
            "turns": len(loaded.queries),
            "added": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "origin": "page" if copy else "cli",
            "owner": owner_hash(owner) if copy else "",
            "client": quotas.address_hash(address) if copy else "",
            "opened": time.time(),
            "refusal": "",
            "source": "" if copy else str(path.resolve()),
            "model": _canonical(settings.embedding_model),
        }
        final = corpus_store.create(
            settings, sanitise(name or Path(shown).stem), taken, meta, loaded.cards, loaded.queries
        )
    entry = entry_of({**meta, "name": final, "collection": corpus_store.PREFIX + final})
    data = CorpusData(entry, tuple(loaded.cards), tuple(chunks), tuple(loaded.queries), loaded.notes)
    return remember(stored_key(settings, final, fp, entry.added), data), True


def _canonical(model: str) -> str:
    from retrieval.encoders import canonical_embedder

    return canonical_embedder(model)
