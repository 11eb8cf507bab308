"""What only a browser shows of the page's shape (issue 18): the answer in the first screen, columns that stay
readable at every width, presenter mode's keyboard tour, and a streamed turn.

Geometry is checked with bounding boxes, not text: the four columns' widths (four across, or two by two, each at
least 280 px), no consensus or rank-move chip over its title, no column header cut, and the reranked column's first
card inside a 1280x720 viewport after Run, without scrolling; the final column's first card in the first screen at
every width from 800 px (two by two, the answer's row first); presenter mode's bar, keys, tour levels and type sizes,
and the map sharing its first screen (its plot area mostly in it, the stage buttons too, no first card cut).
The documentation's pictures are taken by scripts/screenshots.py (``make screenshots``), never by these tests.
"""

from __future__ import annotations

import contextlib

import pytest

from tests.app_server import SHIPPED
from tests.test_e2e_browser import (
    TIMEOUT_MS,
    assert_clean,
    browser,
    expect,
    level,
    open_page,  # noqa: F401
    server,
    sync_playwright,
)

TURN = "GS-40 E-09"
MIN_COLUMN_PX = 280
STAGES = ("bm25", "dense", "rrf", "reranked")

# Every chip and title box of every row, every column head, as the page lays them out.
GEOMETRY_JS = """() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
  const columns = ['bm25', 'dense', 'rrf', 'reranked'].map(s => box(document.querySelector('#list-' + s)));
  const overlaps = [];
  for (const hit of document.querySelectorAll('#columns .hit')) {
    const title = hit.querySelector('.title');
    for (const chip of hit.querySelectorAll('.both, .move')) {
      const a = title.getBoundingClientRect(), b = chip.getBoundingClientRect();
      const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (x > 0.5 && y > 0.5) { overlaps.push(hit.dataset.chunk + ': ' + chip.textContent); }
    }
  }
  const cut = [...document.querySelectorAll('#columns .col-title')]
    .filter(t => t.scrollWidth > t.clientWidth + 1).map(t => t.textContent);
  const narrow = [...document.querySelectorAll('#columns .hit:not(.cut) .title')]
    .filter(t => t.getBoundingClientRect().width < 110).map(t => t.textContent);
  const first = document.querySelector('#list-reranked .hit .hit-head');
  return {columns, overlaps, cut, narrow, first: first ? box(first) : null};
}"""


def run_turn(pg, text: str = TURN) -> None:
    pg.locator("#query textarea").fill(text)
    pg.locator("#run").click()
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    pg.locator("#list-reranked .hit").first.wait_for()


@pytest.fixture()
def context_at(browser):
    contexts = []

    def make(width: int, height: int):
        ctx = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(ctx)
        return ctx

    yield make
    for ctx in contexts:
        ctx.close()


# The sizes whose geometry is checked whole (four across from 1280 px, two by two or stacked below), then the final
# column's first card (its rank and title) inside the first screen after Run: the projectors' 1024x768 and 800x900,
# then every width from 800 px on a 900 px tall screen. One page, opened at 1280x720 and resized (the page lays out
# again: no turn re-run); four pages each loaded at one size and running the same turn cost four page loads and four
# turns drawn more (~30 CPU-s of Chromium) for the same geometry.
READABLE_SIZES = [(1280, 720), (800, 900), (1024, 768), (1440, 900)]
FIRST_SCREENS = [(1024, 768), (800, 900)] + [(w, 900) for w in (860, 960, 1060, 1100, 1180, 1280, 1600, 1920)]
FIRST_CARD_JS = """() => { const h = document.querySelector('#list-reranked .hit .hit-head');
  const r = h.getBoundingClientRect(); return [r.top + window.scrollY, r.bottom + window.scrollY]; }"""


