"""Duplicate texts in a dense collection: one stored row per distinct indexed text (``stored_rows``), and every
sub-chunk of a stored text given that row's distance when a search finds it (``spread``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.types import Chunk


def stored_rows(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The sub-chunks a dense collection stores: the first of each distinct indexed text, in corpus order.

    Sub-chunks with the same text (one notice in hundreds of cards, a corpus uploaded twice under other ids) have the
    same vector, and HNSW cannot hold many exact duplicates: their neighbour lists fill with each other, the graph
    splits, and searches (the open's check too) stop finding other vectors. So each text is stored once, and a
    search gives every sub-chunk of that text its score."""
    first: dict[str, Chunk] = {}
    for chunk in chunks:
        first.setdefault(chunk.indexed_text, chunk)
    return list(first.values())


def row_layout(chunks: Sequence[Chunk], attach: str | None) -> tuple[list[Chunk], np.ndarray, dict[str, list[str]]]:
    """The rows a collection holds for ``chunks``, each sub-chunk's row, and each row's sub-chunks. An attached
    collection is read as it was made (a row per sub-chunk); this app's own store holds one row per text."""
    rows = list(chunks) if attach else stored_rows(chunks)
    row_of_text = {c.indexed_text: i for i, c in enumerate(rows)}
    row_of = (
        np.arange(len(chunks)) if attach else np.array([row_of_text[c.indexed_text] for c in chunks], dtype=np.int64)
    )
    copies: dict[str, list[str]] = {c.chunk_id: [] for c in rows}  # row id -> its sub-chunks
    for chunk, row in zip(chunks, row_of):
        copies[rows[row].chunk_id].append(chunk.chunk_id)
    return rows, row_of, copies


def spread(
    row_ids: Sequence[str], distances: Sequence[float], copies: dict[str, list[str]], depth: int
) -> list[tuple[str, float]]:
    """The nearest ``depth`` sub-chunks of a search's rows: every sub-chunk of a stored text at that text's distance
    (ties in id order); ``depth`` rows bring at least ``depth`` sub-chunks, so the nearest ``depth`` are among them."""
    return sorted(
        ((cid, dist) for row, dist in zip(row_ids, distances) for cid in copies.get(row, (row,))),
        key=lambda p: (p[1], p[0]),
    )[:depth]
