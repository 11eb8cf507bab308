"""The per-turn cache and the stage thread pools with their budgets.

Branch lists and query embeddings are cached per turn (keyed by everything that decides them), cross-encoder
scores process-wide (``retrieval.rerank.PAIR_SCORES``, an ``LRU`` too), so moving rrf_k, a weight, top_k, the
threshold or a failure toggle re-runs no model. Each stage (bm25,
dense, rerank) gets its own small thread pool, so a backend that hangs ties up only its own stage.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any


class LRU:
    """A small thread-safe LRU cache for per-turn values."""

    def __init__(self, size: int = 4096) -> None:
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class Stage:
    """A stage's value, how long computing it took, and whether it came from the cache."""

    value: Any = None
    ms: float = 0.0
    cached: bool = False


def cached(cache: LRU, key: Hashable, compute: Callable[[], Any]) -> Stage:
    """``cache[key]``, computing (and timing) it on a miss."""
    hit = cache.get(key)
    if hit is not None:
        return Stage(hit, 0.0, True)
    start = time.perf_counter()
    value = compute()
    ms = (time.perf_counter() - start) * 1000
    cache.put(key, value)
    return Stage(value, ms, False)


class StagePool:
    """A small thread pool per stage (bm25, dense, rerank).

    A backend that hangs (e.g. a Chroma server that stops answering) ties up only its own stage's workers, never
    the other branch; and once every worker has been busy for longer than a new call's budget, that call fails at
    once instead of queueing behind them (it could not start in time anyway).
    """

    def __init__(self, name: str, workers: int = 4) -> None:
        self.name = name
        self.workers = workers
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"retrieval-{name}")
        self._running: dict[object, float] = {}
        self._lock = threading.Lock()

    def submit(self, budget_ms: float, fn: Callable[..., Any], *args: Any) -> cf.Future:
        now = time.perf_counter()
        with self._lock:
            started = list(self._running.values())
        if len(started) >= self.workers and now - max(started) > budget_ms / 1000:
            future: cf.Future = cf.Future()
            future.set_exception(
                RuntimeError(
                    f"all {self.workers} {self.name} workers have been busy for over {budget_ms} ms with earlier calls "
                    "(the backend is not answering); skipped"
                )
            )
            return future

        def run() -> Any:
            token = object()
            with self._lock:
                self._running[token] = time.perf_counter()
            try:
                return fn(*args)
            finally:
                with self._lock:
                    del self._running[token]

        submitted = self._pool.submit(run)
        # when the work finished, not when the caller looked: a caller that first waits for another branch must
        # not count a late answer as on time (``retrieval.branches._collect``)
        submitted.add_done_callback(lambda f: setattr(f, "done_at", time.perf_counter()))
        return submitted


POOLS: dict[str, StagePool] = {name: StagePool(name) for name in ("bm25", "dense", "rerank")}


class InUse:
    """How many callers are inside ``with in_use():`` right now (thread-safe); ``active`` while any is."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1

    @property
    def active(self) -> bool:
        return self._count > 0
