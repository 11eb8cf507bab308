"""Classroom arithmetic (written as the formula), its rendering, its callbacks, and the tab in a real browser."""

from __future__ import annotations

import pytest

from retrieval.evaluation.lab import (
    CLASS_EXAMPLE,
    CONSENSUS_EXAMPLE,
    RAW_EXAMPLE,
    classroom,
    k_curve,
    parse_ranking,
    parse_scored,
    raw_sum,
    score_fusions,
)


def test_class_example_exact_sums():
    t = classroom(CLASS_EXAMPLE, k=60)
    s = {r["doc"]: r["score"] for r in t["rows"]}
    assert s["A"] == 1 / (60 + 1) + 1 / (60 + 2)
    assert s["B"] == 1 / (60 + 2) + 1 / (60 + 4)
    assert s["C"] == 1 / (60 + 3) + 1 / (60 + 1)
    assert s["D"] == 1 / (60 + 4)
    assert s["E"] == 1 / (60 + 3)
    assert t["order"] == ["A", "C", "B", "E", "D"]
    a = t["rows"][0]
    assert a["ranks"] == {"BM25": 1, "Dense": 2} and a["formula"] == "1/(60+1) + 1/(60+2)"
    assert a["terms"] == {"BM25": 1 / 61, "Dense": 1 / 62}
    e = next(r for r in t["rows"] if r["doc"] == "E")
    assert e["ranks"] == {"BM25": None, "Dense": 3} and e["terms"]["BM25"] == 0.0


def test_lessons_tell_the_truth_about_the_class_example():
    lessons = classroom(CLASS_EXAMPLE)["lessons"]
    assert lessons[0].startswith("A wins with 0.03252: first in BM25")
    assert any(line.startswith("E, D appear in one list only") for line in lessons)
    assert any(line.startswith("C is first in Dense but ends #2") for line in lessons)


def test_consensus_example_winner_is_first_nowhere():
    t = classroom(CONSENSUS_EXAMPLE)
    assert t["order"][0] == "A" and t["rows"][0]["score"] == 2 / (60 + 2)
    assert "without being first in any list" in t["lessons"][0]
    assert any("tie at" in line for line in t["lessons"])  # B and C: 1/61 + 1/64 each, broken by id


def test_small_k_lets_one_top_rank_beat_consensus():
    t = classroom({"x": ["A", "B", "C"], "y": ["Z", "C", "B"]}, k=1)
    s = {r["doc"]: r["score"] for r in t["rows"]}
    assert s["A"] == s["Z"] == 1 / 2 and s["B"] == s["C"] == 1 / 3 + 1 / 4
    assert t["order"] == ["B", "C", "A", "Z"]  # 7/12 > 1/2: still consensus at k=1
    t = classroom({"x": ["A", "B", "C"], "y": ["Z", "Q", "P", "R", "C"]}, k=1)
    assert t["order"][0] == "A" and any("still beat" in line for line in t["lessons"])


def test_weights_scale_each_term():
    t = classroom(CLASS_EXAMPLE, k=60, weights={"BM25": 2.0})
    d = next(r for r in t["rows"] if r["doc"] == "D")
    assert d["score"] == 2.0 / (60 + 4) and d["formula"] == "2/(60+4)"
    assert t["order"][0] == "A"
    assert classroom(CLASS_EXAMPLE, k=60, weights={"BM25": 0.0})["order"][:2] == ["C", "A"]  # dense order


def test_k_curve():
    curves = k_curve([1, 60], max_rank=3)
    assert curves == {1: [1 / 2, 1 / 3, 1 / 4], 60: [1 / 61, 1 / 62, 1 / 63]}
    with pytest.raises(ValueError, match="positive integer"):
        k_curve([0])


