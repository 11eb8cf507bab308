"""The page's state <-> a URL query string, so a link reopens a case: the turn, the active corpus, every control
of A (and of B in compare mode) that differs from the defaults, compare on/off and the explained document.

Parameter names and types come from the Settings knobs (``Knob.parse`` / ``Knob.coerce``): A's controls by their
attribute name (``rrf_k=60``, the environment name ``RRF_K=60`` also works), B's with a ``b.`` prefix
(``b.rrf_k=20``), ``b=<preset>`` starts B from a preset (``retrieval.compare.PRESETS``). Anything unknown or
invalid is reported in words and ignored (the default is used); decoding never raises. A turn from a URL is
untrusted: it is only ever rendered escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from retrieval.compare import PRESETS, preset_values
from retrieval.corpus_entries import SHIPPED
from retrieval.query import MAX_QUERY_CHARS
from retrieval.settings import CONTROLS, Settings, knob_for

TURN, CORPUS, COMPARE, PRESET, DOC = "q", "corpus", "compare", "b", "doc"
B_PREFIX = "b."
PRESENT = "present"  # presenter mode (inspector.presenter): read by the page itself in the browser
CLASS_LINK = ("exercise", "exercises", "class", "teacher")  # a class link: read by inspector.exercise_tab
MAX_PARAMS = 100


@dataclass
class PageState:
    """What a link restores. ``a`` and ``b`` hold every control (defaults included); ``preset`` is the preset B
    started from (``retrieval.compare.PRESETS``), shown selected when the link is opened."""

    query: str = ""
    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    compare: bool = False
    doc: str | None = None
    corpus: str | None = None
    preset: str | None = None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def encode(state: PageState, defaults: Mapping[str, Any]) -> str:
    """The query string (with its leading ``?``) for ``state``: only controls that differ from ``defaults``, and the
    corpus unless it is the shipped cards (what a link without one opens). In compare mode B's preset is named
    (``b=PRESET``) and B's controls that differ from the defaults or from the preset's values follow, so the link
    restores B exactly even when B was edited after its preset."""
    pairs: list[tuple[str, str]] = []
    if state.query:
        pairs.append((TURN, state.query))
    if state.corpus and state.corpus != SHIPPED:
        pairs.append((CORPUS, state.corpus))
    pairs += [(name, _text(state.a[name])) for name in CONTROLS if name in state.a and state.a[name] != defaults[name]]
    if state.compare:
        pairs.append((COMPARE, "1"))
        preset = preset_values(state.preset, state.a, defaults) if state.preset in PRESETS else defaults
        if state.preset in PRESETS:
            pairs.append((PRESET, state.preset))
        pairs += [
            (B_PREFIX + name, _text(state.b[name]))
            for name in CONTROLS
            if name in state.b and (state.b[name] != defaults[name] or state.b[name] != preset[name])
        ]
    if state.doc:
        pairs.append((DOC, state.doc))
    return "?" + urlencode(pairs) if pairs else ""


def parse_query_string(query_string: str) -> list[tuple[str, str]]:
    """``a=1&b=2`` (with or without ``?``) -> pairs, blank values kept."""
    return parse_qsl(query_string.lstrip("?"), keep_blank_values=True)


def decode(
    params: Mapping[str, str] | Iterable[tuple[str, str]],
    defaults: Mapping[str, Any],
    allowed: Mapping[str, Sequence[Any]] | None = None,
) -> tuple[PageState, list[str]]:
    """A ``PageState`` from URL parameters and the problems found (each in words, the value ignored).

    ``allowed`` restricts a control to a list of values (e.g. the embedding models this server offers).
    """
    pairs = list(params.items()) if isinstance(params, Mapping) else list(params)
    problems: list[str] = []
    if len(pairs) > MAX_PARAMS:
        problems.append(f"the link has {len(pairs)} parameters; only the first {MAX_PARAMS} were read.")
        pairs = pairs[:MAX_PARAMS]
    state = PageState(a=dict(defaults))
    b_changes: list[tuple[str, str]] = []
    preset = None
    explicit: bool | None = None  # compare=0/1 wins over the b.* parameters that imply compare mode
    for key, raw in pairs:
        if key == TURN:
            state.query = raw[:MAX_QUERY_CHARS]
        elif key == CORPUS:
            state.corpus = raw or None
        elif key == DOC:
            state.doc = raw or None
        elif key in CLASS_LINK:
            continue
        elif key == PRESENT:
            if _flag(raw) is None:
                problems.append(f"present={raw[:20]!r} is not on or off: use present=1 or present=0.")
        elif key == COMPARE:
            flag = _flag(raw)
            if flag is None:
                problems.append(f"compare={raw[:20]!r} is not on or off: use compare=1 or compare=0; compare is off.")
            explicit = bool(flag)
        elif key == PRESET:
            if raw in PRESETS:
                preset, state.compare = raw, True
            else:
                problems.append(f"b={raw[:80]!r} is not a preset: ignored, B starts from the defaults.")
        elif key.startswith(B_PREFIX):
            b_changes.append((key[len(B_PREFIX) :], raw))
            state.compare = True
        else:
            _apply(state.a, key, raw, defaults, allowed, problems, "")
    state.b = preset_values(preset, state.a, defaults) if preset else dict(defaults)
    state.preset = preset
    for key, raw in b_changes:
        _apply(state.b, key, raw, defaults, allowed, problems, B_PREFIX)
    if explicit is not None:
        state.compare = explicit
    return state, problems


def _flag(raw: str) -> bool | None:
    low = raw.strip().lower()
    return True if low in {"1", "true", "yes", "on"} else False if low in {"0", "false", "no", "off"} else None


def _apply(
    target: dict[str, Any],
    key: str,
    raw: str,
    defaults: Mapping[str, Any],
    allowed: Mapping[str, Sequence[Any]] | None,
    problems: list[str],
    prefix: str,
) -> None:
    spec = knob_for(key)
    if spec is None or spec.name not in CONTROLS:
        problems.append(f"unknown link parameter {(prefix + key)[:80]!r} ignored: no control has that name.")
        return
    try:
        value = spec.coerce(spec.parse(raw))
        if allowed and spec.name in allowed and value not in allowed[spec.name]:
            raise ValueError(f"{spec.env}={raw[:80]!r} is not available here (the page's menu lists those that are).")
    except ValueError as exc:
        problems.append(f"link parameter {prefix + key}: {exc} The default {_text(defaults[spec.name])} is used.")
        return
    target[spec.name] = value


def defaults_of(settings: Settings) -> dict[str, Any]:
    """Every control's value in ``settings``: what a link's missing parameters mean."""
    return {name: getattr(settings, name) for name in CONTROLS}
