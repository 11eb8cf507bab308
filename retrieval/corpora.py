"""The corpora a person can open: the shipped cards, every corpus indexed before (a registry under the data folder),
and the BEIR folders found under the data root; plus the indexing jobs that build their stores.

Each corpus gets its own Chroma collection, named by the fingerprint of its sub-chunks, the embedding model and the
chunker (``retrieval.dense.DenseStore``), in the configured store (``CHROMA_PATH``, or the server at
``CHROMA_HOST``): reopening a corpus, or uploading the same content again, reuses it. One indexing job runs per
corpus and store (a second request attaches to it and sees the same progress), so a store is never written by two
jobs at once; a job can be cancelled, and the next one resumes from what was stored.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
import threading
import time
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval.corpus import DEFAULT_CHUNK_WORDS, Dataset, LabeledQuery, fingerprint, load_shipped, split_cards
from retrieval.formats import Limits, LoadError, load_any
from retrieval.settings import Settings
from retrieval.types import Card, Chunk

log = logging.getLogger(__name__)

SHIPPED = "shipped"
REGISTRY_FILE = "corpora.json"
UPLOADS = "uploads"
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_REGISTRY_LOCK = threading.RLock()
_LOADED: dict[tuple[str, float], CorpusData] = {}  # (source, mtime) -> loaded corpus, shared by every session
_LOADED_KEEP = 8


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus the page and the CLI can open."""

    name: str
    kind: str  # "shipped", "indexed" (uploaded or `index`ed before), "beir" (found under the data root)
    source: str  # the file or folder it is read from
    format: str
    fingerprint: str = ""  # of its sub-chunks (ids, titles, texts) and the chunker; "" until first loaded
    cards: int = 0
    chunks: int = 0
    turns: int = 0
    added: str = ""

    def label(self) -> str:
        size = f"{self.chunks:,} sub-chunks" if self.chunks else "not loaded yet"
        turns = f", {self.turns} labeled turns" if self.turns else ""
        return f"{self.name} ({self.kind}, {self.format}, {size}{turns})"


@dataclass(frozen=True)
class CorpusData:
    """A corpus loaded: its cards, sub-chunks (split exactly as the shipped cards) and labeled turns."""

    entry: CorpusEntry
    cards: tuple[Card, ...]
    chunks: tuple[Chunk, ...]
    queries: tuple[LabeledQuery, ...]

    @property
    def key(self) -> str | None:
        """The corpus identity in the retriever key (None for the shipped cards: the CORPUS_PATH key as before)."""
        return None if self.entry.kind == SHIPPED else f"corpus:{self.entry.fingerprint}"

    def dataset(self) -> Dataset:
        return Dataset(name=self.entry.name, cards=self.cards, queries=self.queries, chunk_words=DEFAULT_CHUNK_WORDS)


def sanitise(name: str, fallback: str = "corpus") -> str:
    """A file-system and display-safe name: letters, digits, ``.``, ``_`` and ``-``, at most 60 characters."""
    clean = _NAME.sub("-", name).strip(".-_")[:60]
    return clean or fallback