def test_raw_sum_min_max_and_rrf_side_by_side():
    out = score_fusions(RAW_EXAMPLE, k=60)
    raw = dict(out["raw_sum"])
    assert raw["A"] == pytest.approx(12.4 + 0.79) and raw["E"] == pytest.approx(0.75)
    assert [d for d, _ in out["raw_sum"]] == ["A", "B", "C", "D", "E"]  # the BM25 order: dense has no say
    mm = dict(out["min_max"])
    assert mm["A"] == pytest.approx((1.0 + (0.79 - 0.61) / (0.82 - 0.61)) / 2)
    assert mm["D"] == 0.0 and mm["B"] == pytest.approx(((9.1 - 3.2) / (12.4 - 3.2) + 0.0) / 2)
    assert [d for d, _ in out["min_max"]] == ["A", "C", "E", "B", "D"]
    assert [d for d, _ in out["rrf"]] == ["A", "C", "B", "E", "D"]
    assert out["scales"] == {"BM25": [3.2, 12.4], "Dense": [0.61, 0.82]}
    assert raw_sum({"x": [("a", 1.0)], "y": [("a", 2.0), ("b", 5.0)]}) == [("b", 5.0), ("a", 3.0)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("A, B, C", ["A", "B", "C"]), ("A B\nC", ["A", "B", "C"]), ("  ", []), ("doc-1;doc-2", ["doc-1", "doc-2"])],
)
def test_parse_ranking(text, expected):
    assert parse_ranking(text) == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_ranking("A, B, A", "BM25"), "BM25: 'A' appears twice"),
        (lambda: parse_ranking(", ".join(f"d{i}" for i in range(60))), "at most 50"),
        (lambda: parse_scored("A:1, B", "BM25"), r"BM25: 'B' has no score: write id:score"),
        (lambda: parse_scored("A:x", "Dense"), r"Dense: the score of 'A' is 'x', not a number"),
        (lambda: parse_scored("A:1, B:2", "Dense"), "must not increase"),
        (lambda: parse_scored("A:nan", "Dense"), "finite"),
        (lambda: classroom({}), "at least one non-empty ranked list"),
        (lambda: classroom(CLASS_EXAMPLE, k=0), "positive integer"),
        (lambda: classroom(CLASS_EXAMPLE, weights={"BM25": -1.0}), "weights must be >= 0"),
    ],
)
def test_bad_input_says_how_to_fix(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_parse_scored():
    assert parse_scored("A:12.4, B:9.1\nC:-0.5") == [("A", 12.4), ("B", 9.1), ("C", -0.5)]


# ------------------------------------------------------------------------------------------------------ render
def test_term_table_html_escapes_and_shows_every_term():
    from inspector.classroom import lessons_html, term_table_html

    t = classroom({"<b>x</b>": ["<script>", "B"], "Dense": ["B"]}, k=60)
    out = term_table_html(t) + lessons_html(t)
    assert "<script>" not in out and "&lt;script&gt;" in out and "&lt;b&gt;x&lt;/b&gt;" in out
    assert f"{1 / 62 + 1 / 61:.6f}" in out  # B: 1/(60+2) + 1/(60+1)
    assert "absent" in out


def test_update_classroom_callback():
    from inspector.classroom import SLOTS, preset_values, update_classroom

    values = preset_values("Class example: BM25 [A,B,C,D], dense [C,A,E,B]")
    assert len(values) == 3 * SLOTS and values[:3] == ["BM25", "A, B, C, D", 1.0] and values[7] == ""
    table, lessons, contrib, curve = update_classroom(*values, 60)
    assert f"{1 / 61 + 1 / 62:.6f}" in table and "A (0.03252) &gt; C (0.03227)" in lessons
    assert [tr.name for tr in contrib.data] == ["BM25", "Dense"]
    assert list(contrib.data[0].x) == ["A", "C", "B", "E", "D"]
    assert any(tr.name == "k=60 (slider)" for tr in curve.data)
    table, lessons, contrib, _ = update_classroom(*values, 1)
    assert "1/(1+1) + 1/(1+2)" in table
    bad, empty, fig, _ = update_classroom("BM25", "A, A", 1.0, "Dense", "", 1.0, "x", "", 1.0, 60)
    assert "appears twice" in bad and empty == "" and fig.layout.annotations  # a message, not a crash
    dup, *_ = update_classroom("L", "A", 1.0, "L", "B", 1.0, "x", "", 1.0, 60)
    assert "two lists are named &#x27;L&#x27;" in dup  # escaped


def test_update_fusions_callback():
    from inspector.classroom import update_fusions

    out = update_fusions("A:12.4, B:9.1, C:7.7, D:3.2", "C:0.82, A:0.79, E:0.75, B:0.61", 60)
    assert "Raw sum (wrong)" in out and "Min-max normalised" in out and "RRF (ranks only)" in out
    assert "13.19000" in out and f"{1 / 61 + 1 / 62:.5f}" in out
    assert "scores span 3.2 to 12.4" in out
    assert "not a number" in update_fusions("A:x", "", 60)


def test_k_curve_figure_failsafe():
    from inspector.classroom import k_curve_figure

    fig = k_curve_figure(30)
    assert [tr.name for tr in fig.data] == ["k=1", "k=10", "k=30 (slider)", "k=60", "k=200"]
    assert fig.data[2].y[0] == 1 / 31
    broken = k_curve_figure("not a number")
    assert broken.layout.annotations and "could not be drawn" in broken.layout.annotations[0].text


def test_k_curve_log_axis_labels_read_as_plain_numbers():
    """Plotly's own log ticks over less than three decades read "5, 2, 0.1, 5, 2, 0.01": the axis says where
    its ticks are and what they read, covering every value drawn."""
    from inspector.classroom import k_curve_figure

    fig = k_curve_figure(60)
    axis = fig.layout.yaxis
    assert axis.type == "log" and axis.tickmode == "array"
    assert list(axis.ticktext) == ["0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5"]
    assert [float(t) for t in axis.ticktext] == list(axis.tickvals)
    drawn = [y for trace in fig.data for y in trace.y]
    assert min(axis.tickvals) <= min(drawn) * 2 and max(drawn) <= max(axis.tickvals) * 2


def test_classroom_chart_titles_fit_half_the_tab_at_1024_px():
    """Plotly never wraps a title: a line longer than about 50 characters ran past the right edge of its chart
    (the k-curve's one-line title was cut at 1280 px already). Each line, tags stripped, fits."""
    import re

    from inspector.classroom import contributions_figure, k_curve_figure

    for fig in (k_curve_figure(60), contributions_figure(classroom(CLASS_EXAMPLE, k=60))):
        lines = re.sub(r"<(?!br>)[^>]*>", "", fig.layout.title.text).split("<br>")
        assert max(len(line) for line in lines) <= 50, lines


def test_tab_builds_inside_blocks():
    import gradio as gr

    from inspector.classroom import build_classroom_tab

    with gr.Blocks() as app:
        with gr.Tab("RRF classroom"):
            build_classroom_tab()
    ids = {getattr(b, "elem_id", None) for b in app.blocks.values()}
    assert {"class-rrf-k", "rrf-terms", "rrf-curve", "raw-fusions", "rrf-list-0", "rrf-weight-2"} <= ids
    table = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "rrf-terms")
    assert f"{1 / 61 + 1 / 62:.6f}" in table.value  # filled on load


