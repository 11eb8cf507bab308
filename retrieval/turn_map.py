"""One turn on the corpus's map (``retrieval.projection``): where the turn lands and which sub-chunks each list of
the turn marks, with every marked point's true cosine to the turn.

Computed from what the turn already has: the turn's embedding from the per-turn cache (the dense branch embedded
it; nothing is embedded again while it is cached), the map's stored coordinates and the store's in-memory vectors.
The groups are the columns' own lists, point for point: ``BM25`` and ``dense`` are the branches' hits, ``both``
the consensus (sub-chunks both branches found), ``fused`` the fused list, ``final`` the final cards (each by the
sub-chunk that represents it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.projection import Projection
from retrieval.types import RetrievalResult

GROUPS = ("BM25", "dense", "both", "fused", "final")
COSINES_FOR_ALL_MAX = 20_000  # every sub-chunk's cosine to the turn is given up to this corpus size


@dataclass(frozen=True)
class MapPoint:
    """A marked sub-chunk: its card, its place on the map, its true cosine to the turn and its rank in the list."""

    chunk_id: str
    parent_id: str
    x: float
    y: float
    cosine: float | None
    rank: int


@dataclass(frozen=True)
class TurnMap:
    """The map for one turn: every sub-chunk's place (``coords``, in ``chunk_ids`` order), the turn's place, the
    marked points of each list (``GROUPS``) and the variance the two axes keep."""

    coords: np.ndarray
    chunk_ids: tuple[str, ...]
    turn: tuple[float, float] | None
    groups: dict[str, tuple[MapPoint, ...]]
    explained: tuple[float, float]
    cosines: np.ndarray | None = None  # every sub-chunk's cosine to the turn (None past COSINES_FOR_ALL_MAX)


_ROWS: dict[str, dict[str, int]] = {}  # map key -> chunk id -> row (built once per map in a process)
_ROWS_LOCK = threading.Lock()
_ROWS_KEEP = 16


def rows_of(projection: Projection, chunk_ids: tuple[str, ...]) -> dict[str, int]:
    """Chunk id -> its row in the map (built once per map)."""
    with _ROWS_LOCK:
        rows = _ROWS.get(projection.key)
        if rows is None:
            if len(_ROWS) >= _ROWS_KEEP:
                _ROWS.pop(next(iter(_ROWS)))
            rows = _ROWS[projection.key] = {cid: i for i, cid in enumerate(chunk_ids)}
        return rows


def turn_map(retriever: Any, result: RetrievalResult, projection: Projection) -> TurnMap:
    """Place ``result``'s turn and lists on ``projection`` (the map of ``retriever``'s dense store).

    Raises:
        ValueError: the map does not belong to this retriever's sub-chunks (another size).
    """
    store = retriever.dense
    chunk_ids = tuple(c.chunk_id for c in retriever.chunks)
    if len(projection.coords) != len(chunk_ids):
        raise ValueError(
            f"the map has {len(projection.coords):,} points but the corpus {len(chunk_ids):,} sub-chunks: "
            "it belongs to another corpus; open the corpus again to fit its own"
        )
    rows = rows_of(projection, chunk_ids)
    qvec = None
    if store is not None and retriever.embedder is not None and result.dense.usable:
        try:  # the dense branch embedded the turn: the per-turn cache has it
            qvec = retriever.embed_query(result.query).value
        except Exception:  # no embedder now: the map is drawn without the turn and the cosines
            qvec = None
    cosines = None
    if qvec is not None and len(chunk_ids) <= COSINES_FOR_ALL_MAX:
        cosines = np.asarray(store.embeddings @ np.asarray(qvec, dtype=np.float32), dtype=np.float32)

    def cos(cid: str) -> float | None:
        if qvec is None:
            return None
        return float(cosines[rows[cid]]) if cosines is not None else store.similarity(qvec, cid)

    def points(hits: Any) -> tuple[MapPoint, ...]:
        out = []
        for h in hits:
            row = rows.get(h.chunk_id)
            if row is not None:
                x, y = projection.coords[row]
                out.append(MapPoint(h.chunk_id, h.parent_id, float(x), float(y), cos(h.chunk_id), h.rank))
        return tuple(out)

    consensus = set(result.consensus)
    groups = {
        "BM25": points(result.bm25.hits),
        "dense": points(result.dense.hits),
        "both": points([h for h in result.bm25.hits if h.chunk_id in consensus]),
        "fused": points(result.fused),
        "final": points(result.final),
    }
    turn = projection.place(qvec) if qvec is not None else None
    return TurnMap(projection.coords, chunk_ids, turn, groups, projection.explained, cosines)
