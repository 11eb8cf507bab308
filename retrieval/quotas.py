"""How many corpora the page's visitors may keep, and when an upload no one opens gives its place up.

``MAX_CORPORA`` bounds the store for everyone; without more, one visitor (or one script minting sessions) could
fill it for good, since a visitor may delete only their own uploads. So:

- a browser session keeps at most ``CORPORA_PER_SESSION`` corpora uploaded or attached from the page, and a client
  address at most ``CORPORA_PER_ADDRESS`` (the address the connection came from, or the one a trusted proxy names:
  ``TRUSTED_PROXIES``);
- when the store is full, the corpora uploaded or attached from the page that no one opened for
  ``UPLOAD_IDLE_HOURS`` are deleted, least recently opened first, to make room (the command line's are never);
- every refusal says what this visitor can do: delete one of their own, or when the next place frees up.

A corpus's last opening is kept in its record (``opened``, seconds since the epoch), written at most once per
``TOUCH_EVERY_S`` per process, so reading it costs no write per turn.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from retrieval import corpus_store
from retrieval.settings import Settings

log = logging.getLogger(__name__)

PAGE_ORIGINS = ("page", "attach")
TOUCH_EVERY_S = 600.0
_TOUCHED: dict[tuple[str, str], float] = {}
_TOUCH_LOCK = threading.Lock()


class QuotaError(ValueError):
    """A corpus cannot be added from the page; the message says what the visitor can do instead."""


def address_hash(address: str | None) -> str:
    """What a record keeps of the client address that uploaded it: a SHA-256, never the address."""
    return hashlib.sha256(("corpus-client:" + address).encode()).hexdigest() if address else ""


def last_opened(row: dict[str, Any]) -> float:
    """When a corpus was last opened (seconds since the epoch): its ``opened``, else when it was added."""
    opened = row.get("opened")
    if isinstance(opened, (int, float)) and not isinstance(opened, bool):
        return float(opened)
    try:
        return datetime.strptime(str(row.get("added", "")), "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return 0.0


def touch(settings: Settings, row_or_entry: Any, *, wait: bool = False) -> None:
    """Record that a corpus uploaded or attached from the page was opened now (at most once per TOUCH_EVERY_S per
    process); a store that cannot be written is left as it is."""
    origin = getattr(row_or_entry, "origin", None) or (
        row_or_entry.get("origin") if isinstance(row_or_entry, dict) else None
    )
    name = getattr(row_or_entry, "name", None) or (row_or_entry.get("name") if isinstance(row_or_entry, dict) else None)
    if origin not in PAGE_ORIGINS or not name:
        return
    key, now = (settings.chroma_host or settings.chroma_path, str(name)), time.time()
    with _TOUCH_LOCK:
        if now - _TOUCHED.get(key, 0.0) < TOUCH_EVERY_S:
            return
        _TOUCHED[key] = now
    from retrieval import store_calls

    def write() -> None:
        try:
            corpus_store.update(settings, str(name), opened=now)
        except Exception as exc:  # deleted meanwhile, or the store is away: the next opening tries again
            log.info("could not record the opening of %s: %s", name, exc)
            with _TOUCH_LOCK:
                _TOUCHED.pop(key, None)

    if wait:
        write()
    else:  # in the background: a turn never waits on a store that does not answer
        store_calls.later(("opened", *key), write)


def check_own(settings: Settings, rows: list[dict[str, Any]], owner_hash: str, client_hash: str) -> None:
    """Refuse (``QuotaError``) an upload past this session's or this address's share of the store."""
    from_page = [r for r in rows if r.get("origin") in PAGE_ORIGINS]
    mine = [str(r.get("name")) for r in from_page if owner_hash and r.get("owner") == owner_hash]
    if len(mine) >= settings.corpora_per_session:
        raise QuotaError(
            f"this session already keeps {len(mine)} corpora uploaded or attached from the page, its share "
            f"(CORPORA_PER_SESSION={settings.corpora_per_session}): delete one of yours ({', '.join(mine)}) in the "
            "Data tab (pick it, then Delete) and upload again."
        )
    here = sum(1 for r in from_page if client_hash and r.get("client") == client_hash)
    if here >= settings.corpora_per_address:
        raise QuotaError(
            f"your address already keeps {here} corpora uploaded or attached from the page, its share "
            f"(CORPORA_PER_ADDRESS={settings.corpora_per_address}): delete one of those you uploaded in the Data "
            f"tab, or wait: one no one opens for {settings.upload_idle_hours:g} h (UPLOAD_IDLE_HOURS) is deleted "
            "when a new upload needs its place."
        )


def make_room(
    settings: Settings,
    rows: list[dict[str, Any]],
    limit: int,
    delete: Callable[[dict[str, Any]], Any],
    owner_hash: str = "",
    now: float | None = None,
) -> list[dict[str, Any]]:
    """If the store keeps ``limit`` corpora (``MAX_CORPORA``), delete (``delete(row)``) the page's corpora that no one
    opened for ``UPLOAD_IDLE_HOURS``, least recently opened first, until one place is free; returns the rows left.

    Raises:
        QuotaError: still full; the message says when the next place frees up and what this session may delete.
    """
    now = time.time() if now is None else now
    idle_s = settings.upload_idle_hours * 3600.0
    rows = list(rows)
    idle = sorted(
        (
            r
            for r in rows
            if r.get("origin") in PAGE_ORIGINS and r.get("state") == "ready" and now - last_opened(r) >= idle_s
        ),
        key=last_opened,
    )
    while len(rows) >= limit and idle:
        row = idle.pop(0)
        try:
            delete(row)
        except ValueError as exc:  # being indexed, or gone meanwhile
            log.info("could not expire %s: %s", row.get("name"), exc)
            continue
        log.info("expired %s: not opened for %.1f h", row.get("name"), (now - last_opened(row)) / 3600)
        rows = [r for r in rows if r.get("name") != row.get("name")]
    if len(rows) < limit:
        return rows
    waiting = [last_opened(r) + idle_s - now for r in rows if r.get("origin") in PAGE_ORIGINS]
    mine = [str(r.get("name")) for r in rows if owner_hash and r.get("owner") == owner_hash]
    when = (
        f"the next place frees up in about {_duration(min(waiting))} if no one opens that corpus meanwhile "
        f"(corpora uploaded from the page that no one opens for {settings.upload_idle_hours:g} h, UPLOAD_IDLE_HOURS, "
        "give their place up)"
        if waiting
        else "every corpus kept was added by the machine's owner, who can delete one with "
        "`python -m retrieval index --delete NAME`"
    )
    own = f"; or delete one of yours ({', '.join(mine)}) in the Data tab" if mine else ""
    raise QuotaError(f"this app already keeps {len(rows)} corpora, its limit (MAX_CORPORA={limit}): {when}{own}.")


def _duration(seconds: float) -> str:
    seconds = max(seconds, 60.0)
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def attach_refusal(settings: Settings) -> str | None:
    """Why the page may not attach a collection made elsewhere under ``ATTACH_FROM_PAGE`` (None: it may).

    Attaching reads a collection's every text into a corpus any visitor of the page can search. On the embedded
    store (``CHROMA_PATH``, this app's own folder) every collection was put there by this machine's owner; on a
    shared Chroma server (``CHROMA_HOST``) a collection may belong to another application and hold what its users
    never meant for this page, so by default (``embedded``) only the command line (``python -m retrieval index
    --attach``), run by someone who may read the server, attaches there."""
    policy = settings.attach_from_page
    if policy == "always" or (policy == "embedded" and not settings.chroma_host):
        return None
    where = "this app" if policy == "never" else f"a shared Chroma server ({settings.chroma_host})"
    return (
        f"Attaching a collection from the page is switched off for {where} (ATTACH_FROM_PAGE={policy}): another "
        "application's collection is not this page's to show. The machine's owner can attach one with "
        "`python -m retrieval index --attach COLLECTION`."
    )
