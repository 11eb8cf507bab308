"""Hostile and malformed values sent to the page's callbacks: a client (or a tampered browser store) can send any
value for any input, whatever its widget would allow. Each callback answers with a message saying what was wrong, or
ignores the value; none raises (a Gradio error toast), and nothing sent comes back unescaped in HTML."""

from __future__ import annotations

import math

import pytest

from tests.conftest import control_values

XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'><"
LONG = "x" * 100_000
HOSTILE = [
    None,
    "",
    " \t\n",
    LONG,
    "a\x00b\x01\x1b[31m\u202e",
    XSS,
    5,
    -1,
    3.5,
    [],
    ["a", 1],
    {"a": 1},
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    10**30,
    True,
    "../../etc/passwd",
    "NaN",
]


def _clean(out) -> None:
    """Nothing sent came back as live markup in the HTML (or text) a callback returns (a session's state is not)."""
    text = repr([v for v in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(v, str)])
    assert "<script>alert" not in text and "<img src=x" not in text, text[:300]


def _cheap_callbacks():
    """(name, callback, valid arguments, the positions a client controls): callbacks that need no model."""
    from inspector import (
        classroom,
        compare_callbacks,
        compare_eval,
        corpus_words,
        data_adding,
        data_panels,
        data_refusal,
        data_tab,
        evaluation_tab,
        handlers,
        presenter,
    )

    lists = classroom.preset_values(classroom.DEFAULT_PRESET)
    a = control_values()
    return [
        ("update_classroom", classroom.update_classroom, [*lists, 60], range(len(lists) + 1)),
        ("update_fusions", classroom.update_fusions, ["a:1, b:2", "b:0.5, c:0.1", 60], range(3)),
        ("classroom preset", classroom.preset_values, [classroom.DEFAULT_PRESET], [0]),
        ("B's preset", compare_callbacks.apply_preset, [None, *a], [0]),
        ("relevance ticks", compare_callbacks.tick, ["a turn", ["a"], None], [0, 1]),
        # compare mode off: the link (and no model) only; the query, doc, B's preset and the corpus are the page's
        (
            "share link",
            compare_callbacks.refresh,
            ["a turn", False, None, None, None, "http://h/", *a, *a, None, None, None],
            [0, 1, 4, 6 + 2 * len(a), 8 + 2 * len(a)],
        ),
        ("example caption", corpus_words.caption_for, ["a turn", None], [0, 1]),
        ("tour step", presenter.step, [1, -1, None], [2]),
        ("A vs B follows the corpus", compare_eval.follow_corpus, [None, None], [0, 1]),
        ("Evaluation follows the corpus", evaluation_tab.follow_corpus, [None, None], [0, 1]),
        ("A vs B kept in the browser", compare_eval.restore, [None, "most broken first"], [0, 1]),
        # (the session's corpus comes back as it was, into its hidden text box: not HTML)
        ("upload", data_adding.upload_corpus, [None, "notes", None, None], [0, 1]),
        ("active corpus", data_panels.active_html, ["x"], [0]),
        ("the map's line", data_panels.map_poll, ["x"], [0]),
        ("refusal text", data_refusal.refusal_of, ["x"], [0]),
        ("open", data_tab.open_corpus, ["x", None], [0]),
        ("embedding model", handlers.on_model_change, [handlers.default_controls()["embedding_model"]], [0]),
    ]


def test_no_cheap_callback_raises_or_echoes_markup_for_any_value(ui):
    failures = []
    for name, callback, good, positions in _cheap_callbacks():
        for i in positions:
            for value in HOSTILE:
                args = list(good)
                args[i] = value
                try:
                    _clean(callback(*args))
                except Exception as exc:  # noqa: BLE001 (the report lists every failure at once)
                    failures.append(f"{name} arg {i} = {value!r:.30}: {type(exc).__name__}: {str(exc)[:120]}")
    assert not failures, "\n".join(failures)


def test_the_classroom_says_what_k_and_the_lists_take():
    from inspector import classroom

    lists = classroom.preset_values(classroom.DEFAULT_PRESET)
    table, *_ = classroom.update_classroom(*lists, math.inf)
    assert "k must be a number" in table and "1 to 200" in table
    table, *_ = classroom.update_classroom(5, *lists[1:], 60)
    assert "list 1: its name and its ranking are text" in table
    assert "k must be a number" in classroom.update_fusions("a:1", "b:1", "sixty")
    assert "id:score pairs" in classroom.update_fusions(["a:1"], "b:1", 60)


def test_a_corpus_named_by_anything_but_text_is_refused_in_words(ui):
    from retrieval.corpora import Registry

    with pytest.raises(ValueError, match="a corpus is named by text"):
        Registry(ui.base_settings()).get(5)  # type: ignore[arg-type]
    view = ui.run_turn("metformin dose", corpus=["notes"])  # the API takes the corpus unprocessed
    assert "a corpus is named by text" in view.message and "Something went wrong" not in view.message