def assert_geometry(pg, width: int, height: int) -> None:
    """The four columns at ``width`` x ``height``: wide enough, in 1, 2 or 4 rows (four across from 1280 px), no chip
    over its title, no header cut, no title squeezed; from 1280 px the reranked first card in the first screen."""
    g = pg.evaluate(GEOMETRY_JS)
    xs, ys, widths = ([c[i] for c in g["columns"]] for i in (0, 1, 2))
    assert min(widths) >= MIN_COLUMN_PX, f"{width}px: columns {widths} (< {MIN_COLUMN_PX}px)"
    across = len({round(y) for y in ys})  # rows of columns: 1 = four across, 2 = two by two, 4 = stacked
    assert across in (1, 2, 4), f"{width}px: columns at {list(zip(xs, ys))}"
    if width >= 1280:
        assert across == 1, f"{width}px: four columns across expected, got rows at {sorted(set(ys))}"
    assert g["overlaps"] == [], f"{width}px: a chip covers its title: {g['overlaps'][:5]}"
    assert g["cut"] == [], f"{width}px: column headers cut: {g['cut']}"
    assert g["narrow"] == [], f"{width}px: titles squeezed to one word per line: {g['narrow'][:5]}"
    if width >= 1280:  # the first screen: the reranked column's first card (its rank and title) without scrolling
        x, y, w, h = g["first"]
        assert pg.evaluate("() => window.scrollY") == 0
        assert y + h <= height, f"{width}x{height}: the reranked first card's title ends at {y + h:.0f}px"


def resize(pg, width: int, height: int) -> None:
    pg.set_viewport_size({"width": width, "height": height})
    pg.wait_for_function(  # the resized page has laid out again
        "([w, h]) => window.innerWidth === w && window.innerHeight === h", arg=[width, height]
    )
    pg.wait_for_timeout(150)


def test_columns_stay_readable_and_the_final_columns_first_card_is_in_the_first_screen_at_every_width(
    context_at, server
):
    pg = open_page(context_at(*READABLE_SIZES[0]), server)
    run_turn(pg)
    assert_geometry(pg, *READABLE_SIZES[0])  # as loaded at 1280x720
    for width, height in READABLE_SIZES[1:]:
        resize(pg, width, height)
        assert_geometry(pg, width, height)
    late = []
    for width, height in FIRST_SCREENS:
        resize(pg, width, height)
        _top, bottom = pg.evaluate(FIRST_CARD_JS)
        if bottom > height:
            late.append(f"{width}x{height}: the final column's first card ends at y={bottom:.0f}")
    assert late == [], late
    assert_clean(pg)


def step(pg, key: str, count: str, text: str, badge: str | None = None) -> None:
    """Press ``key`` once, as soon as the previous step's turn is on screen (its cross-encoder may still be at
    work): the tour shows step ``count`` and its turn (at level ``badge``). Every press counts (trigger_mode
    "multiple", ui._wire)."""
    pg.keyboard.press(key)
    expect()(pg.locator("#tour-caption")).to_contain_text(count, timeout=TIMEOUT_MS)
    expect()(pg.locator("#hybrid-path .turn")).to_contain_text(text, timeout=TIMEOUT_MS)
    if badge:
        expect()(level(pg)).to_have_text(badge, timeout=TIMEOUT_MS)


# Presenter mode at 1280x720, read from the back of a room: score lines and formulas of at least 16 px, no chip cut,
# column titles on one line, the caption's card named by its title as the cards show it and on screen.
READABLE_JS = """() => {
  const px = (e) => parseFloat(getComputedStyle(e).fontSize);
  const small = [...document.querySelectorAll('#columns .hit .score, #columns .hit .formula, #columns .hit .ranks')]
    .filter(e => e.offsetParent && px(e) < 16).map(e => e.className + ' ' + px(e) + 'px');
  const cut = [...document.querySelectorAll('#columns .chip')]
    .filter(c => c.offsetParent && c.scrollWidth > c.clientWidth + 1).map(c => c.textContent);
  const wrapped = [...document.querySelectorAll('#columns .col-title')]
    .filter(t => t.getClientRects().length !== 1 || t.getBoundingClientRect().height > 1.6 * px(t)
                 || t.scrollWidth > t.clientWidth + 1).map(t => t.textContent);
  const watch = document.querySelector('#tour-caption .watch');
  const seen = [...document.querySelectorAll('#columns .hit')].filter(h => getComputedStyle(h).outlineWidth === '5px')
    .map(h => { const r = h.querySelector('.hit-head').getBoundingClientRect();
                return {title: h.querySelector('.title').textContent, top: r.top, bottom: r.bottom}; });
  return {small, cut, wrapped, watch: watch ? watch.textContent : null, seen};
}"""


