"""inspector/why_view.py called directly, over the real pipeline on the mini corpus: the Why not…? box (A, and A and
B in compare mode), judgments saved from the page into the store, and Tune's Apply."""

from __future__ import annotations

import gradio as gr

from inspector import why_view
from retrieval.corpus_entries import owner_hash
from retrieval.judgments import JudgmentStore, mark_scope
from tests.conftest import control_values

TURN = "GlucoSense GS-40 error E-07"
INJECTION = "<img src=x onerror=alert(1)>"


def _values(ui, **b):
    return [*control_values(), *control_values(**b)]


def test_why_not_explains_a_card_for_a_and_b(ui):
    a, b, judge = why_view.why_not(TURN, "olvido-dosis", None, False, *_values(ui))
    assert "olvido-dosis" in a and "<table>" in a and b == ""
    assert judge.value == "olvido-dosis" and ("Olvidé una dosis (olvido-dosis)", "olvido-dosis") in judge.choices
    a, b, _ = why_view.why_not(TURN, "Olvidé dosis", None, True, *_values(ui, top_k=1))
    assert ">A<" in a and ">B<" in b and "top_k=1" in b and "top_k=5" in a


def test_bad_cards_and_turns_are_escaped_messages(ui):
    for card in (INJECTION, "GlucoSense"):  # unknown; ambiguous (two GlucoSense cards)
        a, b, judge = why_view.why_not(TURN, card, None, False, *_values(ui))
        assert "<img" not in a and "message error" in a and judge == gr.skip()
    assert "cards match" in why_view.why_not(TURN, "GlucoSense", None, False, *_values(ui))[0]
    a, _, _ = why_view.why_not("  ", "gs40-e07", None, False, *_values(ui))
    assert "turn is empty" in a


def test_the_refill_after_a_turn_keeps_the_card_the_session_picked_for_that_turn(ui):
    # the picker is refilled as the last event of a turn's chain; a Why not…? answered before it must stay picked
    from gradio.context import LocalContext

    values = control_values()
    token = LocalContext.request.set(gr.Request(session_hash="session-a"))
    try:
        _, _, judge = why_view.why_not(TURN, "olvido-dosis", None, False, *_values(ui))
        assert judge.value == "olvido-dosis"
        refill, _ = why_view.judged_view(TURN.lower(), None, *values)  # the same turn: the pick stays
        assert refill.value == "olvido-dosis" and refill.choices[0][1] == "olvido-dosis"
        assert why_view.judged_view("a different turn", None, *values)[0].value is None  # a new turn: cleared
    finally:
        LocalContext.request.reset(token)
    token = LocalContext.request.set(gr.Request(session_hash="session-b"))
    try:  # another session's refill of the same turn knows nothing of session-a's pick
        assert why_view.judged_view(TURN, None, *values)[0].value is None
    finally:
        LocalContext.request.reset(token)
    why_view.end_session(gr.Request(session_hash="session-a"))
    assert why_view.pick_for("session-a", TURN, None) is None
    # a pick that is not a card of the corpus never reaches the picker, and an over-long one is not kept
    token = LocalContext.request.set(gr.Request(session_hash="session-d"))
    try:
        why_view.remember_pick("session-d", TURN, None, "<img src=x onerror=alert(1)>")
        assert why_view.pick_for("session-d", TURN, None) == "<img src=x onerror=alert(1)>"
        assert why_view.judged_view(TURN, None, *values)[0].value is None
        why_view.remember_pick("session-d", TURN, None, "x" * 10_000)
        assert why_view.pick_for("session-d", TURN, None) is None
    finally:
        LocalContext.request.reset(token)


def test_picks_are_one_per_session_and_the_oldest_go_past_the_cap(monkeypatch):
    monkeypatch.setattr(why_view, "MAX_PICKS", 3)
    for n in range(5):
        why_view.remember_pick(f"cap-{n}", TURN, None, "gs40-e07")
    assert [why_view.pick_for(f"cap-{n}", TURN, None) for n in range(5)] == [None, None, *["gs40-e07"] * 3]
    why_view.remember_pick("cap-4", "another turn", None, "olvido-dosis")  # a new pick replaces the session's last
    assert why_view.pick_for("cap-4", TURN, None) is None
    assert why_view.pick_for("cap-4", "ANOTHER  turn", None) == "olvido-dosis"  # case and spaces do not matter
    assert why_view.pick_for("cap-4", "another turn", "bicycles") is None  # another corpus
    for n in range(5):
        why_view.remember_pick(f"cap-{n}", "", None, None)


