"""The corpora kept in Chroma: one record collection per corpus, so every process on the same store (embedded
``CHROMA_PATH`` or the server at ``CHROMA_HOST``) lists and opens the same corpora.

A record collection is named ``corpus--<name>``; its metadata is the corpus's own (name, format, fingerprint,
chunker, counts, refusal text, when added, where it came from and the hash of the token of the browser session that
may delete it), and its rows are the cards (document = the card text; metadata = card id, title, lang, topic and its
position) and the labeled turns (document = the turn; metadata = turn id, lang, category, judgements as JSON). Each
row carries a one-number placeholder vector: the sub-chunk vectors live in the corpus's dense collections
(``retrieval.dense``), which also keep each sub-chunk's text, title and card id. The sub-chunks are split again
from the cards on open and checked against the stored fingerprint; BM25 is rebuilt from them, never pickled.

Creating a collection is the one atomic step Chroma offers across processes, so a name is claimed by creating its
record collection (a taken name gets ``-2``, ``-3``, ...), written while its ``state`` is ``writing``, and listed
only once it is ``ready``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from retrieval.corpus import CHUNKER_VERSION, LabeledQuery
from retrieval.settings import Settings
from retrieval.types import Card

log = logging.getLogger(__name__)

PREFIX = "corpus--"
SCHEMA = "corpus-v1"
# The app's other collections (judgments, refusal calibrations, class links, corpus maps): never attachable, never
# offered in the Data tab's Attach picker.
OWN_NAMES = ("judgments", "refusal-calibrations", "classroom", "corpus-maps")
PAGE = 1000  # rows per read or write: paged, so a corpus of any size opens in bounded memory per call
STALE_WRITING_S = 3600.0  # a record still "writing" after an hour was left by a process that died while adding


class StoreUnavailable(RuntimeError):
    """The Chroma store that holds the corpora cannot be reached or opened."""


_HTTP_CLIENTS: dict[tuple[str, int], Any] = {}
_HTTP_LOCK = threading.Lock()


def client_for(settings: Settings) -> Any:
    """The Chroma client of these settings' store: the server at ``CHROMA_HOST`` (one HTTP client per server, kept:
    making one costs round trips), else the embedded ``CHROMA_PATH`` (chromadb keeps one per path)."""
    from retrieval.chroma_store import chroma_client

    if settings.chroma_host:
        key = (settings.chroma_host, settings.chroma_port)
        with _HTTP_LOCK:
            if key not in _HTTP_CLIENTS:
                _HTTP_CLIENTS[key] = chroma_client(host=settings.chroma_host, port=settings.chroma_port)
            return _HTTP_CLIENTS[key]
    return chroma_client(path=settings.chroma_path)


def where(settings: Settings) -> str:
    return (
        f"the Chroma server {settings.chroma_host}:{settings.chroma_port}"
        if settings.chroma_host
        else f"the Chroma store at {settings.chroma_path}"
    )


# A read of the listing (not a write) waits for the store at most this long, then uses the last listing this
# process got from it: a frozen server must not hold a turn for the HTTP client's 30 s (retrieval.store_calls).
LIST_WAIT_S = 3.0
FIRST_LIST_WAIT_S = 15.0
_LAST_LISTING: dict[tuple, list] = {}
_STALE: dict[tuple, str] = {}  # the stores whose last read of the listing was answered from _LAST_LISTING: why


def unreachable(settings: Settings) -> str:
    """Why the last read of this store's listing used the listing kept from before ("" if the store answered)."""
    return _STALE.get(
        (settings.chroma_host, settings.chroma_port) if settings.chroma_host else (settings.chroma_path,), ""
    )