WATCHED_ON_SCREEN_JS = """() => [...document.querySelectorAll('#columns .hit')]
  .filter(h => getComputedStyle(h).outlineWidth === '5px')
  .some(h => h.querySelector('.hit-head').getBoundingClientRect().bottom <= window.innerHeight)"""


def assert_readable(pg, where: str) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    if pg.locator("#tour-caption .watch").count():  # the card to watch comes into view (scrolled if it must)
        with contextlib.suppress(PlaywrightTimeout):  # the assertion below says what is wrong
            pg.wait_for_function(WATCHED_ON_SCREEN_JS, timeout=5000)
    r = pg.evaluate(READABLE_JS)
    assert r["small"] == [], f"{where}: score lines under 16 px: {r['small'][:5]}"
    assert r["cut"] == [], f"{where}: chips cut: {r['cut']}"
    assert r["wrapped"] == [], f"{where}: column titles not on one line: {r['wrapped']}"
    if r["watch"] is not None:
        assert r["seen"] and all(s["title"] == r["watch"] for s in r["seen"]), (where, r["watch"], r["seen"][:2])
        assert any(s["bottom"] <= 720 for s in r["seen"]), f"{where}: the watched card is below the screen"
        for name, selector in (("badge", "#hybrid-path .badge"), ("bar", "#turn-row")):
            box = pg.locator(selector).bounding_box()
            assert box["y"] >= 0 and box["y"] + box["height"] <= 720, f"{where}: the {name} left the screen: {box}"


def test_presenter_mode_tours_the_examples_and_the_levels_with_the_keyboard(context_at, server):
    if not SHIPPED.exists():
        pytest.skip("the curated tour is about the shipped corpus")
    from inspector.examples import EXAMPLES

    n = len(EXAMPLES) + 2  # the examples, and the steps that switch hybrid off and fail the reranker
    pg = open_page(context_at(1280, 720), server + "?present=1", ready="#tour-bar")
    expect()(pg.locator("#turn-row")).to_be_visible()  # the compact bar (its own test: below)
    expect()(pg.locator("#examples")).to_be_hidden()
    pg.keyboard.press("ArrowRight")
    expect()(pg.locator("#tour-caption")).to_contain_text(f"1/{n}", timeout=TIMEOUT_MS)
    expect()(pg.locator("#tour-caption")).to_contain_text(EXAMPLES[0].shows[:40])
    expect()(pg.locator("#hybrid-path .turn")).to_contain_text(EXAMPLES[0].text, timeout=TIMEOUT_MS)
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    watched = pg.locator(f'#list-reranked .hit[data-parent="{EXAMPLES[0].card}"]').first
    watched.wait_for()
    assert "5px" in watched.evaluate("e => getComputedStyle(e).outlineWidth")  # the card to watch is outlined
    assert_readable(pg, "step 1")
    # the projected cards look medical: the banner's warning stays, and the answer still fits the first screen
    expect()(pg.locator("#banner .warn")).to_be_visible()
    expect()(pg.locator("#banner .warn")).to_contain_text("not medical advice")
    first = pg.locator("#list-reranked .hit .hit-head").first.bounding_box()
    assert first["y"] + first["height"] <= 720, first
    pg.set_viewport_size({"width": 853, "height": 480})  # 1280x720 at 150 % zoom: each column's first card shows
    pg.wait_for_timeout(200)  # the resized page lays out again
    bar = pg.locator("#tour-bar").bounding_box()
    assert bar["height"] <= 0.35 * 480, f"the tour bar takes {bar['height']:.0f} of 480 px"
    for stage in STAGES:
        head = pg.locator(f"#list-{stage} .hit .hit-head").first.bounding_box()
        assert head["y"] + head["height"] <= 480, f"150 %: {stage}'s first card ends at {head['y'] + head['height']}"
    pg.set_viewport_size({"width": 1280, "height": 720})
    # the levels: hybrid off (dense_only), the reranker's failure (rrf_only), then both restored
    hybrid, fails = pg.locator("#hybrid-enabled input"), pg.locator("#simulate-reranker-failure input")
    step(pg, "ArrowRight", f"2/{n}", EXAMPLES[0].text, "dense_only")
    expect()(hybrid).not_to_be_checked()
    assert_readable(pg, "step 2 (dense_only)")
    step(pg, "ArrowRight", f"3/{n}", EXAMPLES[0].text, "rrf_only")
    expect()(hybrid).to_be_checked()
    expect()(fails).to_be_checked()
    assert_readable(pg, "step 3 (rrf_only)")
    step(pg, "ArrowRight", f"4/{n}", EXAMPLES[1].text, "full")
    expect()(fails).not_to_be_checked()
    step(pg, "ArrowLeft", f"3/{n}", EXAMPLES[0].text, "rrf_only")
    pg.keyboard.press("Escape")
    expect()(pg.locator("#examples")).to_be_visible()
    assert_clean(pg)


