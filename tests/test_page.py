"""The page's pieces below the browser (issue 18): the controls' grouping, a streamed turn, presenter mode's tour,
the corpus's own words, and the badge's marks. The browser checks the geometry (tests/test_e2e_layout.py)."""

from __future__ import annotations

import html
import json
import re
import threading
from typing import Any

import gradio as gr

from inspector import badge, corpus_words, handlers, newest_turn, presenter, render, state, ui
from inspector.examples import EXAMPLES
from retrieval.corpus import LabeledQuery, load_cards
from retrieval.corpus_entries import CorpusData, CorpusEntry
from retrieval.types import Card, Chunk
from tests.conftest import SHIPPED_CARDS, control_values


def test_the_headline_and_the_drawer_groups_hold_every_control_once():
    placed = [*ui.HEADLINE, *(name for _, names in ui.GROUPS for name in names)]
    assert sorted(placed) == sorted(handlers.CONTROLS) and len(placed) == len(set(placed))
    assert ui.HEADLINE == ("rrf_k", "hybrid_enabled", "simulate_reranker_failure")


# ------------------------------------------------------------------------------------------ a streamed turn
def _steps(ui_handlers, text, **changes):
    return list(ui_handlers.stream_turn(text, *control_values(**changes)))


def test_a_new_turn_streams_the_fused_list_then_the_reranked_column(ui):
    text = "what happens if my GS-40 shows E-07 twice in a row (stream unit)"
    steps = _steps(ui, text)
    assert len(steps) == 2 and all(len(step) == len(handlers.COLUMNS) for step in steps), steps
    first, columns = (dict(zip(handlers.COLUMNS, step)) for step in steps)
    assert 'class="status level-pending"' in first["status"] and "scoring" in first["status"]
    # a neutral "reranking…" state until the level is known, never a level (an amber rrf_only read as a fault)
    assert '<span class="badge">reranking…</span>' in first["status"] and "rrf_only" not in first["status"]
    assert '<div class="hit' in first["rrf"] and '<div class="hit' in first["bm25"]
    assert "col col-reranked pending" in first["reranked"] and '<div class="hit' not in first["reranked"]
    assert "level-full" in columns["status"] and '<div class="hit' in columns["reranked"]  # then badge + columns
    # the pending badge's timings are the chips' (it said "ready in 1 ms" beside a dense chip of 30 ms)
    for stage, label in (("bm25", "BM25"), ("dense", "dense")):
        chip = re.search(r"hits? · ([0-9.]+) ms</span>", first[stage])
        assert chip and f"{label} {chip.group(1)}" in first["status"], (stage, first["status"])
    assert "rerank … · total … ms" in first["status"]
    # the branches ran once, for the first step: the whole turn reports that time, never "cached" on a first run
    for stage in ("bm25", "dense"):
        assert "cached" not in columns[stage] and re.search(r"hits? · [0-9.]+ ms</span>", columns[stage]), stage
    assert "BM25 0.0 " not in columns["status"]
    # then everything below the columns, in an event of its own, from the cache
    details = dict(zip(handlers.DETAILS, ui.turn_details(text, *control_values(), None, None)))
    assert set(handlers.COLUMNS) | set(handlers.DETAILS) == set(handlers.TurnView._fields)
    assert all(len(details[f].data) > 0 for f in ("rank_flow", "contributions")) and details["last_turn"]
    assert details["last_turn"]["query"] == text and "context" in details["context"]


def test_a_cached_turn_and_a_turn_without_reranking_are_shown_once(ui):
    text = "what happens if my GS-40 shows E-07 twice in a row (cached unit)"
    assert len(_steps(ui, text)) == 2
    again = _steps(ui, text)  # every pair cached: no "scoring" step
    assert len(again) == 1 and "level-full" in again[0][1]
    failed = _steps(ui, "metformin missed dose (no rerank)", simulate_reranker_failure=True)
    assert len(failed) == 1 and "level-rrf_only" in failed[0][1]


def test_a_turns_details_are_drawn_once(ui, monkeypatch):
    """The event below the columns draws the turn's charts once: it drew all of them for each of its nine outputs
    (about 2 s of CPU a turn on the shipped corpus instead of 0.25 s, and a page's next action waited behind it)."""
    text = "what happens if my GS-40 shows E-07 twice in a row (drawn once)"
    _steps(ui, text)
    drawn = []
    render = handlers.render_details
    monkeypatch.setattr(handlers, "render_details", lambda *args: drawn.append(args) or render(*args))
    details = dict(zip(handlers.DETAILS, ui.turn_details(text, *control_values(), None, None)))
    assert len(drawn) == 1 and details["last_turn"]["query"] == text


