"""The classroom's exercise panel below the browser: class links read and validated, a session's own progress
(check, hint, reveal only after a check), the teacher's anonymous counts per class link, the worksheet's HTML, and
an exercise made from a real turn of the Inspector."""

from __future__ import annotations

import re

import pytest

from inspector import class_record
from inspector import exercise_tab as tab
from inspector.class_record import ClassRecord
from inspector.worksheet import worksheet_html
from retrieval.exercise_set import default_set, ready


@pytest.fixture(autouse=True)
def memory_record(monkeypatch):
    """Class links recorded in memory for these tests (never in the worktree's default store); the store's own
    record is tested on a temporary store below."""
    record = ClassRecord()
    monkeypatch.setattr(class_record, "current", lambda: record)
    return record


class FakeRequest:
    """What a Gradio load event's request carries that the panel reads: headers (the Referer) and query params."""

    def __init__(self, query: str = "", host: str = "127.0.0.1:7860") -> None:
        self.headers = {"referer": f"http://{host}/?{query}" if query else f"http://{host}/", "host": host}
        self.query_params = {}


def test_a_class_link_with_one_exercise_opens_it():
    state, problems = tab.from_link([("exercise", "worked-example")])
    assert problems == [] and [e["id"] for e in state["set"]] == ["worked-example"] and state["class"] is None
    out = tab.open_link(FakeRequest("exercise=worked-example"))
    assert out[0] == "classroom"  # the classroom tab opens (the page clicks the tab it names)
    assert "The class&#x27;s worked example" in out[3]


def test_a_link_with_a_set_opens_that_set_at_the_named_exercise():
    state, problems = tab.from_link([("exercises", "tie,weighted,k-small"), ("exercise", "weighted")])
    assert [e["id"] for e in state["set"]] == ["tie", "weighted", "k-small"] and state["at"] == 1 and not problems


@pytest.mark.parametrize(
    "params",
    [
        [("exercise", "<img src=x onerror=alert(1)>")],
        [("exercises", "nope," * 200)],
        [("class", "../../etc"), ("exercise", "tie")],
        [("class", "A" * 20), ("teacher", "x")],
    ],
)
def test_a_bad_link_opens_the_class_set_and_says_what_was_wrong(params):
    state, problems = tab.from_link(params)
    assert state is not None and problems and state["class"] is None and state["teacher"] is None
    out = tab.open_link(FakeRequest("&".join(f"{k}={v}" for k, v in params)))
    assert "<img" not in out[-3] and "This link had problems" in out[-3]


def test_a_page_without_a_class_link_is_left_alone():
    assert tab.from_link([]) == (None, [])
    assert all(type(v).__name__ == "_Skip" or v is not None for v in tab.open_link(FakeRequest("q=GS-40")))
    assert tab.link_params(FakeRequest("q=x&exercise=tie&__theme=dark")) == [("exercise", "tie")]


def test_check_then_reveal_in_one_session_never_touches_another():
    mine, _ = tab.from_link([("exercise", "worked-example")])
    theirs, _ = tab.from_link([("exercise", "worked-example")])
    mine, early = tab.show_reveal(mine)
    assert "Check an answer first" in early and "0.03252" not in early
    mine, wrong = tab.check_answer(mine, "A, B, C, E, D")
    assert "data-correct='false'" in wrong and "Right place: #1 A, #4 E, #5 D." in wrong
    mine, right = tab.check_answer(mine, "A, C, B, E, D")
    assert "data-correct='true'" in right
    mine, shown = tab.show_reveal(mine)
    assert "RRF(A) = 1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252" in shown
    assert "A (0.03252) &gt; C (0.03227) &gt; B (0.03175) &gt; E (0.01587) &gt; D (0.01563)" in shown
    assert theirs["progress"] == {}  # another session's state is its own
    theirs, blocked = tab.show_reveal(theirs)
    assert "Check an answer first" in blocked


def test_an_unreadable_answer_does_not_count_as_a_check():
    state, _ = tab.from_link([("exercise", "worked-example")])
    state, verdict = tab.check_answer(state, "<script>alert(1)</script>")
    assert "&lt;script" in verdict and "<script" not in verdict
    assert "Check an answer first" in tab.show_reveal(state)[1]