def test_a_why_not_answered_while_the_refill_reads_the_store_stays_picked(ui, monkeypatch):
    # CI: the refill read the pick, then the judgments store (slow under load); a Why not…? answered in between and
    # the refill's older "nothing picked" landed after it. The refill must read the pick after the store.
    from gradio.context import LocalContext

    read_store = why_view._judged

    def store_read_during_which_a_why_not_is_answered(*args):
        why_view.why_not(TURN, "olvido-dosis", None, False, *_values(ui))
        return read_store(*args)

    monkeypatch.setattr(why_view, "_judged", store_read_during_which_a_why_not_is_answered)
    token = LocalContext.request.set(gr.Request(session_hash="session-c"))
    try:
        assert why_view.judged_view(TURN, None, *control_values())[0].value == "olvido-dosis"
    finally:
        LocalContext.request.reset(token)
        why_view.end_session(gr.Request(session_hash="session-c"))


def test_a_judgment_saved_in_the_page_is_in_the_store(ui, mini_settings):
    turn = "why-view test turn about E-07"
    store = JudgmentStore(mini_settings)
    try:
        out = why_view.save_judgment(turn, "gs40-e07", "3", None, "session-token")
        assert "GlucoSense GS-40 error E-07 (gs40-e07)" in out and "<td>3</td>" in out and "your own mark" in out
        assert store.for_turn("shipped", turn.upper()) == {}  # the shipped set's labels: read-only from the page
        assert store.for_turn("shipped", turn, mark_scope(owner_hash("session-token"))) == {"gs40-e07": 3}
        assert "a grade must be 0, 1, 2 or 3" in why_view.save_judgment(turn, "gs40-e07", "9", None)
        assert "pick a card" in why_view.save_judgment(turn, None, "2", None)
        assert "&lt;img" in why_view.save_judgment(turn, INJECTION, "2", None)
    finally:
        store.drop("shipped")


def test_apply_sets_a_to_the_suggestion_and_b_to_the_defaults(ui):
    out = why_view.apply_tune({"settings": {"rrf_k": 60, "fusion": "convex"}, "env": {}})
    n = len(why_view.CONTROLS)
    a, b = dict(zip(why_view.CONTROLS, out[:n])), dict(zip(why_view.CONTROLS, out[n : 2 * n]))
    defaults = ui.default_controls()
    assert a == {**defaults, "rrf_k": 60, "fusion": "convex"} and b == defaults and out[2 * n] is True
    nothing = why_view.apply_tune(None)
    assert all(v == gr.skip() for v in nothing[:-1]) and "Nothing to apply" in nothing[-1]
    assert "live corpus" in why_view.run_tune("runs/x", 0, progress=None)[0]


def test_apply_is_wired_to_a_b_and_compare_mode_across_tabs(ui):
    from inspector.ui import build_app

    app = build_app()
    parts = why_view._TUNE_PARTS[app]
    applies = [fn for fn in app.fns.values() if fn.fn is why_view.apply_tune]
    assert len(applies) == 1 and (parts["apply"]._id, "click") in applies[0].targets
    labels = {getattr(c, "elem_id", None) for c in applies[0].outputs}
    assert {"rrf-k", "b-rrf-k", "compare-on", "compare-panel", "tune-message"} <= labels


def test_a_missing_rank_or_idf_reads_in_words_not_none():
    from types import SimpleNamespace

    why = SimpleNamespace(
        bm25={
            "in_list": False,
            "rank": None,
            "score": None,
            "chunk_rank": None,
            "terms": [{"term": "zzz", "in_card": False, "idf": None}, {"term": "pen", "in_card": True, "idf": 1.2}],
        },
        dense={"in_list": True, "rank": 3, "cosine": 0.61, "chunk_rank": 4},
        fused={"reached": False, "rank": None, "score": None, "as_if_depth": 40},
        cross_encoder={"ran": False, "in_head": False, "score": None, "would_place": None, "reason": "not run"},
        stages=[],
        settings={"candidate_depth": 20},
        verdict="lost at fusion",
        card_id="c1",
        title="Pens",
    )
    out = why_view.render_why(why)
    assert "None" not in out
    assert "not ranked" in out and "not in the index" in out and "idf 1.2" in out and "rank 3" in out
