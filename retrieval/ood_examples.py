"""Out-of-domain examples for the refusal rule's ``out-of-domain example`` test.

The dev split of ``corpus/ood_pool.jsonl`` (other domains, near misses, chit-chat, in en/es/pt), embedded once per
embedding model and process. A turn whose closest example is nearer than the closest card (by the embedder's
cosine) looks like what the cards do not cover: "the printer shows error E-09" sits next to the pool's printer and
appliance questions, not next to the glucose-meter card it shares a code with. The pool's test split is never an
example: calibration holds it out to report on.

The pool was written for the shipped medication cards, and it asks about cycling, cars, cooking...: on another
corpus, the pool turns it answers itself (``covered``) are neither examples nor out-of-domain calibration turns.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from typing import Any

import numpy as np

from retrieval.settings import PROJECT_ROOT

POOL = PROJECT_ROOT / "corpus" / "ood_pool.jsonl"
_EXAMPLES: dict[str, tuple[list[str], np.ndarray]] = {}
# A pool turn is the corpus's own when its nearest card is nearer than its nearest other example by at least this:
# the widest out-of-domain margin calibration may choose (``calibration.GRID["max_ood_margin"]``), so no margin
# would call it out of domain.
COVERED_MARGIN = 0.10
_LOCK = threading.Lock()


def examples(embedder: Any) -> tuple[list[str], np.ndarray] | None:
    """The dev examples and their embeddings by ``embedder`` (built on first use: a few seconds), or None."""
    with _LOCK:
        if embedder.name not in _EXAMPLES:
            if not POOL.exists():
                return None
            rows = [json.loads(line) for line in POOL.read_text(encoding="utf-8").splitlines() if line.strip()]
            texts = [r["text"] for r in rows if r.get("split", "dev") == "dev"]
            if not texts:
                return None
            _EXAMPLES[embedder.name] = (texts, _embedded(embedder, texts))
        return _EXAMPLES[embedder.name]


def _embedded(embedder: Any, texts: list[str]) -> np.ndarray:
    """The examples' embeddings, kept in the cache folder (``retrieval.encoders.graph_cache_dir``) under a name
    that hashes the model and the texts: embedding them costs ~0.45 s, which every cold start's first turn paid.
    A kept file is used only if its first example still re-embeds to it (the same name, another model: rebuilt)."""
    from retrieval.encoders import graph_cache_dir

    digest = hashlib.sha256("\n".join([embedder.name, str(getattr(embedder, "dim", "")), *texts]).encode())
    path = graph_cache_dir() / f"ood-examples-{digest.hexdigest()[:20]}.npy"
    try:
        kept = np.load(path)
        if kept.shape[0] == len(texts) and float(kept[0] @ embedder.embed_query(texts[0])) > 0.999:
            return kept
    except (OSError, ValueError):
        pass  # not kept yet, or unreadable: embed them
    matrix = np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(partial, matrix)
        os.replace(partial, path)
    except OSError:
        pass  # a read-only cache folder costs only time
    return matrix


def nearest(
    embedder: Any, vector: np.ndarray, turn: str, skip: frozenset[str] = frozenset()
) -> tuple[str, float] | None:
    """The example closest to ``vector`` and its cosine, the turn itself left out (a pool turn run through
    calibration is not its own example) and the examples in ``skip`` (``covered``); None without examples."""
    found = examples(embedder)
    if found is None:
        return None
    texts, matrix = found
    sims = matrix @ np.asarray(vector, dtype=np.float32)
    for i in np.argsort(-sims)[: 2 + len(skip)]:
        if texts[i] != turn and texts[i] not in skip:
            return texts[i], float(sims[i])
    return None


def covered(retriever: Any, texts: list[str] | None = None) -> frozenset[str]:
    """Of ``texts`` (default: the examples), the pool turns the retriever's corpus answers itself: the nearest of
    its sub-chunks is nearer than the nearest other example by ``COVERED_MARGIN`` (the embedder's cosines, from
    the dense store's vectors). Empty without examples or embeddings."""
    store = getattr(retriever.dense_branch, "store", None) if retriever.embedder is not None else None
    found = examples(retriever.embedder) if store is not None else None
    cards = getattr(store, "embeddings", None)
    if found is None or cards is None or not len(cards):
        return frozenset()
    names, matrix = found
    texts = list(names) if texts is None else list(texts)
    row = {t: i for i, t in enumerate(names)}
    vectors = np.stack([matrix[row[t]] if t in row else retriever.embedder.embed_query(t) for t in texts])
    to_card = np.full(len(texts), -np.inf, dtype=np.float32)
    for start in range(0, len(cards), 20_000):  # bounded memory on a large corpus
        to_card = np.maximum(to_card, (vectors @ np.asarray(cards[start : start + 20_000], np.float32).T).max(axis=1))
    to_example = vectors @ matrix.T
    for i, t in enumerate(texts):
        if t in row:
            to_example[i, row[t]] = -np.inf  # an example is not its own neighbour
    return frozenset(t for t, c, e in zip(texts, to_card, to_example.max(axis=1)) if c >= e + COVERED_MARGIN)


def mark_covered(retriever: Any) -> None:
    """Keep on ``retriever``, once, the pool turns its own corpus answers (``covered``) as ``ood_covered``: the
    refusal rule then never takes them for another domain (``refusal_turn``, ``calibration``). Left unset on a
    retriever without a dense store, as the page opens such a corpus (``corpus_retrievers.retriever_for``)."""
    if getattr(retriever, "ood_covered", None) is None and getattr(retriever.dense_branch, "store", None) is not None:
        retriever.ood_covered = covered(retriever)