def test_details_of_a_turn_that_cannot_run_are_blank_without_a_second_message(ui):
    details = dict(zip(handlers.DETAILS, ui.turn_details("   ", *control_values(), None, None)))
    assert details["last_turn"] is None and details["export"] is None


def test_an_older_streamed_turn_drops_its_steps_once_a_newer_one_of_its_session_arrived(ui):
    """The server's half of "the newest action wins": a cancel from the page can miss an event it has not finished
    submitting; that older turn then shows nothing more. The page numbers its actions (the events' last input), so
    an older action that reaches the server later changes nothing. Another session is not affected."""
    from types import SimpleNamespace

    def event(session, seq, text):
        return handlers.newest_only(handlers.stream_turn)(
            SimpleNamespace(session_hash=session), text, *control_values(), None, seq
        )

    older = event("s1", 1, "GS-40 E-07 what now (older, newest unit)")
    assert "scoring" in next(older)[1]  # its fused list is shown; the cross-encoder has pairs to score
    other = list(event("s2", 1, "insulin pen storage (other session)"))  # another session does not wait for it
    # The older step is yielded but not handed on (Gradio sends a step, then resumes the stream): a newer turn of
    # the same session waits for it, so the page cannot receive the older "scoring" step after the newer turn.
    newer: list[Any] = []
    waiting = threading.Thread(target=lambda: newer.extend(event("s1", 3, "insulin pen storage (newer)")))
    waiting.start()
    waiting.join(1.0)
    assert waiting.is_alive() and newer == []
    # resumed: its step went out; it stops, a newer action has arrived, on a step that changes nothing (Gradio's
    # closing message of a stream repeats its last step, and would show the older "scoring" step again)
    assert list(older) == [newest_turn.unchanged_columns()]
    waiting.join(newest_turn.OLDER_STEP_WAIT_S)
    assert not waiting.is_alive()
    # an older action that reached the server last: nothing of it shows (a stream that yielded nothing would make
    # Gradio set every column to None: the badge emptied)
    late = list(event("s1", 2, "a cancelled action that reached the server last"))
    # every stream ends on a step that changes nothing: Gradio's closing message repeats a stream's last step, and an
    # older turn's repeat could land after a newer turn's first step (no page cancel stops it: see ui._wire)
    assert newer[-1] == other[-1] == newest_turn.unchanged_columns()
    assert "level-full" in newer[-2][1] and 'data-seq="3"' in newer[-2][1] and "level-full" in other[-2][1]
    assert late == [newest_turn.unchanged_columns()] and all(v == gr.skip() for v in late[0])
    assert newest_turn._IN_FLIGHT == {}
    handlers.end_session(SimpleNamespace(session_hash="s1"))
    assert "s1" not in newest_turn._NEWEST


def test_a_newer_turns_steps_wait_until_an_older_step_on_its_way_is_handed_on():
    """The order on the wire, without models: a step the older stream yielded before the newer action arrived goes
    out first; the newer stream's steps follow once the older one is resumed (its step sent), not before."""
    from types import SimpleNamespace

    def steps(*names):
        return lambda *values: iter([(name,) for name in names])

    older = handlers.newest_only(steps("older fused", "older reranked"))(SimpleNamespace(session_hash="w1"), 1)
    assert next(older) == ("older fused",)
    newer: list[Any] = []
    waiting = threading.Thread(
        target=lambda: newer.extend(handlers.newest_only(steps("newer"))(SimpleNamespace(session_hash="w1"), 2))
    )
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive() and newer == []  # held: the older step is not handed on yet
    assert list(older) == [newest_turn.unchanged_columns()]  # resumed, the older stream stops: a newer action arrived
    waiting.join(newest_turn.OLDER_STEP_WAIT_S)
    assert newer == [("newer",), newest_turn.unchanged_columns()] and newest_turn._IN_FLIGHT == {}
    handlers.end_session(SimpleNamespace(session_hash="w1"))


