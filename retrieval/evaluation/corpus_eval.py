"""Score a registry corpus by name in a running app (the Evaluation tab): the per-configuration metrics
(``evaluate``) and A vs B (``compare_configs``) over its labeled turns, on the process-wide retriever the
inspector's turns use.

Loading the turns is ``labeled.labeled_dataset``, the same as ``python -m retrieval eval --corpus``. A corpus is
never indexed from here: one whose store is not open in this process yet gets a message saying to open it in the
Data tab (which indexes it with a progress bar). The shipped cards are opened (built once) as the inspector does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retrieval.corpora import SHIPPED, is_ready, retriever_for
from retrieval.corpus import Dataset
from retrieval.evaluation.compare import compare_configs
from retrieval.evaluation.evaluate import CONFIGS, DEFAULT_DEPTH, Progress, evaluate
from retrieval.evaluation.labeled import labeled_dataset, limit_turns
from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever


def open_labeled(name: str | None, settings: Settings, *,
                 limit: int | None = None) -> tuple[Dataset, HybridRetriever, int]:
    """The corpus's labeled turns (the first ``limit``; None or 0: all), its ready retriever and how many labeled
    turns it has in all.

    Raises:
        ValueError: unknown corpus, no labeled turns, or not indexed in this process for these settings.
    """
    data, dataset = labeled_dataset(name, settings)
    total = len(dataset.queries)
    if data is None:
        from retrieval.pipeline import get_retriever

        retriever = get_retriever(settings)
    elif is_ready(data, settings):
        retriever = retriever_for(data, settings)
    else:
        raise ValueError(f"corpus {data.entry.name!r} is not indexed for {settings.embedding_model} in this app yet: "
                         "open it in the Data tab first: it is indexed there with a progress bar; then score it "
                         "here.")
    if retriever.dense is None:
        raise ValueError(f"the dense branch is unavailable ({retriever.dense_error}); fix it before evaluating.")
    return limit_turns(dataset, limit), retriever, total


def evaluate_corpus(name: str | None, settings: Settings, configs: Sequence[str] = CONFIGS, *,
                    limit: int | None = None, depth: int = DEFAULT_DEPTH,
                    progress: Progress | None = None) -> dict[str, Any]:
    """``evaluate`` over the corpus's labeled turns (the first ``limit``), in this process.

    Returns ``evaluate``'s report plus ``corpus`` (its name), ``total_turns`` (labeled turns it has; ``turns``
    says how many were scored), ``wall_seconds`` and ``written_at``.
    """
    dataset, retriever, total = open_labeled(name, settings, limit=limit)
    started = time.perf_counter()
    report = evaluate(dataset, retriever, settings, [c for c in CONFIGS if c in configs], depth=depth,
                      progress=progress)
    return _stamp(report, name, total, started)


def compare_corpus(name: str | None, a: Settings, b: Settings, *, limit: int | None = None,
                   depth: int = DEFAULT_DEPTH, progress: Progress | None = None) -> dict[str, Any]:
    """``compare_configs`` (A and B) over the corpus's labeled turns (the first ``limit``), on A's retriever.

    Returns ``compare_configs``'s report plus ``corpus``, ``total_turns``, ``wall_seconds`` and ``written_at``.
    """
    dataset, retriever, total = open_labeled(name, a, limit=limit)
    started = time.perf_counter()
    report = compare_configs(dataset, retriever, a, b, depth=depth, progress=progress)
    return _stamp(report, name, total, started)


def _stamp(report: dict[str, Any], name: str | None, total: int, started: float) -> dict[str, Any]:
    report.update(corpus=name or SHIPPED, total_turns=total, wall_seconds=round(time.perf_counter() - started, 1),
                  written_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
    return report
