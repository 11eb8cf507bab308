"""The newest action wins: each browser session's newest turn event, older streamed steps dropped or handed on
first, and the details below the columns filled only for the newest turn."""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterator
from typing import Any

import gradio as gr

from inspector.turn_view import COLUMNS, DETAILS
from retrieval.settings import CONTROLS

# The newest turn event of each browser session: "the newest action wins" (no Gradio cancels: see ui._wire). Each
# turn event carries the page's own count of turn actions (``ui.turn_seq_js`` stamps it as the event's last input,
# in the order the person acted); a streamed turn does not start, or drops its remaining steps, once a higher count
# of its session has reached the server, whichever of the two started first here. Its badge carries the count
# (``data-seq``) beside the settings it was computed with.
_NEWEST: dict[str, float] = {}
# What the newest turn of each session searched (its query, controls and corpus): the details event that follows a
# streamed turn fills the page below the columns only for that turn (``newest_details``).
_NEWEST_TURN: dict[str, str] = {}
# Steps an older turn yielded before the newer one arrived, not yet handed to the page: Gradio sends a yielded
# step, then asks the stream for the next, so a step counts until its stream resumes (or is closed). A newer turn
# waits for them before its own steps, so the page never receives an older step after a newer one (the race seen
# as an older turn's "scoring" step left on the badge over the newer turn, tests/test_e2e_race.py).
_IN_FLIGHT: dict[str, dict[float, int]] = {}
_NEWEST_LOCK = threading.Lock()
_HANDED_ON = threading.Condition(_NEWEST_LOCK)
# How long a newer step waits at most for an older one: Gradio hands a step on in milliseconds; a stream whose
# page went away may never be resumed, and then the newer turn goes on after this.
OLDER_STEP_WAIT_S = 3.0


def unchanged_columns() -> tuple[Any, ...]:
    """A step that changes none of the turn's columns. A dropped stream ends on it: Gradio's closing message of a
    stream repeats its last step (or, for a stream that yielded nothing, sets every output to None, which empties
    the badge), and that message can reach a page that has not yet cancelled the older event."""
    return tuple(gr.skip() for _ in COLUMNS)


def _turn_key(values: tuple[Any, ...] | list[Any], explained: bool) -> str:
    """A digest of (query, every control, corpus) of a page event's ``values``: ``stream_turn``'s (query, controls,
    corpus) or, ``explained``, ``stream_rerun``'s and ``turn_details``' (query, controls, explained sub-chunk,
    corpus). A digest, not the values: what a client sent (a turn of megabytes, refused as too long) is never kept."""
    n = len(CONTROLS) + 1
    tail = values[n + 1 :] if explained else values[n:]
    digest = hashlib.sha256()
    for value in (*values[:n], *tail):
        digest.update(repr(value).encode("utf-8", "surrogatepass") + b"\x00")
    return digest.hexdigest()


def newest_only(stream: Any, explained: bool = False) -> Any:
    """``stream`` (``stream_turn``, or ``stream_rerun`` with ``explained``) as a page event whose last input is the
    page's count of turn actions: every step it would show once a newer action of the same session has reached the
    server is dropped, and its steps go out only after any step of an older action that was already on its way."""

    def event(request: gr.Request, *values: Any) -> Iterator[tuple[Any, ...]]:
        *rest, seq = values
        values = tuple(rest)
        session = getattr(request, "session_hash", None)
        mine = seq if isinstance(seq, (int, float)) and not isinstance(seq, bool) and math.isfinite(seq) else None
        if not session or mine is None:
            yield from stream(*values)
            return
        with _NEWEST_LOCK:
            if mine >= _NEWEST.get(session, mine):
                _NEWEST[session] = mine
                _NEWEST_TURN[session] = _turn_key(values, explained)
        if _NEWEST.get(session, mine) > mine:  # a newer action arrived first: this one's work would be dropped
            yield unchanged_columns()
            return
        for step in stream(*values):
            step = stamp_seq(step, mine)
            with _HANDED_ON:
                _HANDED_ON.wait_for(
                    lambda: not any(s < mine for s in _IN_FLIGHT.get(session, {})), timeout=OLDER_STEP_WAIT_S
                )
                if _NEWEST.get(session, mine) > mine:
                    break
                flying = _IN_FLIGHT.setdefault(session, {})
                flying[mine] = flying.get(mine, 0) + 1
            try:
                yield step
            finally:
                with _HANDED_ON:
                    flying = _IN_FLIGHT.get(session, {})
                    flying[mine] = flying.get(mine, 1) - 1
                    if flying.get(mine, 0) <= 0:
                        flying.pop(mine, None)
                    if not flying:
                        _IN_FLIGHT.pop(session, None)
                    _HANDED_ON.notify_all()
        # Every stream ends on a step that changes nothing: Gradio's closing message repeats the last step, and
        # that repeat of an older turn could otherwise land after a newer turn's first step (see its docstring).
        yield unchanged_columns()

    event.__name__ = stream.__name__
    return event


def stamp_seq(step: tuple[Any, ...], seq: float) -> tuple[Any, ...]:
    """``step`` with the page's count of the action it answers on its badge (``data-seq``): a page, or a test,
    knows the badge shows the newest action's result when it equals the page's own count."""
    i = COLUMNS.index("status")
    status = step[i] if len(step) > i else None
    if not isinstance(status, str) or not status.startswith("<div"):
        return step
    stamped = f'<div data-seq="{int(seq)}"' + status[len("<div") :]
    return (*step[:i], stamped, *step[i + 1 :])


def newest_details(details: Any, key_inputs: int | None = None, outputs: int = len(DETAILS)) -> Any:
    """``turn_details`` (or the event that ends a turn and starts with it, ``turn_end.TurnEnd``) as the page event
    after a streamed turn: it fills the page below the columns only if its turn is still its session's newest when
    it starts and when it is drawn (an older turn's stream that ended after a newer action arrived, or details still
    being drawn when it arrived, would otherwise put their charts and export under the newer turn's columns).
    ``key_inputs``: how many of the first inputs are ``turn_details``' own (all by default); ``outputs``: how many
    outputs the event has."""

    def event(request: gr.Request, *values: Any) -> tuple[Any, ...]:
        session = getattr(request, "session_hash", None)
        key = _turn_key(values[:key_inputs] if key_inputs is not None else values, explained=True)
        skipped = tuple(gr.skip() for _ in range(outputs))

        def older() -> bool:
            with _NEWEST_LOCK:
                newest = _NEWEST_TURN.get(session) if session else None
            return newest is not None and newest != key

        if older():
            return skipped
        drawn = details(*values)
        # a newer action reached the server while they were drawn: they would land under its columns
        return skipped if older() else drawn

    event.__name__ = details.__name__
    return event


def forget(session: str | None) -> None:
    """A session ended: drop what is kept of its turns."""
    if session is None:
        return
    with _NEWEST_LOCK:
        _NEWEST.pop(session, None)
        _NEWEST_TURN.pop(session, None)
        _IN_FLIGHT.pop(session, None)
