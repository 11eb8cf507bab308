"""The classroom's exercises: predict, check, hint, reveal; class links and the teacher's counts; the worksheet; and
"make an exercise from this turn" (the Inspector's button, handled here).

The logic is ``retrieval.exercises`` (checking, rounding, the reveal's terms); this module keeps a session's own
progress in a ``gr.State`` (never shared), reads and validates a class link, and renders (``exercise_view``).

Links: ``/?exercise=worked-example`` opens the classroom on that exercise; ``/?exercises=a,b,c`` opens that set;
``&class=<id>`` (made by "Make a class link") counts the answers for that link; ``/?class=<id>&teacher=<key>`` is
the teacher's view of those counts (``inspector.class_record``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import gradio as gr

from inspector import class_record
from inspector import exercise_view as view
from inspector.class_record import CLASS_RE
from inspector.state import parse_query_string
from retrieval.exercise_set import default_set, parse_set, ready
from retrieval.exercises import Exercise, check, hint, reveal

log = logging.getLogger(__name__)

EXERCISE, EXERCISES, CLASS, TEACHER = "exercise", "exercises", "class", "teacher"
LINK_KEYS = (EXERCISE, EXERCISES, CLASS, TEACHER)
TAB_ID = "classroom"
PRIVATE: dict[str, Any] = {"api_visibility": "private"}
MAX_PARAM_CHARS = 2000


# ----------------------------------------------------------------------------------------------- state
def new_state(ids: list[str] | None = None, at: int = 0) -> dict[str, Any]:
    """A session's exercises (as dicts: ``gr.State`` deep-copies them) and its own progress on each."""
    known = ready()
    exercises = [known[i].to_dict() for i in (ids or default_set())]
    return {"set": exercises, "at": at, "progress": {}, "class": None, "teacher": None, "student": None}


def _current(state: Mapping[str, Any]) -> Exercise:
    return Exercise.from_dict(state["set"][state["at"]])


def _progress(state: dict[str, Any]) -> dict[str, Any]:
    ex_id = state["set"][state["at"]]["id"]
    return state["progress"].setdefault(ex_id, {"checked": False, "right": False, "revealed": False, "hints": 0})


def _valid(state: Any) -> dict[str, Any]:
    if not isinstance(state, dict) or not state.get("set"):
        return new_state()
    return state


def show(state: dict[str, Any]) -> list[Any]:
    """The view of the current exercise: state, picker, question, answer box, verdict, hints, reveal."""
    ex = _current(state)
    p = state["progress"].get(ex.id, {})
    choices = [(f"{i + 1}. {e['title']}", i) for i, e in enumerate(state["set"])]
    shown_hints = list(ex.hints[: p.get("hints", 0)])
    return [
        state,
        gr.Dropdown(choices=choices, value=state["at"]),
        view.exercise_html(ex, state["at"] + 1, len(state["set"])),
        "",
        "",
        view.hints_html(shown_hints, len(shown_hints) < len(ex.hints)),
        view.reveal_html(reveal(ex)) if p.get("revealed") else "",
    ]


# -------------------------------------------------------------------------------------------- handlers
def pick(state: Any, at: Any) -> list[Any]:
    """The student picks another exercise of the set."""
    state = _valid(state)
    if isinstance(at, int) and not isinstance(at, bool) and 0 <= at < len(state["set"]):
        state["at"] = at
    return show(state)


def check_answer(state: Any, answer: Any) -> tuple[dict[str, Any], str]:
    """Check the student's answer; a class link counts it (anonymously) for the teacher."""
    state = _valid(state)
    ex = _current(state)
    verdict = check(ex, answer)
    if verdict.understood:
        p = _progress(state)
        first_right = verdict.correct and not p["revealed"]
        p["checked"], p["right"] = True, p["right"] or first_right
        if state.get("class"):
            state["student"] = state.get("student") or secrets.token_urlsafe(12)
            class_record.current().record(state["class"], ex.id, state["student"], first_right)
    return state, view.verdict_html(verdict)


