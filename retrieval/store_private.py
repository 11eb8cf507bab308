"""The embedded Chroma store is its owner's alone: ``chroma.sqlite3`` holds every uploaded card and judged turn.

``private_store`` (called by ``chroma_store.chroma_client`` before it opens a ``CHROMA_PATH``) makes the store's
folder 0700 and everything in it owner-only (folders 0700, files 0600), whatever the umask, and narrows this
process's umask so that what Chroma creates later (a new collection's folder, its index files after inserts, the
write-ahead log) is owner-only too: Chroma creates those files itself, in this process. A store made by an earlier
version (0644 files in a 0755 folder) is tightened the first time this process opens it. Entries another user owns
are left as they are (the process could not change them). A Chroma server (``CHROMA_HOST``) keeps its own folder:
the documentation says how to start one the same way.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077
_DONE: set[str] = set()
_LOCK = threading.Lock()


def narrow_umask() -> int:
    """Add group and other bits to this process's umask (kept: it is process-wide); returns the umask now."""
    old = os.umask(PRIVATE_UMASK)
    new = old | PRIVATE_UMASK
    os.umask(new)
    return new


def private_store(path: str | Path) -> Path:
    """Create ``path`` (with its parents) if missing, make it and what it holds owner-only (once per process and
    path), and narrow the umask for what Chroma writes into it later."""
    folder = Path(path)
    narrow_umask()
    folder.mkdir(parents=True, exist_ok=True)
    key = str(folder.resolve())
    with _LOCK:
        if key in _DONE:
            return folder
        _tighten(folder)
        _DONE.add(key)
    return folder


def _tighten(folder: Path) -> None:
    me = os.getuid()
    _chmod(folder, 0o700, me)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            _chmod(Path(root) / name, 0o700, me)
        for name in files:
            _chmod(Path(root) / name, 0o600, me)


def _chmod(path: Path, mode: int, me: int) -> None:
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode) or st.st_uid != me or stat.S_IMODE(st.st_mode) & 0o077 == 0:
            return
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077 | (mode & 0o700))
    except OSError as exc:  # gone meanwhile, or not ours to change: reported, the store still opens
        log.warning("could not make %s owner-only: %s", path, exc)
