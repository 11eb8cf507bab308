"""The corpora a person can open: the shipped cards, every corpus kept in the Chroma store (uploaded from the page,
indexed by the CLI, or attached from a collection made elsewhere) and the BEIR folders found under the data root;
plus the indexing jobs that build their stores.

Chroma is the record (``retrieval.corpus_store``): each corpus's cards, labeled turns and metadata (format,
fingerprint, counts, refusal text, when added, who may delete it) live in its record collection in the configured
store (``CHROMA_PATH``, or the server at ``CHROMA_HOST``), so every process on that store lists and opens the same
corpora, and nothing of a corpus is kept in a file of one process. Each corpus also gets a dense collection per
embedding model, named by the fingerprint of its sub-chunks, the model and the chunker (``retrieval.dense_store.
DenseStore``): reopening a corpus, or uploading the same content again, reuses it. One indexing job runs per corpus
and store in a process (a second request attaches to it and sees the same progress); two processes indexing the
same corpus write the same ids and vectors into the one collection. A job can be cancelled, and the next one
resumes from what was stored.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval import calibration_jobs, corpus_store, quotas
from retrieval.calibration_jobs import CalibrationJob, calibrate_on_index
from retrieval.context import REFUSAL
from retrieval.corpus import (
    DEFAULT_CHUNK_WORDS,
    CorpusError,
    Dataset,
    LabeledQuery,
    fingerprint,
    load_cards,
    load_shipped,
    split_cards,
)
from retrieval.formats import Limits, LoadError, load_any
from retrieval.settings import PROJECT_ROOT, Settings
from retrieval.types import Card, Chunk

log = logging.getLogger(__name__)

SHIPPED = "shipped"
LEGACY_REGISTRY = "corpora.json"  # the registry file of earlier versions: imported into the store once
NEUTRAL_REFUSAL = (
    "I could not find this in the documents I have, so I will not guess. Could you rephrase, or ask "
    "about something they cover?"
)
MAX_REFUSAL_CHARS = 1000
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_REGISTRY_LOCK = threading.RLock()  # one add (or legacy import) at a time in this process
_CACHE_LOCK = threading.Lock()  # the loaded corpora: never held while the store is read or written
_LOADED: dict[tuple, CorpusData] = {}  # (source or record, stamp) -> loaded corpus, shared by every session
_LOADED_KEEP = 8
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


class _Changes:
    """What changes the corpora of a store besides adding: the legacy import, delete, the refusal text. Who may
    change what is decided here: the page only what its own session uploaded, the CLI anything of the store."""

    settings: Settings
    data_dir: Path
    get: Any
    add: Any
    load: Any

    def _import_legacy(self) -> None:
        """Corpora registered by an earlier version in ``DATA_DIR/corpora.json``: added to the store once (the CLI
        may delete them), then the file is renamed ``corpora.json.imported`` (0600)."""
        path = self.data_dir / LEGACY_REGISTRY
        if not path.is_file():
            return
        with _REGISTRY_LOCK:
            if not path.is_file():
                return
            try:
                rows = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                rows = []
            done = path.with_name(path.name + ".imported")
            path.replace(done)
            os.chmod(done, 0o600)
            uploads = self.data_dir / "uploads"  # the old copies of uploads: the owner's only from now on
            if uploads.is_dir():
                os.chmod(uploads, 0o700)
                for old in uploads.iterdir():
                    if old.is_file():
                        os.chmod(old, 0o600)
            for row in rows if isinstance(rows, list) else []:
                raw = str(row.get("source") or "") if isinstance(row, dict) else ""
                if raw and Path(raw).exists():
                    source = Path(raw)
                    try:
                        self.add(source, str(row.get("name") or source.stem))
                    except Exception as exc:
                        log.warning("could not import %s from %s: %s", row.get("name"), done, exc)

    # --------------------------------------------------------------------------------------------- changing
    def _owned(self, name: str, token: str | None, page: bool, what: str) -> CorpusEntry:
        entry = self.get(name)
        if entry.kind not in STORED:
            where = "the shipped corpus" if entry.kind == SHIPPED else "a folder under the data root"
            raise ValueError(f"{entry.name!r} is {where}; only corpora uploaded or indexed here can {what}.")
        if page and not entry.may_delete(token):
            how = (
                "added from the command line"
                if not entry.owner
                else "uploaded or attached from another browser session"
            )
            act = "delete it" if what == "be deleted" else what
            raise ValueError(
                f"{entry.name!r} was {how}: only the browser session that uploaded or attached a corpus may {act} "
                "from the page"
                + (
                    f" (the machine's owner can, with `python -m retrieval index --delete {entry.name}`)."
                    if what == "be deleted"
                    else "."
                )
            )
        return entry

    def delete(self, name: str, *, token: str | None = None, page: bool = False) -> str:
        """Forget a corpus kept in the store: its record and its dense collections (an attached collection is never
        dropped: it was made elsewhere). ``page``: asked from the page, allowed only to the session holding the
        ``token`` its upload was given; the CLI (``page=False``) may delete any.

        Raises:
            ValueError: the shipped cards, a data-root folder, another session's corpus, or an unknown name.
        """
        return delete_corpus(self, self._owned(name, token, page, "be deleted"))

    def may_calibrate(self, name: str | None, token: str | None) -> CorpusEntry:
        """The entry of a corpus whose refusal calibration the page session holding ``token`` may re-run: only one
        it uploaded or attached (the shipped cards' and the CLI's corpora: `python -m retrieval calibrate NAME`).

        Raises:
            ValueError: the shipped cards, a data-root folder, another session's corpus, or an unknown name.
        """
        return self._owned(name or SHIPPED, token, True, "re-run its refusal calibration")

    def set_refusal(self, name: str, text: str | None, *, token: str | None = None, page: bool = False) -> str:
        """Keep ``text`` with the corpus as what the assistant says when it refuses a turn on it ("" or None: back to
        the neutral default). The same rule as ``delete`` says who may change it.

        Raises:
            ValueError: not a corpus of the store, not this session's, or a text too long.
        """
        entry = self._owned(name, token, page, "change its refusal text")
        clean = " ".join(str(text or "").split())
        if len(clean) > MAX_REFUSAL_CHARS:
            raise ValueError(f"the refusal text has {len(clean):,} characters; keep it under {MAX_REFUSAL_CHARS:,}.")
        try:
            corpus_store.update(self.settings, entry.name, refusal=clean)
        except KeyError:
            raise ValueError(
                f"corpus {entry.name!r} has been deleted (perhaps from another page or app process)."
            ) from None
        return f"refusal text of {entry.name} " + ("set" if clean else "reset to the default")


class Registry(_Changes):
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
        away = self.store_error or corpus_store.unreachable(self.settings)
        if away and wanted != SHIPPED:  # not "deleted": the store did not answer
            raise ValueError(
                f"corpus {wanted[:80]!r} cannot be opened now: {away}. Nothing was deleted; try again "
                f"once the store answers ({SHIPPED!r}, the shipped cards, works meanwhile)."
            )
        names = ", ".join(e.name for e in entries)
        gone = " If it was listed before, it has been deleted (perhaps from another page or app process)."
        if not paths:
            raise ValueError(
                f"no corpus named {wanted[:80]!r}: choose one of {names} (the Data tab lists them; "
                "upload a file there to add one)." + gone
            )
        raise ValueError(
            f"no corpus named {wanted!r}: choose one of {names}, or give the path of a file or folder "
            "(index it first with `python -m retrieval index PATH`)." + gone
        )

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
        if entry.kind in STORED:
            return self._load_stored(entry)
        source = Path(entry.source)
        try:
            stamp = source.stat().st_mtime
        except OSError:
            raise LoadError([f"{entry.name}: its source {source} is gone."]) from None
        cache_key = (str(source), stamp)
        cached = _cached(cache_key)
        if cached is not None and cached.entry.name == entry.name:
            return cached
        cards, queries, fmt = _read(entry.kind, source, self.limits)
        chunks = tuple(split_cards(cards, DEFAULT_CHUNK_WORDS))
        entry = dataclasses.replace(
            entry, format=fmt, fingerprint=fingerprint(chunks), cards=len(cards), chunks=len(chunks), turns=len(queries)
        )
        return _remember(cache_key, CorpusData(entry, tuple(cards), chunks, tuple(queries)))

    def _load_stored(self, entry: CorpusEntry) -> CorpusData:
        cache_key = (
            "store",
            self.settings.chroma_host or self.settings.chroma_path,
            entry.name,
            entry.fingerprint,
            entry.added,
        )
        cached = _cached(cache_key)
        if cached is not None:
            return dataclasses.replace(cached, entry=entry)  # the refusal text may have changed since
        if entry.kind == "attached":
            from retrieval.attach import read_attached

            chunks, cards = read_attached(self.settings, entry)
            queries: list[LabeledQuery] = []
        else:
            try:
                _, cards, queries = corpus_store.read(self.settings, entry.name)
            except KeyError:
                raise ValueError(
                    f"corpus {entry.name!r} has been deleted (perhaps from another page or app "
                    "process): pick another in the Data tab."
                ) from None
            chunks = split_cards(cards, DEFAULT_CHUNK_WORDS)
            if fingerprint(chunks) != entry.fingerprint:
                entry = _resplit(self.settings, entry, cards, chunks)
        return _remember(cache_key, CorpusData(entry, tuple(cards), tuple(chunks), tuple(queries)))

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
        path = Path(path)
        shown = display or path.name
        loaded = load_any(path, self.limits, display=shown if copy else None)
        chunks = split_cards(loaded.cards, DEFAULT_CHUNK_WORDS)
        fp = fingerprint(chunks)
        with _REGISTRY_LOCK:
            rows = self._records(writing=True, strict=True)
            for row in rows:
                if row.get("fingerprint") == fp and row.get("state") == "ready" and row.get("origin") != "attach":
                    same = self.load(entry_of(row))
                    if same.queries == tuple(loaded.queries):  # the same cards with other labeled turns are new
                        return dataclasses.replace(same, notes=loaded.notes), False
            try:
                if copy:
                    quotas.check_own(self.settings, rows, owner_hash(owner), quotas.address_hash(address))
                if len(rows) >= self.limits.max_corpora:
                    rows = quotas.make_room(
                        self.settings,
                        rows,
                        self.limits.max_corpora,
                        lambda row: delete_corpus(self, entry_of(row)),
                        owner_hash(owner) if copy else "",
                    )
            except quotas.QuotaError as exc:
                raise LoadError([f"{shown}: {exc}"]) from None
            taken = {SHIPPED, *(e.name for e in beir_folders(self.data_root, []))}
            meta = {
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
                "model": _canonical(self.settings.embedding_model),
            }
            final = corpus_store.create(
                self.settings, sanitise(name or Path(shown).stem), taken, meta, loaded.cards, loaded.queries
            )
        entry = entry_of({**meta, "name": final, "collection": corpus_store.PREFIX + final})
        data = CorpusData(entry, tuple(loaded.cards), tuple(chunks), tuple(loaded.queries), loaded.notes)
        return _remember(
            ("store", self.settings.chroma_host or self.settings.chroma_path, final, fp, entry.added), data
        ), True


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


def attach(
    settings: Settings,
    collection: str,
    *,
    name: str | None = None,
    text_field: str = "",
    title_field: str = "",
    limits=None,
    owner: str | None = None,
):
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


def _canonical(model: str) -> str:
    from retrieval.encoders import canonical_embedder

    return canonical_embedder(model)


def _cached(key: tuple) -> CorpusData | None:
    with _CACHE_LOCK:
        return _LOADED.get(key)


def _remember(key: tuple, data: CorpusData) -> CorpusData:
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


def _by_path(wanted: str, entries: list[CorpusEntry]) -> CorpusEntry | None:
    """The entry read from the file or folder ``wanted``, a new "path" entry for it, or None."""
    path = Path(wanted).expanduser()
    if not path.exists():
        return None
    for entry in entries:
        if entry.kind not in STORED and Path(entry.source).resolve() == path.resolve():
            return entry
    return CorpusEntry(sanitise(path.stem if path.is_file() else path.name), "path", str(path.resolve()), "")


def delete_corpus(self: Registry, entry: CorpusEntry) -> str:
    """Forget a corpus of the store: its record and (unless attached) its dense collections."""
    job = job_for_entry(entry.name)
    if job is not None and job.running:
        raise ValueError(f"{entry.name!r} is being indexed; cancel the job first.")
    dropped = 0
    if entry.kind == "indexed":
        try:
            dropped = drop_collections(self.settings, self.load(entry).chunks)
        except (ValueError, LoadError):
            pass  # deleted meanwhile, or its cards no longer load: the record still goes
    if not corpus_store.drop(self.settings, entry.name):
        return f"{entry.name} was already deleted (perhaps from another page or app process)"
    from retrieval.judgments import corpus_identity, drop_corpus

    drop_corpus(self.settings, corpus_identity(CorpusData(entry, (), (), ())))  # its labels and everyone's marks
    forget_retrievers(CorpusData(entry, (), (), ()).key or "")
    with _JOBS_LOCK:
        for key in [k for k, j in _JOBS.items() if j.name == entry.name]:
            _JOBS.pop(key)
    if entry.kind == "attached":
        return f"deleted {entry.name} (its collection {entry.collection} was made elsewhere and is kept)"
    return f"deleted {entry.name} ({dropped} Chroma collection{'s' if dropped != 1 else ''} removed)"


# ------------------------------------------------------------------------------------------------ stores
def collection_names(chunks: tuple[Chunk, ...] | list[Chunk], models: list[str]) -> list[str]:
    """The Chroma collection names a corpus may have, one per embedding model (``DenseStore``'s naming)."""
    return [f"chunks-{fingerprint(chunks, model)}" for model in models]


def drop_collections(settings: Settings, chunks) -> int:
    from retrieval.encoders import BUNDLED_EMBEDDERS, canonical_embedder

    models = sorted({*BUNDLED_EMBEDDERS, canonical_embedder(settings.embedding_model), settings.embedding_model})
    client = corpus_store.client_for(settings)
    existing = {c.name if hasattr(c, "name") else str(c) for c in client.list_collections()}
    dropped = 0
    for name in collection_names(chunks, models):
        if name in existing:
            try:
                client.delete_collection(name)
                dropped += 1
            except Exception as exc:  # another process dropped it first
                log.warning("could not drop %s: %s", name, exc)
    return dropped


def is_indexed(data: CorpusData, settings: Settings) -> bool:
    """True if the store already holds this corpus's complete dense collection for these settings' model (indexed
    by this process before, or by another one): opening it embeds nothing."""
    if data.key is None or data.entry.kind == "attached":
        return True
    from retrieval.dense_rows import stored_rows
    from retrieval.encoders import canonical_embedder

    name = collection_names(data.chunks, [canonical_embedder(settings.embedding_model)])[0]
    try:
        return corpus_store.client_for(settings).get_collection(name).count() == len(stored_rows(data.chunks))
    except Exception:
        return False


def forget_retrievers(corpus_key: str) -> None:
    from retrieval import retriever_cache

    with retriever_cache._RETRIEVERS_LOCK:
        for key in [k for k in retriever_cache._RETRIEVERS if k[0] == corpus_key]:
            retriever_cache._RETRIEVERS.pop(key, None)


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


def settings_for(data: CorpusData, settings: Settings) -> Settings:
    """The settings a corpus is indexed and searched with: an attached collection's own embedding model."""
    if data.entry.kind == "attached" and data.entry.model:
        return settings.replace(embedding_model=data.entry.model)
    return settings


# The corpus's stored refusal calibration is read again at most this often: one re-run by another process (the CLI's
# ``calibrate``, another app process on the store, the Data tab of another) reaches this one's turns within it.
CALIBRATION_REREAD_S = 30.0


def retriever_for(data: CorpusData, settings: Settings, *, progress=None, cancel=None):
    """The process-wide retriever over this corpus (built, and its store indexed, on first use)."""
    from retrieval.retriever_cache import get_retriever

    if data.key is None:
        return get_retriever(settings, progress=progress, cancel=cancel)
    attach = data.entry.collection if data.entry.kind == "attached" else None
    if progress is not None:  # an indexing job (the Data tab, the CLI): the one place a build starts or resumes
        _drop_half_built(data, settings)
    retriever = get_retriever(
        settings_for(data, settings),
        progress=progress,
        chunks=data.chunks,
        corpus_key=data.key,
        cancel=cancel,
        attach=attach,
    )
    now = time.monotonic()
    if getattr(retriever, "ood_covered", None) is None and retriever.dense_branch.store is not None:
        from retrieval import ood_examples  # the out-of-domain pool's turns this corpus answers itself

        retriever.ood_covered = ood_examples.covered(retriever)
    if now - getattr(retriever, "calibration_read_at", -CALIBRATION_REREAD_S) >= CALIBRATION_REREAD_S:
        from retrieval import calibration, store_calls

        try:  # a store that does not answer at once keeps what this process has; read again at the next turn
            done, stored = store_calls.bounded(
                ("calibration", data.key), lambda: calibration.load(settings_for(data, settings), data.chunks), 1.0
            )
        except Exception:  # (an unreadable store keeps what this process has)
            done, stored = True, None
        if stored is not None:
            retriever.calibration = stored
        if done:
            retriever.calibration_read_at = now
    return retriever


def _drop_half_built(data: CorpusData, settings: Settings) -> None:
    """Forget this process's retriever over ``data`` if its dense store never opened (the store went away while
    it was being built): the job about to run builds it again, resuming from what the store kept."""
    from retrieval.retriever_cache import cached_retriever

    kept = cached_retriever(settings_for(data, settings), data.key)
    if kept is not None and kept.dense is None:
        forget_retrievers(data.key or "")


def open_for_turns(name: str | None, settings: Settings):
    """The retriever a turn runs on for the corpus ``name`` (``turn_corpus``'s first half)."""
    return turn_corpus(name, settings)[0]


def turn_corpus(name: str | None, settings: Settings):
    """The retriever a turn runs on for the corpus ``name`` (None or "shipped": the cards at CORPUS_PATH) and the
    corpus's refusal text. A corpus whose dense collection the store holds complete (indexed here or by another
    process) is opened; a turn never starts an indexing job (the Data tab or ``python -m retrieval index`` does).

    Raises:
        ValueError: unknown (or deleted) corpus, or one not indexed yet for these settings' embedding model.
    """
    from retrieval.retriever_cache import get_retriever

    if not name or name == SHIPPED:
        return get_retriever(settings), shipped_refusal(settings.corpus_path)
    data = Registry(settings).open(name)
    quotas.touch(settings, data.entry)
    if not is_ready(data, settings) and not is_indexed(data, settings):
        raise ValueError(
            f"corpus {name!r} is not indexed for {settings.embedding_model} in this app yet: open it "
            "in the Data tab and wait for its progress bar to reach 100%."
        )
    return retriever_for(data, settings), data.entry.refusal


def open_within(data: CorpusData, settings: Settings, seconds: float) -> dict[str, Any] | None:
    """Open the corpus's store for a share link, waiting at most ``seconds``: None once it is ready, else the
    snapshot of this process's job (still running, or failed with its error). A link never starts indexing: a
    corpus whose store is not complete is refused, and a person starts its indexing in the Data tab.

    Raises:
        ValueError: the corpus is not indexed yet (and no job of this process is indexing it).
    """
    if data.key is None or is_ready(data, settings):
        return None
    job = job_for(data, settings)
    if job is None or not job.running:
        if not is_indexed(data, settings):
            raise ValueError(
                f"is not indexed yet for {settings.embedding_model}: a link opens only corpora "
                "already indexed; open it in the Data tab to index it."
            )
        job = start_index(data, settings)  # its collection is complete: this opens it, embedding nothing
    snap = job.wait(seconds)
    return None if snap["status"] == "done" else snap


def labels_by_turn(data: CorpusData) -> dict[str, dict[str, int]]:
    """The judgements (card id -> grade) of each labeled turn, keyed by ``turn_key`` of its text."""
    return {turn_key(q.text): dict(q.relevant) for q in data.queries if q.relevant}


def turn_key(text: str) -> str:
    """A turn's text with case and runs of white space ignored: how a typed turn is matched to a labeled one."""
    return " ".join(str(text).lower().split())


def is_ready(data: CorpusData, settings: Settings) -> bool:
    """True if a retriever over this corpus is built in this process (its store opened or indexed)."""
    from retrieval.retriever_cache import cached_retriever

    kept = cached_retriever(settings_for(data, settings), data.key)
    # a retriever whose dense store never opened (the store went away mid-build) is not ready: the Data tab resumes
    return kept is not None and (data.key is None or kept.dense is not None)


# ------------------------------------------------------------------------------------------------ jobs
class IndexJob:
    """One indexing job: builds the retriever (BM25 + the dense store) of one corpus for one store and model."""

    def __init__(self, key: tuple, data: CorpusData, settings: Settings) -> None:
        self.key = key
        self.name = data.entry.name
        self.data = data
        self.settings = settings
        self.total = len(data.chunks)
        self.done = 0
        self.first_done: int | None = None  # what the store already held (a resumed build starts there)
        self.started = time.monotonic()
        self.updated = self.started
        self.finished: float | None = None
        self.status = "running"  # running, done, cancelled, failed
        self.error = ""
        self.cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"index-{self.name}", daemon=True)

    @property
    def running(self) -> bool:
        return self.status == "running"

    def _progress(self, done: int, total: int) -> None:
        if self.first_done is None:  # the first call says where the build starts (what the store held)
            self.first_done = done
            self.started = time.monotonic()
        self.done, self.total, self.updated = done, total, time.monotonic()

    def _run(self) -> None:
        from retrieval.dense_build import IndexingCancelled

        try:
            retriever = retriever_for(self.data, self.settings, progress=self._progress, cancel=self.cancel)
            if retriever.dense is None:
                self.status, self.error = "failed", retriever.dense_error or "the dense store is unavailable"
            else:
                self.done = self.total
                self.status = "done"
                from retrieval import projection

                projection.request(retriever.dense)  # the corpus's map, in the background (loaded if it is kept)
                if (
                    calibrate_on_index(self.settings)
                    and self.data.key is not None
                    and getattr(retriever, "calibration", None) is None
                ):
                    start_calibration(self.data, self.settings)
        except IndexingCancelled as exc:
            self.status, self.error = "cancelled", str(exc)
        except Exception as exc:  # shown in the page and the CLI; the log keeps the traceback
            log.exception("indexing %s failed", self.name)
            self.status, self.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self.finished = time.monotonic()

    def snapshot(self) -> dict[str, Any]:
        """What a progress bar shows: embedded / total, rate (sub-chunks/s), seconds left, status, error."""
        elapsed = max((self.finished or time.monotonic()) - self.started, 1e-9)
        fresh = self.done - (self.first_done or 0)
        rate = fresh / elapsed if fresh > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else None
        return {
            "name": self.name,
            "status": self.status,
            "done": self.done,
            "total": self.total,
            "fraction": (self.done / self.total) if self.total else 1.0,
            "rate": rate,
            "eta_s": left,
            "elapsed_s": elapsed,
            "error": self.error,
        }

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        self._thread.join(timeout)
        return self.snapshot()


