"""Which corpora have labeled turns, and their labeled turns as a ``Dataset``: the one loader behind
``python -m retrieval eval --corpus NAME|PATH`` and the Evaluation tab's live entries (``corpus_eval``).

A corpus has labeled turns when it was registered with some (the shipped queries schema beside cards, or BEIR
``queries.jsonl`` + ``qrels/*.tsv``), when it is a BEIR folder under the data root holding both files (how many
is known only once it is loaded), for the shipped cards when ``queries.jsonl`` sits beside them, or when judgments
were made for it (``retrieval.judgments``, kept in the Chroma store, bound to the corpus's identity): its labels
(never a visitor's own marks) are merged into its labeled turns by ``retrieval.judgments.merge``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from retrieval.corpora import Registry
from retrieval.corpus import Dataset, load_shipped
from retrieval.corpus_entries import SHIPPED, STORED, CorpusData, CorpusEntry
from retrieval.judgments import JudgmentStore, corpus_identity, merge
from retrieval.settings import Settings

log = logging.getLogger(__name__)


def has_judgments(entry: CorpusEntry, settings: Settings) -> bool:
    """True if the corpus of ``entry`` has label judgments (one record read; False when the store cannot be read:
    evaluation goes on without them). A data-root folder or a corpus not loaded yet has none."""
    if entry.kind != SHIPPED and entry.kind not in STORED:
        return False
    try:
        return JudgmentStore(settings).has_labels(corpus_identity(CorpusData(entry, (), (), ())))
    except Exception as exc:  # a store that is down must not hide the corpora's own labeled turns
        log.warning("judgments unavailable (%s: %s)", type(exc).__name__, exc)
        return False


def with_judgments(dataset: Dataset, corpus: str, settings: Settings) -> Dataset:
    """``dataset`` with the label judgments of the corpus identity ``corpus`` (``judgments.corpus_identity``)
    merged into its labeled turns (``judgments.merge``)."""
    try:
        judged = JudgmentStore(settings).all(corpus)
    except Exception as exc:
        log.warning("judgments of %s unavailable (%s: %s)", corpus, type(exc).__name__, exc)
        return dataset
    if not judged:
        return dataset
    return dataclasses.replace(dataset, queries=merge(dataset.queries, judged, {c.id for c in dataset.cards}))


def has_labeled_turns(entry: CorpusEntry, settings: Settings | None = None) -> bool:
    """True if the entry has (or, for a BEIR folder not loaded yet, carries the files of) labeled turns, or (with
    ``settings``) label judgments in the store (``has_judgments``)."""
    source = Path(entry.source)
    if entry.kind == SHIPPED and source.with_name("queries.jsonl").is_file():
        return True
    if entry.turns:
        return True
    if entry.kind == "beir":
        return (source / "queries.jsonl").is_file() and any((source / "qrels").glob("*.tsv"))
    return settings is not None and has_judgments(entry, settings)


def labeled_entries(settings: Settings) -> list[CorpusEntry]:
    """The registry's corpora with labeled turns, in the registry's order (the shipped cards first)."""
    return [e for e in Registry(settings).entries() if has_labeled_turns(e, settings)]


def describe(entry: CorpusEntry) -> str:
    """What is known of an entry's labeled turns, in words (a BEIR folder's count only once it is loaded)."""
    if entry.kind == SHIPPED:
        return "the shipped labeled set"
    if entry.turns:
        return f"{entry.turns:,} labeled turns, {entry.kind}"
    return "BEIR folder under the data root; its labeled turns are counted when it is loaded"


def labeled_dataset(
    name: str | None, settings: Settings, *, paths: bool = False, limit: int | None = None
) -> tuple[CorpusData | None, Dataset]:
    """The corpus called ``name`` (None, "" or "shipped": the cards at CORPUS_PATH) and its labeled turns.

    ``paths`` also accepts a file or folder (the CLI only; a name from the page never opens a path). ``limit``
    keeps the first N turns (None or 0: all). The shipped cards come back with ``None`` as their CorpusData.

    Raises:
        ValueError: unknown corpus, a corpus without labeled turns, a bad ``limit``, or a file that does not load
            (the message names the file, line and field).
    """
    if not name or name == SHIPPED:
        queries = Path(settings.corpus_path).with_name("queries.jsonl")
        if queries.is_file():
            dataset = with_judgments(load_shipped(settings.corpus_path, queries), SHIPPED, settings)
        else:
            data = Registry(settings).open(SHIPPED)
            dataset = with_judgments(data.dataset(), SHIPPED, settings)
        if not dataset.queries:
            raise ValueError(
                f"the shipped cards ({settings.corpus_path}) have no labeled turns: evaluation needs "
                f"{queries.name} beside them or labels from `python -m retrieval judgments`, or pick a corpus with "
                "labeled turns."
            )
        return None, limit_turns(dataset, limit)
    data = Registry(settings).open(name, paths=paths)
    dataset = with_judgments(data.dataset(), corpus_identity(data), settings)
    if not dataset.queries:
        raise ValueError(
            f"corpus {dataset.name!r} has no labeled turns: evaluation needs the shipped queries schema "
            "beside the cards, BEIR queries.jsonl + qrels/, or labels judged by its owner (in the page, the session "
            "that uploaded it; or `python -m retrieval judgments`)."
        )
    return data, limit_turns(dataset, limit)


def limit_turns(dataset: Dataset, limit: int | None) -> Dataset:
    """The first ``limit`` labeled turns (None or 0: all of them)."""
    if not limit:
        return dataset
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"the number of turns must be a whole number, 0 for all, got {limit!r}.")
    return dataclasses.replace(dataset, queries=dataset.queries[:limit])


SAMPLE_SEED = 0


def sample_turns(dataset: Dataset, limit: int | None, seed: int = SAMPLE_SEED) -> Dataset:
    """At most ``limit`` labeled turns with every category represented (None or 0: all of them): the turns of each
    category in a seeded shuffle, then one category after another, one turn each, until ``limit``; kept in the
    dataset's order. The same ``seed`` gives the same turns. (The first N of the shipped set are all lexical, so a
    capped run named BM25 the best branch.)"""
    import random

    if not limit or limit >= len(dataset.queries):
        return limit_turns(dataset, limit)
    limit_turns(dataset, limit)  # the same checks of ``limit``
    by_category: dict[str, list[int]] = {}
    for i, q in enumerate(dataset.queries):
        by_category.setdefault(q.category or "", []).append(i)
    rng = random.Random(seed)
    for indexes in by_category.values():
        rng.shuffle(indexes)
    picked: list[int] = []
    queues = [list(v) for _, v in sorted(by_category.items())]
    while len(picked) < limit:
        for queue in queues:
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return dataclasses.replace(dataset, queries=tuple(dataset.queries[i] for i in sorted(picked)))
