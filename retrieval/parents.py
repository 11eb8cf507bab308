"""Parent dedup (ADR-0020): keep the best-ranked sub-chunk of each parent card, in order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar


class _HasParent(Protocol):
    @property
    def parent_id(self) -> str: ...


H = TypeVar("H", bound=_HasParent)


def best_per_parent(hits: Iterable[H]) -> list[H]:
    """The first (best-ranked) hit of every parent, preserving order. ``hits`` must be best-first."""
    seen: set[str] = set()
    out: list[H] = []
    for hit in hits:
        if hit.parent_id not in seen:
            seen.add(hit.parent_id)
            out.append(hit)
    return out
