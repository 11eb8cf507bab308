"""What only a browser shows of the map: after Run, the Plotly plot in #turn-map holds the turn and the columns'
marks as named traces, the honesty line is on the page, a card hovered in the columns is ringed on the map, and a
click on a point asks Why not…? about its card."""

from __future__ import annotations

from tests.test_e2e_browser import (  # noqa: F401  (fixtures)
    TIMEOUT_MS,
    browser,
    expect,
    page,
    run,
    server,
    sync_playwright,
)

TURN = "what does error E-07 mean on my GlucoSense GS-40"
TRACES_JS = """() => {
  const div = document.querySelector('#turn-map .js-plotly-plot');
  return div && div.data ? div.data.map(t => [t.name, (t.x || []).length]) : null;
}"""


def test_the_map_shows_the_turn_and_the_columns_marks_after_run(page):  # noqa: F811
    run(page, TURN, "full")
    page.wait_for_function(
        "() => { const d = document.querySelector('#turn-map .js-plotly-plot');"
        " return d && d.data && d.data.some(t => t.name === 'turn' && t.x && t.x.length === 1); }",
        timeout=TIMEOUT_MS,
    )
    traces = dict(page.evaluate(TRACES_JS))
    for name in ("turn", "BM25", "dense", "both", "final"):
        assert traces.get(name, 0) > 0, (name, traces)
    assert traces["final"] == page.locator("#list-reranked .hit:not(.cut)").count()
    assert traces["BM25"] == page.locator("#list-bm25 .hit").count()
    expect()(page.locator("#map-note")).to_contain_text("A 2-D projection distorts distances")
    page.locator("#turn-map .updatemenu-button").first.wait_for()  # the stage buttons

    # a card hovered in the columns is ringed on the map
    first = page.locator("#list-reranked .hit").first
    first.hover()
    page.wait_for_function(
        "() => document.querySelector('#turn-map .js-plotly-plot')"
        ".data.find(t => t.name === 'highlight').x.length === 1"
    )
    # a click on a point asks Why not…? about its card (plotly's click event, as a click on the point raises it)
    card = first.get_attribute("data-parent")
    page.evaluate(
        """() => { const d = document.querySelector('#turn-map .js-plotly-plot');
        const t = d.data.find(t => t.name === 'final');
        d.emit('plotly_click', {points: [{customdata: t.customdata[0], data: t, pointNumber: 0}]}); }"""
    )
    expect()(page.locator("#why-card textarea, #why-card input").first).to_have_value(card)
    expect()(page.locator("#why-a")).to_contain_text(card, timeout=TIMEOUT_MS)
