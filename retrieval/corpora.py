"""The corpora of a store a person can open (``Registry``): the shipped cards, every corpus kept in the Chroma store
(uploaded from the page, indexed by the CLI, or attached from a collection made elsewhere) and the BEIR folders
found under the data root; listing, naming, loading and adding them.

Chroma is the record (``retrieval.corpus_store``): each corpus's cards, labeled turns and metadata (format,
fingerprint, counts, refusal text, when added, who may delete it) live in its record collection in the configured
store (``CHROMA_PATH``, or the server at ``CHROMA_HOST``), so every process on that store lists and opens the same
corpora, and nothing of a corpus is kept in a file of one process. Each corpus also gets a dense collection per
embedding model, named by the fingerprint of its sub-chunks, the model and the chunker (``retrieval.dense.
DenseStore``): reopening a corpus, or uploading the same content again, reuses it. Its indexing jobs are
``retrieval.index_jobs``, its process-wide retriever ``retrieval.corpus_retrievers``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from retrieval import corpus_adding, corpus_loading, corpus_store
from retrieval.corpus import fingerprint
from retrieval.corpus_changes import CorpusChanges
from retrieval.corpus_entries import (
    SHIPPED,
    STORED,
    CorpusData,
    CorpusEntry,
    beir_folders,
    entry_of,
    owner_hash,
    sanitise,
    shipped_refusal,
)
from retrieval.formats import Limits
from retrieval.settings import Settings

log = logging.getLogger(__name__)


class Registry(CorpusChanges):
    """The corpora of one Settings' store (and data root)."""

    def __init__(self, settings: Settings, limits: Limits | None = None) -> None:
        self.settings = settings
        self.limits = limits or Limits.from_env()
        self.data_dir = Path(settings.data_dir)
        self.data_root = Path(settings.data_root) if settings.data_root else None
        self.store_error = ""

    # --------------------------------------------------------------------------------------------- listing
    def _records(self, *, writing: bool = False, strict: bool = False) -> list[dict[str, Any]]:
        """The corpus records in the store; a store that cannot be listed gives none (``strict``: raises)."""
        self._import_legacy()
        try:
            return corpus_store.records(self.settings, writing=writing)
        except (corpus_store.StoreUnavailable, ValueError) as exc:
            if strict:
                raise ValueError(f"{exc}; no corpus can be added or deleted until it is reachable.") from exc
            self.store_error = str(exc)
            log.warning("%s", exc)
            return []

    def entries(self) -> list[CorpusEntry]:
        """The shipped cards, the corpora in the store, then the BEIR folders under the data root."""
        shipped = CorpusEntry(
            SHIPPED,
            SHIPPED,
            str(self.settings.corpus_path),
            "cards-jsonl",
            refusal=shipped_refusal(self.settings.corpus_path),
        )
        stored = [entry_of(r) for r in self._records()]
        return [shipped, *stored, *beir_folders(self.data_root, stored)]

    def get(self, name_or_path: str | None, *, paths: bool = False) -> CorpusEntry:
        """The entry called ``name_or_path`` (None or "" = the shipped cards); with ``paths`` (the CLI, run by the
        machine's owner) also the one read from a file or folder. The page and its API pass names only: a path
        from a browser or a link is never opened.

        Raises:
            ValueError: no such corpus; the message lists the names there are.
        """
        if name_or_path is not None and not isinstance(name_or_path, str):
            raise ValueError(
                f"a corpus is named by text (e.g. {SHIPPED!r}), not by a {type(name_or_path).__name__}: "
                "pick one in the Data tab."
            )
        wanted = (name_or_path or SHIPPED).strip()
        entries = self.entries()
        found = next((e for e in entries if e.name == wanted), None) or (_by_path(wanted, entries) if paths else None)
        if found is not None:
            return found
        raise _not_found(wanted, entries, self.store_error or corpus_store.unreachable(self.settings), paths)

    # --------------------------------------------------------------------------------------------- loading
    def open(self, name_or_path: str | None, *, paths: bool = False) -> CorpusData:
        """``load(get(name_or_path, paths=paths))``: the corpus by name (None = the shipped cards), loaded."""
        return self.load(self.get(name_or_path, paths=paths))

    def load(self, entry: CorpusEntry) -> CorpusData:
        """The entry's cards, sub-chunks and labeled turns (validated; cached while the source is unchanged): a
        corpus in the store is read from it page by page, anything else from its file or folder.

        Raises:
            LoadError / CorpusError: the source does not load; the message names the file, line and field.
        """
        return corpus_loading.load(self.settings, self.limits, entry)

    # --------------------------------------------------------------------------------------------- adding
    def add(
        self,
        path: str | Path,
        name: str | None = None,
        *,
        display: str | None = None,
        copy: bool = False,
        owner: str | None = None,
        address: str | None = None,
    ) -> tuple[CorpusData, bool]:
        """Validate a file or folder and keep its cards and labeled turns in the store. ``copy``: it is an upload
        from the page (its temporary file is read, nothing of it is kept on disk), deletable from the page only by
        the session holding ``owner`` (a secret token); otherwise the CLI indexed it and the page never deletes it.
        ``address``: the page's client address; an upload counts against its session's and its address's share of
        the store, and a full store first deletes the page's corpora no one opened for a while (``retrieval.quotas``).

        Returns the loaded corpus and whether it was new (False: the same cards and labeled turns are in the store
        already, and that corpus, with its dense collections, is reused). A file that does not validate changes nothing.

        Raises:
            LoadError: every problem found (file, line or row, field), or the MAX_CORPORA limit.
            ValueError: the store cannot be reached.
        """
        return corpus_adding.add(self, path, name, display=display, copy=copy, owner=owner, address=address)


