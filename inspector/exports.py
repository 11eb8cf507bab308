"""A turn's export: its JSON record and share link, written to the session's private folder, pruned to the newest."""

from __future__ import annotations

import atexit
import itertools
import json
import os
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from inspector import state
from inspector.controls import default_controls
from inspector.turn import Turn, execute

EXPORT_KEEP = 200  # newest exports kept on disk (the whole process, every session together)
EXPORT_KEEP_SESSION = 20  # newest exports kept per session
EXPORT_IDLE_S = 2 * 3600  # a session folder with no new export for this long goes (a client that never said bye)
_EXPORT_DIR: Path | None = None
_EXPORT_LOCK = threading.Lock()
_EXPORT_SEQ = itertools.count(1)
_SESSION_DIRS: dict[str | None, tuple[Path, float]] = {}  # session hash -> (its export folder, last export time)


def turn_record(turn: Turn, link: str | None = None) -> dict[str, Any]:
    """The exported JSON: inputs, settings, every list, the level, the timings and the context. ``link`` is the
    page's share link (A, B, compare, the explained document, the corpus); without it, the turn's own (A)."""
    return {
        "app": "hybrid-retrieval-inspector",
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "inputs": {"query": turn.query, **turn.controls, **({"corpus": turn.corpus} if turn.corpus else {})},
        "link": link or share_query(turn),
        "settings": turn.settings.to_dict(),
        "hybrid_path": turn.result.hybrid_path,
        "reason": turn.result.reason,
        "timings_ms": turn.result.timings_ms,
        "result": turn.result.to_dict(),
        "context": turn.context.to_dict(),
    }


def export_dir() -> Path:
    """This process's private export folder: made by ``mkdtemp`` (0700: no other user can list or read it), once per
    process, removed at exit. It sits in Gradio's cache folder, so Gradio serves an export from there instead of
    keeping a second copy of every one. It holds one folder per session (``session_export_dir``), never a file."""
    global _EXPORT_DIR
    with _EXPORT_LOCK:
        if _EXPORT_DIR is None or not _EXPORT_DIR.is_dir():
            from gradio.utils import get_upload_folder

            try:
                cache = Path(get_upload_folder())
                cache.mkdir(parents=True, exist_ok=True)
                _EXPORT_DIR = Path(tempfile.mkdtemp(prefix="inspector-exports-", dir=cache))
            except OSError:  # Gradio's cache folder is not ours to write: a private folder in the system temp
                _EXPORT_DIR = Path(tempfile.mkdtemp(prefix="inspector-exports-"))
            atexit.register(shutil.rmtree, _EXPORT_DIR, ignore_errors=True)
            _SESSION_DIRS.clear()
        return _EXPORT_DIR


def current_session() -> str | None:
    """The browser (or API client) session of the event being handled; None outside an event (tests, the CLI)."""
    from gradio.context import LocalContext

    return getattr(LocalContext.request.get(None), "session_hash", None) or None


def session_export_dir(session: str | None) -> Path:
    """The session's own export folder: a 0700 folder under ``export_dir()`` named by 32 random bytes
    (``secrets.token_urlsafe``), nothing derived from the session, so no other visitor can guess it; Gradio serves
    files by path but never lists a folder. Made at the session's first export, removed when the session ends
    (``end_session``) or after ``EXPORT_IDLE_S`` without an export."""
    root = export_dir()
    with _EXPORT_LOCK:
        known = _SESSION_DIRS.get(session)
        if known is not None and known[0].is_dir():
            folder = known[0]
        else:
            folder = root / secrets.token_urlsafe(32)
            folder.mkdir(mode=0o700)
            os.chmod(folder, 0o700)  # whatever the umask
        _SESSION_DIRS[session] = (folder, time.time())
        return folder


def share_query(turn: Turn) -> str:
    """The share link's query string for this turn (configuration A; in compare mode the page's Link box also
    carries B): prefix it with the page's address to reopen the case."""
    page = state.PageState(query=turn.query, a=dict(turn.controls), corpus=turn.corpus or None)
    return state.encode(page, default_controls())


def export_turn(turn: Turn, link: str | None = None) -> str:
    """Write the turn's JSON to a new file (0600, in the session's own folder, ``session_export_dir``) and return its
    path for the download button.

    The name carries a time and a sequence number, nothing of the turn; each session keeps its newest
    ``EXPORT_KEEP_SESSION`` and the process its newest ``EXPORT_KEEP``.
    """
    folder = session_export_dir(current_session())
    path = folder / f"turn-{time.strftime('%Y%m%d-%H%M%S')}-{next(_EXPORT_SEQ):06d}.json"
    data = json.dumps(turn_record(turn, link), ensure_ascii=False, indent=2, default=str).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)  # whatever the umask
        handle.write(data)
    _prune_exports(folder)
    return str(path)


def export_last_turn(last_turn: dict[str, Any], link: str) -> str:
    """The page's last turn exported again, recording the page's own share link (compare mode's B included):
    re-run from the per-turn cache, so no model is called. Raises what ``execute`` raises."""
    turn = execute(last_turn["query"], last_turn["controls"], last_turn.get("corpus") or None)
    return export_turn(turn, link)


def _prune_exports(folder: Path) -> None:
    """Keep the session's newest ``EXPORT_KEEP_SESSION`` exports and the process's newest ``EXPORT_KEEP``; remove the
    folders of sessions idle for ``EXPORT_IDLE_S`` (an API client never closes a page, so no ``unload`` comes)."""
    now = time.time()
    with _EXPORT_LOCK:
        idle = [s for s, (path, used) in _SESSION_DIRS.items() if path != folder and now - used > EXPORT_IDLE_S]
        stale = [_SESSION_DIRS.pop(s)[0] for s in idle]
    for old in stale:
        shutil.rmtree(old, ignore_errors=True)
    _drop_oldest(folder.glob("turn-*.json"), EXPORT_KEEP_SESSION)
    _drop_oldest(folder.parent.glob("*/turn-*.json"), EXPORT_KEEP)


def _drop_oldest(paths: Any, keep: int) -> None:
    files = []
    for path in paths:
        try:
            files.append((path.stat().st_mtime_ns, path.name, path))
        except FileNotFoundError:  # a concurrent session pruned it meanwhile
            continue
    for *_, old in sorted(files)[:-keep]:
        old.unlink(missing_ok=True)


def drop_session_dir(session: str | None) -> None:
    """A session ended: remove its export folder and everything in it."""
    with _EXPORT_LOCK:
        known = _SESSION_DIRS.pop(session, None)
    if known is not None:
        shutil.rmtree(known[0], ignore_errors=True)