class Registry:
    """The corpora under one Settings' data folder and data root."""

    def __init__(self, settings: Settings, limits: Limits | None = None) -> None:
        self.settings = settings
        self.limits = limits or Limits.from_env()
        self.data_dir = Path(settings.data_dir)
        self.data_root = Path(settings.data_root) if settings.data_root else None

    # --------------------------------------------------------------------------------------------- listing
    def _read(self) -> list[dict[str, Any]]:
        path = self.data_dir / REGISTRY_FILE
        if not path.is_file():
            return []
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
            return [r for r in rows if isinstance(r, dict) and "name" in r and "source" in r]
        except (OSError, ValueError) as exc:
            log.warning("corpus registry %s unreadable (%s); starting from an empty list", path, exc)
            return []

    def _write(self, rows: list[dict[str, Any]]) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / REGISTRY_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(path)

    def entries(self) -> list[CorpusEntry]:
        """The shipped cards, the corpora indexed before, then the BEIR folders under the data root."""
        shipped = CorpusEntry(SHIPPED, SHIPPED, str(self.settings.corpus_path), "cards-jsonl")
        with _REGISTRY_LOCK:
            indexed = [CorpusEntry(**{k: v for k, v in r.items() if k in CorpusEntry.__dataclass_fields__})
                       for r in self._read()]
        known = {Path(e.source).resolve() for e in indexed}
        names = {SHIPPED, *(e.name for e in indexed)}
        beir: list[CorpusEntry] = []
        if self.data_root and self.data_root.is_dir():
            for folder in sorted(self.data_root.iterdir()):
                if (folder / "corpus.jsonl").is_file() and folder.resolve() not in known:
                    name = folder.name if folder.name not in names else f"{folder.name}-beir"
                    beir.append(CorpusEntry(name, "beir", str(folder), "beir"))
        return [shipped, *indexed, *beir]

    def get(self, name_or_path: str | None, *, paths: bool = False) -> CorpusEntry:
        """The entry called ``name_or_path`` (None or "" = the shipped cards); with ``paths`` (the CLI, run by the
        machine's owner) also the one read from a file or folder. The page and its API pass names only: a path
        from a browser or a link is never opened.

        Raises:
            ValueError: no such corpus; the message lists the names there are.
        """
        wanted = (name_or_path or SHIPPED).strip()
        entries = self.entries()
        found = next((e for e in entries if e.name == wanted), None) or (_by_path(wanted, entries) if paths else None)
        if found is not None:
            return found
        names = ", ".join(e.name for e in entries)
        if not paths:
            raise ValueError(f"no corpus named {wanted[:80]!r}: choose one of {names} (the Data tab lists them; "
                             "upload a file there to add one).")
        raise ValueError(f"no corpus named {wanted!r}: choose one of {names}, or give the path of a file or folder "
                         "(index it first with `python -m retrieval index PATH`).")

    # --------------------------------------------------------------------------------------------- loading
    def open(self, name_or_path: str | None, *, paths: bool = False) -> CorpusData:
        """``load(get(name_or_path, paths=paths))``: the corpus by name (None = the shipped cards), loaded."""
        return self.load(self.get(name_or_path, paths=paths))

    def load(self, entry: CorpusEntry) -> CorpusData:
        """The entry's cards, sub-chunks and labeled turns (validated; cached while the source is unchanged).

        Raises:
            LoadError / CorpusError: the source does not load; the message names the file, line and field.
        """
        source = Path(entry.source)
        try:
            stamp = source.stat().st_mtime
        except OSError:
            raise LoadError([f"{entry.name}: its source {source} is gone. Delete the corpus and upload it "
                             "again."]) from None
        cache_key = (str(source), stamp)
        with _REGISTRY_LOCK:
            cached = _LOADED.get(cache_key)
        if cached is not None and cached.entry.name == entry.name:
            return cached
        cards, queries, fmt = _read(entry.kind, source, self.limits)
        chunks = tuple(split_cards(cards, DEFAULT_CHUNK_WORDS))
        entry = dataclasses.replace(entry, format=fmt, fingerprint=fingerprint(chunks), cards=len(cards),
                                    chunks=len(chunks), turns=len(queries))
        data = CorpusData(entry, tuple(cards), chunks, tuple(queries))
        with _REGISTRY_LOCK:
            if len(_LOADED) >= _LOADED_KEEP:
                _LOADED.pop(next(iter(_LOADED)))
            _LOADED[cache_key] = data
        return data

    # --------------------------------------------------------------------------------------------- adding
    def add(self, path: str | Path, name: str | None = None, *, display: str | None = None,
            copy: bool = False) -> tuple[CorpusData, bool]:
        """Validate a file or folder and register it; ``copy`` stores the file under the data folder (uploads).

        Returns the loaded corpus and whether it was new (False: the same content was registered before, and that
        entry, with its store, is reused). A file that does not validate changes nothing.

        Raises:
            LoadError: every problem found (file, line or row, field).
        """
        path = Path(path)
        shown = display or path.name
        loaded = load_any(path, self.limits, display=shown if copy else None)
        chunks = split_cards(loaded.cards, DEFAULT_CHUNK_WORDS)
        fp = fingerprint(chunks)
        with _REGISTRY_LOCK:
            rows = self._read()
            for row in rows:
                if row.get("fingerprint") == fp and Path(row["source"]).exists():
                    return self.load(self.get(row["name"])), False
            if len(rows) >= self.limits.max_corpora:
                raise LoadError([f"{shown}: this app already keeps {len(rows)} corpora, its limit (MAX_CORPORA="
                                 f"{self.limits.max_corpora}); delete one in the Data tab first."])
            base = sanitise(name or Path(shown).stem)
            taken = {SHIPPED, *(r["name"] for r in rows), *(e.name for e in self.entries() if e.kind == "beir")}
            final, n = base, 2
            while final in taken:
                final, n = f"{base}-{n}", n + 1
            source = path.resolve()
            if copy:
                folder = self.data_dir / UPLOADS
                folder.mkdir(parents=True, exist_ok=True)
                suffix = "".join(s for s in path.suffixes[-1:] if re.fullmatch(r"\.[A-Za-z0-9]{1,10}", s)).lower()
                source = folder / f"{final}-{fp[:8]}{suffix}"
                shutil.copyfile(path, source)
            entry = CorpusEntry(final, "indexed", str(source), loaded.format, fp, len(loaded.cards), len(chunks),
                                len(loaded.queries), time.strftime("%Y-%m-%dT%H:%M:%S"))
            rows.append(dataclasses.asdict(entry))
            self._write(rows)
        return self.load(entry), True

    def delete(self, name: str) -> str:
        """Forget an indexed corpus: its registry row, its stored upload and its Chroma collections (see
        ``delete_corpus``)."""
        return delete_corpus(self, name)


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
    """The registered entry read from the file or folder ``wanted``, a new "path" entry for it, or None."""
    path = Path(wanted).expanduser()
    if not path.exists():
        return None
    for entry in entries:
        if Path(entry.source).resolve() == path.resolve():
            return entry
    return CorpusEntry(sanitise(path.stem if path.is_file() else path.name), "path", str(path.resolve()), "")