def test_an_older_turns_details_never_fill_the_page_under_a_newer_turn(ui):
    """The event after a streamed turn (charts, export, everything below the columns) runs only for its session's
    newest turn: an older turn whose stream ended after a newer action arrived leaves the page as it is."""
    from types import SimpleNamespace

    request = SimpleNamespace(session_hash="d1")
    older, newer = "GS-40 E-07 what now (older details)", "insulin pen storage (newer details)"
    for seq, text in ((1, older), (2, newer)):
        list(handlers.newest_only(handlers.stream_turn)(request, text, *control_values(), None, seq))
    details = handlers.newest_details(handlers.turn_details)
    stale = details(request, older, *control_values(), None, None)
    fresh = dict(zip(handlers.DETAILS, details(request, newer, *control_values(), None, None)))
    assert stale == tuple(gr.skip() for _ in handlers.DETAILS)
    assert newer in json.dumps(fresh["last_turn"])
    # another session, or an event without one (the API), is not affected
    other = dict(
        zip(handlers.DETAILS, details(SimpleNamespace(session_hash="d2"), older, *control_values(), None, None))
    )
    assert older in json.dumps(other["last_turn"])
    handlers.end_session(request)
    assert "d1" not in newest_turn._NEWEST_TURN


def test_a_bad_turn_streams_its_message_once(ui):
    steps = _steps(ui, "   ")
    assert len(steps) == 1 and "The turn is empty" in steps[0][0]


# ------------------------------------------------------------------------------------------- presenter mode
def test_the_tour_steps_forward_and_back_and_wraps_around(ui):
    n = len(presenter.tour_steps(corpus_words.words_for(None)))
    assert n == len(EXAMPLES) + 2  # the examples, and the two level steps
    index, text, caption, hybrid, fails = presenter.step(1, -1)
    assert index == 0 and text == EXAMPLES[0].text and f"0/{n}" not in caption and f"1/{n}" in caption
    assert f'.hit[data-parent="{EXAMPLES[0].card}"]' in caption  # the card to watch is outlined
    assert (hybrid, fails) == (True, False)
    index, text, caption, *_ = presenter.step(-1, 0)
    assert index == n - 1 and text == EXAMPLES[-1].text
    index, *_ = presenter.step(1, n - 1)
    assert index == 0


def test_the_tour_switches_hybrid_off_then_fails_the_reranker_then_restores_both(ui):
    """The steps after the first one: hybrid off (dense_only), the reranker's failure simulated (rrf_only), then the
    next example with both restored (each step sets both controls, which the page then runs)."""
    first = EXAMPLES[0]
    seen = [presenter.step(1, i) for i in range(3)]  # steps 2, 3 and 4
    assert [(s[1], s[3], s[4]) for s in seen] == [
        (first.text, False, False),
        (first.text, True, True),
        (EXAMPLES[1].text, True, False),
    ]
    assert "Hybrid off" in seen[0][2] and "dense_only" in seen[0][2] and "rrf_only" in seen[1][2]
    assert "back on" in seen[2][2]


def test_tour_captions_name_the_card_by_its_title_not_its_id():
    cards = tuple(load_cards(SHIPPED_CARDS))
    entry = CorpusEntry("shipped", "shipped", str(SHIPPED_CARDS), "jsonl", "f" * 16, len(cards), 0)
    words = corpus_words._words(CorpusData(entry, cards, (), ()))
    titles = {c.id: c.title for c in cards}
    watched = [step for step in presenter.tour_steps(words) if step.card]
    assert len(watched) >= len(EXAMPLES)  # the examples with a card, and the two level steps
    for step in watched:
        caption = presenter.caption_html(step, 0, 1)
        assert f'class="watch">{html.escape(titles[step.card], quote=False)}<' in caption, caption
        shown = re.sub(r"<[^>]+>", "", caption.split("<style>")[0])
        assert step.card not in shown  # the id only in attributes and the outline's selector, never in words
    queries = [LabeledQuery("q1", "how do I fix chain 1", category="lexical", relevant={"bike-1": 2})]
    labeled = corpus_words._words(_corpus(queries)).steps[0]
    assert labeled.title == "Bicycle chain repair 1" and "bike-1" not in labeled.caption


def test_the_rrf_k_keys_step_through_the_k_worth_showing():
    assert presenter.nudge_k(10, 1) == 20 and presenter.nudge_k(10, -1) == 5
    assert presenter.nudge_k(1, -1) == 1 and presenter.nudge_k(1000, 1) == 1000
    assert presenter.nudge_k(7, 1) == 10 and presenter.nudge_k(7, -1) == 5
    assert presenter.nudge_k("junk", 1) in presenter.K_STOPS


def test_the_page_documents_its_keys():
    for key, what in presenter.KEYS:
        assert f"<kbd>{html.escape(key)}</kbd> {html.escape(what)}" in presenter.KEYS_HTML
    for key in ("h", "f", "+", "-", "/", "r", "ArrowRight", "Escape"):
        assert f"{key}:" in presenter.KEYS_JS or f"'{key}':" in presenter.KEYS_JS


