"""Semantic branch: chunk embeddings in Chroma (embedded PersistentClient by default, a Chroma server when
CHROMA_HOST is set). Embeddings are always computed here and passed explicitly; Chroma never embeds."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np

from retrieval.attach_vectors import ATTACH_REEMBED, attach_problem  # noqa: F401  (importable here as before)
from retrieval.cache import LRU, Stage, cached
from retrieval.corpus import fingerprint
from retrieval.encoders import BUNDLED_EMBEDDERS, Embedder, canonical_embedder, load_embedder
from retrieval.settings import Settings
from retrieval.types import Chunk, Hit

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
_ADD_BATCH = 256
_EMBED_BLOCK = 16  # sub-chunks per parallel embedding call: the cancel check and the progress step
_PROGRESS_EVERY = 16
HTTP_TIMEOUT_S = 30.0  # chromadb's HTTP client waits forever by default; a hung server must not pin a thread forever
OPENING_MARKER = ".retrieval-opening"
# Reused collections of this app (their name holds the model and corpus fingerprint): chunks re-embedded and compared
# with their stored vectors, evenly spaced. Another model or tokenizer changes every vector, so a few find it; each
# costs a document embedding (~9 ms on one thread) at every cold start. A collection attached from elsewhere is
# checked on more rows, and every vector for NaN and length (``retrieval.attach_vectors``).
VERIFY_REEMBED = 4
VERIFY_PROBES = 256  # reused collections: stored vectors queried back, each must find itself


class StoreCorrupted(RuntimeError):
    """The persisted store cannot be used as it is (the caller moves it aside and rebuilds)."""


class EmbeddingFailed(RuntimeError):
    """The embedder failed on a sub-chunk while building: the corpus or the model is at fault, not the store."""


class IndexingCancelled(RuntimeError):
    """A build was cancelled between sub-chunks; what it stored is kept and the next open resumes from it."""


class StorePathError(ValueError):
    """CHROMA_PATH cannot hold a Chroma store (a file, or a folder of other things): a configuration error, and
    nothing there is touched."""


# What an embedded Chroma store folder holds: its SQLite database and one folder per segment (named by a UUID).
# Anything else in CHROMA_PATH is someone else's: another store (the evaluation's beir-* stores), or user files.
STORE_FILES = ("chroma.sqlite3", "chroma.sqlite3-wal", "chroma.sqlite3-shm", "chroma.sqlite3-journal")
_SEGMENT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HARMLESS = {".DS_Store", ".gitignore", ".gitkeep"}


def _store_entry(entry: Path) -> bool:
    """Part of the Chroma store whose folder holds ``entry`` (its database, a segment folder, the open marker)."""
    return (
        entry.name in STORE_FILES
        or entry.name == OPENING_MARKER
        or (entry.is_dir() and _SEGMENT.fullmatch(entry.name) is not None)
    )


def _neighbour_store(entry: Path) -> bool:
    """Another store kept in the same folder: a ``beir-*`` folder or any folder holding a Chroma database."""
    return entry.is_dir() and (entry.name.startswith("beir-") or (entry / "chroma.sqlite3").exists())


def check_store_path(path: str | Path) -> None:
    """Refuse a CHROMA_PATH that cannot be a Chroma store folder, before anything is created or moved.

    Raises:
        StorePathError: the path (or a folder above it) is a file, or the folder holds files that are not part of
            a Chroma store.
    """
    folder = Path(path)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file, not a folder" if existing == folder else f"lies inside {existing}, which is a file"
        raise StorePathError(
            f"CHROMA_PATH={path} {where}. Point CHROMA_PATH at a folder for the Chroma store "
            "(it is created if missing; default .chroma/); nothing was changed."
        )
    if not folder.is_dir() or (folder / "chroma.sqlite3").exists():
        return
    foreign = sorted(
        e.name for e in folder.iterdir() if not (_store_entry(e) or _neighbour_store(e) or e.name in _HARMLESS)
    )
    if foreign:
        shown = ", ".join(repr(name) for name in foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        raise StorePathError(
            f"CHROMA_PATH={path} holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} "
            f"that are not part of a Chroma store ({shown}); nothing was changed. Point "
            "CHROMA_PATH at an empty or new folder (default .chroma/)."
        )


def move_store_aside(path: str | Path) -> tuple[Path, list[str], list[str]]:
    """Move the Chroma store's own files out of ``path`` into a new sibling ``<path>.corrupt-<time>`` folder.

    Returns the new folder, the names moved and the names left in place (other stores, e.g. ``beir-*``).
    """
    folder = Path(path)
    stamp, n = time.strftime("%Y%m%d-%H%M%S"), 0
    while (aside := folder.with_name(f"{folder.name}.corrupt-{stamp}{f'-{n}' if n else ''}")).exists():
        n += 1
    entries = sorted(folder.iterdir()) if folder.is_dir() else []
    moved = [e for e in entries if _store_entry(e)]
    aside.mkdir()
    for entry in moved:
        shutil.move(str(entry), str(aside / entry.name))
    return aside, [e.name for e in moved], [e.name for e in entries if e not in moved]


def chroma_client(path: str | None = None, host: str | None = None, port: int = 8000):
    """A Chroma client with anonymized telemetry off: an HTTP client if ``host`` is given, else embedded."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if host:
        client = chromadb.HttpClient(host=host, port=port, settings=chroma_settings)
        session = getattr(getattr(client, "_server", None), "_session", None)
        if session is not None:  # private in chromadb 1.5.9 (httpx.Client(timeout=None)); skipped if it moves
            import httpx

            session.timeout = httpx.Timeout(HTTP_TIMEOUT_S, connect=5.0)
        return client
    if path is None:
        raise ValueError("chroma_client needs a path (CHROMA_PATH) or a host (CHROMA_HOST).")
    check_store_path(path)
    from retrieval.store_private import private_store

    private_store(path)  # 0700 folder, 0600 files, whatever the umask (and for what Chroma writes later)
    return chromadb.PersistentClient(path=path, settings=chroma_settings)