def next_hint(state: Any) -> tuple[dict[str, Any], str]:
    state = _valid(state)
    ex = _current(state)
    p = _progress(state)
    if hint(ex, p["hints"]) is not None:
        p["hints"] += 1
    shown = list(ex.hints[: p["hints"]])
    return state, view.hints_html(shown, len(shown) < len(ex.hints))


def show_reveal(state: Any) -> tuple[dict[str, Any], str]:
    """The arithmetic, term by term: only after the student checked an answer."""
    state = _valid(state)
    p = _progress(state)
    if not p["checked"]:
        return state, view.message_html("Check an answer first: predict, then the page reveals the arithmetic.")
    p["revealed"] = True
    return state, view.reveal_html(reveal(_current(state)))


def link_params(request: gr.Request | None) -> list[tuple[str, str]]:
    """The page's URL parameters (from the Referer, as the share links read them), gradio's own left out."""
    if request is None:
        return []
    referer = dict(request.headers or {}).get("referer") or ""
    if "?" in referer:
        return state_params(referer)
    pairs = list(dict(request.query_params or {}).items())
    return [(k, v[:MAX_PARAM_CHARS]) for k, v in pairs if k in LINK_KEYS]


def state_params(link: str) -> list[tuple[str, str]]:
    """A class link's own parameters (``exercise``, ``exercises``, ``class``, ``teacher``) from its address."""
    return [(k, v[:MAX_PARAM_CHARS]) for k, v in parse_query_string(urlsplit(link).query) if k in LINK_KEYS]


def from_link(params: list[tuple[str, str]]) -> tuple[dict[str, Any] | None, list[str]]:
    """A session state from a class link's parameters, and the problems found (each in words); None: no exercise
    parameter, the page stays as it is."""
    got = dict(params)
    if not got:
        return None, []
    problems: list[str] = []
    class_id = got.get(CLASS)
    if class_id is not None and not CLASS_RE.match(class_id):
        problems.append("the class id in this link is not one this page makes: answers are not counted.")
        class_id = None
    known = class_record.current().exercises(class_id)
    if class_id and known is None:
        problems.append("this class link is not known on this server (was it restarted?): answers are not counted.")
        class_id = None
    ids, found = parse_set(got.get(EXERCISES))
    problems += found
    one, found = parse_set(got.get(EXERCISE))
    problems += found
    ids = list(known) if known else ids or one
    if not ids:
        problems.append("the link names no exercise this page has: the whole class set is open.")
        ids = default_set()
    state = new_state(ids, ids.index(one[0]) if one and one[0] in ids else 0)
    state["class"] = class_id
    if got.get(TEACHER) and class_id:
        state["teacher"] = got[TEACHER][:100]
    return state, problems


def open_link(request: gr.Request) -> list[Any]:
    """Page load: a class link opens the classroom tab on its exercises; any other page is left alone."""
    state, problems = from_link(link_params(request))
    if state is None:
        return [gr.skip()] * (VIEW_LEN + 4)
    message = view.message_html("This link had problems: " + " ".join(problems)) if problems else ""
    return [TAB_ID, *show(state), message, teacher_counts(state), worksheet_file(state)]


def teacher_counts(state: Any) -> str:
    state = _valid(state)
    counts = class_record.current().counts(state.get("class"), state.get("teacher"))
    if counts is None:
        return ""
    titles = {e["id"]: e["title"] for e in state["set"]}
    return view.counts_html(counts, titles)


def make_link(state: Any, chosen: Any, request: gr.Request | None = None) -> list[Any]:
    """The teacher's set becomes a class link (and a teacher link for its counts); the page opens it."""
    ids, problems = parse_set(",".join(c for c in (chosen or []) if isinstance(c, str)))
    if not ids:
        return [gr.skip()] * VIEW_LEN + [view.message_html("Pick at least one exercise for the class link."), ""]
    if problems:
        return [gr.skip()] * VIEW_LEN + [view.message_html(" ".join(problems)), ""]
    class_id, key = class_record.current().open_class(ids)
    state = new_state(ids)
    state["class"], state["teacher"] = class_id, key
    base = _base(dict(request.headers or {}) if request is not None else {})
    student = base + "?" + urlencode({EXERCISES: ",".join(ids), CLASS: class_id})
    teacher = base + "?" + urlencode({CLASS: class_id, TEACHER: key})
    return [*show(state), view.links_html(student, teacher), teacher_counts(state)]