def _listing(settings: Settings, writing: bool) -> list:
    key = (settings.chroma_host, settings.chroma_port) if settings.chroma_host else (settings.chroma_path,)
    if writing or not settings.chroma_host:  # a change is decided on what the store holds now; an embedded store
        collections = client_for(settings).list_collections()  # is this process's own files (it opens slowly once)
        _LAST_LISTING[key] = collections
        return collections
    from retrieval import store_calls

    wait = LIST_WAIT_S if key in _LAST_LISTING else FIRST_LIST_WAIT_S  # the first: the client is made, chromadb loads
    done, collections = store_calls.bounded(("list", key), lambda: client_for(settings).list_collections(), wait)
    if done:
        _LAST_LISTING[key] = collections
        _STALE.pop(key, None)
        return collections
    if key in _LAST_LISTING:
        _STALE[key] = f"{where(settings)} is unreachable (no answer within {LIST_WAIT_S:g} s)"
        log.warning("%s: using its last listing", _STALE[key])
        return _LAST_LISTING[key]
    raise TimeoutError(f"no answer within {wait:g} s")


def records(settings: Settings, *, writing: bool = False) -> list[dict[str, Any]]:
    """The metadata of every corpus record in the store (``ready`` ones; with ``writing`` also those being written),
    oldest first. A read that the store does not answer within ``LIST_WAIT_S`` gets the last listing this process
    had of it (``writing``: always the store's own answer).

    Raises:
        StoreUnavailable: the store cannot be listed (the message says which store and why).
    """
    try:
        collections = _listing(settings, writing)
    except Exception as exc:
        raise StoreUnavailable(f"{where(settings)} is unreachable ({type(exc).__name__}: {exc})") from exc
    rows = []
    for col in collections:
        meta = dict(getattr(col, "metadata", None) or {})
        if col.name.startswith(PREFIX) and meta.get("schema") == SCHEMA and (writing or meta.get("state") == "ready"):
            rows.append({**meta, "collection": col.name})
    return sorted(rows, key=lambda r: (str(r.get("added", "")), str(r.get("name", ""))))


def collection_names(settings: Settings) -> list[str]:
    """Every collection name in the store."""
    return [c.name for c in client_for(settings).list_collections()]


def _exists_error(exc: Exception) -> bool:
    return "already exists" in str(exc).lower() or type(exc).__name__ == "UniqueConstraintError"


def create(
    settings: Settings,
    base: str,
    taken: set[str],
    meta: dict[str, Any],
    cards: Sequence[Card],
    queries: Sequence[LabeledQuery],
) -> str:
    """Claim the first free name ``base``, ``base-2``, ... (not in ``taken`` and not claimed in the store by any
    process), write the cards and turns, then mark the record ready. Returns the name.

    A failure while writing drops the half-written record, so nothing half-made is ever listed.
    """
    client = client_for(settings)
    _drop_stale(client)
    n = 1
    while True:
        name = base if n == 1 else f"{base}-{n}"
        n += 1
        if name in taken:
            continue
        full = {
            **meta,
            "schema": SCHEMA,
            "name": name,
            "chunker": CHUNKER_VERSION,
            "state": "writing",
            "started": time.time(),
        }
        try:
            col = client.create_collection(PREFIX + name, metadata=full)
        except Exception as exc:
            if _exists_error(exc):
                continue  # another process (or an earlier add) holds this name
            raise
        break
    try:
        _write_rows(col, cards, queries)
        col.modify(metadata={**full, "state": "ready"})
    except BaseException:
        try:
            client.delete_collection(PREFIX + name)
        except Exception:
            log.exception("could not drop the half-written corpus record %s", name)
        raise
    return name


def _drop_stale(client: Any) -> None:
    """Drop records left ``writing`` by a process that died while adding (older than ``STALE_WRITING_S``)."""
    now = time.time()
    for col in client.list_collections():
        meta = getattr(col, "metadata", None) or {}
        if (
            col.name.startswith(PREFIX)
            and meta.get("state") == "writing"
            and now - float(meta.get("started", now)) > STALE_WRITING_S
        ):
            log.warning("dropping corpus record %s: left half-written by a process that stopped", col.name)
            try:
                client.delete_collection(col.name)
            except Exception:
                pass


