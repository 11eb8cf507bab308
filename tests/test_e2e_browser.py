"""End to end: the launched app (``python app.py`` in a subprocess) driven by a real headless Chromium.

Without a browser these tests skip locally, and fail under CI (CI=true). Chromium is launched with every host but
127.0.0.1 unresolvable, and each test asserts the page asked for nothing outside 127.0.0.1. Screenshots go to tmp_path:
the documentation's pictures are taken by scripts/screenshots.py (``make screenshots``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from retrieval.settings import Settings
from tests.app_server import CHROMIUM, CHROMIUM_ARGS, SHIPPED

INJECTION = "<img src=x onerror=alert(1)>"
TIMEOUT_MS = 90_000
LOCAL = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:")
DEFAULTS = Settings.from_env()  # what the app under test reads (the test only overrides corpus, Chroma and port)


def _unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser tests cannot run under CI: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright as sp
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -r requirements-dev.txt)")
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        _unavailable(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    return sp


@pytest.fixture(scope="module")
def server(sync_playwright, shipped_app):
    """The URL of ``python app.py`` on a free port, on the shipped corpus if present (else the mini corpus): the
    session's ``shipped_app`` (conftest), one app for every file that imports this fixture."""
    return shipped_app.url


@pytest.fixture(scope="module")
def browser(sync_playwright, server):
    with sync_playwright() as p:
        executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_page(ctx, url: str, ready: str = "#query textarea"):
    """A page of ``ctx`` at ``url``, ready for a turn, recording any request outside 127.0.0.1 (``pg.outside``) and
    any dialog a script opened (``pg.dialogs``). Shared by every browser test file."""
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    pg.outside, pg.dialogs = [], []
    pg.on("request", lambda r: None if r.url.startswith(LOCAL) else pg.outside.append(r.url))
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.goto(url)
    pg.locator(ready).wait_for()
    return pg


def assert_clean(pg) -> None:
    assert pg.outside == [], f"the page tried to reach outside 127.0.0.1: {pg.outside[:5]}"
    assert pg.dialogs == [], f"a script ran in the page: {pg.dialogs}"


@pytest.fixture()
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = open_page(context, server)
    yield pg
    context.close()
    assert_clean(pg)


def expect():
    """Playwright's ``expect``, waiting up to TIMEOUT_MS: the suite runs three workers on two cores, and an answer
    that takes 1 s on a quiet machine took 13.5 s in one run (the default wait is 5 s)."""
    from playwright.sync_api import expect as e

    e.set_options(timeout=TIMEOUT_MS)
    return e


def level(page):
    return page.locator("#hybrid-path .badge")


def run(page, text: str, want_level: str | None = None) -> None:
    page.locator("#query textarea").fill(text)
    page.locator("#run").click()
    if want_level:
        expect()(level(page)).to_have_text(want_level, timeout=TIMEOUT_MS)
    page.locator("#hybrid-path .turn").wait_for()


TURN = "what does error E-07 mean on my GlucoSense GS-40"


def test_a_turn_then_each_level_its_controls_bring_and_the_export(page, tmp_path):
    """One page, one turn at ``full`` (its lists, charts, a whole-page screenshot and its export), then each control
    that changes the level or the fused list, each restored before the next: what seven pages (each loading the app
    and drawing a turn) checked."""
    run(page, TURN, "full")
    expect()(page.locator("#hybrid-path .turn")).to_contain_text(TURN)
    for column in ("bm25", "dense", "rrf", "reranked"):
        assert page.locator(f"#list-{column} .hit").count() > 0, column
    assert f"/({DEFAULTS.rrf_k}+" in page.locator("#list-rrf").text_content()
    for chart in ("rank-flow", "contributions", "k-sensitivity"):
        page.locator(f"#chart-{chart} .main-svg").first.wait_for()  # plotly drew it
    # Gradio's run history is off: no turn is kept in the browser (it made every turn slower than the last, and a
    # shared screen showed the next person what was typed)
    kept = page.evaluate("() => Object.keys(localStorage).filter(k => k.startsWith('gradio:run-history'))")
    assert kept == [], kept
    assert page.evaluate("() => window.__turnSeq") >= 1  # the page numbers its turn actions (ui.turn_seq_js)

    # the whole page screenshots with its charts (scripts/screenshots.py takes the docs' copy)
    page.wait_for_timeout(1500)  # let plotly finish its transitions
    bottom = page.locator("#chart-contributions").bounding_box()
    out = tmp_path / "inspector-full.png"
    page.screenshot(
        path=str(out),
        full_page=True,
        clip={"x": 0, "y": 0, "width": 1400, "height": bottom["y"] + bottom["height"] + 16},
    )
    assert out.stat().st_size > 50_000

    # the export comes with the charts and the context, right after the columns (handlers.turn_details)
    expect()(page.locator("#context")).to_contain_text("device-gs40-e07", timeout=TIMEOUT_MS)
    with page.expect_download() as download:
        page.locator("#export").click()
    record = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert record["inputs"]["query"] == TURN and record["hybrid_path"] == "full"
    assert record["result"]["fused"] and record["settings"]["rrf_k"] == DEFAULTS.rrf_k

    # the reranker's simulated failure: rrf_only, and back
    page.locator("#simulate-reranker-failure input").check()
    expect()(level(page)).to_have_text("rrf_only", timeout=TIMEOUT_MS)
    expect()(page.locator("#hybrid-path")).to_contain_text("reranker load failure (simulated)")
    page.locator("#simulate-reranker-failure input").uncheck()
    expect()(level(page)).to_have_text("full", timeout=TIMEOUT_MS)

    # hybrid off: dense_only, the BM25 branch shown dropped, and back
    page.locator("#hybrid-enabled input").uncheck()
    expect()(level(page)).to_have_text("dense_only", timeout=TIMEOUT_MS)
    expect()(page.locator("#list-bm25 .dropped")).to_contain_text("disabled")
    assert page.locator("#list-dense .hit").count() > 0
    page.locator("#hybrid-enabled input").check()
    expect()(level(page)).to_have_text("full", timeout=TIMEOUT_MS)

    # an empty BM25 index (simulated, in the Controls drawer): dense_only, and back
    box = open_controls(page, "simulate-empty-bm25").locator("input")
    box.evaluate("e => e.click()")  # a click where it is: the drawer's transform confuses Playwright's geometry
    expect()(box).to_be_checked()
    expect()(level(page)).to_have_text("dense_only", timeout=TIMEOUT_MS)
    expect()(page.locator("#list-bm25 .dropped")).to_contain_text("BM25 index is empty (simulated)")
    box.evaluate("e => e.click()")
    expect()(box).not_to_be_checked()
    expect()(level(page)).to_have_text("full", timeout=TIMEOUT_MS)

    # moving RRF k changes the fused list
    before = page.locator("#list-rrf").text_content()
    target = 1 if DEFAULTS.rrf_k != 1 else 200
    k = page.locator("#rrf-k input[type=number]")
    k.fill(str(target))
    k.press("Tab")  # the number box releases the slider on blur
    # Playwright trims expected text ("k=1 " would match "k=10"): wait for the formula, "/(1+" is not "/(10+".
    expect()(page.locator("#list-rrf .formula").first).to_contain_text(f"/({target}+", timeout=TIMEOUT_MS)
    after = page.locator("#list-rrf").text_content()
    assert f"k={target} ·" in after and f"k={DEFAULTS.rrf_k} ·" not in after and after != before


