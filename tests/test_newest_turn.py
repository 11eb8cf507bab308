"""The server's half of "the newest action wins" (``inspector.newest_turn``) under real threads, without
models or a browser: several streamed turns of one session run at once, numbered by the page in an order other
than the one in which they reach the server, and each is driven as Gradio drives a stream: a yielded step is put on
the session's one message queue (after a little work of Gradio's own), and only then is the stream resumed.

The page may receive an older action's step only before every step of a newer one, and it ends on the newest
action's last step. tests/test_page.py pins the two orders one by one; tests/test_e2e_race.py keeps a few browser
tries for what only a page does (its count of actions, the events Gradio's real queue sends)."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace
from typing import Any

import gradio as gr

from inspector import newest_turn
from inspector.turn_view import DETAILS
from retrieval.settings import CONTROLS

SKIP = newest_turn.unchanged_columns()
# Each round runs four turns at once, in about 20 ms. Measured with one part of the guard taken out (300 rounds each,
# 2026-12-03, load average 7; the guard itself failed 0 of 600): never dropping a stream failed 300 of 300 rounds;
# not dropping a stream that had started, 162; not waiting for an older step on its way, 43. 100 rounds miss that
# last one with p ~ (1 - 43/300) ** 100 = 2e-7 (tests/test_page.py also pins that wait in one fixed order).
ROUNDS = 100
TURNS = 4


def _turn(seq: int, work_s: tuple[float, float]):
    """A streamed turn: its fused list after ``work_s[0]`` seconds, its reranked list after ``work_s[1]`` more."""

    def stream(*values: Any):
        time.sleep(work_s[0])
        yield (f"{seq} fused",)
        time.sleep(work_s[1])
        yield (f"{seq} reranked",)

    return stream


def _drive(session: str, seq: int, work_s: tuple[float, float], send_s: float, page: list, lock: threading.Lock):
    """Gradio's loop over one stream: each yielded step goes on the session's message queue (``page``), then the
    stream is resumed (``for`` asks for the next step only after its body ran)."""
    event = newest_turn.newest_only(_turn(seq, work_s))
    for step in event(SimpleNamespace(session_hash=session), "turn", seq):
        time.sleep(send_s)  # Gradio's own work between a step and its message
        with lock:
            page.append((seq, step))


def _round(n: int) -> list[tuple[int, tuple]]:
    """TURNS turns of one session started in a shuffled order, a few ms apart: what the page received."""
    rng = random.Random(n)
    session, page, lock = f"round-{n}", [], threading.Lock()
    seqs = list(range(1, TURNS + 1))
    rng.shuffle(seqs)  # the server sees the actions in an order other than the person's
    threads = []
    for seq in seqs:
        # two turns in three answer their first step at once (cached, as a Run of an earlier turn does); Gradio takes
        # 1-6 ms to send a step, longer than the work of a cached turn: the in-flight wait is what orders them
        work_s = (rng.choice((0, 0, rng.uniform(0, 0.004))), rng.uniform(0, 0.004))
        args = (session, seq, work_s, rng.uniform(0.001, 0.006), page, lock)
        threads.append(threading.Thread(target=_drive, args=args))
    for thread in threads:
        thread.start()
        time.sleep(rng.uniform(0, 0.003))
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads), f"round {n}: a turn never ended"
    assert session not in newest_turn._IN_FLIGHT, f"round {n}: a step stayed counted in flight"
    newest_turn.forget(session)
    return page


def test_the_page_never_receives_an_older_step_after_a_newer_one_and_ends_on_the_newest():
    for n in range(ROUNDS):
        page = _round(n)
        shown = [(seq, step) for seq, step in page if step != SKIP]
        order = [seq for seq, _ in shown]
        assert order == sorted(order), f"round {n}: an older action's step reached the page after a newer one: {shown}"
        # the newest action is never dropped, and its last step is what the page ends on
        assert [step for seq, step in shown if seq == TURNS] == [(f"{TURNS} fused",), (f"{TURNS} reranked",)], (n, page)
        # every stream ends on a step that changes nothing (Gradio's closing message repeats a stream's last step)
        assert all([step for seq, step in page if seq == s][-1] == SKIP for s in range(1, TURNS + 1)), (n, page)


def test_details_drawn_while_a_newer_action_reached_the_server_are_not_shown():
    """The event after a streamed turn (charts, context, export) fills the page only for its session's newest turn:
    also when the newer action arrives while they are being drawn (an older turn's details, started first, could
    otherwise end last and put its charts under the newer turn's columns)."""
    request = SimpleNamespace(session_hash="details-1")
    controls = tuple(range(len(CONTROLS)))  # the values only tell turns apart (their digest)
    seqs = iter(range(1, 10))

    def start(text: str) -> None:  # a streamed turn of ``text``: the session's newest from its first step
        list(newest_turn.newest_only(lambda *values: iter([(text,)]))(request, text, *controls, "", next(seqs)))

    def draw(text: str, meanwhile: str | None = None) -> tuple[Any, ...]:
        def details(*values: Any) -> tuple[Any, ...]:
            if meanwhile:
                start(meanwhile)
            return (f"{text} charts",)

        return newest_turn.newest_details(details)(request, text, *controls, None, "")

    skipped = tuple(gr.skip() for _ in DETAILS)
    start("X")
    assert draw("X") == ("X charts",)
    assert draw("X", meanwhile="B") == skipped  # B was Run while X's details were drawn
    assert draw("X") == skipped and draw("B") == ("B charts",)
    newest_turn.forget("details-1")