# Presenter mode shares its first screen with the map (head.css section 4): the map's plot area (Plotly's axes)
# starts in it and mostly shows, with its stage buttons, while each column's first card stays whole in its column.
MAP_SHARE_JS = """() => {
  const plot = document.querySelector('#turn-map .js-plotly-plot');
  if (!plot || !plot.data || !plot.data.some(t => t.name === 'turn' && t.x && t.x.length === 1)) { return null; }
  const area = plot.querySelector('.nsewdrag').getBoundingClientRect();
  const buttons = [...plot.querySelectorAll('.updatemenu-button')].map(b => b.getBoundingClientRect().bottom);
  const cut = [...document.querySelectorAll('#columns .col')].filter(col => {
    const head = col.querySelector('.hit .hit-head');
    return head && head.getBoundingClientRect().bottom > col.getBoundingClientRect().bottom + 0.5;
  }).map(col => col.className);
  return {top: area.top, height: area.height, buttons, cut, scrollY: window.scrollY};
}"""


def test_presenter_bar_keeps_the_turn_and_the_three_controls_and_keys_drive_them(context_at, server):
    pg = open_page(context_at(1280, 720), server + "?present=1&q=GS-40+E-09", ready="#tour-bar")
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    share = pg.wait_for_function(MAP_SHARE_JS, timeout=TIMEOUT_MS).json_value()  # the map follows the columns
    seen = (720 - share["top"]) / share["height"]
    assert share["scrollY"] == 0 and share["top"] < 720 and seen >= 0.4, f"the map's plot area: {share}, {seen:.0%}"
    assert share["buttons"] and max(share["buttons"]) <= 720, f"the stage buttons below the screen: {share}"
    assert share["cut"] == [], f"a column's first card is cut by the column's cap: {share['cut']}"
    parts = {
        "turn box": "#query textarea",
        "Run": "#run",
        "RRF k": "#rrf-k input[type=number]",
        "Hybrid on": "#hybrid-enabled label",
        "Reranker fails": "#simulate-reranker-failure label",
    }
    for name, selector in parts.items():  # on screen, in type that reads from the back of a room
        box = pg.locator(selector).bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= 720 and box["x"] + box["width"] <= 1280, name
        size = pg.locator(selector).evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
        assert size >= 18, f"{name}: {size} px"
    pg.mouse.wheel(0, 900)  # scrolled down the columns, the bar stays at the top of the screen
    pg.wait_for_function("() => window.scrollY > 200")
    bar = pg.locator("#turn-row").bounding_box()
    assert 0 <= bar["y"] and bar["y"] + bar["height"] <= 120, f"the bar scrolled away: {bar}"
    expect()(pg.locator("#tour-caption .tour-keys")).to_contain_text("Hybrid on/off")  # the keys, in the page
    hybrid, fails = pg.locator("#hybrid-enabled input"), pg.locator("#simulate-reranker-failure input")
    pg.keyboard.press("h")
    expect()(hybrid).not_to_be_checked()
    expect()(level(pg)).to_have_text("dense_only", timeout=TIMEOUT_MS)
    pg.keyboard.press("h")
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    pg.keyboard.press("f")
    expect()(fails).to_be_checked()
    expect()(level(pg)).to_have_text("rrf_only", timeout=TIMEOUT_MS)
    pg.keyboard.press("f")
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    k = pg.locator("#rrf-k input[type=number]")
    start = int(k.input_value())
    pg.keyboard.press("+")
    expect()(k).not_to_have_value(str(start), timeout=TIMEOUT_MS)
    raised = int(k.input_value())
    assert raised > start
    expect()(pg.locator("#list-rrf .col-head .chip")).to_contain_text(f"k={raised} ", timeout=TIMEOUT_MS)
    pg.keyboard.press("-")
    expect()(k).to_have_value(str(start), timeout=TIMEOUT_MS)
    expect()(pg.locator("#list-rrf .col-head .chip")).to_contain_text(f"k={start} ", timeout=TIMEOUT_MS)
    # while typing in the turn box the keys are letters: "h" and "f" go into the turn, the controls stay
    pg.keyboard.press("/")
    pg.keyboard.press("End")
    pg.keyboard.type(" hf")
    expect()(pg.locator("#query textarea")).to_have_value("GS-40 E-09 hf")
    expect()(hybrid).to_be_checked()
    expect()(fails).not_to_be_checked()
    assert_clean(pg)