# ----------------------------------------------------------------------------------------------------- browser
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def classroom_app():
    import gradio as gr

    from inspector.classroom import build_classroom_tab

    with gr.Blocks() as app:
        with gr.Tab("RRF classroom"):
            build_classroom_tab()
    app.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    yield app.local_url
    app.close()


@pytest.mark.browser
def test_classroom_in_a_real_browser(classroom_app):
    import os

    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium at /usr/bin/chromium")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(classroom_app)
        terms = page.locator("#rrf-terms")
        expect(terms).to_contain_text("1/(60+1) + 1/(60+2)", timeout=30_000)
        expect(terms).to_contain_text(f"{1 / 61 + 1 / 62:.6f}")
        k_box = page.locator("#class-rrf-k input[type=number]")
        k_box.fill("1")
        k_box.press("Enter")
        expect(terms).to_contain_text("1/(1+1) + 1/(1+2)", timeout=30_000)
        expect(terms).to_contain_text(f"{1 / 2 + 1 / 3:.6f}")
        box = page.locator("#rrf-list-1 textarea")
        box.fill("C, A, E, B, <img/src=x/onerror=alert(1)>")
        box.press("Tab")
        expect(terms).to_contain_text("<img/src=x/onerror=alert(1)>", timeout=30_000)  # shown as text, escaped
        assert page.locator("#rrf-terms img").count() == 0
        expect(page.locator("#raw-fusions")).to_contain_text("Raw sum (wrong)")
        browser.close()


