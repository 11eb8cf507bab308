"""The classroom's exercises in a real browser, once each: a class link opens the worked example, a wrong order is
marked wrong with what differs, the right order is marked right, the reveal shows the class's five scores; an
exercise made from a turn in the Inspector opens in the classroom with that turn's lists; the worksheet the page
gives prints on A4 (Chromium's page.pdf) with nothing wider than the printable area."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests import test_e2e_browser as e2e
from tests.test_e2e_browser import TIMEOUT_MS, assert_clean, expect, level, open_page

# the shared browser fixtures (a module's fixtures are found by name in the test module)
sync_playwright, server, browser = e2e.sync_playwright, e2e.server, e2e.browser

# The printable width of A4 with the worksheet's margins (210 mm - 2 x 18 mm), in CSS px (96 per inch).
PRINTABLE_PX = (210 - 2 * 18) / 25.4 * 96
OVERFLOW_JS = """(limit) => {
  const out = [];
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.right > limit + 0.5 || e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible') {
      out.push(e.tagName + ' ' + (e.textContent || '').slice(0, 40) + ' ' + Math.round(r.right));
    }
  }
  const key = document.querySelector('section.key');
  return {out, keyBreak: key ? getComputedStyle(key).breakBefore : null, width: document.documentElement.scrollWidth};
}"""


@pytest.fixture()
def printer(sync_playwright):
    """A Chromium of its own, closed after the test (before the app's browser starts): printing needs no app."""
    with sync_playwright() as p:
        executable = e2e.CHROMIUM if Path(e2e.CHROMIUM).exists() else shutil.which("chromium")
        b = p.chromium.launch(executable_path=executable, args=e2e.CHROMIUM_ARGS)
        yield b
        b.close()


def test_the_worksheet_prints_on_a4_without_cut_off_content(printer, tmp_path):
    from inspector.worksheet import worksheet_html
    from retrieval.exercise_set import default_set, ready

    page = printer.new_page(viewport={"width": round(PRINTABLE_PX), "height": 1100})
    page.set_content(worksheet_html([ready()[i] for i in default_set()]))
    page.emulate_media(media="print")
    found = page.evaluate(OVERFLOW_JS, PRINTABLE_PX)
    assert found["out"] == [], f"wider than the printable area of A4: {found['out'][:5]}"
    assert found["width"] <= round(PRINTABLE_PX) and found["keyBreak"] == "page"
    pdf = page.pdf(format="A4", path=str(tmp_path / "worksheet.pdf"))
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf))
    assert pages >= 2, f"the answer key should start on its own page; the PDF has {pages} page(s)"
    page.close()


CLASS_SCORES = ("A (0.03252)", "C (0.03227)", "B (0.03175)", "E (0.01587)", "D (0.01563)")


def test_a_class_link_checks_a_wrong_then_a_right_order_then_reveals(browser, server, tmp_path):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    pg = open_page(ctx, server + "?exercise=worked-example", ready="#exercise-answer input, #exercise-answer textarea")
    answer = pg.locator("#exercise-answer input, #exercise-answer textarea").first
    expect()(answer).to_be_visible()  # the link opened the classroom tab
    expect()(pg.locator("#exercise-card")).to_contain_text("The class's worked example")
    verdict = pg.locator("#exercise-verdict")
    answer.fill("A, B, C, E, D")
    pg.locator("#exercise-check").click()
    expect()(verdict).to_contain_text("Not yet: 3 of 5 places are right.")
    expect()(verdict).to_contain_text("#2: you wrote B")
    expect()(pg.locator("#exercise-reveal-out")).to_have_text("")  # nothing revealed yet
    answer.fill("A, C, B, E, D")
    pg.locator("#exercise-check").click()
    expect()(verdict).to_contain_text("Right: A, C, B, E, D.")
    pg.locator("#exercise-reveal").click()
    reveal = pg.locator("#exercise-reveal-out")
    expect()(reveal).to_contain_text("RRF(A) = 1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252")
    expect()(reveal).to_contain_text(" > ".join(CLASS_SCORES))
    # the worksheet of this link's set, as the page gives it, printed on A4
    pg.locator("#exercise-teacher").get_by_text("For the teacher").click()
    with pg.expect_download() as download:
        pg.locator("#exercise-worksheet").click()
    sheet = Path(download.value.path()).read_text(encoding="utf-8")
    assert "Answer key" in sheet and "0.03252" in sheet
    assert_clean(pg)
    ctx.close()


def test_an_exercise_from_this_turn_opens_in_the_classroom_with_its_lists(browser, server):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = open_page(ctx, server)
    pg.locator("#query textarea").fill("GS-40 E-09")
    pg.locator("#run").click()
    expect()(level(pg)).to_have_text("full", timeout=TIMEOUT_MS)
    expect()(pg.locator("#export")).to_be_visible(timeout=TIMEOUT_MS)
    pg.wait_for_function("() => document.querySelector('#chart-contributions .main-svg')", timeout=TIMEOUT_MS)
    first_bm25 = pg.locator("#list-bm25 .hit").first.get_attribute("data-chunk")
    pg.locator("#exercise-from-turn").click()
    card = pg.locator("#exercise-card")
    expect()(card).to_contain_text("From a turn of the Inspector", timeout=TIMEOUT_MS)
    expect()(card).to_contain_text("GS-40 E-09")
    expect()(card).to_contain_text(f"({first_bm25.split('#')[0]})")  # BM25's first card is letter A's label
    expect()(pg.locator("#exercise-answer input, #exercise-answer textarea").first).to_be_visible()
    assert_clean(pg)
    ctx.close()