def test_hints_come_one_at_a_time():
    state, _ = tab.from_link([("exercise", "worked-example")])
    hints = ready()["worked-example"].hints
    for n in range(1, len(hints) + 2):
        state, out = tab.next_hint(state)
        assert out.count("<li>") == min(n, len(hints))
    assert "No more hints" in out


def test_teacher_counts_for_that_link_only_and_without_names(memory_record):
    record = memory_record
    out = tab.make_link(tab.new_state(), ["worked-example", "tie"], FakeRequest())
    links = out[-2]
    student = re.search(r"class='class-link' href='([^']+)'", links).group(1).replace("&amp;", "&")
    teacher = re.search(r"class='teacher-link' href='([^']+)'", links).group(1).replace("&amp;", "&")
    assert student.startswith("http://127.0.0.1:7860/?exercises=worked-example%2Ctie&class=")
    class_id = re.search(r"class=([\w-]+)", student).group(1)
    other_id, other_key = record.open_class(["worked-example"])  # another class's answers never show here
    for answers in (["A, C, B, E, D"], ["A, B, C, E, D", "A, C, B, E, D"], ["A"]):  # three students
        s, _ = tab.from_link(tab.state_params(student))
        for a in answers:
            s, _ = tab.check_answer(s, a)
    late, _ = tab.from_link(tab.state_params(student))  # a fourth: reveals first, then answers right
    late, _ = tab.check_answer(late, "B")
    late, _ = tab.show_reveal(late)
    late, _ = tab.check_answer(late, "A, C, B, E, D")
    o, _ = tab.from_link([("exercise", "worked-example"), ("class", other_id)])
    tab.check_answer(o, "A, C, B, E, D")
    view, _ = tab.from_link(tab.state_params(teacher))
    counts = tab.teacher_counts(view)
    assert re.search(r"worked example</td><td>4</td><td>2</td>", counts), counts  # 'A' was not read: not counted
    assert re.search(r"A tie and how it is broken</td><td>0</td><td>0</td>", counts)
    student_view, _ = tab.from_link(tab.state_params(student))
    assert tab.teacher_counts(student_view) == ""  # the student link shows no counts
    assert record.counts(class_id, "wrong key") is None and record.counts(other_id, other_key) == {
        "worked-example": (1, 1)
    }


def test_worksheet_has_the_questions_then_the_key_after_a_page_break():
    exercises = [ready()[i] for i in default_set()]
    page = worksheet_html(exercises)
    key = page.index("<section class='key'>")
    assert "@page { size: A4;" in page and "break-before: page" in page
    assert page.count("<section class='exercise'>") == 2 * len(exercises)
    assert "A (0.03252) &gt; C (0.03227)" in page[key:] and "A (0.03252)" not in page[:key]
    assert "<script" not in page
    with pytest.raises(ValueError, match="at least one exercise"):
        worksheet_html([])


def test_an_exercise_from_a_turn_opens_with_that_turns_lists(ui):
    from retrieval.exercise_turns import card_lists

    turn = ui.execute("GS-40 E-09", ui.default_controls())
    state = tab.new_state(["worked-example"])
    out = tab.from_turn({"query": "GS-40 E-09", "controls": ui.default_controls()}, state)
    assert out[0] == "classroom"  # the tab the page opens
    state = out[1]
    assert len(state["set"]) == 2 and state["at"] == 1 and state["set"][1]["id"] == "from-turn-1"
    lists = card_lists(turn.result)
    ex = state["set"][1]
    titles = {c.parent_id: c.title for c in turn.retriever.by_id.values()}
    for name, cards in lists.items():
        assert [ex["labels"][letter] for letter in ex["lists"][name]] == [f"{titles[c]} ({c})" for c in cards]
    assert "GS-40 E-09" in out[3]
    nothing = tab.from_turn(None, state)
    assert "Run a turn first" in nothing[-1]


