"""The smallest single change of one control that brings a card among a turn's final cards.

Each control's values are tried in ladder steps away from the current value (``LADDERS``), running the pipeline
itself, whose per-turn cache keeps the branch lists and pair scores; the first step count at which some control
succeeds wins (ties go to the control listed first), then a numeric control is refined between the last value that
failed and the one that worked. "No single change does" comes with the closest try.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from retrieval.settings import MAX_CANDIDATE_DEPTH, Settings, env_name
from retrieval.why_stages import card_position

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever

LADDERS: dict[str, tuple[Any, ...]] = {
    "candidate_multiplier": (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50),
    "reranker_max_input": (0, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200),
    "rrf_k": (1, 2, 5, 10, 20, 30, 40, 60, 80, 100, 150, 200, 300, 500, 1000),
    "bm25_weight": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0),
    "dense_weight": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0),
    "min_similarity": tuple(round(x / 100, 2) for x in range(-100, 101, 5)),
    "rerank_weight": (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0),
    "bm25_tokenizer": ("snowball", "plain"),
    "fusion": ("rrf", "convex"),
    "rerank_mode": ("rrf", "replace"),
}
MAX_TRIES = 400  # pipeline runs a suggestion may take at most (each from the per-turn cache where it can)


def _ladder(attr: str, s: Settings) -> list[Any]:
    """The values tried for ``attr``, ascending, with the current value in place (for ladder distances)."""
    current = getattr(s, attr)
    values = set(LADDERS[attr]) | {current}
    if attr == "candidate_multiplier":  # beyond MAX_CANDIDATE_DEPTH a larger multiplier changes nothing
        cap = math.ceil(MAX_CANDIDATE_DEPTH / s.top_k)
        values = {v for v in values if v <= cap} | ({cap} if cap <= 50 else set())
    if isinstance(current, str):
        return list(LADDERS[attr])
    return sorted(values)


def _try(
    retriever: HybridRetriever, query: str, card_id: str, s: Settings, attr: str, value: Any, tried: list[int]
) -> tuple[bool, int | None, Settings | None]:
    """Run the pipeline with one control changed: (the card is a final card, its candidate position, the settings)."""
    try:
        changed = s.replace(**{attr: value})
    except ValueError:  # e.g. both branch weights 0
        return False, None, None
    tried[0] += 1
    result = retriever.retrieve(query, changed)
    return card_id in {h.parent_id for h in result.final}, card_position(result, card_id), changed


def _refine(
    retriever: HybridRetriever,
    query: str,
    card_id: str,
    s: Settings,
    attr: str,
    failed: Any,
    works: Any,
    tried: list[int],
) -> Any:
    """The value nearest the one that failed, between it and the ladder value that works (0.01 for the
    threshold, whole numbers for integer controls; at most 50 tries)."""
    if isinstance(works, str) or isinstance(works, bool):
        return works
    if attr == "min_similarity":
        step = 0.01 if works > failed else -0.01
        between = [round(failed + step * n, 2) for n in range(1, int(round(abs(works - failed) / 0.01)))]
    elif isinstance(works, int):
        step = 1 if works > failed else -1
        between = list(range(failed + step, works, step))
    else:
        return works
    for value in between[:50]:
        if _try(retriever, query, card_id, s, attr, value, tried)[0]:
            return value
    return works


def suggest(
    retriever: HybridRetriever, query: str, card_id: str, s: Settings, budget_s: float | None = None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, int, bool]:
    """The smallest single change of one control that puts the card among the final cards, the closest try when
    none does, how many pipeline runs the search took, and whether it stopped at ``budget_s`` seconds before
    trying every value (then "none" only means none among those tried). See the module docstring for "smallest"."""
    tried = [0]
    deadline = None if budget_s is None else time.monotonic() + budget_s
    ladders = {attr: _ladder(attr, s) for attr in LADDERS}
    if s.fusion != "rrf" and s.rerank_mode != "rrf":
        ladders.pop("rrf_k")  # rrf_k acts on nothing then
    if s.rerank_mode != "rrf":
        ladders.pop("rerank_weight")
    if not s.hybrid_enabled:
        ladders = {a: v for a, v in ladders.items() if a in ("candidate_multiplier", "min_similarity")}
    closest: dict[str, Any] | None = None
    longest = max(len(v) for v in ladders.values())
    for step in range(1, longest):
        for attr, values in ladders.items():
            here = values.index(getattr(s, attr)) if getattr(s, attr) in values else 0
            for direction in (1, -1):
                j = here + direction * step
                if not 0 <= j < len(values) or tried[0] >= MAX_TRIES:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    return None, closest, tried[0], True
                ok, position, changed = _try(retriever, query, card_id, s, attr, values[j], tried)
                if ok:
                    previous = values[j - direction] if 0 <= j - direction < len(values) else getattr(s, attr)
                    value = _refine(retriever, query, card_id, s, attr, previous, values[j], tried)
                    return _change(attr, value, s, step), None, tried[0], False
                if position is not None and (closest is None or position < closest["card_position"]):
                    closest = {**_change(attr, values[j], s, step), "card_position": position}
    return None, closest, tried[0], False


def _change(attr: str, value: Any, s: Settings, steps: int) -> dict[str, Any]:
    return {"setting": env_name(attr), "attribute": attr, "value": value, "current": getattr(s, attr), "steps": steps}
