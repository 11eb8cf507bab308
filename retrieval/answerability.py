"""The answerability model's slot: a local sentence-transformers ``CrossEncoder`` that judges whether a card answers
a turn (``REFUSAL_MODEL``), added to the refusal rule as a gate (``retrieval.refusal_gates``).

None of the bundled models can tell a turn that borrows the cards' words ("the printer shows error E-09") from one
that rephrases them; an NLI model or a multilingual reranker can. Whichever the user has on disk is loaded lazily,
once per process and path (a failure is remembered and reported, never raised into a turn), scores the turn
against its top_k cards in batches, and remembers each pair's score. A one-label model's score is used as it
comes (its own activation: a sigmoid for most rerankers, 0..1); a model with several labels (NLI) gives the
probability of its ``entailment`` label (its last label when none is called that).

How a user with a hub connection gets one (once; then offline)::

    python -c "from sentence_transformers import CrossEncoder; \\
        CrossEncoder('cross-encoder/nli-deberta-v3-xsmall').save_pretrained('models/nli')"
    REFUSAL_MODEL=models/nli python -m retrieval calibrate --corpus NAME   # chooses REFUSAL_MIN_ANSWERABILITY
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval.encoders import ModelUnavailable

BATCH_SIZE = 16
_KEEP = 8192  # pair scores remembered per process
_MODELS: dict[str, Any] = {}
_FAILED: dict[str, str] = {}
_SCORES: OrderedDict[tuple[str, str, str], float] = OrderedDict()
_LOCK = threading.Lock()
_LOADING = threading.Lock()
LOADS = {"count": 0}  # how many times a model was actually loaded (tests check the process loads it once)


def load(name: str) -> Any:
    """The CrossEncoder at ``name`` (a local folder), loaded on first use and kept for the process.

    Raises:
        ModelUnavailable: the folder is missing or is not a sentence-transformers CrossEncoder (the message says
        what to fix); the failure is remembered, so a broken path costs one attempt per process.
    """
    with _LOADING:
        if name in _MODELS:
            return _MODELS[name]
        if name in _FAILED:
            raise ModelUnavailable(_FAILED[name])
        try:
            model = _load(name)
        except Exception as exc:
            _FAILED[name] = (
                f"REFUSAL_MODEL={name!r} could not be loaded ({type(exc).__name__}: {str(exc)[:200]}); set it to a "
                "local folder saved by sentence-transformers' CrossEncoder.save_pretrained, or unset it"
            )
            raise ModelUnavailable(_FAILED[name]) from exc
        _MODELS[name] = model
        LOADS["count"] += 1
        return model


def _load(name: str) -> Any:
    if not Path(name).is_dir():
        raise FileNotFoundError(f"no folder {name}")
    from sentence_transformers import CrossEncoder

    return CrossEncoder(name, device="cpu", local_files_only=True)


def scores(name: str, turn: str, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> list[float]:
    """The model's score of (``turn``, text) for each of ``texts``: remembered pairs from the cache, the others
    predicted in batches of ``batch_size``.

    Raises:
        ModelUnavailable: see ``load``.
    """
    keys = [(name, turn, text) for text in texts]
    with _LOCK:
        todo = list(dict.fromkeys(k for k in keys if k not in _SCORES))
    if todo:
        model = load(name)
        raw = model.predict([(turn, text) for _, _, text in todo], batch_size=batch_size, show_progress_bar=False)
        got = [_score(model, row) for row in raw]
        with _LOCK:
            for key, value in zip(todo, got):
                _SCORES[key] = value
            while len(_SCORES) > _KEEP:
                _SCORES.popitem(last=False)
    with _LOCK:
        return [_SCORES[k] for k in keys]


def _score(model: Any, row: Any) -> float:
    """One pair's score: the value of a one-label model; for several labels, the entailment probability."""
    import numpy as np

    values = np.atleast_1d(np.asarray(row, dtype=np.float64))
    if values.size == 1:
        return float(values[0])
    probs = np.exp(values - values.max())
    probs /= probs.sum()
    labels = {str(v).lower(): int(k) for k, v in (getattr(model.config, "id2label", None) or {}).items()}
    return float(probs[labels.get("entailment", values.size - 1)])


def best(name: str, turn: str, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> float:
    """The best score of ``turn`` against ``texts`` (the top_k cards). Raises ModelUnavailable as ``load``."""
    return max(scores(name, turn, texts, batch_size)) if texts else float("-inf")


def clear() -> None:
    """Forget loaded models, failures and scores (tests; a user's model replaced on disk)."""
    with _LOADING, _LOCK:
        _MODELS.clear()
        _FAILED.clear()
        _SCORES.clear()
