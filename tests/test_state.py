"""Share links: the page's state <-> a URL query string, for every control; bad parameters are reported, not
raised."""

from __future__ import annotations

import pytest

from inspector.state import PageState, decode, defaults_of, encode, parse_query_string
from retrieval.compare import PRESETS, preset_values
from retrieval.settings import ADR_RECIPE, CONTROLS, Settings

DEFAULTS = defaults_of(Settings())


def other_value(name: str):
    """A valid value different from the default, from the knob's own metadata."""
    spec = Settings.knobs()[name]
    d = DEFAULTS[name]
    if spec.kind == "bool":
        return not d
    if spec.kind == "choice":
        return next(c for c in spec.choices if c != d)
    if spec.kind == "int":
        return int(spec.lo) if d != spec.lo else int(spec.lo) + 1
    if spec.kind == "float":
        return 0.25 if d != 0.25 else 0.5
    return "all-MiniLM-L6-v2"


def roundtrip(state: PageState) -> tuple[PageState, list[str]]:
    return decode(parse_query_string(encode(state, DEFAULTS)), DEFAULTS)


@pytest.mark.parametrize("name", CONTROLS)
def test_every_control_round_trips_on_both_sides(name):
    value = other_value(name)
    state = PageState(
        query="E-07 on GS-40",
        a={**DEFAULTS, name: value},
        b={**DEFAULTS, name: value},
        compare=True,
        doc="device-gs40-e07#0",
    )
    link = encode(state, DEFAULTS)
    assert f"{name}=" in link and f"b.{name}=" in link
    back, problems = roundtrip(state)
    assert problems == []
    assert back == state and type(back.a[name]) is type(value)


def test_all_controls_at_once_and_defaults_are_left_out():
    a = {name: other_value(name) for name in CONTROLS}
    state = PageState(query="x & y = z?", a=a, b=dict(DEFAULTS), compare=True, corpus="my-upload")
    back, problems = roundtrip(state)
    assert problems == [] and back == state
    assert encode(PageState(a=dict(DEFAULTS), b=dict(DEFAULTS)), DEFAULTS) == ""
    assert "b." not in encode(PageState(a=dict(DEFAULTS), b={**DEFAULTS, "rrf_k": 3}, compare=False), DEFAULTS)


def test_an_xss_turn_is_kept_as_text():
    turn = "<img src=x onerror=alert(1)>"
    back, problems = roundtrip(PageState(query=turn, a=dict(DEFAULTS), b=dict(DEFAULTS)))
    assert back.query == turn and problems == []


def test_invalid_and_unknown_parameters_are_reported_and_ignored():
    state, problems = decode({"q": "hi", "rrf_k": "abc", "colour": "red", "b.top_k": "0", "compare": "maybe"}, DEFAULTS)
    assert state.query == "hi" and state.a["rrf_k"] == DEFAULTS["rrf_k"] and state.b["top_k"] == DEFAULTS["top_k"]
    text = " ".join(problems)
    assert "RRF_K='abc' is not a whole number" in text and f"default {DEFAULTS['rrf_k']} is used" in text
    assert "unknown link parameter 'colour' ignored" in text and "TOP_K=0 is out of range" in text
    assert "compare='maybe'" in text and len(problems) == 4
    # each problem names what the link asked for and what is used instead, not every control the page has
    assert "hybrid_enabled" not in text and "bm25_weight" not in text


def test_env_names_presets_and_allowed_values():
    state, problems = decode([("RRF_K", "60"), ("b", "ADR recipe"), ("b.rrf_k", "7")], DEFAULTS)
    assert problems == [] and state.a["rrf_k"] == 60 and state.compare
    assert state.b["bm25_tokenizer"] == ADR_RECIPE["bm25_tokenizer"] and state.b["rrf_k"] == 7
    state, problems = decode(
        {"b": "nope", "embedding_model": "evil-model"}, DEFAULTS, allowed={"embedding_model": ["bge-small-en-v1.5"]}
    )
    assert not state.compare and state.a["embedding_model"] == DEFAULTS["embedding_model"]
    assert len(problems) == 2 and "b='nope' is not a preset" in problems[0] and "not available here" in problems[1]
    assert "ADR recipe" not in problems[0] and "bge-small-en-v1.5 is used" in problems[1]
    state, _ = decode({"b.rrf_k": "7", "compare": "0"}, DEFAULTS)
    assert not state.compare


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_b_preset_is_kept_in_the_link(preset):
    """B from a preset: the link says b=PRESET (so reopening shows it selected) and restores every B value."""
    a = {**DEFAULTS, "rrf_k": 7, "top_k": 3}
    state = PageState(query="E-07", a=a, b=preset_values(preset, a, DEFAULTS), compare=True, preset=preset)
    link = encode(state, DEFAULTS)
    assert ("b", preset) in parse_query_string(link)
    back, problems = roundtrip(state)
    assert problems == [] and back == state and back.preset == preset


def test_b_edited_after_its_preset_round_trips():
    """A B value put back to the default after a one-change preset copied A's: the link must still say so."""
    a = {**DEFAULTS, "rrf_k": 7}
    b = {**preset_values("hybrid off", a, DEFAULTS), "rrf_k": DEFAULTS["rrf_k"], "top_k": 2}
    state = PageState(query="E-07", a=a, b=b, compare=True, preset="hybrid off")
    back, problems = roundtrip(state)
    assert problems == [] and back == state
    assert "b=" not in encode(PageState(a=a, b=b, compare=False, preset="hybrid off"), DEFAULTS)  # compare off
