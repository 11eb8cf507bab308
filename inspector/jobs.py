"""Heavy jobs: a live evaluation ("Show") and A vs B, minutes of both cores on a large corpus (issue 19, defect 4).

Every heavy job runs under one limit for the whole app (``HEAVY``: one Gradio queue, one at a time), so a person
waiting sees their place in that line (Gradio's queue status on the outputs: "queue: 2/3"). A running job checks
its session's cancel flag after every turn (``ticker``) and stops: the page's Cancel button sets it (``cancel``),
and so does the page going away (``end_session``, Gradio's ``unload``), so an abandoned job frees the slot within a
turn instead of running to its end. A job whose session has no open page or result stream (a script that queued it
and disconnected) stops the same way (``guard.listening``), and a session may queue at most one (``guard``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

from inspector import guard, handlers

log = logging.getLogger(__name__)

# One queue for every heavy job: ``concurrency_id`` shared, at most one running in the whole app.
HEAVY: dict[str, Any] = dict(concurrency_id="heavy", concurrency_limit=1)

_RUNNING: dict[str | None, list[threading.Event]] = {}  # session -> the cancel flags of its running jobs
_SESSION_OF: dict[threading.Event, str | None] = {}  # a running job's cancel flag -> its session
_LOCK = threading.Lock()


class JobCancelled(Exception):
    """The job's page asked to stop (Cancel) or went away."""


@contextlib.contextmanager
def running(session: str | None = None) -> Iterator[threading.Event]:
    """Register a heavy job of ``session`` (default: the session of the event being handled) for the length of the
    ``with`` block; yields its cancel flag."""
    session = handlers.current_session() if session is None else session
    flag = threading.Event()
    with _LOCK:
        _RUNNING.setdefault(session, []).append(flag)
        _SESSION_OF[flag] = session
    try:
        yield flag
    finally:
        with _LOCK:
            _SESSION_OF.pop(flag, None)
            flags = _RUNNING.get(session, [])
            if flag in flags:
                flags.remove(flag)
            if not flags:
                _RUNNING.pop(session, None)


def ticker(flag: threading.Event, progress: Any = None) -> Callable[[int, int, str], None]:
    """A progress callback ``(done, total, label)`` for the core: raises ``JobCancelled`` once ``flag`` is set, else
    moves the page's progress bar (``gr.Progress``) when there is one."""

    def tick(done: int, total: int, label: str) -> None:
        if not flag.is_set() and not guard.listening(_SESSION_OF.get(flag)):
            flag.set()  # no page or result stream of its session is open: no one would see the result
            log.warning(
                "heavy job of session %s stopped at %s: no one listens for its result", _SESSION_OF.get(flag), label
            )
        if flag.is_set():
            raise JobCancelled(label)
        if progress is not None:
            progress((done, total), desc=f"{label}: {done}/{total}")

    return tick


def cancel_session(session: str | None) -> int:
    """Set the cancel flag of every running heavy job of ``session``; returns how many."""
    with _LOCK:
        flags = list(_RUNNING.get(session, []))
    for flag in flags:
        flag.set()
    return len(flags)


def cancel() -> str:
    """The Cancel button: stop this session's running heavy job (a queued one is dropped by Gradio's ``cancels``)."""
    stopped = cancel_session(handlers.current_session())
    return (
        "<div class='eval-tab'><p class='note'>"
        + ("Cancelled: the job stops after the turn it is on." if stopped else "Cancelled.")
        + "</p></div>"
    )


def end_session(request: gr.Request | None = None) -> None:
    """The page went away (Gradio's ``unload``): stop its heavy jobs."""
    cancel_session(getattr(request, "session_hash", None) or handlers.current_session())


CANCELLED = (
    "<div class='eval-tab'><p class='note'>Cancelled: nothing was scored. Press the button again to run it.</p></div>"
)
