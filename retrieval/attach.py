"""Read a Chroma collection made elsewhere (issue 22.3: ``python -m retrieval index --attach COLLECTION``, kept as
a corpus by ``retrieval.corpora.attach``).

The collection (documents + embeddings, in the configured store) is read page by page and never written. Its
vectors are checked against the named embedding model (same dimension, and a sample of its texts re-embeds to its
stored vectors, ``retrieval.attach_vectors``), so turns embedded with that model search it correctly; BM25 is
built from its documents. Each row is one sub-chunk: its id, its text (the document, or the metadata field
``text_field``), its card (the metadata ``parent_id`` or ``card_id``, else the row itself) and optionally a title
(``title_field``; the embedded text is then ``title\\ntext``, as this project indexes). The corpus's record in the
store names the collection and the model; deleting the corpus forgets the record and keeps the collection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval import corpus_store
from retrieval.settings import Settings
from retrieval.types import Card, Chunk

if TYPE_CHECKING:
    from retrieval.corpus_entries import CorpusEntry

PAGE = 1000


def _chunk(cid: str, doc: str | None, meta: dict[str, Any] | None, text_field: str, title_field: str) -> Chunk:
    meta = meta or {}
    text = str(meta.get(text_field, "") if text_field else (doc or ""))
    parent = str(meta.get("parent_id") or meta.get("card_id") or cid)
    return Chunk(
        chunk_id=cid,
        parent_id=parent,
        title=str(meta.get(title_field, "")) if title_field else "",
        lang=str(meta.get("lang", "en")),
        text=text,
    )


def read_collection(
    settings: Settings, name: str, text_field: str = "", title_field: str = "", embeddings: bool = False
) -> tuple[list[Chunk], np.ndarray | None]:
    """Every row of the collection ``name`` as a sub-chunk (and, with ``embeddings``, its stored vectors).

    Raises:
        ValueError: no such collection, an empty one, or rows without text.
    """
    client = corpus_store.client_for(settings)
    try:
        col = client.get_collection(name)
    except Exception:
        others = sorted(n for n in corpus_store.collection_names(settings) if not own_collection(n))
        raise ValueError(
            f"no collection named {name!r} in {corpus_store.where(settings)}; it holds: {', '.join(others) or 'none'}."
        ) from None
    include = ["documents", "metadatas", *(["embeddings"] if embeddings else [])]
    chunks: list[Chunk] = []
    vectors: list[np.ndarray] = []
    total = col.count()
    for lo in range(0, total, PAGE):
        got = col.get(limit=PAGE, offset=lo, include=include)
        metas = got["metadatas"] or [None] * len(got["ids"])
        for i, cid in enumerate(got["ids"]):
            chunks.append(
                _chunk(cid, got["documents"][i] if got["documents"] else None, metas[i], text_field, title_field)
            )
        if embeddings:
            vectors.extend(np.asarray(e, dtype=np.float32) for e in got["embeddings"])
    if not chunks:
        raise ValueError(f"collection {name!r} is empty: nothing to attach.")
    empty = [c.chunk_id for c in chunks if not c.text.strip()]
    if empty:
        where = f"metadata field {text_field!r}" if text_field else "document"
        raise ValueError(
            f"collection {name!r}: {len(empty)} rows have no text in their {where} (e.g. {empty[0]!r}); "
            "name the metadata field that holds it with --text-field."
        )
    return chunks, (np.stack(vectors) if embeddings else None)


def cards_of(chunks: list[Chunk]) -> list[Card]:
    """One card per parent id, its text the parent's sub-chunks in order."""
    parts: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        parts.setdefault(chunk.parent_id, []).append(chunk)
    return [
        Card(pid, group[0].title, group[0].lang, "general", " ".join(c.text for c in group))
        for pid, group in parts.items()
    ]


def read_attached(settings: Settings, entry: CorpusEntry) -> tuple[list[Chunk], list[Card]]:
    """An attached corpus's sub-chunks and cards, read from its collection (``Registry.load``)."""
    meta = corpus_store.meta_of(settings, entry.name)
    chunks, _ = read_collection(
        settings, entry.collection, str(meta.get("text_field", "")), str(meta.get("title_field", ""))
    )
    return chunks, cards_of(chunks)


def own_collection(name: str) -> bool:
    """True for this app's own collections: corpus records, dense collections, the relevance judgments."""
    return name.startswith((corpus_store.PREFIX, "chunks-")) or name in corpus_store.OWN_NAMES


def attachable(settings: Settings) -> list[str]:
    """The collections of the store made elsewhere (not this app's own)."""
    return sorted(n for n in corpus_store.collection_names(settings) if not own_collection(n))