_JOBS: dict[tuple, IndexJob] = {}
_JOBS_LOCK = threading.Lock()


def start_index(data: CorpusData, settings: Settings) -> IndexJob:
    """The indexing job for this corpus and store: a running one is joined (same progress), else a new one starts.
    A corpus whose retriever is already built gets a job that is done at once."""
    from retrieval.retriever_cache import retriever_key

    key = retriever_key(settings_for(data, settings), data.key)
    with _JOBS_LOCK:
        job = _JOBS.get(key)
        if job is not None and (job.running or job.status == "done"):
            return job
        job = IndexJob(key, data, settings)
        _JOBS[key] = job
        job._thread.start()
        return job


def job_for(data: CorpusData, settings: Settings) -> IndexJob | None:
    from retrieval.retriever_cache import retriever_key

    with _JOBS_LOCK:
        return _JOBS.get(retriever_key(settings_for(data, settings), data.key))


def job_for_entry(name: str) -> IndexJob | None:
    with _JOBS_LOCK:
        running = [j for j in _JOBS.values() if j.name == name and j.running]
        return running[0] if running else None


# ------------------------------------------------------------------------------------- refusal calibration
def start_calibration(data: CorpusData, settings: Settings) -> CalibrationJob:
    """Calibrate the corpus's refusal thresholds in the background, one corpus at a time in this process (a queued
    or running job for it is joined; ``retrieval.calibration_jobs``). Who may ask is checked by the caller
    (``Registry.may_calibrate`` for the page; indexing and the CLI may)."""
    return calibration_jobs.start(data, settings_for(data, settings), lambda: retriever_for(data, settings))


def running_calibration(name: str | None) -> CalibrationJob | None:
    """The refusal calibration of this process still running on the corpus ``name`` (None: none is)."""
    return calibration_jobs.running(name or SHIPPED)


def calibration_state(data: CorpusData, settings: Settings) -> tuple[Any, CalibrationJob | None]:
    """(the calibration in force for this corpus or None, the latest calibration job of this process or None)."""
    return calibration_jobs.state(data, settings_for(data, settings))
