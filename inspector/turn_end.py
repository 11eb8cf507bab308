"""The one page event that ends a turn: everything below the columns (``handlers.turn_details``), then what follows
every turn (compare mode and the share link, the judgments), in one call.

Gradio 6 keeps a status for every output of every event that has run on a page and deep-copies each of them at
every status change of any event: each event of a turn costs the browser a copy of the whole page's outputs at its
start and at its end. A turn was four events (the streamed columns, the details, the compare/link refresh, the
judgments' refill); the last three are now one (``TurnEnd.wire``), so a turn is two."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import gradio as gr

from inspector import newest_turn

log = logging.getLogger(__name__)


def _is_skip(value: Any) -> bool:
    return value == {"__type__": "update"}  # gr.skip(): the output stays as it is


def _page_value(value: Any, current: Any) -> Any:
    """What the page holds once ``value`` (an event's output) is drawn over ``current``, as the next event reads it:
    an update or a component made in the event (``gr.Dropdown(choices=..., value=...)``) sets the value it names."""
    if isinstance(value, gr.blocks.Block):
        return value.constructor_args.get("value", current)
    if isinstance(value, dict) and value.get("__type__") == "update":
        return value.get("value", current)
    return value


class TurnEnd:
    """The event after each streamed turn (``follows``: the streamed events): the turn's details (``details``, on
    ``inputs``, drawing ``outputs``), then each follower added with ``follow`` in that order.

    A follower reads the page as it is once the parts before it are drawn: an input that an earlier part outputs
    gets that part's new value (the refresh reads the new turn's ``last_turn``), and an output two parts share takes
    the later part's value unless it skips. A follower that raises leaves its outputs as they are (logged) and the
    rest of the turn still lands. The whole event is skipped (``newest_turn.newest_details``) when its turn is no
    longer its session's newest, as the details were: a newer turn's own end event draws it all."""

    def __init__(self, details: Callable[..., Any], inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        self.follows: list[Any] = []
        self.inputs: list[Any] = []  # the event's: every part's, each component once, in the parts' order
        self.outputs: list[Any] = []
        self._parts: list[tuple[Callable[..., Any], list[Any], list[Any]]] = []
        self.follow(details, inputs, outputs)

    def follow(self, fn: Callable[..., Any], inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        self._parts.append((fn, list(inputs), list(outputs)))
        self.inputs += [c for c in inputs if not any(c is i for i in self.inputs)]
        self.outputs += [c for c in outputs if not any(c is o for o in self.outputs)]

    def end_turn(self, *values: Any) -> tuple[Any, ...]:
        """Every part in order, on the page's ``values`` (one per ``inputs``) as each part would see them."""
        page = {id(c): v for c, v in zip(self.inputs, values)}
        out: dict[int, Any] = {id(c): gr.skip() for c in self.outputs}
        for number, (fn, part_inputs, part_outputs) in enumerate(self._parts):
            try:
                drawn = fn(*(page[id(c)] for c in part_inputs))
            except Exception:  # a follower's failure must not take the turn's details with it
                if number == 0:
                    raise
                log.exception("after the turn, %s failed", getattr(fn, "__name__", fn))
                continue
            drawn = drawn if isinstance(drawn, (tuple, list)) else (drawn,)
            for component, value in zip(part_outputs, drawn):
                if not _is_skip(value):
                    out[id(component)] = value
                    page[id(component)] = _page_value(value, page.get(id(component)))
        return tuple(out[id(c)] for c in self.outputs)

    def wire(self, **queue: Any) -> None:
        """Wire the event after each of ``follows``, behind the newest-turn guard (``newest_turn.newest_details``,
        told how many inputs are the details' own). Its trigger_mode is "always_last", never Gradio's default
        "once", which dropped a newer turn's end while an older turn's was still being drawn
        (tests/test_e2e_race.py); deferred, it runs once the older one ends, on the page's values of then: the
        newest turn's."""
        details_inputs = len(self._parts[0][1])
        fn = newest_turn.newest_details(self.end_turn, key_inputs=details_inputs, outputs=len(self.outputs))
        for event in self.follows:
            event.success(fn=fn, inputs=self.inputs, outputs=self.outputs, trigger_mode="always_last", **queue)
