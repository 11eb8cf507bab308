"""The process-wide retriever of each corpus: the settings it is searched with, opening (or, for an indexing job,
building) it with its stored refusal calibration, whether it is built here or complete in the store, and its
refusal calibration jobs."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retrieval import calibration_jobs, corpus_store
from retrieval.calibration_jobs import CalibrationJob
from retrieval.corpus import fingerprint
from retrieval.corpus_entries import SHIPPED, CorpusData
from retrieval.settings import Settings
from retrieval.types import Chunk

if TYPE_CHECKING:
    from retrieval.dense_build import Progress
    from retrieval.pipeline import HybridRetriever


def settings_for(data: CorpusData, settings: Settings) -> Settings:
    """The settings a corpus is indexed and searched with: an attached collection's own embedding model."""
    if data.entry.kind == "attached" and data.entry.model:
        return settings.replace(embedding_model=data.entry.model)
    return settings


# The corpus's stored refusal calibration is read again at most this often: one re-run by another process (the CLI's
# ``calibrate``, another app process on the store, the Data tab of another) reaches this one's turns within it.
CALIBRATION_REREAD_S = 30.0


def retriever_for(
    data: CorpusData,
    settings: Settings,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> HybridRetriever:
    """The process-wide retriever over this corpus (built, and its store indexed, on first use)."""
    from retrieval.retriever_cache import get_retriever

    if data.key is None:
        return get_retriever(settings, progress=progress, cancel=cancel)
    attach = data.entry.collection if data.entry.kind == "attached" else None
    if progress is not None:  # an indexing job (the Data tab, the CLI): the one place a build starts or resumes
        _drop_half_built(data, settings)
    retriever = get_retriever(
        settings_for(data, settings),
        progress=progress,
        chunks=data.chunks,
        corpus_key=data.key,
        cancel=cancel,
        attach=attach,
    )
    now = time.monotonic()
    from retrieval import ood_examples  # the out-of-domain pool's turns this corpus answers itself

    ood_examples.mark_covered(retriever)
    if now - getattr(retriever, "calibration_read_at", -CALIBRATION_REREAD_S) >= CALIBRATION_REREAD_S:
        from retrieval import calibration, store_calls

        try:  # a store that does not answer at once keeps what this process has; read again at the next turn
            done, stored = store_calls.bounded(
                ("calibration", data.key), lambda: calibration.load(settings_for(data, settings), data.chunks), 1.0
            )
        except Exception:  # (an unreadable store keeps what this process has)
            done, stored = True, None
        if stored is not None:
            retriever.calibration = stored  # type: ignore[attr-defined]
        if done:
            retriever.calibration_read_at = now  # type: ignore[attr-defined]
    return retriever


def _drop_half_built(data: CorpusData, settings: Settings) -> None:
    """Forget this process's retriever over ``data`` if its dense store never opened (the store went away while
    it was being built): the job about to run builds it again, resuming from what the store kept."""
    from retrieval.retriever_cache import cached_retriever

    kept = cached_retriever(settings_for(data, settings), data.key)
    if kept is not None and kept.dense is None:
        forget_retrievers(data.key or "")


def is_ready(data: CorpusData, settings: Settings) -> bool:
    """True if a retriever over this corpus is built in this process (its store opened or indexed)."""
    from retrieval.retriever_cache import cached_retriever

    kept = cached_retriever(settings_for(data, settings), data.key)
    # a retriever whose dense store never opened (the store went away mid-build) is not ready: the Data tab resumes
    return kept is not None and (data.key is None or kept.dense is not None)


def is_indexed(data: CorpusData, settings: Settings) -> bool:
    """True if the store already holds this corpus's complete dense collection for these settings' model (indexed
    by this process before, or by another one): opening it embeds nothing."""
    if data.key is None or data.entry.kind == "attached":
        return True
    from retrieval.dense_rows import stored_rows
    from retrieval.encoders import canonical_embedder

    name = collection_names(data.chunks, [canonical_embedder(settings.embedding_model)])[0]
    try:
        return corpus_store.client_for(settings).get_collection(name).count() == len(stored_rows(data.chunks))
    except Exception:
        return False


def forget_retrievers(corpus_key: str) -> None:
    from retrieval import retriever_cache

    retriever_cache.forget(corpus_key)


def collection_names(chunks: Sequence[Chunk], models: list[str]) -> list[str]:
    """The Chroma collection names a corpus may have, one per embedding model (``DenseStore``'s naming)."""
    return [f"chunks-{fingerprint(chunks, model)}" for model in models]


# ------------------------------------------------------------------------------------- refusal calibration
def start_calibration(data: CorpusData, settings: Settings) -> CalibrationJob:
    """Calibrate the corpus's refusal thresholds in the background, one corpus at a time in this process (a queued
    or running job for it is joined; ``retrieval.calibration_jobs``). Who may ask is checked by the caller
    (``Registry.may_calibrate`` for the page; indexing and the CLI may)."""
    return calibration_jobs.start(data, settings_for(data, settings), lambda: retriever_for(data, settings))


def running_calibration(name: str | None) -> CalibrationJob | None:
    """The refusal calibration of this process still running on the corpus ``name`` (None: none is)."""
    return calibration_jobs.running(name or SHIPPED)


def calibration_state(data: CorpusData, settings: Settings) -> tuple[Any, CalibrationJob | None]:
    """(the calibration in force for this corpus or None, the latest calibration job of this process or None)."""
    return calibration_jobs.state(data, settings_for(data, settings))
