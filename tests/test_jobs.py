"""Heavy jobs (issue 19, defect 4, and issue 18 item 6): a running live evaluation or A vs B stops after the turn it
is on when its page cancels it or goes away; Show and A vs B share one queue of one; a capped evaluation samples
every category, seeded. Real models and Chroma on the shipped set; the queue's place in line: tests/test_e2e_compare.py.
"""

from __future__ import annotations

import threading
import time

import gradio as gr
import pytest
from gradio.context import LocalContext

from inspector import compare_eval, evaluation_tab, handlers, jobs
from retrieval.corpus import QUERY_CATEGORIES, load_shipped
from retrieval.evaluation.labeled import sample_turns
from tests.conftest import SHIPPED_CARDS


@pytest.fixture()
def shipped_base(shipped, shipped_settings):
    handlers.use_base_settings(shipped_settings)
    yield shipped_settings
    handlers.use_base_settings(None)


def _in_session(session: str, fn, *args, **kwargs) -> tuple[threading.Thread, list]:
    """Run ``fn`` in a thread as the browser session ``session`` (Gradio sets the event's request so)."""
    out: list = []

    def target() -> None:
        LocalContext.request.set(gr.Request(session_hash=session))
        out.append(fn(*args, **kwargs))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out


def _wait_for(ticks: list, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 600
    while not ticks and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ticks, "the job never reported progress"


@pytest.mark.parametrize("how", ["cancel button", "page closed"])
def test_a_running_a_vs_b_stops_after_the_turn_it_is_on(shipped_base, how):
    ticks: list = []
    progress = lambda value, desc=None: ticks.append(value)  # noqa: E731 (gr.Progress's call)
    thread, out = _in_session(
        "abandoned",
        compare_eval.show_ab,
        "tuned defaults",
        "",
        "ADR recipe",
        "",
        "most broken first",
        None,
        0,
        progress,
    )
    _wait_for(ticks, thread)
    if how == "cancel button":
        LocalContext.request.set(gr.Request(session_hash="abandoned"))
        try:
            assert "stops after the turn" in jobs.cancel()
        finally:
            LocalContext.request.set(None)
    else:
        jobs.end_session(gr.Request(session_hash="abandoned"))
    thread.join(60)
    assert not thread.is_alive(), "the job did not stop within a minute"
    summary, turns, report = out[0]
    assert "Cancelled" in summary and report is None
    assert len(ticks) < 2 * 71  # it stopped early: A and B over 71 turns would be 142 ticks
    assert "abandoned" not in jobs._RUNNING


def test_cancel_touches_only_its_own_sessions_job(shipped_base):
    ticks: list = []
    progress = lambda value, desc=None: ticks.append(value)  # noqa: E731
    thread, out = _in_session("mine", evaluation_tab.show, "live:shipped", ["bm25"], "rrf", 8, progress)
    _wait_for(ticks, thread)
    assert jobs.cancel_session("someone else") == 0
    thread.join(600)
    summary = out[0][0]
    assert "Cancelled" not in summary and "a sample of 8 of its 71 labeled turns" in summary


def test_show_a_vs_b_and_tune_share_one_queue_of_one():
    from inspector import ui

    app = ui.build_app()
    heavy = {
        fn.name: (fn.concurrency_id, fn.concurrency_limit)
        for fn in app.fns.values()
        if fn.name in {"show", "show_ab", "run_tune"}
    }
    assert heavy == {"show": ("heavy", 1), "show_ab": ("heavy", 1), "run_tune": ("heavy", 1)}


def test_a_capped_evaluation_samples_every_category_seeded():
    """Issue 18 item 6: the first 10 shipped turns are all lexical, so a capped run named BM25 the best branch."""
    dataset = load_shipped(SHIPPED_CARDS, SHIPPED_CARDS.with_name("queries.jsonl"))
    assert {q.category for q in dataset.queries[:10]} == {"lexical"}
    sample = sample_turns(dataset, 10)
    present = {q.category for q in dataset.queries}
    assert {q.category for q in sample.queries} == present and present <= set(QUERY_CATEGORIES)
    assert len(sample.queries) == 10 and sample == sample_turns(dataset, 10)  # seeded: the same turns every run
    order = [q.id for q in dataset.queries]
    assert [order.index(q.id) for q in sample.queries] == sorted(order.index(q.id) for q in sample.queries)
    assert sample_turns(dataset, 0) == dataset and sample_turns(dataset, 500) == dataset


def test_a_running_tune_stops_when_its_page_goes_away(shipped_base):
    from inspector import why_view

    ticks: list = []
    progress = lambda value, desc=None: ticks.append(value)  # noqa: E731
    thread, out = _in_session("tuner", why_view.run_tune, "live:shipped", 0, progress)
    _wait_for(ticks, thread)
    jobs.end_session(gr.Request(session_hash="tuner"))
    thread.join(60)
    assert not thread.is_alive() and "Tune stopped" in out[0][0] and out[0][1] is None