def _not_found(wanted: str, entries: list[CorpusEntry], away: str, paths: bool) -> ValueError:
    """Why no corpus is called ``wanted``: the store did not answer, or no such name (listing those there are)."""
    if away and wanted != SHIPPED:  # not "deleted": the store did not answer
        return ValueError(
            f"corpus {wanted[:80]!r} cannot be opened now: {away}. Nothing was deleted; try again "
            f"once the store answers ({SHIPPED!r}, the shipped cards, works meanwhile)."
        )
    names = ", ".join(e.name for e in entries)
    gone = " If it was listed before, it has been deleted (perhaps from another page or app process)."
    if not paths:
        return ValueError(
            f"no corpus named {wanted[:80]!r}: choose one of {names} (the Data tab lists them; "
            "upload a file there to add one)." + gone
        )
    return ValueError(
        f"no corpus named {wanted!r}: choose one of {names}, or give the path of a file or folder "
        "(index it first with `python -m retrieval index PATH`)." + gone
    )


def _by_path(wanted: str, entries: list[CorpusEntry]) -> CorpusEntry | None:
    """The entry read from the file or folder ``wanted``, a new "path" entry for it, or None."""
    path = Path(wanted).expanduser()
    if not path.exists():
        return None
    for entry in entries:
        if entry.kind not in STORED and Path(entry.source).resolve() == path.resolve():
            return entry
    return CorpusEntry(sanitise(path.stem if path.is_file() else path.name), "path", str(path.resolve()), "")


def attach(
    settings: Settings,
    collection: str,
    *,
    name: str | None = None,
    text_field: str = "",
    title_field: str = "",
    limits: Limits | None = None,
    owner: str | None = None,
) -> tuple[CorpusData, bool]:
    """Check the collection against ``settings.embedding_model`` and keep a record of it in the store.

    Returns the corpus (``CorpusData``) and whether it was new (False: this collection was attached before, with
    the same model). ``owner``: the token of the browser session that attached it from the page (only it may
    forget it there); the CLI gives none.

    Raises:
        ValueError: no such collection, rows without text, or vectors that are not the model's (``AttachMismatch``,
            naming the mismatch).
    """
    from retrieval.attach import cards_of, own_collection, read_collection
    from retrieval.attach_vectors import attach_problem
    from retrieval.dense_store import AttachMismatch
    from retrieval.encoders import canonical_embedder, load_embedder

    if own_collection(collection):
        raise ValueError(f"{collection!r} is one of this app's own collections: open its corpus by name instead.")
    chunks, vectors = read_collection(settings, collection, text_field, title_field, embeddings=True)
    assert vectors is not None  # asked for with embeddings=True
    embedder = load_embedder(settings.embedding_model)
    problem = attach_problem(embedder, chunks, vectors)
    if problem:
        raise AttachMismatch(f"collection {collection!r} cannot be searched with {embedder.name}: {problem}.")
    model = canonical_embedder(settings.embedding_model)
    fp = fingerprint(chunks, "attach", collection, model)
    registry = Registry(settings, limits)
    for row in corpus_store.records(settings):
        if row.get("attached") == collection and row.get("model") == model:
            return registry.open(str(row["name"])), False
    meta = {
        "format": "chroma-collection",
        "fingerprint": fp,
        "cards": len(cards_of(chunks)),
        "chunks": len(chunks),
        "turns": 0,
        "added": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "origin": "attach",
        "owner": owner_hash(owner),
        "refusal": "",
        "source": "",
        "attached": collection,
        "model": model,
        "text_field": text_field,
        "title_field": title_field,
    }
    taken = {SHIPPED, *(e.name for e in beir_folders(registry.data_root, []))}
    final = corpus_store.create(settings, sanitise(name or collection), taken, meta, (), ())
    return registry.open(final), True
