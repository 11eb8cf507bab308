"""What a turn or a share link runs on for a named corpus: its retriever (opened only if complete in the store; a
turn never starts indexing) and refusal text, and the labeled turn a typed one matches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval import quotas
from retrieval.corpora import Registry
from retrieval.corpus_entries import SHIPPED, CorpusData, shipped_refusal
from retrieval.corpus_retrievers import is_indexed, is_ready, retriever_for
from retrieval.index_jobs import job_for, start_index
from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever


def open_for_turns(name: str | None, settings: Settings) -> HybridRetriever:
    """The retriever a turn runs on for the corpus ``name`` (``turn_corpus``'s first half)."""
    return turn_corpus(name, settings)[0]


def turn_corpus(name: str | None, settings: Settings) -> tuple[HybridRetriever, str]:
    """The retriever a turn runs on for the corpus ``name`` (None or "shipped": the cards at CORPUS_PATH) and the
    corpus's refusal text. A corpus whose dense collection the store holds complete (indexed here or by another
    process) is opened; a turn never starts an indexing job (the Data tab or ``python -m retrieval index`` does).

    Raises:
        ValueError: unknown (or deleted) corpus, or one not indexed yet for these settings' embedding model.
    """
    from retrieval.retriever_cache import get_retriever

    if not name or name == SHIPPED:
        return get_retriever(settings), shipped_refusal(settings.corpus_path)
    data = Registry(settings).open(name)
    quotas.touch(settings, data.entry)
    if not is_ready(data, settings) and not is_indexed(data, settings):
        raise ValueError(
            f"corpus {name!r} is not indexed for {settings.embedding_model} in this app yet: open it "
            "in the Data tab and wait for its progress bar to reach 100%."
        )
    return retriever_for(data, settings), data.entry.refusal


def open_within(data: CorpusData, settings: Settings, seconds: float) -> dict[str, Any] | None:
    """Open the corpus's store for a share link, waiting at most ``seconds``: None once it is ready, else the
    snapshot of this process's job (still running, or failed with its error). A link never starts indexing: a
    corpus whose store is not complete is refused, and a person starts its indexing in the Data tab.

    Raises:
        ValueError: the corpus is not indexed yet (and no job of this process is indexing it).
    """
    if data.key is None or is_ready(data, settings):
        return None
    job = job_for(data, settings)
    if job is None or not job.running:
        if not is_indexed(data, settings):
            raise ValueError(
                f"is not indexed yet for {settings.embedding_model}: a link opens only corpora "
                "already indexed; open it in the Data tab to index it."
            )
        job = start_index(data, settings)  # its collection is complete: this opens it, embedding nothing
    snap = job.wait(seconds)
    return None if snap["status"] == "done" else snap


def labels_by_turn(data: CorpusData) -> dict[str, dict[str, int]]:
    """The judgements (card id -> grade) of each labeled turn, keyed by ``turn_key`` of its text."""
    return {turn_key(q.text): dict(q.relevant) for q in data.queries if q.relevant}


def turn_key(text: str) -> str:
    """A turn's text with case and runs of white space ignored: how a typed turn is matched to a labeled one."""
    return " ".join(str(text).lower().split())
