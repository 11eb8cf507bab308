"""Whether a collection made elsewhere can be searched with an embedding model (``index --attach``, the Data tab's
Attach): its vectors are of the model's size, every one is finite, every one is of unit length where the model's
are, and a sample re-embeds to them. Every comparison is written so that NaN fails it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.encoders import Embedder
from retrieval.types import Chunk

ATTACH_REEMBED = 8  # rows of an attached collection re-embedded and compared with their stored vectors
UNIT_TOLERANCE = 1e-2  # how far from 1 an attached vector's length may be when the model's vectors are unit length


def attach_problem(embedder: Embedder, chunks: Sequence[Chunk], stored: np.ndarray) -> str:
    """Why ``stored`` (one vector per chunk, in order) cannot be searched with ``embedder`` ("" if it can): vectors
    of another dimension, or a sample of texts that does not re-embed to its stored vectors."""
    if stored.ndim != 2 or stored.shape[1] != embedder.dim:
        dim = stored.shape[1] if stored.ndim == 2 else 0
        return (
            f"its vectors have {dim} dimensions but {embedder.name} makes {embedder.dim}: it was embedded with "
            "another model; name that one with --embedding-model"
        )
    n = len(stored)
    bad = _non_finite(chunks, stored)
    if bad:
        return bad
    for k, i in enumerate(np.unique(np.linspace(0, n - 1, min(n, ATTACH_REEMBED)).astype(int))):
        fresh = embedder.embed_document(chunks[i].indexed_text)
        if k == 0 and abs(float(np.linalg.norm(fresh)) - 1.0) <= UNIT_TOLERANCE:  # the model's vectors are unit
            bad = _non_unit(chunks, stored)
            if bad:
                return bad
        norm = float(np.linalg.norm(stored[i])) or 1.0
        cosine = float(np.dot(fresh, stored[i]) / norm)
        if not cosine >= 0.99:  # written so that NaN fails too
            return (
                f"the stored vector of {chunks[i].chunk_id!r} is not {embedder.name}'s embedding of its text "
                f"(cosine {cosine:.3f}): it was embedded with another model (name it with --embedding-model) or "
                "from other text (--text-field, --title-field)"
            )
    return ""


def _non_finite(chunks: Sequence[Chunk], stored: np.ndarray) -> str:
    """Why some stored vector holds NaN or an infinity ("" if none does): every vector is checked."""
    finite = np.isfinite(stored).all(axis=1)
    if finite.all():
        return ""
    first = int(np.argmin(finite))
    return (
        f"{int((~finite).sum()):,} of its {len(stored):,} vectors hold NaN or an infinity (e.g. that of "
        f"{chunks[first].chunk_id!r}; Chroma keeps 32-bit floats and stores a value too large for them, such as 1e30, "
        "as NaN): re-embed those rows"
    )


def _non_unit(chunks: Sequence[Chunk], stored: np.ndarray) -> str:
    """Why some stored vector is not of unit length ("" if all are), for a model whose vectors are."""
    norms = np.linalg.norm(stored.astype(np.float64, copy=False), axis=1)
    unit = np.abs(norms - 1.0) <= UNIT_TOLERANCE  # NaN compares False: it fails
    if unit.all():
        return ""
    first = int(np.argmin(unit))
    return (
        f"{int((~unit).sum()):,} of its {len(stored):,} vectors are not of unit length (e.g. that of "
        f"{chunks[first].chunk_id!r}, length {norms[first]:.4g}) while the model's are: they were scaled or "
        "made by another model; re-embed those rows"
    )
