"""The Chroma client and the embedded store's folder: what CHROMA_PATH may hold, the client (embedded or HTTP), and
the means of recovery (an opening marker, a probe in a child process, moving a damaged store's files aside)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 30.0  # chromadb's HTTP client waits forever by default; a hung server must not pin a thread forever
OPENING_MARKER = ".retrieval-opening"


class StoreCorrupted(RuntimeError):
    """The persisted store cannot be used as it is (the caller moves it aside and rebuilds)."""


class StorePathError(ValueError):
    """CHROMA_PATH cannot hold a Chroma store (a file, or a folder of other things): a configuration error, and
    nothing there is touched."""


# What an embedded Chroma store folder holds: its SQLite database and one folder per segment (named by a UUID).
# Anything else in CHROMA_PATH is someone else's: another store (the evaluation's beir-* stores), or user files.
STORE_FILES = ("chroma.sqlite3", "chroma.sqlite3-wal", "chroma.sqlite3-shm", "chroma.sqlite3-journal")
_SEGMENT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HARMLESS = {".DS_Store", ".gitignore", ".gitkeep"}


def _store_entry(entry: Path) -> bool:
    """Part of the Chroma store whose folder holds ``entry`` (its database, a segment folder, the open marker)."""
    return (
        entry.name in STORE_FILES
        or entry.name == OPENING_MARKER
        or (entry.is_dir() and _SEGMENT.fullmatch(entry.name) is not None)
    )


def _neighbour_store(entry: Path) -> bool:
    """Another store kept in the same folder: a ``beir-*`` folder or any folder holding a Chroma database."""
    return entry.is_dir() and (entry.name.startswith("beir-") or (entry / "chroma.sqlite3").exists())


def check_store_path(path: str | Path) -> None:
    """Refuse a CHROMA_PATH that cannot be a Chroma store folder, before anything is created or moved.

    Raises:
        StorePathError: the path (or a folder above it) is a file, or the folder holds files that are not part of
            a Chroma store.
    """
    folder = Path(path)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file, not a folder" if existing == folder else f"lies inside {existing}, which is a file"
        raise StorePathError(
            f"CHROMA_PATH={path} {where}. Point CHROMA_PATH at a folder for the Chroma store "
            "(it is created if missing; default .chroma/); nothing was changed."
        )
    if not folder.is_dir() or (folder / "chroma.sqlite3").exists():
        return
    foreign = sorted(
        e.name for e in folder.iterdir() if not (_store_entry(e) or _neighbour_store(e) or e.name in _HARMLESS)
    )
    if foreign:
        shown = ", ".join(repr(name) for name in foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        raise StorePathError(
            f"CHROMA_PATH={path} holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} "
            f"that are not part of a Chroma store ({shown}); nothing was changed. Point "
            "CHROMA_PATH at an empty or new folder (default .chroma/)."
        )


def move_store_aside(path: str | Path) -> tuple[Path, list[str], list[str]]:
    """Move the Chroma store's own files out of ``path`` into a new sibling ``<path>.corrupt-<time>`` folder.

    Returns the new folder, the names moved and the names left in place (other stores, e.g. ``beir-*``).
    """
    folder = Path(path)
    stamp, n = time.strftime("%Y%m%d-%H%M%S"), 0
    while (aside := folder.with_name(f"{folder.name}.corrupt-{stamp}{f'-{n}' if n else ''}")).exists():
        n += 1
    entries = sorted(folder.iterdir()) if folder.is_dir() else []
    moved = [e for e in entries if _store_entry(e)]
    aside.mkdir()
    for entry in moved:
        shutil.move(str(entry), str(aside / entry.name))
    return aside, [e.name for e in moved], [e.name for e in entries if e not in moved]


def chroma_client(path: str | None = None, host: str | None = None, port: int = 8000) -> Any:
    """A Chroma client with anonymized telemetry off: an HTTP client if ``host`` is given, else embedded."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if host:
        client = chromadb.HttpClient(host=host, port=port, settings=chroma_settings)
        session = getattr(getattr(client, "_server", None), "_session", None)
        if session is not None:  # private in chromadb 1.5.9 (httpx.Client(timeout=None)); skipped if it moves
            import httpx

            session.timeout = httpx.Timeout(HTTP_TIMEOUT_S, connect=5.0)
        return client
    if path is None:
        raise ValueError("chroma_client needs a path (CHROMA_PATH) or a host (CHROMA_HOST).")
    check_store_path(path)
    from retrieval.store_private import private_store

    private_store(path)  # 0700 folder, 0600 files, whatever the umask (and for what Chroma writes later)
    return chromadb.PersistentClient(path=path, settings=chroma_settings)


def forget_client(path: str) -> None:
    """Drop chromadb's cached embedded client for ``path``: after a failed open (or a move) it still points at the
    old files, and chromadb would hand it back for the same path."""
    from chromadb.api.shared_system_client import SharedSystemClient

    system = SharedSystemClient._identifier_to_system.pop(str(path), None)
    SharedSystemClient._identifier_to_refcount.pop(str(path), None)
    if system is not None:
        try:
            system.stop()
        except Exception:  # a system that never started cannot stop cleanly; it is dropped either way
            pass


_PROBE = """
import sys
import chromadb
from chromadb.config import Settings
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
for col in client.list_collections():
    n = col.count()
    for lo in range(0, n, 1000):
        got = col.get(limit=1000, offset=lo, include=["embeddings"])
    if n:
        col.query(query_embeddings=[got["embeddings"][0]], n_results=min(10, n))
print("ok")
"""


def probe_store(path: str | Path, timeout: float = 600.0) -> str:
    """Open and read every collection of the embedded store at ``path`` in a child process; "" if that worked,
    else what went wrong. A store whose HNSW files are damaged can crash Chroma's native code (a segfault), which
    no ``except`` in this process could survive."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return f"reading it in a child process did not finish within {timeout:.0f} s"
    if proc.returncode == 0:
        return ""
    if proc.returncode < 0:
        return f"Chroma crashed reading it in a child process (signal {-proc.returncode})"
    last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
    return f"Chroma failed reading it in a child process ({last})"


def _opened_by_live_process(marker: Path) -> bool:
    """True if the marker names another process that is still running (it is opening the store right now)."""
    try:
        pid = int(marker.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def opening_guard(path: str | Path) -> Iterator[None]:
    """Mark the store folder while this process opens it. A marker left behind means an earlier process died
    inside that window (e.g. a segfault in Chroma on damaged files): the store is then probed in a child process
    first, and ``StoreCorrupted`` is raised if the probe fails, so the caller rebuilds instead of crashing again."""
    folder = Path(path)
    marker = folder / OPENING_MARKER
    if marker.exists() and not _opened_by_live_process(marker):
        log.warning(
            "a previous process died while opening the Chroma store at %s; checking it in a child process", folder
        )
        problem = probe_store(folder)
        if problem:
            raise StoreCorrupted(f"a previous process died while opening it and {problem}")
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)