def _write_rows(col: Any, cards: Sequence[Card], queries: Sequence[LabeledQuery]) -> None:
    rows: list[tuple[str, str, dict[str, Any]]] = [
        (
            f"card:{i:09d}",
            c.text,
            {"role": "card", "i": i, "id": c.id, "title": c.title, "lang": c.lang, "topic": c.topic},
        )
        for i, c in enumerate(cards)
    ]
    rows += [
        (
            f"turn:{i:09d}",
            q.text,
            {
                "role": "turn",
                "i": i,
                "id": q.id,
                "lang": q.lang,
                "category": q.category,
                "relevant": json.dumps(q.relevant, ensure_ascii=False),
            },
        )
        for i, q in enumerate(queries)
    ]
    for lo in range(0, len(rows), PAGE):
        page = rows[lo : lo + PAGE]
        col.add(
            ids=[r[0] for r in page],
            documents=[r[1] for r in page],
            metadatas=[r[2] for r in page],
            embeddings=[[1.0]] * len(page),
        )


def read(settings: Settings, name: str) -> tuple[dict[str, Any], list[Card], list[LabeledQuery]]:
    """A corpus record's metadata, cards and labeled turns, read page by page.

    Raises:
        KeyError: no ready record of that name (deleted, perhaps by another process).
    """
    col = _get(client_for(settings), name)
    meta = dict(col.metadata or {})
    if meta.get("state") != "ready":
        raise KeyError(name)
    cards: list[tuple[int, Card]] = []
    turns: list[tuple[int, LabeledQuery]] = []
    total = col.count()
    for lo in range(0, total, PAGE):
        got = col.get(limit=PAGE, offset=lo, include=["documents", "metadatas"])
        for doc, m in zip(got["documents"], got["metadatas"]):
            if m.get("role") == "card":
                cards.append(
                    (
                        int(m["i"]),
                        Card(
                            str(m["id"]),
                            str(m.get("title", "")),
                            str(m.get("lang", "en")),
                            str(m.get("topic", "general")),
                            doc or "",
                        ),
                    )
                )
            elif m.get("role") == "turn":
                turns.append(
                    (
                        int(m["i"]),
                        LabeledQuery(
                            str(m["id"]),
                            doc or "",
                            str(m.get("lang", "en")),
                            str(m.get("category", "mixed")),
                            json.loads(m.get("relevant") or "{}"),
                        ),
                    )
                )
    return meta, [c for _, c in sorted(cards, key=lambda p: p[0])], [q for _, q in sorted(turns, key=lambda p: p[0])]


def _get(client: Any, name: str) -> Any:
    try:
        return client.get_collection(PREFIX + name)
    except Exception as exc:
        if (
            "does not exist" in str(exc).lower()
            or "not found" in str(exc).lower()
            or type(exc).__name__ in ("NotFoundError", "InvalidCollectionException", "ValueError")
        ):
            raise KeyError(name) from None
        raise


def meta_of(settings: Settings, name: str) -> dict[str, Any]:
    """A ready record's metadata (KeyError if there is none)."""
    meta = dict(_get(client_for(settings), name).metadata or {})
    if meta.get("state") != "ready":
        raise KeyError(name)
    return meta


def update(settings: Settings, name: str, **changes: Any) -> dict[str, Any]:
    """Change fields of a record's metadata (Chroma replaces the whole metadata, so the rest is written back)."""
    col = _get(client_for(settings), name)
    meta = {**(col.metadata or {}), **changes}
    col.modify(metadata=meta)
    return meta


def drop(settings: Settings, name: str) -> bool:
    """Drop a corpus record; False if there was none (another process dropped it first)."""
    try:
        client_for(settings).delete_collection(PREFIX + name)
        return True
    except Exception as exc:
        if "does not exist" in str(exc).lower() or "not found" in str(exc).lower():
            return False
        raise
