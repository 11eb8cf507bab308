"""A turn's two branches, run concurrently on their stage pools within their budgets (``run_branches``): each
``BranchResult`` says whether its branch ran, and why not (disabled, empty, timed out, failed)."""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable
from typing import Any

from retrieval.bm25 import BM25Index
from retrieval.cache import LRU, POOLS, cached
from retrieval.dense import DenseBranch
from retrieval.settings import Settings
from retrieval.types import BranchResult, Hit


def run_branches(
    query: str,
    s: Settings,
    dense_branch: DenseBranch,
    bm25_empty: bool,
    bm25_index: Callable[[str], BM25Index],
    cache: LRU,
    timings: dict[str, float],
) -> tuple[BranchResult, BranchResult]:
    """Run BM25 and dense concurrently on their stage pools; each result says whether it ran, and why not.
    ``bm25_index`` gives the index of a tokenizer; ``cache`` is the retriever's per-turn cache."""
    depth = s.candidate_depth
    started = time.perf_counter()
    known = dense_branch.search_cached(query, depth, cache)  # cached: no thread hand-off
    dense_future = (
        _done(known)
        if known is not None
        else POOLS["dense"].submit(s.dense_timeout_ms, dense_branch.search, query, depth, cache)
    )
    if not s.hybrid_enabled:
        bm25 = BranchResult("bm25", status="disabled", reason="hybrid disabled (RETRIEVAL_HYBRID_ENABLED=false)")
    elif s.simulate_empty_bm25 or bm25_empty:
        why = "BM25 index is empty (simulated)" if s.simulate_empty_bm25 else "BM25 index is empty"
        bm25 = BranchResult("bm25", status="empty", reason=why)
    else:
        hits = cache.get(("bm25", s.bm25_tokenizer, query, depth))
        future = (
            _done((hits, {"bm25": 0.0}))
            if hits is not None
            else POOLS["bm25"].submit(
                s.bm25_timeout_ms, _search_bm25, bm25_index, cache, query, depth, s.bm25_tokenizer
            )
        )
        bm25 = _collect("bm25", future, s.bm25_timeout_ms, started, timings)
    dense = _collect("dense", dense_future, s.dense_timeout_ms, started, timings)
    return bm25, dense


def _search_bm25(
    bm25_index: Callable[[str], BM25Index], cache: LRU, query: str, depth: int, tokenizer: str
) -> tuple[list[Hit], dict[str, float]]:
    """BM25's hits (the tokenizer's index built on first use, inside the branch's budget) and the time it took."""
    index = bm25_index(tokenizer)
    stage = cached(cache, ("bm25", tokenizer, query, depth), lambda: index.search(query, depth))
    return stage.value, {"bm25": stage.ms}


def _done(value: Any) -> cf.Future:
    """A branch answered from the per-turn cache (a moved control that changes no branch list), as a finished
    future: no thread hand-off, which costs a time slice when the cores are shared."""
    future: cf.Future = cf.Future()
    future.set_result(value)
    return future


def _collect(name: str, future: cf.Future, budget_ms: int, started: float, timings: dict[str, float]) -> BranchResult:
    """A branch's result from its future, or why it has none (timeout, failure). A branch that finished after its
    budget timed out even when the caller looked only later (it waited for the other branch first)."""

    def timeout(at: float) -> BranchResult:
        return BranchResult(
            name, status="timeout", reason=f"{name} exceeded its {budget_ms} ms budget", ms=(at - started) * 1000
        )

    remaining = max(0.0, budget_ms / 1000 - (time.perf_counter() - started))
    try:
        hits, stage_ms = future.result(timeout=remaining)
    except cf.TimeoutError:
        return timeout(time.perf_counter())
    except Exception as exc:
        return BranchResult(
            name,
            status="failed",
            reason=f"{name} failed: {type(exc).__name__}: {exc}",
            ms=(time.perf_counter() - started) * 1000,
        )
    done_at = getattr(future, "done_at", None)
    if done_at is not None and done_at - started > budget_ms / 1000:
        return timeout(done_at)
    # to the microsecond, as the result's timings keep them: the column's chip and the badge then print one value
    # (a chip of 0.2500004 ms read "0.3" beside the badge's 0.25 -> "0.2")
    stage_ms = {k: round(v, 3) for k, v in stage_ms.items()}
    timings.update(stage_ms)
    ms = sum(stage_ms.values())
    if not hits and name == "bm25":
        return BranchResult(name, (), status="ok", reason="no chunk shares a term with the turn", ms=ms)
    return BranchResult(name, tuple(hits), status="ok", ms=ms)