# Plotly draws a subset of HTML in labels: list names and ids typed by a user must reach the chart as text.
LINK = '<a href="https://evil.example/">click</a>'
STYLED = '<span style="font-size:60px">big</span>'


def test_contributions_chart_escapes_list_names_and_ids():
    from inspector.classroom import update_classroom

    *_, contrib, _ = update_classroom(LINK, "A, <b>B</b>", 1.0, STYLED, "A", 1.0, 'Say "x"', "B", 1.0, 60)
    names = [tr.name for tr in contrib.data]
    assert names == [
        '&lt;a href="https://evil.example/"&gt;click&lt;/a&gt;',
        '&lt;span style="font-size:60px"&gt;big&lt;/span&gt;',
        'Say "x"',
    ]
    assert "&lt;b&gt;B&lt;/b&gt;" in contrib.data[0].x and not any("<" in doc for doc in contrib.data[0].x)
    # user text never sits in a hovertemplate, where plotly would substitute %{...} in it
    assert all("evil" not in tr.hovertemplate and "Say" not in tr.hovertemplate for tr in contrib.data)


@pytest.mark.browser
def test_classroom_chart_markup_stays_text_in_a_real_browser(classroom_app):
    import os

    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium at /usr/bin/chromium")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(classroom_app)
        chart = page.locator("#rrf-contrib")
        expect(chart).to_contain_text("BM25", timeout=30_000)
        for i, text in ((0, LINK), (1, STYLED)):
            name = page.locator(f"#rrf-name-{i} textarea")
            name.fill(text)
            name.press("Tab")
        ranking = page.locator("#rrf-list-0 textarea")
        ranking.fill("A, <b>B</b>, C, D")
        ranking.press("Tab")
        for text in (LINK, STYLED, "<b>B</b>"):
            expect(chart).to_contain_text(text, timeout=30_000)
        assert chart.locator("svg a").count() == 0, "a list name became a live link"  # (not the modebar's <a>)
        styled = chart.locator('tspan[style*="font-size:60px"], tspan[style*="font-size: 60px"]')
        assert styled.count() == 0, "a list name became styled text"
        assert chart.locator('tspan[style*="bold"]').count() == 0, "an id became bold text"
        browser.close()


def test_a_score_on_a_half_rounds_up_as_the_class_writes_it():
    """1/64 = 0.015625: the class writes 0.01563 (half up), Python's :.5f printed 0.01562 (half to even)."""
    from inspector.classroom import fusions_html, lessons_html

    t = classroom({"BM25": ["A", "B", "C", "D"], "Dense": ["A"]}, k=60)  # D: 1/(60+4) alone
    out = lessons_html(t)
    assert "D (0.01563)" in out and "0.01562" not in out
    scored = {"BM25": [("D", 1 / 64)], "Dense": [("D", 1 / 64)]}
    fused = fusions_html({"scales": {}, "raw_sum": [("D", 1 / 64)], "min_max": [], "rrf": [("D", 1 / 64)]}, scored, 60)
    assert "<td>0.01563</td>" in fused and "<td>0.01562</td>" not in fused