def delete_corpus(self: Registry, name: str) -> str:
    """Forget an indexed corpus: its registry row, its stored upload and its Chroma collections.

    Raises:
        ValueError: the shipped cards or a data-root folder (not ours to delete), or an unknown name.
    """
    entry = self.get(name)
    if entry.kind != "indexed":
        raise ValueError(f"{entry.name!r} is {'the shipped corpus' if entry.kind == SHIPPED else 'a folder under the data root'}; "
                         "only corpora uploaded or indexed here can be deleted.")
    job = job_for_entry(entry.name)
    if job is not None and job.running:
        raise ValueError(f"{entry.name!r} is being indexed; cancel the job first.")
    dropped = drop_collections(self.settings, self.load(entry).chunks) if Path(entry.source).exists() else 0
    with _REGISTRY_LOCK:
        self._write([r for r in self._read() if r["name"] != entry.name])
    source = Path(entry.source)
    if source.is_file() and (self.data_dir / UPLOADS).resolve() in source.resolve().parents:
        source.unlink()
    forget_retrievers(f"corpus:{entry.fingerprint}")
    with _JOBS_LOCK:
        for key in [k for k, j in _JOBS.items() if j.name == entry.name]:
            _JOBS.pop(key)
    return f"deleted {entry.name} ({dropped} Chroma collection{'s' if dropped != 1 else ''} removed)"


# ------------------------------------------------------------------------------------------------ stores
def collection_names(chunks: tuple[Chunk, ...] | list[Chunk], models: list[str]) -> list[str]:
    """The Chroma collection names a corpus may have, one per embedding model (``DenseStore``'s naming)."""
    return [f"chunks-{fingerprint(chunks, model)}" for model in models]


def drop_collections(settings: Settings, chunks) -> int:
    from retrieval.dense import chroma_client
    from retrieval.encoders import BUNDLED_EMBEDDERS, canonical_embedder

    models = sorted({*BUNDLED_EMBEDDERS, canonical_embedder(settings.embedding_model), settings.embedding_model})
    client = (chroma_client(host=settings.chroma_host, port=settings.chroma_port) if settings.chroma_host
              else chroma_client(path=settings.chroma_path))
    existing = {c.name if hasattr(c, "name") else str(c) for c in client.list_collections()}
    dropped = 0
    for name in collection_names(chunks, models):
        if name in existing:
            client.delete_collection(name)
            dropped += 1
    return dropped


