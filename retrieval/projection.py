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
the background, one job per store in a process and one build at a time (a job waits ``queued`` for the one before
it); ``status`` is a corpus's map job as it stands (queued; building, with its stage and the sub-chunks it has done;
ready, with its points and when it was fitted; failed, with the reason), cheap enough for a page to poll; ``FITS``
counts the fits this process made (tests check that a second process loads instead).
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

Progress = Callable[[int, int], None]  # (done, total) of one pass over the vectors
StageProgress = Callable[[str, int, int], None]  # (stage, done, total): a build's progress, stage by stage
FITTING, PLACING, KEEPING = "fitting the map (PCA)", "placing the sub-chunks on the map", "keeping the map in the store"


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
        ValueError: ``vectors`` is not a non-empty 2-D array, or holds NaN or infinity.
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
        part = x[lo : lo + BLOCK].sum(axis=0, dtype=np.float64)
        if not np.isfinite(part).all():  # (a damaged or attached collection): a map of NaN says nothing
            raise ValueError(
                f"a map needs finite vectors: sub-chunks {lo:,} to {min(lo + BLOCK, n) - 1:,} hold NaN or infinity"
            )
        mean += part
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


def project(
    vectors: np.ndarray, mean: np.ndarray, components: np.ndarray, progress: Progress | None = None
) -> np.ndarray:
    """``(vectors - mean) @ components.T`` as float32, ``BLOCK`` rows at a time."""
    out = np.empty((len(vectors), 2), dtype=np.float32)
    for lo in range(0, len(vectors), BLOCK):
        out[lo : lo + BLOCK] = (np.asarray(vectors[lo : lo + BLOCK], dtype=np.float64) - mean) @ components.T
        if progress is not None:
            progress(min(lo + BLOCK, len(vectors)), len(vectors))
    return out


def _stage(progress: StageProgress | None, stage: str) -> Progress | None:
    return None if progress is None else (lambda done, total: progress(stage, done, total))


def fit_projection(vectors: np.ndarray, key: str, model: str, progress: StageProgress | None = None) -> Projection:
    """Fit the map of ``vectors`` (counted in ``FITS``), reporting its two stages (``FITTING``, ``PLACING``)."""
    global FITS
    started = time.perf_counter()
    mean, comps, explained = fit(vectors, _stage(progress, FITTING))
    coords = project(vectors, mean, comps, _stage(progress, PLACING))
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