def forget_client(path: str) -> None:
    """Drop chromadb's cached embedded client for ``path``: after a failed open (or a move) it still points at the
    old files, and chromadb would hand it back for the same path."""
    from chromadb.api.shared_system_client import SharedSystemClient

    system = SharedSystemClient._identifier_to_system.pop(str(path), None)
    SharedSystemClient._identifier_to_refcount.pop(str(path), None)
    if system is not None:
        try:
            system.stop()
        except Exception:  # a system that never started cannot stop cleanly; it is dropped either way
            pass


_PROBE = """
import sys
import chromadb
from chromadb.config import Settings
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
for col in client.list_collections():
    n = col.count()
    for lo in range(0, n, 1000):
        got = col.get(limit=1000, offset=lo, include=["embeddings"])
    if n:
        col.query(query_embeddings=[got["embeddings"][0]], n_results=min(10, n))
print("ok")
"""


def probe_store(path: str | Path, timeout: float = 600.0) -> str:
    """Open and read every collection of the embedded store at ``path`` in a child process; "" if that worked,
    else what went wrong. A store whose HNSW files are damaged can crash Chroma's native code (a segfault), which
    no ``except`` in this process could survive."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return f"reading it in a child process did not finish within {timeout:.0f} s"
    if proc.returncode == 0:
        return ""
    if proc.returncode < 0:
        return f"Chroma crashed reading it in a child process (signal {-proc.returncode})"
    last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
    return f"Chroma failed reading it in a child process ({last})"


def _opened_by_live_process(marker: Path) -> bool:
    """True if the marker names another process that is still running (it is opening the store right now)."""
    try:
        pid = int(marker.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def opening_guard(path: str | Path) -> Iterator[None]:
    """Mark the store folder while this process opens it. A marker left behind means an earlier process died
    inside that window (e.g. a segfault in Chroma on damaged files): the store is then probed in a child process
    first, and ``StoreCorrupted`` is raised if the probe fails, so the caller rebuilds instead of crashing again."""
    folder = Path(path)
    marker = folder / OPENING_MARKER
    if marker.exists() and not _opened_by_live_process(marker):
        log.warning(
            "a previous process died while opening the Chroma store at %s; checking it in a child process", folder
        )
        problem = probe_store(folder)
        if problem:
            raise StoreCorrupted(f"a previous process died while opening it and {problem}")
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def stderr_progress(done: int, total: int) -> None:
    """Default indexing progress: one line on stderr, rewritten in place."""
    end = "\n" if done >= total else "\r"
    print(f"embedding chunks into Chroma: {done}/{total}", end=end, file=sys.stderr, flush=True)


def stored_rows(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The sub-chunks a dense collection stores: the first of each distinct indexed text, in corpus order.

    Sub-chunks with the same text (one notice in hundreds of cards, a corpus uploaded twice under other ids) have the
    same vector, and HNSW cannot hold many exact duplicates: their neighbour lists fill with each other, the graph
    splits, and searches (the open's check too) stop finding other vectors. So each text is stored once, and a
    search gives every sub-chunk of that text its score."""
    first: dict[str, Chunk] = {}
    for chunk in chunks:
        first.setdefault(chunk.indexed_text, chunk)
    return list(first.values())