def test_an_unreadable_corpus_name_is_not_echoed_whole(ui):
    from inspector import corpus_words

    words = corpus_words.words_for(LONG)
    assert len(words.name) <= 80 and len(words.hint) < 2_000
    assert len(corpus_words.banner(words)) < 2_000


def test_a_tampered_a_vs_b_copy_in_the_browser_is_escaped():
    from inspector import compare_eval
    from retrieval.evaluation.turn_runs import CONFIGS

    side = {c: {} for c in CONFIGS}
    sig = {
        "metric": "ndcg@10",
        "diff": 0.1,
        "ci_low": 0.0,
        "ci_high": 0.2,
        "p_value": 0.5,
        "seed": XSS,
        "resamples": XSS,
        "fixed": XSS,
        "broke": 0,
        "ties": 0,
    }
    kept = {"changed": {}, "a": side, "b": side, "significance": sig, "turns": [], "dataset": "d", "wall_seconds": XSS}
    summary, turns, _ = compare_eval.restore(kept, "most broken first")
    assert "&lt;script&gt;" in summary
    _clean((summary, turns))


def test_a_link_echoes_a_long_compare_value_only_in_part():
    from inspector import handlers, state

    _, problems = state.decode([("compare", LONG)], handlers.default_controls())
    assert problems and all(len(p) < 500 for p in problems)


def test_the_evaluation_tab_reads_only_the_reports_its_menu_lists(ui, tmp_path):
    from inspector import evaluation_tab

    outside = tmp_path / "report.json"  # a well-formed report, but not one the Dataset menu offers
    outside.write_text('{"dataset": "<b>not listed</b>", "turns": [], "configs": {}}', encoding="utf-8")
    for source in (str(outside), "/etc/passwd", "../../etc/passwd", 5, ["live:shipped"]):
        summary, *_, kept = evaluation_tab.show(source, ["bm25"], "rrf", 0, progress=None, runs_dir=tmp_path / "runs")
        assert "is not a dataset of this page: pick one in the Dataset menu" in summary, summary
        assert "not listed" not in summary and "JSON" not in summary and kept is None


def test_attach_loads_only_a_model_the_page_offers(ui):
    from inspector import data_adding

    for model in ("/tmp", "../../models/x", "someone/any-hub-model", ["bge-small-en-v1.5"]):
        message = data_adding.attach_collection("their-collection", model, "", None, None)[0]
        assert "is not available here: choose one of" in message and ui.model_choices()[0] in message, message


def test_cancel_after_the_pending_corpus_was_deleted_says_so(ui):
    """Upload, then Delete while it indexes (Delete leaves the session's pending name), then Cancel indexing."""
    from inspector import data_tab

    message = data_tab.cancel("deleted-meanwhile")
    assert "deleted-meanwhile is not being indexed" in message and "no corpus named" in message


def test_a_malformed_slider_value_sent_to_a_page_event_gets_a_message_not_a_processing_error(ui):
    """Private events are still called by fn_index through the queue: Gradio's own Slider processing raised on
    "abc" or a list (ComponentProcessingError, a bare error toast); these events check the values themselves."""
    import asyncio

    from gradio.state_holder import SessionState

    from inspector.ui import build_app

    app = build_app()
    first = {}
    for fn in app.fns.values():
        first.setdefault(fn.name, fn)

    def send(fn, bad, kind="Slider"):
        values = [getattr(block, "value", None) for block in fn.inputs]
        slider = next(i for i, block in enumerate(fn.inputs) if type(block).__name__ == kind)
        values[slider] = bad
        return asyncio.run(app.process_api(block_fn=fn, inputs=values, state=SessionState(app), request=None))

    for name in (
        "refresh",
        "why_not",
        "apply_preset",
        "update_classroom",
        "update_fusions",
        "judged_view_for",
        "rerun_turn",
    ):
        for bad in ("abc", [1], math.nan):
            out = send(first[name], bad)["data"]  # raised ComponentProcessingError before
            _clean(out)
    assert "k must be a number" in send(first["update_fusions"], "abc")["data"][0]
    for name in ("show", "show_ab"):  # the "at most N turns" box
        for bad in ("abc", [1], math.inf, -1):
            summary = send(first[name], bad, "Number")["data"][0]
            assert "at most N turns&#x27; must be a number, 0 (all turns) or more" in summary, summary
    for bad in ("abc", [1], math.inf):
        report = send(first["run_tune"], bad, "Number")["data"][0]
        assert "Seed must be a whole number" in report, report
    for name in ("tick", "redraw"):  # a checkbox group's value that is not a list
        for bad in (None, 5, "abc"):
            send(first[name], bad, "CheckboxGroup")