def forget_retrievers(corpus_key: str) -> None:
    from retrieval import pipeline

    with pipeline._RETRIEVERS_LOCK:
        for key in [k for k in pipeline._RETRIEVERS if k[0] == corpus_key]:
            pipeline._RETRIEVERS.pop(key, None)


def retriever_for(data: CorpusData, settings: Settings, *, progress=None, cancel=None):
    """The process-wide retriever over this corpus (built, and its store indexed, on first use)."""
    from retrieval.pipeline import get_retriever

    if data.key is None:
        return get_retriever(settings, progress=progress, cancel=cancel)
    return get_retriever(settings, progress=progress, chunks=data.chunks, corpus_key=data.key, cancel=cancel)


def open_for_turns(name: str | None, settings: Settings):
    """The retriever a turn runs on for the corpus ``name`` (None or "shipped": the cards at CORPUS_PATH).

    Raises:
        ValueError: unknown corpus, or one not indexed yet for these settings' embedding model and store (a turn
            never starts an indexing job; the Data tab or ``python -m retrieval index`` does).
    """
    from retrieval.pipeline import get_retriever

    if not name or name == SHIPPED:
        return get_retriever(settings)
    data = Registry(settings).open(name)
    if not is_ready(data, settings):
        raise ValueError(f"corpus {name!r} is not indexed for {settings.embedding_model} in this app yet: open it "
                         "in the Data tab and wait for its progress bar to reach 100%.")
    return retriever_for(data, settings)


def open_within(data: CorpusData, settings: Settings, seconds: float) -> dict[str, Any] | None:
    """Open the corpus's store (or index it) for a share link, waiting at most ``seconds``: None once it is ready,
    else the job's snapshot (still running, or failed with its error). A store already on disk reopens in seconds;
    a corpus never indexed starts (or joins) its job, which the Data tab shows."""
    if data.key is None or is_ready(data, settings):
        return None
    snap = start_index(data, settings).wait(seconds)
    return None if snap["status"] == "done" else snap


def labels_by_turn(data: CorpusData) -> dict[str, dict[str, int]]:
    """The judgements (card id -> grade) of each labeled turn, keyed by ``turn_key`` of its text."""
    return {turn_key(q.text): dict(q.relevant) for q in data.queries if q.relevant}


def turn_key(text: str) -> str:
    """A turn's text with case and runs of white space ignored: how a typed turn is matched to a labeled one."""
    return " ".join(str(text).lower().split())


def is_ready(data: CorpusData, settings: Settings) -> bool:
    """True if a retriever over this corpus is built in this process (its store opened or indexed)."""
    from retrieval.pipeline import has_retriever

    return has_retriever(settings, data.key)


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
        from retrieval.dense import IndexingCancelled

        try:
            retriever = retriever_for(self.data, self.settings, progress=self._progress, cancel=self.cancel)
            if retriever.dense is None:
                self.status, self.error = "failed", retriever.dense_error or "the dense store is unavailable"
            else:
                self.done = self.total
                self.status = "done"
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
        return {"name": self.name, "status": self.status, "done": self.done, "total": self.total,
                "fraction": (self.done / self.total) if self.total else 1.0, "rate": rate, "eta_s": left,
                "elapsed_s": elapsed, "error": self.error}

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        self._thread.join(timeout)
        return self.snapshot()


_JOBS: dict[tuple, IndexJob] = {}
_JOBS_LOCK = threading.Lock()


def start_index(data: CorpusData, settings: Settings) -> IndexJob:
    """The indexing job for this corpus and store: a running one is joined (same progress), else a new one starts.
    A corpus whose retriever is already built gets a job that is done at once."""
    from retrieval.pipeline import retriever_key

    key = retriever_key(settings, data.key)
    with _JOBS_LOCK:
        job = _JOBS.get(key)
        if job is not None and (job.running or job.status == "done"):
            return job
        job = IndexJob(key, data, settings)
        _JOBS[key] = job
        job._thread.start()
        return job


def job_for(data: CorpusData, settings: Settings) -> IndexJob | None:
    from retrieval.pipeline import retriever_key

    with _JOBS_LOCK:
        return _JOBS.get(retriever_key(settings, data.key))


def job_for_entry(name: str) -> IndexJob | None:
    with _JOBS_LOCK:
        running = [j for j in _JOBS.values() if j.name == name and j.running]
        return running[0] if running else None
