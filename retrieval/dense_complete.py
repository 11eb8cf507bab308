"""Whether the store holds a corpus's dense collection complete: what a turn checks before it reconnects to a store
that was away, so that it opens a finished collection and never resumes a build (only an indexing job does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from retrieval.corpus import fingerprint
from retrieval.types import Chunk


def complete_or_why(
    chunks: Sequence[Chunk],
    embedder: Any,
    client: Callable[[], Any],
    stored: int,
    where: str,
    attach: str | None = None,
) -> str:
    """ "" if the store (``client()``) holds the complete dense collection of ``chunks`` for ``embedder`` (``stored``
    rows: one per distinct text), or it is an attached collection (opened as it is); else why not, in words a page
    can show."""
    if attach or embedder is None:
        return ""
    try:
        count = client().get_collection(f"chunks-{fingerprint(list(chunks), embedder.name)}").count()
    except Exception as exc:  # not there at all, or the store is away: either way nothing is embedded in a turn
        return (
            f"the dense index of this corpus is not in {where} ({type(exc).__name__}: {str(exc)[:160]}); open the "
            "corpus in the Data tab (or run `python -m retrieval index`) to build it"
        )
    if count == stored:
        return ""
    return (
        f"the dense index of this corpus is incomplete in {where} ({count:,} of {stored:,} sub-chunks: the store "
        "went away while it was built); open the corpus in the Data tab (or run `python -m retrieval index`) to "
        "resume it"
    )