def save(client: Any, projection: Projection, progress: StageProgress | None = None) -> None:
    """Keep ``projection`` in the store of ``client`` (replacing one with the same key): pieces first, header last
    (``KEEPING``: the sub-chunks whose places are kept so far)."""
    col, key, n = _collection(client), projection.key, len(projection.coords)
    pieces = [projection.coords[lo : lo + PIECE] for lo in range(0, len(projection.coords), PIECE)]
    ids = [f"{key}/{i}" for i in range(len(pieces))]
    if progress is not None:
        progress(KEEPING, 0, n)
    for lo in range(0, len(ids), 8):
        col.upsert(
            ids=ids[lo : lo + 8],
            documents=[_b64(p, "<f4") for p in pieces[lo : lo + 8]],
            embeddings=[_placeholder(i) for i in ids[lo : lo + 8]],
            metadatas=[{"map": key, "part": lo + j} for j in range(len(ids[lo : lo + 8]))],
        )
        if progress is not None:
            progress(KEEPING, min((lo + 8) * PIECE, n), n)
    header = {
        "version": VERSION,
        "model": projection.model,
        "n": int(n),
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


def ensure(store: Any, progress: StageProgress | None = None) -> Projection:
    """The map of a dense store: loaded from its Chroma store, else fitted from its in-memory vectors and saved
    there (a store that cannot be written still gets its map, for this process). ``progress`` hears each stage
    (``FITTING``, ``PLACING``, ``KEEPING``) with the sub-chunks it has done."""
    key, n = key_for(store), len(store.embeddings)
    found = load(store.client, key, n)
    if found is not None:
        return found
    projection = fit_projection(store.embeddings, key, store.embedder.name, progress)
    try:
        save(store.client, projection, progress)
    except Exception:
        log.warning("map %s could not be kept in the store; this process keeps it", key, exc_info=True)
    return projection


# ------------------------------------------------------------------------------------------------ the jobs
QUEUED, BUILDING, READY, FAILED = "queued", "building", "ready", "failed"
_BUILD = threading.Lock()  # one map is read or fitted at a time: two 50,000-point fits would share two cores


@dataclass(frozen=True)
class MapStatus:
    """One map job as it stands (a snapshot): what the Data tab, the CLI and the map's place show."""

    corpus: str  # the corpus it was asked for ("" if the caller did not say)
    model: str  # the embedding model of its vectors
    state: str  # queued (waiting for another map to finish), building, ready, failed
    stage: str  # what it is doing, e.g. "fitting the map (PCA)"
    done: int  # sub-chunks the stage has done
    total: int  # the corpus's sub-chunks
    elapsed_s: float
    points: int = 0  # ready: the map's points
    when: str = ""  # ready: when its PCA was fitted (UTC; a map loaded from the store keeps its fit's time)
    loaded: bool = False  # ready: read from the store, not fitted by this process
    error: str = ""  # failed: the reason
    states: tuple[str, ...] = ()  # the states it went through, in order

    @property
    def fraction(self) -> float:
        """The share of the current stage done (1.0 when there is nothing to count)."""
        return min(self.done / self.total, 1.0) if self.total else 1.0


class MapJob:
    """Loads or fits one store's map in the background, one job at a time in a process; ``snapshot`` is its
    status. Its fields change under its lock, so a snapshot taken from another thread is consistent."""

    def __init__(self, store: Any, corpus: str = "") -> None:
        self.key, self.corpus, self.model = key_for(store), corpus, str(store.embedder.name)
        self.total = len(store.embeddings)
        self.result: Projection | None = None
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._state, self._stage, self._done, self._error = QUEUED, "waiting for another map to finish", 0, ""
        self._states: list[str] = [QUEUED]
        self._finished: float | None = None
        self._ended = threading.Event()
        self._store = store
        self._thread = threading.Thread(target=self._run, name=f"map-{self.key}", daemon=True)

    @property
    def status(self) -> str:
        return self._state

    @property
    def error(self) -> str:
        return self._error

    def _set(self, state: str | None = None, stage: str | None = None, done: int | None = None) -> None:
        with self._lock:
            if state is not None and state != self._state:
                self._state = state
                self._states.append(state)
            self._stage = self._stage if stage is None else stage
            self._done = self._done if done is None else done

    def _progress(self, stage: str, done: int, total: int) -> None:
        self._set(stage=stage, done=min(done, total))

    def _run(self) -> None:
        try:
            with _BUILD:
                self._set(BUILDING, "reading the stored map", 0)
                self.result = ensure(self._store, self._progress)
            with self._lock:
                self._finished = time.monotonic()
            self._set(READY, "ready", self.total)
        except Exception as exc:  # shown in the map's place and the Data tab; the log keeps the traceback
            log.exception("map %s failed", self.key)
            with self._lock:
                self._error, self._finished = f"{type(exc).__name__}: {exc}", time.monotonic()
            self._set(FAILED, "failed")
        finally:
            self._store = None
            self._ended.set()

    def wait(self, timeout: float | None = None) -> Projection | None:
        self._ended.wait(timeout)
        return self.result

    def snapshot(self) -> MapStatus:
        with self._lock:
            made = self.result
            return MapStatus(
                corpus=self.corpus,
                model=self.model,
                state=self._state,
                stage=self._stage,
                done=self._done,
                total=self.total,
                elapsed_s=(self._finished or time.monotonic()) - self.started,
                points=len(made.coords) if made is not None else 0,
                when=made.when if made is not None else "",
                loaded=made.loaded if made is not None else False,
                error=self._error,
                states=tuple(self._states),
            )


_JOBS: weakref.WeakKeyDictionary[Any, MapJob] = weakref.WeakKeyDictionary()
_LATEST: dict[tuple[str, str], MapJob] = {}  # (corpus, model) -> the newest job asked for it
_LOCK = threading.Lock()


def request(store: Any, corpus: str = "") -> MapJob:
    """The map job of ``store`` (a dense store) of the corpus ``corpus``: a running or finished one is returned, a
    failed one retried. Naming the corpus makes the job its status (``status``)."""
    with _LOCK:
        job = _JOBS.get(store)
        if job is None or job.status == FAILED:
            job = _JOBS[store] = MapJob(store, corpus)
            job._thread.start()
        if corpus:
            _LATEST[(corpus, job.model)] = job
        return job


def ready(store: Any) -> Projection | None:
    """The store's map if this process has it (no wait, no start)."""
    with _LOCK:
        job = _JOBS.get(store)
    return job.result if job is not None else None


def status(corpus: str, model: str | None = None) -> MapStatus | None:
    """The status of the map of ``corpus`` with the embedding ``model`` (None: the newest job of the corpus, any
    model) in this process, or None if none was asked for here. A dictionary look-up: cheap enough to poll."""
    with _LOCK:
        jobs = [(k, j) for k, j in _LATEST.items() if k[0] == corpus and (model is None or _same_model(k[1], model))]
        job = max(jobs, key=lambda kj: kj[1].started)[1] if jobs else None
    return job.snapshot() if job is not None else None


def _same_model(a: str, b: str) -> bool:
    from retrieval.encoders import canonical_embedder

    return a == b or canonical_embedder(a) == canonical_embedder(b)


def forget(corpus: str) -> None:
    """Forget the status of ``corpus``'s maps (it was deleted)."""
    with _LOCK:
        for key in [k for k in _LATEST if k[0] == corpus]:
            _LATEST.pop(key)
