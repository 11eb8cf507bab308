"""The one event that ends a turn (``inspector.turn_end``): the details, then compare mode's refresh and the
judgments' refill in one call, each part reading the page as the parts before it left it. Below the page: plain
functions and real Gradio components, no app."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from inspector import newest_turn
from inspector.turn_end import TurnEnd
from retrieval.settings import CONTROLS


def _components() -> dict[str, gr.components.Component]:
    with gr.Blocks():
        names = ("query", "doc", "last_turn", "export", "link", "view", "judged")
        made = {n: gr.Textbox(elem_id=n) for n in names}
        made["doc"] = gr.Dropdown(choices=["a", "b"], value="a", elem_id="doc")
    return made


def test_a_follower_reads_what_the_details_just_drew_and_an_output_they_share_takes_its_value():
    c = _components()
    seen: dict[str, tuple] = {}

    def details(query, doc):
        return gr.Dropdown(choices=["a", "b"], value="b"), {"query": query}, "plain export"

    def refresh(query, doc, last_turn):
        seen["refresh"] = (query, doc, last_turn)
        return f"link to {doc}", "stamped export"

    def refill(query):
        seen["refill"] = (query,)
        return gr.skip(), f"judged {query}"

    end = TurnEnd(details, [c["query"], c["doc"]], [c["doc"], c["last_turn"], c["export"]])
    end.follow(refresh, [c["query"], c["doc"], c["last_turn"]], [c["link"], c["export"]])
    end.follow(refill, [c["query"]], [c["view"], c["judged"]])
    out = end.end_turn("insulin", "a", None)  # the page before: doc "a", no last turn
    assert seen == {"refresh": ("insulin", "b", {"query": "insulin"}), "refill": ("insulin",)}
    drawn = dict(zip(("doc", "last_turn", "export", "link", "view", "judged"), out))
    assert drawn["export"] == "stamped export" and drawn["link"] == "link to b" and drawn["judged"] == "judged insulin"
    assert drawn["view"] == gr.skip() and drawn["last_turn"] == {"query": "insulin"}


def test_a_follower_that_skips_or_fails_leaves_what_came_before_and_the_details_still_land(caplog):
    c = _components()

    def refresh(query):
        return gr.skip()

    def refill(query):
        raise RuntimeError("judgment store away")

    end = TurnEnd(lambda query: ("plain export",), [c["query"]], [c["export"]])
    end.follow(refresh, [c["query"]], [c["export"]])
    end.follow(refill, [c["query"]], [c["judged"]])
    assert end.end_turn("insulin") == ("plain export", gr.skip())
    assert "refill failed" in caplog.text

    broken = TurnEnd(lambda query: 1 / 0, [c["query"]], [c["export"]])  # the details' own failure is the event's
    with pytest.raises(ZeroDivisionError):
        broken.end_turn("insulin")


def test_the_whole_end_is_skipped_once_a_newer_turn_of_its_session_started():
    c = _components()
    request = SimpleNamespace(session_hash="turn-end-1")
    controls = tuple(range(len(CONTROLS)))
    with gr.Blocks():  # the details' own inputs: the query, the controls, the explained card, the corpus
        own = [gr.State() for _ in range(len(CONTROLS) + 3)]
    calls: list[str] = []
    end = TurnEnd(lambda query, *rest: (f"{query} charts",), own, [c["export"]])
    end.follow(lambda query: calls.append(query) or (f"judged {query}",), [c["query"]], [c["judged"]])
    guarded = newest_turn.newest_details(end.end_turn, key_inputs=len(own), outputs=2)

    def start(text: str, seq: int) -> None:  # a streamed turn of ``text``, numbered ``seq`` by the page
        list(newest_turn.newest_only(lambda *values: iter([(text,)]))(request, text, *controls, "", seq))

    start("X", 1)
    start("Y", 2)  # a newer Run: X's end draws nothing and asks no follower
    assert guarded(request, "X", *controls, None, "", "X") == (gr.skip(), gr.skip()) and calls == []
    assert guarded(request, "Y", *controls, None, "", "Y") == ("Y charts", "judged Y") and calls == ["Y"]
    newest_turn.forget("turn-end-1")
