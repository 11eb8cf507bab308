"""A 2-D map of a corpus's sub-chunks: PCA of the dense store's vectors, fitted once per corpus and embedding model
and kept with the corpus in its Chroma store, so a restart or another process on the store loads it.

Why PCA (and not UMAP or t-SNE): it is a fixed linear map, so a new turn lands on the same map exactly
(``Projection.place``: one matrix product) and the same corpus always gives the same picture; it is fitted in one
pass over the vectors (a 384 x 384 covariance, then its two leading eigenvectors), seconds at 50,000 sub-chunks on
two cores; and numpy is all it needs. Its price: two axes keep only part of the variance (``explained``), so two
points near each other on the map may be far apart in the embedding space. The page says so, and gives every
point's true cosine to the turn.

The record lives in the collection ``corpus-maps`` of the corpus's store, keyed by ``VERSION`` and the dense store's
fingerprint (its sub-chunks and the embedding model): a header row (the mean, the two components, the variance
they keep, when and how long the fit took) and the coordinates in rows of ``PIECE`` points (float32, base64),
the header written last, so a reader that finds it finds every piece. ``request`` fits or loads a store's map in
the background, one job per store in a process; ``FITS`` counts the fits this process made (tests check that a
second process loads instead).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

COLLECTION = "corpus-maps"
VERSION = "pca-v1"
PIECE = 8192  # points per stored row of coordinates
BLOCK = 4096  # vectors per step of the fit (its progress)
FITS = 0  # fits made by this process (a loaded map is not one)

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Projection:
    """A fitted map: ``coords[i]`` is the 2-D place of the store's i-th sub-chunk (corpus order)."""

    key: str
    model: str
    mean: np.ndarray  # (dim,)
    components: np.ndarray  # (2, dim), unit rows
    coords: np.ndarray  # (n, 2) float32
    explained: tuple[float, float]  # share of the vectors' variance each axis keeps
    when: str = ""
    fit_seconds: float = 0.0
    loaded: bool = False  # read from the store, not fitted by this process

    def place(self, vector: np.ndarray) -> tuple[float, float]:
        """Where a vector (a turn's embedding) lands on this map: the same linear map as every sub-chunk."""
        x, y = self.components @ (np.asarray(vector, dtype=np.float64) - self.mean)
        return float(x), float(y)


def _one_blas_thread() -> AbstractContextManager[object]:
    """BLAS on one thread for the fit: on two shared cores OpenBLAS's two spinning threads made a 384 x 384 ``eigh``
    take 2.5 s where one thread took 0.06 s (load 13, ``python -m retrieval bench-map``)."""
    try:
        from threadpoolctl import threadpool_limits  # (installed with sentence-transformers' scikit-learn)
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1)