def _base(headers: Mapping[str, str]) -> str:
    referer = headers.get("referer") or ""
    if referer.startswith(("http://", "https://")):
        return referer.split("?", 1)[0].split("#", 1)[0]
    host = headers.get("host")
    return f"http://{host}/" if host else "/"


def worksheet_file(state: Any) -> str | None:
    """The session's set as a printable worksheet (an HTML file in the session's own export folder)."""
    from inspector import handlers
    from inspector.worksheet import write_worksheet

    state = _valid(state)
    try:
        folder = handlers.session_export_dir(handlers.current_session())
        return str(write_worksheet([Exercise.from_dict(e) for e in state["set"]], folder))
    except (OSError, ValueError) as exc:
        log.warning("worksheet not written: %s", exc)
        return None


def from_turn(last_turn: Any, state: Any) -> list[Any]:
    """The Inspector's "make an exercise from this turn": the turn's top cards of each branch, as an exercise that
    opens in the classroom (added to the session's set, never to anyone else's)."""
    from inspector import handlers
    from retrieval.exercise_turns import exercise_from_result

    state = _valid(state)
    if not isinstance(last_turn, dict) or not last_turn.get("query"):
        return [gr.skip()] * (VIEW_LEN + 1) + [view.message_html("Run a turn first, then make an exercise of it.")]
    try:
        turn = handlers.execute(last_turn["query"], last_turn["controls"], last_turn.get("corpus") or None)
        titles = {c.parent_id: c.title for c in turn.retriever.by_id.values()}
        ex = exercise_from_result(turn.result, lambda card: titles.get(card, card), exercise_id=_turn_id(state))
    except ValueError as exc:
        return [gr.skip()] * (VIEW_LEN + 1) + [view.message_html(str(exc))]
    state["set"].append(ex.to_dict())
    state["at"] = len(state["set"]) - 1
    return [TAB_ID, *show(state), ""]


def _turn_id(state: Mapping[str, Any]) -> str:
    taken = {e["id"] for e in state["set"]}
    n = 1
    while f"from-turn-{n}" in taken:
        n += 1
    return f"from-turn-{n}"


# ---------------------------------------------------------------------------------------------- layout
VIEW_LEN = 7  # show()'s outputs: state, picker, question, answer, verdict, hints, reveal


def build_exercise_panel() -> dict[str, Any]:
    """The exercise panel, in the current Gradio context (the top of the classroom tab); returns its components."""
    first = new_state()
    first_card = view.exercise_html(_current(first), 1, len(first["set"]))  # (show() would make a Dropdown here)
    c: dict[str, Any] = {}
    gr.HTML(f"<style>{view.CSS}</style>")
    gr.Markdown("### Exercises: predict, then check, then reveal")
    c["message"] = gr.HTML("", elem_id="exercise-message")
    c["state"] = gr.State(first)
    c["pick"] = gr.Dropdown(
        choices=[(f"{i + 1}. {e['title']}", i) for i, e in enumerate(first["set"])],
        value=0,
        label="Exercise",
        elem_id="exercise-pick",
    )
    c["card"] = gr.HTML(first_card, elem_id="exercise-card")
    with gr.Row(equal_height=True):
        c["answer"] = gr.Textbox(label="Your answer", elem_id="exercise-answer", scale=4, max_lines=1)
        c["check"] = gr.Button("Check", variant="primary", elem_id="exercise-check", scale=0, min_width=90)
        c["hint"] = gr.Button("Hint", elem_id="exercise-hint", scale=0, min_width=80)
        c["reveal"] = gr.Button("Reveal the arithmetic", elem_id="exercise-reveal", scale=0, min_width=170)
    c["verdict"] = gr.HTML("", elem_id="exercise-verdict")
    c["hints"] = gr.HTML("", elem_id="exercise-hints")
    c["reveal_out"] = gr.HTML("", elem_id="exercise-reveal-out")
    with gr.Accordion("For the teacher: class link, counts, worksheet", open=False, elem_id="exercise-teacher"):
        c["choose"] = gr.CheckboxGroup(
            [(e.title, e.id) for e in ready().values()],
            value=default_set(),
            label="Exercises for the class link",
            elem_id="exercise-choose",
        )
        with gr.Row():
            c["make"] = gr.Button("Make a class link", elem_id="exercise-make-link", scale=0, min_width=170)
            c["refresh"] = gr.Button("Refresh the counts", elem_id="exercise-refresh", scale=0, min_width=170)
            c["worksheet"] = gr.DownloadButton(
                "⬇ Worksheet (HTML, print or save as PDF)", value=worksheet_file(first), elem_id="exercise-worksheet"
            )
        c["links"] = gr.HTML("", elem_id="exercise-links")
        c["counts"] = gr.HTML("", elem_id="exercise-counts")
    c["view"] = [c["state"], c["pick"], c["card"], c["answer"], c["verdict"], c["hints"], c["reveal_out"]]
    _wire(c)
    return c