STREAM_JS = """(text) => {
  window.__seen = {};
  const mark = (name) => { if (!(name in window.__seen)) { window.__seen[name] = performance.now(); } };
  new MutationObserver(() => {
    const turn = document.querySelector('#hybrid-path .turn');
    if (!turn || !turn.textContent.includes(text)) { return; }  // still the previous turn
    if (document.querySelector('#hybrid-path .level-pending')) { mark('pending'); }
    if (document.querySelector('#list-rrf .hit') && document.querySelector('#list-reranked .col.pending')) {
      mark('fused'); }
    if (document.querySelector('#list-reranked .col:not(.pending) .hit')) { mark('reranked'); }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_a_turn_streams_the_fused_list_before_the_reranked_one(context_at, server):
    # 40 pairs for the cross-encoder (the link sets the control): with the default 10 the two steps can arrive
    # within one browser task on a loaded machine and render once (seen once in a full run: only 'reranked').
    # The link carries a turn too, and the page's restore runs it: once it is on screen the load events are over
    # (a Run pressed before the restore lands is superseded by the restore's own re-run, as the newest action).
    pg = open_page(context_at(1280, 720), server + "?q=GS-40+E-09&reranker_max_input=40")
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    pg.locator("#list-reranked .hit").first.wait_for()
    text = "which GlucoSense code means the strip went in backwards (stream check)"
    pg.evaluate(STREAM_JS, text)
    pg.locator("#query textarea").fill(text)
    pg.locator("#run").click()  # a turn never run before: the cross-encoder has new pairs to score (RERANKER_MAX_INPUT)
    pg.wait_for_function("() => 'reranked' in window.__seen", timeout=TIMEOUT_MS)
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    seen = pg.evaluate("() => window.__seen")
    assert "pending" in seen and "fused" in seen, f"no streamed first step was shown: {seen}"
    assert seen["fused"] < seen["reranked"], seen
    expect()(pg.locator("#list-reranked .scoring")).to_have_count(0)
    assert_clean(pg)


def test_compare_mode_keeps_a_and_b_side_by_side_at_1280(context_at, server):
    pg = open_page(context_at(1280, 720), server + "?q=GS-40+E-09&compare=1&b.rrf_k=60")
    pg.locator("#cmp-final-b .cmp-row").first.wait_for(timeout=TIMEOUT_MS)
    a, b = (pg.locator(f"#cmp-final-{side}").bounding_box() for side in ("a", "b"))
    assert abs(a["y"] - b["y"]) < 1 and a["x"] + a["width"] <= b["x"], (a, b)  # side by side, not stacked
    assert min(a["width"], b["width"]) >= 2 * MIN_COLUMN_PX, (a, b)
    assert_clean(pg)
