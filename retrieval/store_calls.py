"""Calls to the Chroma store that a turn must not wait on for long: at most one in flight per key, waited for at
most a few seconds, so a frozen server (SIGSTOP: connections accepted, nothing answered) holds one background
thread per kind of call instead of one of the turn slots per turn for the HTTP client's 30-s timeout.

``bounded(key, fn, wait_s)`` runs ``fn`` in a daemon thread (or joins the one already running for ``key``) and
returns ``(True, value)`` if it finished within ``wait_s`` (its exception re-raised), else ``(False, None)``; the
call goes on in the background and its result is dropped. ``later(key, fn)`` runs ``fn`` in the background without
waiting (a write nothing waits for), skipped while one for ``key`` is still running.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)

_RUNNING: dict[Any, Future] = {}
_LOCK = threading.Lock()


def _start(key: Any, fn: Callable[[], Any]) -> Future:
    with _LOCK:
        future = _RUNNING.get(key)
        if future is not None and not future.done():
            return future
        future = Future()
        _RUNNING[key] = future

    def run() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to whoever waits (or dropped)
            future.set_exception(exc)
        finally:
            with _LOCK:
                if _RUNNING.get(key) is future:
                    del _RUNNING[key]

    threading.Thread(target=run, name=f"store-call-{key!s:.40}", daemon=True).start()
    return future


def bounded(key: Any, fn: Callable[[], Any], wait_s: float) -> tuple[bool, Any]:
    """``fn()`` if it (or the call for ``key`` already running) finishes within ``wait_s``: (True, its value); else
    (False, None). Its exception is raised."""
    future = _start(key, fn)
    try:
        return True, future.result(timeout=wait_s)
    except TimeoutError:
        return False, None


def later(key: Any, fn: Callable[[], Any]) -> None:
    """Run ``fn()`` in the background (nothing waits for it); a failure is logged."""

    def logged() -> None:
        try:
            fn()
        except Exception as exc:  # a write nothing waits for: the next one tries again
            log.info("background store call %s failed: %s", key, exc)

    _start(key, logged)