def test_a_hostile_card_id_never_reaches_the_watch_style():
    step = corpus_words.Step("<b>x</b>", "turn", "caption <script>", 'a"] {} </style><script>alert(1)</script>')
    html_out = presenter.caption_html(step, 0, 1)
    assert "<style>" not in html_out and "<script>" not in html_out and "&lt;b&gt;x&lt;/b&gt;" in html_out


# ------------------------------------------------------------------------------------------ corpus words
def _corpus(queries=()) -> CorpusData:
    cards = tuple(
        Card(
            id=f"bike-{i}",
            title=f"Bicycle chain repair {i}",
            lang="en",
            topic="bikes",
            text=f"Oil the chain and check link {i}.",
        )
        for i in range(4)
    )
    chunks = tuple(Chunk(chunk_id=f"{c.id}#0", parent_id=c.id, title=c.title, lang="en", text=c.text) for c in cards)
    entry = CorpusEntry("bikes", "indexed", "/nowhere/bikes.csv", "csv", "f" * 16, len(cards), len(chunks))
    return CorpusData(entry, cards, chunks, tuple(queries))


def test_another_corpus_speaks_its_own_words_not_the_medication_cards():
    words = corpus_words._words(_corpus())
    assert not words.shipped and words.steps == ()
    text = " ".join([words.placeholder, words.hint, corpus_words.banner(words), corpus_words.turn_label(words)])
    assert "GlucoSense" not in text and "medical" not in text and "synthetic" not in text
    assert "bikes" in corpus_words.turn_label(words) and "4 cards" in corpus_words.turn_label(words)
    assert "Bicycle chain repair" in words.hint  # the hint names the corpus's own cards


def test_labeled_turns_become_examples_and_the_tour_sampled_across_categories():
    queries = [
        LabeledQuery(
            f"q{i}",
            f"how do I fix chain {i}",
            category="lexical" if i < 10 else "semantic",
            relevant={f"bike-{i % 4}": 2},
        )
        for i in range(14)
    ]
    words = corpus_words._words(_corpus(queries))
    categories = {q.category for q in queries if q.text in {s.text for s in words.steps[:2]}}
    assert categories == {"lexical", "semantic"}  # not the first N, which are all lexical
    assert words.steps == corpus_words._words(_corpus(queries)).steps  # seeded: the same tour every time
    assert words.placeholder.startswith("e.g. ") and words.hint == ""
    samples, labels = corpus_words.example_samples(words)
    assert len(samples) == corpus_words.MAX_EXAMPLES and all(s[0] for s in samples)


def test_the_shipped_cards_keep_their_examples_and_banner(ui):
    words = corpus_words.words_for(None)
    assert words.shipped and [s.text for s in words.steps] == [e.text for e in EXAMPLES]
    assert "not medical advice" in corpus_words.banner(words)


# ------------------------------------------------------------------------------------------- badge and marks
def test_rank_moves_read_as_marks():
    assert ">▲3<" in render.move_mark(4, 1) and 'class="move up"' in render.move_mark(4, 1)
    assert ">▼1<" in render.move_mark(1, 2) and ">=<" in render.move_mark(2, 2) and render.move_mark(None, 1) == ""


def test_the_badge_summarises_timings_and_explains_where_a_cosine_threshold_comes_from():
    summary = badge.timing_summary(
        {"bm25": 0.4, "embed_query": 10.0, "chroma_query": 2.5, "fusion": 0.3, "rerank": 290.0, "total": 305.0}
    )
    assert summary == "timings: BM25 0.4 · dense 12.5 · fusion 0.3 · rerank 290.0 · total 305.0 ms"
    origin = badge._threshold_origin("cosine rescue", {"min_similarity": 0.55, "refusal_rescue_margin": 0.09})
    assert origin == " (threshold = MIN_SIMILARITY 0.55 + REFUSAL_RESCUE_MARGIN 0.09)"
    assert badge._threshold_origin("cross-encoder", {"min_similarity": 0.55}) == ""


def test_the_evidence_box_is_neutral_on_an_answered_turn(ui):
    view = ui.run_turn("GlucoSense GS-40 error E-07", *control_values())
    box = re.search(r'<details class="refusal-evidence ([a-z]+)"', view.status)
    assert box and box.group(1) == "answered"
    assert 'class="refusal"' not in view.status  # not the red refusal style


def test_present_in_a_link_is_not_a_problem():
    _, problems = state.decode([("present", "1")], handlers.default_controls())
    assert problems == []
    _, problems = state.decode([("present", "maybe")], handlers.default_controls())
    assert problems and "present" in problems[0]