def fit(vectors: np.ndarray, progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """The mean, the two principal components (signs fixed: each one's largest entry positive) and the share of
    variance each keeps, from the covariance accumulated ``BLOCK`` vectors at a time.

    Raises:
        ValueError: ``vectors`` is not a non-empty 2-D array.
    """
    with _one_blas_thread():
        return _fit(vectors, progress)


def _fit(vectors: np.ndarray, progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    x = np.asarray(vectors)
    if x.ndim != 2 or not len(x):
        raise ValueError(f"a map needs a non-empty (n, dim) array of vectors, got shape {x.shape}")
    n, dim = x.shape
    mean = np.zeros(dim)
    for lo in range(0, n, BLOCK):
        mean += x[lo : lo + BLOCK].sum(axis=0, dtype=np.float64)
    mean /= n
    cov = np.zeros((dim, dim))
    for lo in range(0, n, BLOCK):
        block = x[lo : lo + BLOCK].astype(np.float64) - mean
        cov += block.T @ block
        if progress is not None:
            progress(min(lo + BLOCK, n), n)
    values, vecs = np.linalg.eigh(cov)
    top = np.argsort(values)[::-1][:2]
    comps = vecs[:, top].T.copy()
    if comps.shape[0] < 2:  # one-dimensional vectors: the second axis is zero
        comps = np.vstack([comps, np.zeros((1, dim))])
    for row in comps:
        if row[np.argmax(np.abs(row))] < 0:
            row *= -1
    total = float(values.sum())
    kept = [float(values[i]) / total if total > 0 else 0.0 for i in top] + [0.0, 0.0]
    return mean, comps, (kept[0], kept[1])


def project(vectors: np.ndarray, mean: np.ndarray, components: np.ndarray) -> np.ndarray:
    """``(vectors - mean) @ components.T`` as float32, ``BLOCK`` rows at a time."""
    out = np.empty((len(vectors), 2), dtype=np.float32)
    for lo in range(0, len(vectors), BLOCK):
        out[lo : lo + BLOCK] = (np.asarray(vectors[lo : lo + BLOCK], dtype=np.float64) - mean) @ components.T
    return out


def fit_projection(vectors: np.ndarray, key: str, model: str, progress: Progress | None = None) -> Projection:
    """Fit the map of ``vectors`` (counted in ``FITS``)."""
    global FITS
    started = time.perf_counter()
    mean, comps, explained = fit(vectors, progress)
    coords = project(vectors, mean, comps)
    FITS += 1
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return Projection(key, model, mean, comps, coords, explained, when, time.perf_counter() - started)


# ---------------------------------------------------------------------------------------------- the store
def key_for(store: Any) -> str:
    """The record's id: the map's version and the dense store's fingerprint (sub-chunks + embedding model)."""
    return f"{VERSION}-{store.fingerprint}"


def _collection(client: Any) -> Any:
    return client.get_or_create_collection(COLLECTION, metadata={"hnsw:space": "cosine"})


def _b64(array: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=dtype).tobytes()).decode("ascii")


def _unb64(text: str, dtype: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=dtype)


def _placeholder(row_id: str) -> list[float]:
    """A 2-D unit vector per row (the collection is read by id only; distinct vectors keep its index sound)."""
    angle = int(hashlib.sha256(row_id.encode()).hexdigest()[:8], 16) / 2**32 * 2 * math.pi
    return [math.cos(angle), math.sin(angle)]


def save(client: Any, projection: Projection) -> None:
    """Keep ``projection`` in the store of ``client`` (replacing one with the same key): pieces first, header last."""
    col, key = _collection(client), projection.key
    pieces = [projection.coords[lo : lo + PIECE] for lo in range(0, len(projection.coords), PIECE)]
    ids = [f"{key}/{i}" for i in range(len(pieces))]
    for lo in range(0, len(ids), 8):
        col.upsert(
            ids=ids[lo : lo + 8],
            documents=[_b64(p, "<f4") for p in pieces[lo : lo + 8]],
            embeddings=[_placeholder(i) for i in ids[lo : lo + 8]],
            metadatas=[{"map": key, "part": lo + j} for j in range(len(ids[lo : lo + 8]))],
        )
    header = {
        "version": VERSION,
        "model": projection.model,
        "n": int(len(projection.coords)),
        "dim": int(projection.mean.shape[0]),
        "mean": _b64(projection.mean, "<f8"),
        "components": _b64(projection.components, "<f8"),
        "explained": list(projection.explained),
        "when": projection.when,
        "fit_seconds": round(projection.fit_seconds, 3),
        "pieces": len(pieces),
    }
    col.upsert(ids=[key], documents=[json.dumps(header)], embeddings=[_placeholder(key)], metadatas=[{"map": key}])


def load(client: Any, key: str, n: int) -> Projection | None:
    """The stored map ``key`` of ``n`` sub-chunks, or None (never fitted, of another size, or unreadable)."""
    try:
        col = _collection(client)
        got = col.get(ids=[key], include=["documents"])
        if not got["ids"]:
            return None
        head = json.loads(got["documents"][0])
        if head.get("version") != VERSION or head.get("n") != n:
            return None
        ids = [f"{key}/{i}" for i in range(int(head["pieces"]))]
        docs: dict[str, str] = {}
        for lo in range(0, len(ids), 8):
            part = col.get(ids=ids[lo : lo + 8], include=["documents"])
            docs.update(zip(part["ids"], part["documents"]))
        coords = np.concatenate([_unb64(docs[i], "<f4") for i in ids]) if ids else np.zeros(0, dtype="<f4")
        dim = int(head["dim"])
        mean, comps = _unb64(head["mean"], "<f8"), _unb64(head["components"], "<f8").reshape(2, dim)
        if coords.size != 2 * n or mean.size != dim:
            return None
        explained = tuple(float(v) for v in head["explained"][:2])
        return Projection(
            key,
            str(head.get("model", "")),
            mean.copy(),
            comps.copy(),
            coords.reshape(n, 2).copy(),
            (explained[0], explained[1]),
            str(head.get("when", "")),
            float(head.get("fit_seconds", 0.0)),
            loaded=True,
        )
    except Exception:  # a store that cannot be read, or a record of another shape: fitted again
        log.warning("stored map %s could not be read; fitting it again", key, exc_info=True)
        return None


def ensure(store: Any, progress: Progress | None = None) -> Projection:
    """The map of a dense store: loaded from its Chroma store, else fitted from its in-memory vectors and saved
    there (a store that cannot be written still gets its map, for this process)."""
    key, n = key_for(store), len(store.embeddings)
    found = load(store.client, key, n)
    if found is not None:
        return found
    projection = fit_projection(store.embeddings, key, store.embedder.name, progress)
    try:
        save(store.client, projection)
    except Exception:
        log.warning("map %s could not be kept in the store; this process keeps it", key, exc_info=True)
    return projection


# ------------------------------------------------------------------------------------------------ the jobs
class MapJob:
    """Loads or fits one store's map in the background; ``snapshot`` is its progress."""

    def __init__(self, store: Any) -> None:
        self.key = key_for(store)
        self.total = len(store.embeddings)
        self.done = 0
        self.stage = "reading the stored map"
        self.status = "running"  # running, done, failed
        self.error = ""
        self.result: Projection | None = None
        self.started = time.monotonic()
        self._store = store
        self._thread = threading.Thread(target=self._run, name=f"map-{self.key}", daemon=True)

    def _progress(self, done: int, total: int) -> None:
        self.stage, self.done, self.total = "fitting the map (PCA)", done, total

    def _run(self) -> None:
        try:
            self.result = ensure(self._store, self._progress)
            self.done, self.status, self.stage = self.total, "done", "ready"
        except Exception as exc:  # shown in the map's place; the log keeps the traceback
            log.exception("map %s failed", self.key)
            self.status, self.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self._store = None

    def wait(self, timeout: float | None = None) -> Projection | None:
        self._thread.join(timeout)
        return self.result

    def snapshot(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "stage": self.stage,
            "done": self.done,
            "total": self.total,
            "elapsed_s": time.monotonic() - self.started,
            "error": self.error,
        }


_JOBS: weakref.WeakKeyDictionary[Any, MapJob] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def request(store: Any) -> MapJob:
    """The map job of ``store`` (a dense store): a running or finished one is returned, a failed one retried."""
    with _LOCK:
        job = _JOBS.get(store)
        if job is None or job.status == "failed":
            job = _JOBS[store] = MapJob(store)
            job._thread.start()
        return job


def ready(store: Any) -> Projection | None:
    """The store's map if this process has it (no wait, no start)."""
    with _LOCK:
        job = _JOBS.get(store)
    return job.result if job is not None else None