def _wire(c: dict[str, Any]) -> None:
    quiet: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
    c["pick"].input(pick, [c["state"], c["pick"]], c["view"], **quiet)
    for trigger in (c["check"].click, c["answer"].submit):
        trigger(check_answer, [c["state"], c["answer"]], [c["state"], c["verdict"]], **quiet)
    c["hint"].click(next_hint, c["state"], [c["state"], c["hints"]], **quiet)
    c["reveal"].click(show_reveal, c["state"], [c["state"], c["reveal_out"]], **quiet)
    made = c["make"].click(make_link, [c["state"], c["choose"]], [*c["view"], c["links"], c["counts"]], **quiet)
    made.then(worksheet_file, c["state"], c["worksheet"], **quiet)
    c["refresh"].click(teacher_counts, c["state"], c["counts"], **quiet)


class TurnExercise:
    """The Inspector's "make an exercise from this turn": ``place`` puts its button (and a note for a turn it cannot
    use) in the Inspector once the turn's ``last_turn`` state exists; ``wire_app`` wires it once the classroom does."""

    def __init__(self) -> None:
        self.button: gr.Button | None = None
        self.note: gr.HTML | None = None
        self.last_turn: Any = None

    def place(self, last_turn: Any) -> None:
        with gr.Row(elem_id="exercise-from-turn-row", elem_classes=["no-present"]):
            self.button = gr.Button(
                "🎓 Make an exercise from this turn", elem_id="exercise-from-turn", size="sm", scale=0, min_width=260
            )
            self.note = gr.HTML("", elem_id="exercise-from-turn-note")
        self.last_turn = last_turn


# The tab to open is named in a hidden box and a script clicks its button: no event of the page outputs the Tabs.
# An event with the Tabs among its outputs (this page load did, on every page) made Gradio 6's page re-read the whole
# tab tree (~300 components, each props object deep-copied, one structuredClone per value) at every later change of
# any event's status: ~66,000 copies per turn, a quarter of a turn's Chromium CPU (2026-12-04, Chromium 150: a
# turn's renderer 2.7-3.0 CPU-s without, 4.0-4.1 with).
SELECT_TAB_JS = """(tab) => {
  const button = tab && document.querySelector(`button[role="tab"][data-tab-id="${tab}"]`);
  if (button) { button.click(); }
  return [];
}"""


def wire_app(app: gr.Blocks, c: Mapping[str, Any], search: gr.Textbox, turn: TurnExercise | None = None) -> None:
    """Page-level wiring: a class link opens the classroom once the page has loaded (``search``: the page's query
    string, ``share_link.page_search``); the Inspector's button makes an exercise."""
    opened = gr.Textbox("", visible=False, elem_id="tab-to-open")
    loaded = search.change(open_link, None, [opened, *c["view"], c["message"], c["counts"], c["worksheet"]], **PRIVATE)
    loaded.then(None, opened, None, js=SELECT_TAB_JS, **PRIVATE)
    if turn is not None and turn.button is not None and turn.note is not None:
        made = turn.button.click(from_turn, [turn.last_turn, c["state"]], [opened, *c["view"], turn.note], **PRIVATE)
        made.then(None, opened, None, js=SELECT_TAB_JS, **PRIVATE)
        made.then(worksheet_file, c["state"], c["worksheet"], **PRIVATE)
