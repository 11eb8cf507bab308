"""Score a registry corpus by name in a running app (the Evaluation tab): the per-configuration metrics
(``evaluate``) and A vs B (``compare_configs``) over its labeled turns, on the process-wide retriever the
inspector's turns use.

Loading the turns is ``labeled.labeled_dataset``, the same as ``python -m retrieval eval --corpus``. A corpus is
never indexed from here: one whose store is not open in this process yet gets a message saying to open it in the
Data tab (which indexes it with a progress bar). The shipped cards are opened (built once) as the inspector does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retrieval.corpus import Dataset
from retrieval.corpus_entries import SHIPPED
from retrieval.corpus_retrievers import is_indexed, is_ready, retriever_for
from retrieval.encoders import canonical_embedder
from retrieval.evaluation.compare import compare_configs
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.labeled import SAMPLE_SEED, labeled_dataset, sample_turns
from retrieval.evaluation.turn_runs import CONFIGS, DEFAULT_DEPTH, Progress
from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever


def open_labeled(
    name: str | None, settings: Settings, *, limit: int | None = None
) -> tuple[Dataset, HybridRetriever, int]:
    """The corpus's labeled turns (at most ``limit``, every category represented: ``sample_turns``; None or 0: all),
    its ready retriever and how many labeled turns it has in all.

    Raises:
        ValueError: unknown corpus, no labeled turns, or not indexed in this process for these settings.
    """
    data, dataset = labeled_dataset(name, settings)
    total = len(dataset.queries)
    if data is None:
        from retrieval.retriever_cache import get_retriever

        retriever = get_retriever(settings)
    elif is_ready(data, settings) or is_indexed(data, settings):  # built here, or complete in the store
        retriever = retriever_for(data, settings)
    else:
        raise ValueError(
            f"corpus {data.entry.name!r} is not indexed for {settings.embedding_model} in this app yet: "
            "open it in the Data tab first: it is indexed there with a progress bar; then score it "
            "here."
        )
    if retriever.dense is None:
        raise ValueError(f"the dense branch is unavailable ({retriever.dense_error}); fix it before evaluating.")
    return sample_turns(dataset, limit), retriever, total


def evaluate_corpus(
    name: str | None,
    settings: Settings,
    configs: Sequence[str] = CONFIGS,
    *,
    limit: int | None = None,
    depth: int = DEFAULT_DEPTH,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """``evaluate`` over the corpus's labeled turns (at most ``limit``, every category represented), in this
    process.

    Returns ``evaluate``'s report plus ``corpus`` (its name), ``total_turns`` (labeled turns it has; ``turns``
    says how many were scored), ``wall_seconds`` and ``written_at``.
    """
    dataset, retriever, total = open_labeled(name, settings, limit=limit)
    started = time.perf_counter()
    report = evaluate(
        dataset, retriever, settings, [c for c in CONFIGS if c in configs], depth=depth, progress=progress
    )
    return _stamp(report, name, total, started)


def compare_corpus(
    name: str | None,
    a: Settings,
    b: Settings,
    *,
    limit: int | None = None,
    depth: int = DEFAULT_DEPTH,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """``compare_configs`` (A and B) over the corpus's labeled turns (at most ``limit``, every category
    represented): A on A's retriever, B on an index of B's embedding model (``index_for``: opened, or built with
    its progress, when B changes the model).

    Returns ``compare_configs``'s report plus ``corpus``, ``total_turns``, ``wall_seconds``, ``written_at`` and,
    when B changes the model, ``b_index`` (the model B was scored with, and whether its index was built for it).
    """
    dataset, retriever, total = open_labeled(name, a, limit=limit)
    started = time.perf_counter()
    retriever_b, index = retriever, None
    if canonical_embedder(b.embedding_model) != canonical_embedder(a.embedding_model):
        retriever_b, built = index_for(name, b, progress=progress, cancel=cancel, label="indexing B's model")
        index = {"embedding_model": retriever_b.settings.embedding_model, "built": built}
    report = compare_configs(dataset, retriever, a, b, depth=depth, progress=progress, retriever_b=retriever_b)
    if index:
        report["b_index"] = index
    return _stamp(report, name, total, started)


def index_for(
    name: str | None,
    settings: Settings,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    label: str = "indexing",
) -> tuple[HybridRetriever, bool]:
    """The corpus's retriever for these settings' embedding model, and whether it had to be indexed: opened if
    ready, else indexed as the Data tab does (its shared job, whose progress goes to ``progress``). ``cancel`` stops
    the wait, and the job too if this call started it (what was embedded is kept; the next open resumes).

    Raises:
        IndexingCancelled: ``cancel`` was set.
        ValueError: the job failed, or the dense branch is unavailable.
    """
    from retrieval.corpora import Registry
    from retrieval.dense_build import IndexingCancelled
    from retrieval.index_jobs import job_for, start_index
    from retrieval.retriever_cache import get_retriever, has_retriever

    data = None if not name or name == SHIPPED else Registry(settings).open(name)
    if data is None or data.key is None:
        built = not has_retriever(settings)
        retriever = get_retriever(
            settings, progress=lambda done, total: progress and progress(done, total, label), cancel=cancel
        )
    elif is_ready(data, settings) or is_indexed(data, settings):
        retriever, built = retriever_for(data, settings), False
    else:
        before = job_for(data, settings)
        mine = before is None or not before.running
        job = start_index(data, settings)
        while (snap := job.wait(0.5))["status"] == "running":
            if progress:
                progress(snap["done"], snap["total"], label)
            if cancel is not None and cancel.is_set():
                if mine:
                    job.cancel.set()
                raise IndexingCancelled(f"cancelled while indexing {data.entry.name} for {settings.embedding_model}")
        if snap["status"] != "done":
            raise ValueError(
                f"indexing {data.entry.name} for {settings.embedding_model} {snap['status']}: {snap['error']}"
            )
        retriever, built = retriever_for(data, settings), True
    if retriever.dense is None:
        raise ValueError(f"the dense branch of {settings.embedding_model} is unavailable ({retriever.dense_error}).")
    return retriever, built


def _stamp(report: dict[str, Any], name: str | None, total: int, started: float) -> dict[str, Any]:
    report.update(
        corpus=name or SHIPPED,
        total_turns=total,
        wall_seconds=round(time.perf_counter() - started, 1),
        written_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
        sample_seed=SAMPLE_SEED,
    )
    return report