def open_controls(page, elem_id: str = "reranker-max-input"):
    """Open the Controls drawer (closed at first: the answer owns the first screen) unless it is open, and bring the
    control ``elem_id`` into view; returns its locator. The drawer slides in with a CSS transform, which Playwright's
    own scrolling misreads ("outside of the viewport"), so the page scrolls it as a person's wheel would (and a
    click on a control in the drawer is the element's own ``click()``)."""
    control = page.locator(f"#{elem_id}")
    if not control.is_visible():
        page.locator("#open-controls").click()
        control.wait_for()
    control.evaluate("e => e.scrollIntoView({block: 'center'})")
    return control


def run_example(page, kind: str, expected_level: str):
    """Click the first curated example of ``kind`` (they are about the shipped corpus) and wait for its level."""
    if not SHIPPED.exists():
        pytest.skip("the curated examples are about the shipped corpus")
    from inspector.examples import by_kind

    example = by_kind(kind)[0]
    page.get_by_text(example.label, exact=True).click()
    expect()(level(page)).to_have_text(expected_level, timeout=TIMEOUT_MS)
    return example


def test_an_empty_turn_the_refusal_example_and_an_injection_each_say_what_they_are(page):
    """One page: an empty turn gets a clear message, the no_match example ends in the refusal, and an injection
    string in the turn renders as text."""
    page.locator("#query textarea").fill("   ")
    page.locator("#run").click()
    expect()(page.locator("#message")).to_contain_text("The turn is empty")
    expect()(level(page)).to_have_text("idle")

    example = run_example(page, "no_match", "no_match")
    expect()(page.locator("#query textarea")).to_have_value(example.text)
    expect()(page.locator("#list-reranked .refusal")).to_contain_text("I could not find this")
    expect()(page.locator("#context")).to_contain_text("I could not find this")

    run(page, INJECTION)
    expect()(page.locator("#hybrid-path .turn")).to_contain_text(INJECTION)
    assert page.locator("img[src='x']").count() == 0


def test_why_not_box_and_a_judgment_that_stays_the_session_s_own(page, browser, server):
    run(page, TURN, "full")
    page.locator("#why-card textarea").fill("device-bc7-err4")
    page.locator("#why-run").click()
    expect()(page.locator("#why-a .verdict")).to_contain_text("device-bc7-err4:", timeout=TIMEOUT_MS)
    expect()(page.locator("#judge-card input")).to_have_value(re.compile("device-bc7-err4"), timeout=TIMEOUT_MS)
    page.locator("#judge-grade label", has_text="0").click()  # grade 0: changes no metric of the other tests
    page.locator("#judge-save").click()
    expect()(page.locator("#judgments")).to_contain_text("(device-bc7-err4)", timeout=TIMEOUT_MS)
    # the shipped set's labels are read-only from the page: the grade is this session's own mark
    expect()(page.locator("#judgments")).to_contain_text("your mark", timeout=TIMEOUT_MS)
    other = browser.new_context()  # another session, after this one made it: the mark is not its to see or count
    try:
        pg = open_page(other, server)
        run(pg, TURN.upper(), "full")
        expect()(pg.locator("#judgments")).to_contain_text("No judgment for this turn yet", timeout=TIMEOUT_MS)
        assert_clean(pg)
    finally:
        other.close()
    page.locator("#judge-undo").click()  # and the session takes its mark back
    expect()(page.locator("#judgments")).to_contain_text("Undid your latest change", timeout=TIMEOUT_MS)


def test_run_turn_is_callable_by_gradio_client_with_its_own_settings(server):
    from tests.app_server import local_client

    client = local_client(server)
    params = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/run_turn"]["parameters"]
    from inspector.handlers import CONTROLS

    assert [p["parameter_name"] for p in params] == ["query", *CONTROLS, "corpus"]
    out = client.predict(TURN, rrf_k=3, simulate_reranker_failure=True, api_name="/run_turn")
    status, fused = out[1], out[4]
    assert "level-rrf_only" in status and "/(3+" in fused