class _ResumableBuild:
    """The build half of ``DenseStore``: embed the rows a collection lacks (all of them for a new one) and check
    that a partial collection's vectors can be kept."""

    _rows: list[Chunk]  # what the collection stores: one sub-chunk per distinct text (``stored_rows``)
    embedder: Embedder
    cancel: threading.Event | None

    def _embed_missing(self, collection, have: dict[str, np.ndarray], progress: Progress) -> np.ndarray:
        """Embed every sub-chunk not in ``have`` (one sequence per model call) and add it to the collection in
        batches; ``cancel`` is checked between sub-chunks, and what was embedded before a cancel is stored first,
        so the next open resumes from it."""
        start = time.perf_counter()
        vectors = np.zeros((len(self._rows), self.embedder.dim), dtype=np.float32)
        for i, chunk in enumerate(self._rows):
            if chunk.chunk_id in have:
                vectors[i] = have[chunk.chunk_id]
        missing = [i for i, c in enumerate(self._rows) if c.chunk_id not in have]
        done, total = len(have), len(self._rows)
        self.resumed_from = done
        pending: list[int] = []

        def flush() -> None:
            if pending:
                batch = [self._rows[i] for i in pending]
                # upsert: another process indexing the same corpus writes the same ids and vectors (the
                # embedders are deterministic), so both end with one complete collection
                collection.upsert(
                    ids=[c.chunk_id for c in batch],
                    embeddings=vectors[pending],
                    documents=[c.text for c in batch],
                    metadatas=[{"parent_id": c.parent_id, "title": c.title, "lang": c.lang} for c in batch],
                )
                pending.clear()

        progress(done, total)  # where this build starts (a resumed one starts at what the store held)
        many = getattr(self.embedder, "embed_documents", None)  # parallel one-sequence calls (the ONNX models)
        step = _EMBED_BLOCK if many is not None else 1
        for lo in range(0, len(missing), step):
            if self.cancel is not None and self.cancel.is_set():
                flush()
                raise IndexingCancelled(
                    f"indexing cancelled after {done:,} of {total:,} sub-chunks; the "
                    "vectors stored so far are kept and the next open resumes from them"
                )
            block = missing[lo : lo + step]
            try:
                if many is not None:
                    vectors[block] = many([self._rows[i].indexed_text for i in block])
                else:
                    vectors[block[0]] = self.embedder.embed_document(self._rows[block[0]].indexed_text)
            except Exception as exc:
                raise EmbeddingFailed(self._name_failure(block, exc)) from exc
            pending.extend(block)
            done += len(block)
            if len(pending) >= _ADD_BATCH or lo + step >= len(missing):
                flush()
            if step > 1 or done % _PROGRESS_EVERY == 0 or done == total:
                progress(done, total)
        self.index_seconds = time.perf_counter() - start
        return vectors

    def _name_failure(self, block: list[int], exc: Exception) -> str:
        """Which sub-chunk the embedder failed on (a failed block is retried one text at a time to find it)."""
        for i in block if len(block) > 1 else ():
            try:
                self.embedder.embed_document(self._rows[i].indexed_text)
            except Exception as one:
                block, exc = [i], one
                break
        return f"embedding sub-chunk {self._rows[block[0]].chunk_id!r} failed ({type(exc).__name__}: {exc})"

    def _read_present(self, collection, ids: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of this corpus's ids (those present)."""
        rows: dict[str, np.ndarray] = {}
        for lo in range(0, len(ids), 1000):
            got = collection.get(ids=ids[lo : lo + 1000], include=["embeddings"])
            for cid, emb in zip(got["ids"], got["embeddings"]):
                rows[cid] = np.asarray(emb, dtype=np.float32)
        return rows

    @staticmethod
    def _foreign_ids(collection, ids: set[str]) -> int:
        """How many ids stored in the collection are not in ``ids`` (read page by page, ids only)."""
        foreign, lo = 0, 0
        while True:
            got = collection.get(limit=1000, offset=lo, include=[])
            foreign += sum(1 for cid in got["ids"] if cid not in ids)
            if len(got["ids"]) < 1000:
                return foreign
            lo += 1000

    def _verify_sample(self, have: dict[str, np.ndarray]) -> str:
        """Why the vectors of a partial collection cannot be kept ("" if they can): not unit length, or a sample
        that does not re-embed to its stored vector."""
        present = [c for c in self._rows if c.chunk_id in have]
        stored = np.stack([have[c.chunk_id] for c in present])
        bad = np.flatnonzero(np.abs(np.linalg.norm(stored, axis=1) - 1.0) > 1e-2)
        if bad.size:
            return f"{bad.size} stored vectors are not unit length, e.g. {present[bad[0]].chunk_id!r}"
        for i in np.unique(np.linspace(0, len(present) - 1, min(len(present), VERIFY_REEMBED)).astype(int)):
            cosine = float(np.dot(self.embedder.embed_document(present[i].indexed_text), stored[i]))
            if not cosine >= 0.999:  # NaN fails too
                return f"the stored vector of {present[i].chunk_id!r} is not its text's embedding (cosine {cosine:.3f})"
        return ""


class AttachMismatch(ValueError):
    """An attached collection's vectors are not the named model's embeddings of its texts (or of another size)."""


class DenseStore(_ResumableBuild):
    """A Chroma collection keyed by model + corpus fingerprint, and the chunk embeddings kept in memory for the
    similarity threshold. A restart with the same corpus and model reuses the collection; a changed one rebuilds;
    a partial one (a cancelled or crashed build: same fingerprint, fewer vectors) resumes.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        embedder: Embedder,
        client,
        *,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        attach: str | None = None,
    ):
        self.embedder = embedder
        self.cancel = cancel
        self.resumed_from = 0
        self.client = client
        self._chunks = list(chunks)
        self._by_id = {c.chunk_id: c for c in self._chunks}
        # An attached collection is read as it was made (a row per sub-chunk); this app's own store one per text.
        self._rows = list(self._chunks) if attach else stored_rows(self._chunks)
        row_of_text = {c.indexed_text: i for i, c in enumerate(self._rows)}
        self._row_of = (
            np.arange(len(self._chunks))
            if attach
            else np.array([row_of_text[c.indexed_text] for c in self._chunks], dtype=np.int64)
        )
        self._copies: dict[str, list[str]] = {c.chunk_id: [] for c in self._rows}  # row id -> its sub-chunks
        for chunk, row in zip(self._chunks, self._row_of):
            self._copies[self._rows[row].chunk_id].append(chunk.chunk_id)
        self.fingerprint = fingerprint(self._chunks, embedder.name)
        self.collection_name = attach or f"chunks-{self.fingerprint}"
        self.built = False
        self.index_seconds = 0.0
        self.space = "cosine"
        self.collection = self._open_attached() if attach else self._open_or_build(progress)
        self._row = {c.chunk_id: i for i, c in enumerate(self._chunks)}

    def __len__(self) -> int:
        return len(self._chunks)

    def _open_or_build(self, progress: Progress | None):
        metadata = {"hnsw:space": "cosine", "model": self.embedder.name, "fingerprint": self.fingerprint}
        collection = self.client.get_or_create_collection(self.collection_name, metadata=metadata)
        ids = [c.chunk_id for c in self._rows]
        count = collection.count()
        have: dict[str, np.ndarray] = {}
        if count == len(ids) and len(ids) > 0:
            got = self._read_embeddings(collection, ids)
            problem = "it lacks some of the corpus ids" if got is None else self._verify(collection, got)
            if not problem:
                self.embeddings = got[self._row_of]
                return collection
            log.warning(
                "Chroma collection %s does not match the corpus (%s); rebuilding it", self.collection_name, problem
            )
        elif count:
            # Same fingerprint, fewer vectors: a build that was cancelled or died part-way. Keep what it stored
            # (if every stored id belongs to this corpus and a sample re-embeds to its stored vector) and embed
            # only the missing sub-chunks; anything else rebuilds from scratch.
            foreign = self._foreign_ids(collection, set(ids))  # (not count - len(have): another process may
            have = self._read_present(collection, ids)  # be adding to the same collection right now)
            problem = (
                f"{foreign} stored ids are not rows of this corpus (one per distinct sub-chunk text)"
                if foreign
                else self._verify_sample(have)
                if have
                else ""
            )
            if problem:
                log.warning(
                    "Chroma collection %s holds %d vectors but the corpus has %d sub-chunks, and %s; rebuilding it",
                    self.collection_name,
                    count,
                    len(ids),
                    problem,
                )
                have = {}
            else:
                log.warning(
                    "Chroma collection %s holds %d vectors but the corpus has %d sub-chunks (a half-written "
                    "build); resuming: embedding the %d missing",
                    self.collection_name,
                    count,
                    len(ids),
                    len(ids) - count,
                )
        if count and not have:
            self.client.delete_collection(self.collection_name)
            collection = self.client.get_or_create_collection(self.collection_name, metadata=metadata)
        self.embeddings = self._embed_missing(collection, have, progress or stderr_progress)[self._row_of]
        self.built = True
        return collection

    def _open_attached(self):
        """A collection made elsewhere (``--attach``): read, checked against the embedder, never written."""
        collection = self.client.get_collection(self.collection_name)
        got = self._read_embeddings(collection, [c.chunk_id for c in self._chunks])
        if got is None:
            raise AttachMismatch(
                f"collection {self.collection_name!r} changed since it was attached (ids are missing): attach it again"
            )
        problem = attach_problem(self.embedder, self._chunks, got)
        if problem:
            raise AttachMismatch(f"collection {self.collection_name!r}: {problem}")
        config = getattr(collection, "configuration", None) or {}
        self.space = str(
            (config.get("hnsw") or {}).get("space") or (collection.metadata or {}).get("hnsw:space") or "l2"
        )
        norms = np.linalg.norm(got, axis=1, keepdims=True)
        self.embeddings = got / np.where(norms > 0, norms, 1.0)
        return collection

    def _verify(self, collection, stored: np.ndarray) -> str:
        """Why a reused collection cannot be trusted ("" if it can): vectors that are not unit length (damaged
        files), vectors that are not their chunk's embedding (another model or tokenizer), or an index that does
        not find the stored vectors."""
        norms = np.linalg.norm(stored, axis=1)
        bad = np.flatnonzero(np.abs(norms - 1.0) > 1e-2)
        if bad.size:
            return f"{bad.size} stored vectors are not unit length, e.g. {self._rows[bad[0]].chunk_id!r}"
        n = len(stored)
        for i in np.unique(np.linspace(0, n - 1, min(n, VERIFY_REEMBED)).astype(int)):
            fresh = self.embedder.embed_document(self._rows[i].indexed_text)
            cosine = float(np.dot(fresh, stored[i]))
            if cosine < 0.999:
                return (
                    f"the stored vector of {self._rows[i].chunk_id!r} is not its text's embedding (cosine {cosine:.3f})"
                )
        probes = np.unique(np.linspace(0, n - 1, min(n, VERIFY_PROBES)).astype(int))
        got = collection.query(query_embeddings=stored[probes], n_results=1, include=["distances"])
        misses = sum(1 for d in got["distances"] if not d or d[0] > 1e-3)
        if misses > len(probes) // 100:
            return f"the index does not find {misses} of {len(probes)} stored vectors queried back"
        return ""

    @staticmethod
    def _read_embeddings(collection, ids: list[str]) -> np.ndarray | None:
        rows: dict[str, np.ndarray] = {}
        for lo in range(0, len(ids), 1000):
            got = collection.get(ids=ids[lo : lo + 1000], include=["embeddings"])
            for cid, emb in zip(got["ids"], got["embeddings"]):
                rows[cid] = np.asarray(emb, dtype=np.float32)
        if len(rows) != len(ids):
            return None
        return np.stack([rows[i] for i in ids])

    def search(self, query_vector: np.ndarray, depth: int) -> list[Hit]:
        """The ``depth`` nearest sub-chunks by cosine similarity (Chroma's cosine distance is 1 - cosine)."""
        if depth < 1 or not self._chunks:
            return []
        got = self.collection.query(
            query_embeddings=[np.asarray(query_vector, dtype=np.float32)],
            n_results=min(depth, len(self._rows)),
            include=["distances"],
        )
        # every sub-chunk of a stored text at that text's distance (ties in id order); ``depth`` rows bring at
        # least ``depth`` sub-chunks, so the nearest ``depth`` are among them
        pairs = sorted(
            (
                (cid, dist)
                for row, dist in zip(got["ids"][0], got["distances"][0])
                for cid in self._copies.get(row, (row,))
            ),
            key=lambda p: (p[1], p[0]),
        )[:depth]
        # cosine and ip distances are 1 - cosine for unit vectors; squared l2 (an attached collection's default
        # space) is 2 - 2 cosine
        half = 0.5 if self.space == "l2" else 1.0
        return [
            Hit(chunk_id=cid, parent_id=self._by_id[cid].parent_id, rank=r, score=1.0 - half * float(dist))
            for r, (cid, dist) in enumerate(pairs, start=1)
        ]

    def similarity(self, query_vector: np.ndarray, chunk_id: str) -> float:
        """Cosine between the query and a chunk, from the in-memory copy of the embeddings."""
        return float(np.dot(self.embeddings[self._row[chunk_id]], query_vector))


# ------------------------------------------------------------------------------------------ the branch
def open_store(
    chunks: Sequence[Chunk],
    embedder: Embedder,
    *,
    chroma_path: str,
    chroma_host: str | None = None,
    chroma_port: int = 8000,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    attach: str | None = None,
) -> DenseStore:
    """The dense store for ``chunks`` on a Chroma server (``chroma_host``) or embedded at ``chroma_path``.

    An embedded store that cannot be opened (corrupted or half-written files) has its own files (database and
    segment folders) moved aside, nothing deleted, and is rebuilt from the corpus; other stores in the same folder
    (``beir-*``) stay. A failing embedder is re-raised as it is (moving the store would not help), and so is a
    cancel (``IndexingCancelled``: what was stored is kept for the next open to resume).

    Raises:
        StorePathError: ``chroma_path`` is a file, or a folder of things that are not a Chroma store.
    """
    if chroma_host:
        return DenseStore(
            chunks,
            embedder,
            chroma_client(host=chroma_host, port=chroma_port),
            progress=progress,
            cancel=cancel,
            attach=attach,
        )
    if attach:  # a collection made elsewhere: opened as it is, never moved aside or rebuilt
        return DenseStore(chunks, embedder, chroma_client(path=chroma_path), attach=attach)
    check_store_path(chroma_path)  # a configuration error: never "recovered" by moving the user's files
    try:
        with opening_guard(chroma_path):  # survives a crash inside Chroma on damaged files
            return DenseStore(chunks, embedder, chroma_client(path=chroma_path), progress=progress, cancel=cancel)
    except (EmbeddingFailed, IndexingCancelled, StorePathError):
        raise
    except Exception as exc:
        forget_client(chroma_path)  # chromadb caches one client per path; it would keep the bad files open
        aside, moved, kept = move_store_aside(chroma_path)
        log.warning(
            "Chroma store at %s could not be opened (%s: %s); moved its files (%s) to %s and rebuilding%s",
            chroma_path,
            type(exc).__name__,
            exc,
            ", ".join(moved) or "none",
            aside,
            f"; left in place: {', '.join(kept)}" if kept else "",
        )
        with opening_guard(chroma_path):
            return DenseStore(chunks, embedder, chroma_client(path=chroma_path), progress=progress, cancel=cancel)


class DenseBranch:
    """The dense branch of one retriever: its embedder, its store's lifecycle (open, recover, reconnect) and its
    cached searches. A store that is unavailable leaves ``store`` None and says why in ``error``; the next turn
    tries to connect again.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        attach: str | None = None,
    ) -> None:
        self.chunks = chunks
        self.attach = attach
        self._cancel = cancel
        self.settings = settings
        self.embedder = embedder
        self.store: DenseStore | None = None
        self.error = ""
        self._progress = progress
        self._lock = threading.Lock()
        self.resume_in_turn = True  # False (a corpus of the Data tab): a turn never embeds, see ``ensure``
        self.connect()

    def connect(self) -> None:
        """Load the embedder (a name that can never load is a configuration error) and open the store."""
        s = self.settings
        try:
            self.embedder = self.embedder or load_embedder(s.embedding_model)
        except Exception as exc:
            if canonical_embedder(s.embedding_model) not in BUNDLED_EMBEDDERS:
                # Neither bundled nor loadable: the index could never be built, so refuse to start instead of
                # answering bm25_only forever.
                choices = "; ".join(
                    f"{name} (also {', '.join(a for a in aliases if a != name)})"
                    for name, aliases in BUNDLED_EMBEDDERS.items()
                )
                raise ValueError(
                    f"EMBEDDING_MODEL={s.embedding_model!r} could not be loaded ({exc}). Use a bundled "
                    f"model: {choices}; or the name or path of a sentence-transformers model that is "
                    "already on disk."
                ) from exc
            self.error = str(exc)
            log.error("dense branch unavailable: %s", exc)
            return
        try:
            self.store = open_store(
                self.chunks,
                self.embedder,
                chroma_path=s.chroma_path,
                chroma_host=s.chroma_host,
                chroma_port=s.chroma_port,
                progress=self._progress,
                cancel=self._cancel,
                attach=self.attach,
            )
            self.error = ""
        except (IndexingCancelled, StorePathError, AttachMismatch):
            raise  # the caller asked to stop, or CHROMA_PATH is wrong: no retriever is built
        except Exception as exc:
            where = f"Chroma server {s.chroma_host}:{s.chroma_port}" if s.chroma_host else f"Chroma at {s.chroma_path}"
            self.error = f"{where} unavailable ({type(exc).__name__}: {exc})"
            log.error("dense branch unavailable: %s", self.error)

    def ensure(self) -> DenseStore | None:
        """The store, reconnecting first if an earlier attempt failed. Without ``resume_in_turn`` a reconnect opens
        only a complete collection: one the store kept half-written (it went away mid-build) is left to the Data tab
        or the CLI to resume, and the turn answers without the dense branch, saying so."""
        if self.store is None:
            with self._lock:
                if self.store is None and (self.resume_in_turn or self._complete()):
                    self.connect()
        return self.store

    def _complete(self) -> bool:
        from retrieval.dense_complete import complete_or_why

        s = self.settings
        where = f"the Chroma server {s.chroma_host}:{s.chroma_port}" if s.chroma_host else f"Chroma at {s.chroma_path}"
        client = partial(chroma_client, host=s.chroma_host, port=s.chroma_port, path=s.chroma_path)
        why = complete_or_why(self.chunks, self.embedder, client, len(stored_rows(self.chunks)), where, self.attach)
        if why:
            self.error = why
        return not why

    def embed_query(self, query: str, cache: LRU) -> Stage:
        if self.embedder is None:
            raise RuntimeError(self.error or "no embedder")
        embedder = self.embedder
        return cached(cache, ("qvec", embedder.name, query), lambda: embedder.embed_query(query))

    def search(self, query: str, depth: int, cache: LRU) -> tuple[list[Hit], dict[str, float]]:
        """The ``depth`` nearest sub-chunks and the time spent embedding the turn and querying Chroma."""
        store = self.ensure()
        if store is None:
            raise RuntimeError(self.error)
        qvec = self.embed_query(query, cache)
        found = cached(
            cache,
            ("dense", store.embedder.name, store.fingerprint, query, depth),
            lambda: store.search(qvec.value, depth),
        )
        return found.value, {"embed_query": qvec.ms, "chroma_query": found.ms}

    def search_cached(self, query: str, depth: int, cache: LRU) -> tuple[list[Hit], dict[str, float]] | None:
        """``search``'s answer when ``cache`` already holds it (a moved control that changes no branch list), found
        without a thread, a model or Chroma; else None."""
        store, embedder = self.store, self.embedder
        if store is None or embedder is None or cache.get(("qvec", embedder.name, query)) is None:
            return None
        hits = cache.get(("dense", store.embedder.name, store.fingerprint, query, depth))
        return None if hits is None else (hits, {"embed_query": 0.0, "chroma_query": 0.0})

    def similarity_to(self, query: str, cache: LRU) -> tuple[Callable[[str], float] | None, str]:
        """A function chunk id -> cosine with the turn, or (None, why the threshold cannot be applied)."""
        if self.store is None or self.embedder is None:
            return None, "similarity threshold skipped (no embeddings available)"
        try:
            qvec = self.embed_query(query, cache).value
        except Exception as exc:  # the embedder failed now: keep results, say the threshold was skipped
            return None, f"similarity threshold skipped ({type(exc).__name__}: {exc})"
        store = self.store
        return (lambda chunk_id: store.similarity(qvec, chunk_id)), ""