def test_a_class_links_parameters_are_not_reported_as_unknown_controls():
    from inspector.state import decode
    from retrieval.settings import CONTROLS, Settings

    defaults = {name: getattr(Settings(), name) for name in CONTROLS}
    _, problems = decode([("exercise", "tie"), ("exercises", "a,b"), ("class", "x"), ("teacher", "y")], defaults)
    assert problems == []
    _, problems = decode([("exercize", "tie")], defaults)
    assert problems and "unknown link parameter 'exercize'" in problems[0]


def test_the_free_lists_round_scores_as_the_class_does():
    """1/64 = 0.015625: the class prints D (0.01563); Python's format gave 0.01562 (the float is just below)."""
    from inspector.classroom import preset_values, update_classroom, update_fusions

    _, lessons, _, _ = update_classroom(*preset_values("Class example: BM25 [A,B,C,D], dense [C,A,E,B]"), 60)
    assert "A (0.03252) &gt; C (0.03227) &gt; B (0.03175) &gt; E (0.01587) &gt; D (0.01563)" in lessons
    fusions = update_fusions("A:12.4, B:9.1, C:7.7, D:3.2", "C:0.82, A:0.79, E:0.75, B:0.61", 60)
    assert "<b>D</b></td><td>0.01563</td>" in fusions and "0.01562" not in fusions


def test_the_classroom_tab_has_one_exercise_picker_and_the_names_the_checks_use():
    import gradio as gr

    from inspector.classroom import build_classroom_tab

    with gr.Blocks() as app, gr.Tab("RRF classroom"):
        panel = build_classroom_tab()
    dropdowns = [b for b in app.blocks.values() if isinstance(b, gr.Dropdown)]
    assert [d.elem_id for d in dropdowns] == ["exercise-pick", "rrf-preset"]
    ids = {getattr(b, "elem_id", None) for b in app.blocks.values()}
    assert {"exercise-answer", "exercise-check", "exercise-verdict", "exercise-reveal", "exercise-worksheet"} <= ids
    assert "The class&#x27;s worked example" in panel["card"].value


STUDENT_PROCESS = """
import sys
from inspector.class_record import StoreClassRecord
from retrieval.settings import Settings
record = StoreClassRecord(Settings(chroma_path=sys.argv[1]))
print(record.record(sys.argv[2], "tie", "student-of-another-process", True))
"""


def test_counts_live_in_the_store_so_every_process_on_it_sees_them(tmp_path):
    """Two processes serving one class (one shared store): an answer recorded by the other process counts here, and
    a new record on the same store (a restart) still knows the class link."""
    import subprocess
    import sys

    from inspector.class_record import StoreClassRecord
    from retrieval.settings import Settings
    from tests.app_server import ROOT

    settings = Settings(chroma_path=str(tmp_path / "store"))
    record = StoreClassRecord(settings)
    class_id, key = record.open_class(["worked-example", "tie"])
    assert record.record(class_id, "worked-example", "s1", False) and record.record(
        class_id, "worked-example", "s1", True
    )
    assert record.record(class_id, "worked-example", "s2", False)
    assert not record.record(class_id, "weighted", "s1", True) and not record.record("unknown-class", "tie", "s1", True)
    out = subprocess.run(
        [sys.executable, "-c", STUDENT_PROCESS, settings.chroma_path, class_id],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip() == "True", out.stderr[-2000:]
    restarted = StoreClassRecord(settings)
    assert restarted.exercises(class_id) == ("worked-example", "tie")
    assert restarted.counts(class_id, key) == {"worked-example": (2, 1), "tie": (1, 1)}
    assert restarted.counts(class_id, "not the key") is None and restarted.counts(class_id, None) is None
    from retrieval import corpus_store

    assert class_record.COLLECTION in corpus_store.OWN_NAMES  # never offered as a corpus to attach


def test_picking_another_exercise_shows_it_and_a_bad_pick_changes_nothing():
    state = tab.new_state()
    out = tab.pick(state, 2)
    assert out[0]["at"] == 2 and f"Exercise 3 of {len(default_set())}" in out[2]
    for bad in (99, -1, "2", None, True):
        assert tab.pick(out[0], bad)[0]["at"] == 2
    assert tab.pick(None, 0)[0]["set"]  # a state a client damaged starts the class set again
