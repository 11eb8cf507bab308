"""The Data tab end to end (issue 10): the launched app (``python app.py``) driven by a real headless Chromium.

Upload a JSONL with a broken line (the message names the line), then the fixed file (the progress bar reaches
100%, a turn's four lists come from the new corpus); upload a CSV and a .zip of Markdown; open a BEIR folder found
under the data root (a small one made in tmp, so the test indexes in seconds; real SciFact takes ~25 min) and see
its labeled turns offered in the inspector; switch back to the shipped corpus; two browser contexts with different
active corpora each see their own lists. Screenshots the Data tab into tmp_path.
The Evaluation tab scores the session's corpus (preselected) and its A vs B links carry the corpus (issue 11).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.app_server import MINI, ROOT, AppServer, prebuilt_store
from tests.test_data_tab_logic import write_csv, write_zip
from tests.test_e2e_browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, _unavailable, open_page

OWN = [
    {
        "id": "own-water",
        "title": "Water with tablets",
        "text": "Drink a full glass of water with every tablet. Water helps the tablet reach the stomach.",
    },
    {"id": "own-alarm", "title": "Evening alarm", "text": "Set a phone alarm for the evening dose. Snooze once."},
    {"id": "own-travel", "title": "Travel kit", "text": "Pack spare doses in hand luggage when flying abroad."},
    {"id": "own-fridge", "title": "Fridge", "text": "Keep unopened insulin pens in the fridge door."},
]
TURN = "glass of water with every tablet"
# tinybeir's labeled turns: q2 shares no word with its card, so B = BM25's order alone breaks it (A vs B has a link).
SCIFACT = ROOT.parent / "shared" / "eval" / "scifact"
# The corpora an earlier test's session of this module uploaded (its tests run in order in one process): a later
# test that needs a corpus uploaded by another session uses that one instead of opening a session to upload it.
UPLOADED: set[str] = set()
BEIR_TURNS = [
    ("q1", "what lowers cholesterol", "tb-statin"),
    ("q2", "exercise for hypertension", "tb-walk"),
    ("q3", "medicine that prevents clots", "tb-aspirin"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("uploads")
    out = {}
    good = "".join(json.dumps(c) + "\n" for c in OWN)
    broken = good.splitlines(keepends=True)
    broken[1] = '{"id": "own-alarm", "title": "Evening alarm", "text": <script>alert(1)</script>\n'
    out["broken"] = d / "own cards.jsonl"
    out["broken"].write_text("".join(broken), encoding="utf-8")
    fixed = d / "fixed"
    fixed.mkdir()
    out["fixed"] = fixed / "own cards.jsonl"
    out["fixed"].write_text(good, encoding="utf-8")
    out["csv"] = write_csv(d / "team-kb.csv")  # the same files the unit test below the page adds
    out["zip"] = write_zip(d / "notes.zip")
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory, store_cache):
    try:
        from playwright.sync_api import sync_playwright  # noqa: F401
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -r requirements-dev.txt)")
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        _unavailable(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    work = tmp_path_factory.mktemp("e2e-data")
    beir = work / "eval" / "tinybeir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(
        "".join(
            json.dumps(d) + "\n"
            for d in [
                {"_id": "tb-aspirin", "title": "Aspirin", "text": "Low-dose aspirin thins the blood."},
                {"_id": "tb-statin", "title": "Statins", "text": "Statins lower LDL cholesterol."},
                {"_id": "tb-walk", "title": "Walking", "text": "A daily walk lowers blood pressure."},
            ]
        ),
        encoding="utf-8",
    )
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t, _ in BEIR_TURNS), encoding="utf-8"
    )
    (beir / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, d in BEIR_TURNS), encoding="utf-8"
    )
    if SCIFACT.is_dir():  # the real BEIR SciFact (read in place, never copied into the repo)
        (work / "eval" / "scifact").symlink_to(SCIFACT, target_is_directory=True)
    env = {"DATA_DIR": str(work / "data"), "DATA_ROOT": str(work / "eval")}
    with AppServer(work, MINI, extra_env=env, store=prebuilt_store(MINI, store_cache)).running() as app:
        yield app


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()


def new_page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    return context, open_page(context, server.url)


@pytest.fixture()
def page(browser, server):
    context, pg = new_page(browser, server)
    yield pg
    context.close()
    assert pg.outside == [], f"the page tried to reach outside 127.0.0.1: {pg.outside[:5]}"
    assert pg.dialogs == [], f"a script ran in the page: {pg.dialogs}"


def expect():
    from playwright.sync_api import expect as e

    e.set_options(timeout=TIMEOUT_MS)
    return e


def tab(page, name: str) -> None:
    """Open a tab; a click that lands before the page is live is lost, so it is retried until the tab is selected."""
    button = page.get_by_role("tab", name=name)
    for attempt in range(3):
        button.click()
        try:
            expect()(button).to_have_attribute("aria-selected", "true", timeout=15_000)
            return
        except AssertionError:
            if attempt == 2:
                raise


def upload(page, path: Path) -> None:
    """Choose ``path`` in the Data tab's upload box and press Add, until the Add's answer names the file."""
    tab(page, "Data")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    message = page.locator("#data-message")
    for attempt in range(3):  # the box re-renders when the previous upload is cleared: a file set meanwhile is lost
        box = page.locator("#corpus-upload input[type=file]")
        try:
            box.wait_for(state="attached", timeout=10_000)
        except PlaywrightTimeout:  # the box still shows the previous file (its clearing never arrived): clear it as
            shown = page.locator("#corpus-upload").inner_text()  # a user would, with its x button
            clear = page.locator("#corpus-upload button[aria-label='Clear']")
            assert clear.count(), f"the upload box has no file input and no clear button; it shows: {shown[:500]!r}"
            clear.first.click()
        box.set_input_files(str(path))
        # Gradio has it: the box lists the uploaded file in a cell labelled with its name. Its text does not carry the
        # name whole ("own cards" and ".jsonl" are two spans, the text reads "own cards .jsonl"): only the passing
        # "Uploading 1 file... own cards.jsonl" does, which a test process the machine starves for a moment misses.
        try:
            page.locator("#corpus-upload").get_by_label(path.name, exact=True).first.wait_for(timeout=20_000)
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            continue
        # ... and has finished sending it: Add pressed while the box still says "Uploading 1 file..." sends no file
        # (on a busy machine the page then said "Choose a file to upload first" and nothing was indexed)
        expect()(page.locator("#corpus-upload")).not_to_contain_text("Uploading", timeout=TIMEOUT_MS)
        before = message.inner_text()
        page.locator("#corpus-add").click()
        # The Add's answer names the file (its cards, or what is wrong with it). "Choose a file" means the box was
        # emptied under the test by the previous Add's answer (that answer clears the box): choose the file again.
        try:
            expect()(message).not_to_have_text(before, timeout=30_000)
        except AssertionError:  # the same answer as the last one (the same file added again): read it
            pass
        done = re.compile(f"{re.escape(path.name)}|Choose a file|Active corpus:")  # ("processing" meanwhile; the
        expect()(message).to_have_text(done, timeout=TIMEOUT_MS)  # poll's word once an index is done at once)
        answer = message.inner_text()
        if "Choose a file" not in answer:
            return
    raise AssertionError(f"Add of {path.name} found the upload box empty three times: {answer[:300]!r}")


def wait_ready(page, name: str) -> None:
    expect()(page.locator("#index-progress")).to_contain_text("100%", timeout=300_000)
    expect()(page.locator("#index-progress")).to_contain_text("ready")
    expect()(page.locator("#active-corpus")).to_contain_text(name)


def pick(page, name: str) -> None:
    tab(page, "Data")
    box = page.locator("#corpus-picker input")
    box.click()
    box.fill(name)
    box.press("Enter")
    box.blur()
    page.locator("#corpus-open").click()


def run_turn(page, text: str) -> dict[str, list[str]]:
    tab(page, "Inspector")
    page.locator("#query textarea").fill(text)
    page.locator("#run").click()
    expect()(page.locator("#hybrid-path .turn")).to_contain_text(text)
    # the turn streams: the fused lists first, the reranked column when the cross-encoder is done
    page.locator("#list-reranked [data-chunk]").first.wait_for(timeout=300_000)
    return {
        col: page.locator(f"#list-{col} [data-chunk]").evaluate_all("els => els.map(e => e.dataset.chunk)")
        for col in ("bm25", "dense", "rrf", "reranked")
    }


def test_broken_upload_is_answered_beside_the_drop_zone_then_the_fixed_file_answers_in_its_session_only(
    browser, server, page, files
):
    """A broken upload's message names the line, and at 1280x720 it and the indexing progress are in the first
    screen, beside the drop zone (they were at y=990, below the refusal text and the calibration: a refused upload
    changed nothing seen). The fixed file indexes; a second session that never switched keeps the shipped corpus
    while this one answers from its upload.

    (One page for what were three tests: the layout check at 1280x720, the broken then fixed upload, and two
    sessions with their own corpus, whose session A was this page's upload: one page load, one broken upload and
    one turn fewer.)"""
    page.set_viewport_size({"width": 1280, "height": 720})
    upload(page, files["broken"])
    page.evaluate("() => window.scrollTo(0, 0)")
    zone = page.locator("#corpus-upload").bounding_box()
    for elem_id in ("data-message", "index-progress"):
        box = page.locator(f"#{elem_id}").bounding_box()
        assert box and box["height"] > 0 and box["y"] + box["height"] <= 720, (elem_id, box)
        assert box["y"] < zone["y"] + zone["height"], (elem_id, box, zone)  # beside the zone, not below it
    message = page.locator("#data-message")
    expect()(message).to_contain_text("own cards.jsonl:2: invalid JSON")
    expect()(message).to_contain_text("1 problem found; nothing was indexed")
    expect()(page.locator("#active-corpus")).to_contain_text("shipped")  # a failed upload changes nothing
    assert "Traceback" not in message.text_content()
    page.set_viewport_size({"width": 1400, "height": 1000})

    upload(page, files["fixed"])
    wait_ready(page, "own-cards")
    # the map, built after indexing: its line follows the new corpus until it is ready (polled while it is made)
    expect()(page.locator("#map-progress")).to_contain_text(
        re.compile(r"Map of own-cards: ready: \d+ points"), timeout=60_000
    )
    # two sessions keep their own corpus: B never switched (the shipped, here the mini, corpus); A's turn after B's
    ctx_b, b = new_page(browser, server)
    try:
        lists_b = run_turn(b, TURN)
        lists = run_turn(page, TURN)
        for column, ids in lists.items():
            assert ids, f"{column} is empty"
            assert all(i.startswith("own-") for i in ids), (column, ids)
        assert lists["bm25"][0] == "own-water#0"
        assert lists_b["dense"] and not any(i.startswith("own-") for i in lists_b["dense"])
        tab(b, "Data")
        expect()(b.locator("#active-corpus")).to_contain_text("shipped")
        expect()(page.locator("#active-corpus")).to_contain_text("own-cards")
        assert b.outside == [] and b.dialogs == []
    finally:
        ctx_b.close()


def test_csv_and_zip_of_markdown(page, files):
    """A CSV and a .zip of Markdown through the real file input: each indexes to 100% and becomes the session's
    corpus."""
    upload(page, files["csv"])
    wait_ready(page, "team-kb")
    UPLOADED.add("team-kb")  # by this test's session: another session than any later test's
    upload(page, files["zip"])
    wait_ready(page, "notes")
    # What a turn on each answers from (the CSV's dense list all kb-, the zip's reranked first notes/sharps#0) is
    # checked below the page, with the same files, handlers, models and a real Chroma: tests/test_data_tab_logic.py
    # (a turn shown costs ~4 CPU-s in Chromium; the page's columns are checked on the uploaded JSONL above).


def test_open_a_beir_folder_from_the_picker_offers_its_turns_and_scores_it_then_back_to_shipped(page):
    """Pick a BEIR folder: its labeled turns are offered and a turn answers from it; the Evaluation tab scores the
    session's corpus (preselected) and its A vs B links carry the corpus (issue 11); then back to the shipped cards.
    (One page for what were two tests, each of which opened a page and picked tinybeir.)"""
    pick(page, "tinybeir")
    wait_ready(page, "tinybeir")
    tab(page, "Inspector")
    turns = page.locator("#corpus-turns")
    expect()(turns).to_be_visible()
    expect()(turns).to_contain_text(f"Labeled turns of tinybeir ({len(BEIR_TURNS)})")
    # The page speaks the corpus's words (issue 18): the turn box names it, its labeled turns are the examples,
    # the medication cards' banner is gone.
    expect()(page.locator("#query")).to_contain_text("corpus: tinybeir")
    expect()(page.locator("#examples")).to_contain_text("what lowers cholesterol")
    expect()(page.locator("#banner")).not_to_contain_text("not medical advice")
    page.locator("#query textarea").fill("what lowers cholesterol")
    page.locator("#run").click()
    expect()(page.locator("#hybrid-path .turn")).to_contain_text("what lowers cholesterol")
    assert page.locator("#list-bm25 [data-chunk]").first.get_attribute("data-chunk") == "tb-statin#0"

    # the Evaluation tab scores the session's corpus and its A vs B links carry it
    tab(page, "Evaluation")
    expect()(page.locator("#eval-source input")).to_have_value(re.compile(r"^tinybeir: live run"))
    expect()(page.locator("#ab-corpus input")).to_have_value(re.compile(r"^tinybeir "))
    page.locator("#eval-limit input").fill("2")
    page.locator("#eval-run").click()
    summary = page.locator("#eval-summary")
    expect()(summary).to_contain_text("a live run of corpus tinybeir", timeout=120_000)
    expect()(summary).to_contain_text("a sample of 2 of its 3 labeled turns")
    expect()(summary.locator("caption")).to_have_text("tinybeir: 2 answerable turns")
    expect()(summary.locator("#eval-table tbody tr")).to_have_count(4)  # bm25, dense, rrf, full

    box = page.locator("#ab-b-preset input")  # B = BM25's order alone: the tuned defaults without dense or reranker
    box.click()
    box.fill("tuned defaults")
    box.press("Enter")
    box.blur()
    page.locator("#ab-b-overrides textarea, #ab-b-overrides input").first.fill("dense_weight=0,reranker_max_input=0")
    page.locator("#ab-run").click()
    expect()(page.locator("#ab-summary")).to_contain_text("Corpus tinybeir: 3 labeled turns", timeout=120_000)
    expect()(page.locator("#ab-summary")).to_contain_text(re.compile(r"dense_weight [0-9.]+ → 0\.0"))
    links = page.locator("#ab-turns a.ab-open")
    expect()(links.first).to_be_visible()
    hrefs = links.evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert hrefs and all("corpus=tinybeir" in h for h in hrefs), hrefs
    assert "exercise for hypertension" in links.all_text_contents()

    pick(page, "shipped")
    expect()(page.locator("#active-corpus")).to_contain_text("shipped")
    lists = run_turn(page, "GlucoSense GS-40 error E-07")
    mini_ids = {json.loads(line)["id"] for line in MINI.read_text(encoding="utf-8").splitlines() if line.strip()}
    assert lists["bm25"] and all(i.split("#")[0] in mini_ids for i in lists["bm25"])


def test_a_link_reopens_its_corpus_in_compare_mode_and_a_path_is_refused(browser, server):
    """A share link's corpus= opens that corpus for the new session (a labeled turn gets its relevance marks in
    compare mode, the page's link names the corpus); a path or an unknown name is reported and the shipped cards
    used."""
    from urllib.parse import urlencode

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        pg = open_page(
            context,
            server.url
            + "?"
            + urlencode({"q": "what lowers cholesterol", "corpus": "tinybeir", "compare": 1, "b.rrf_k": 60}),
        )
        expect()(pg.locator("#cmp-summary")).to_be_visible(timeout=300_000)
        assert pg.locator("#list-bm25 [data-chunk]").first.get_attribute("data-chunk") == "tb-statin#0"
        statin = pg.locator('#cmp-bm25-b .cmp-row[data-id="tb-statin#0"]')
        expect()(statin.locator(".rel")).to_have_text("✓")  # q1 of tinybeir's labels
        expect()(pg.locator("#cmp-bm25-a .cmp-head")).to_contain_text("nDCG@10 1.000")
        expect()(pg.locator("#share-link textarea")).to_have_value(re.compile(r"corpus=tinybeir"))
        tab(pg, "Data")
        expect()(pg.locator("#active-corpus")).to_contain_text("tinybeir")
        assert pg.outside == [] and pg.dialogs == []
        pg.close()  # done with: its renderer is not kept busy beside the next page

        bad = open_page(context, server.url + "?" + urlencode({"q": "water", "corpus": "/etc/passwd"}))
        expect()(bad.locator("#link-message")).to_contain_text("no corpus named '/etc/passwd'")
        expect()(bad.locator("#link-message")).to_contain_text("The shipped cards are shown instead.")
        expect()(bad.locator("#link-message")).not_to_contain_text("tinybeir")  # only what the link asked for
        expect()(bad.locator("#hybrid-path .turn")).to_contain_text("water")
        assert "root:" not in bad.content()
        tab(bad, "Data")
        expect()(bad.locator("#active-corpus")).to_contain_text("shipped")
    finally:
        context.close()


@pytest.mark.skipif(not SCIFACT.is_dir(), reason=f"BEIR SciFact is not at {SCIFACT}")
def test_real_scifact_opens_from_the_picker_indexes_with_progress_cancels_and_resumes(page, server):
    """The real SciFact (5,183 abstracts, 23,341 sub-chunks) from the picker: the bar counts real sub-chunks, Cancel
    keeps the session on its corpus, and opening it again resumes from what the store holds. (Indexing all of it
    takes ~11 min here: `python -m retrieval bench --corpus ../shared/eval/scifact` measures that.)"""
    bar = page.locator("#index-progress progress")
    pick(page, "scifact")
    expect()(page.locator("#index-progress")).to_contain_text("scifact: indexing", timeout=120_000)
    expect()(page.locator("#index-progress")).to_contain_text("/23,341 sub-chunks embedded")
    # cancelled at the first progress the page shows (it waited for 150 sub-chunks: ~10 more embedding steps of
    # the app's CPU; the app's log below tells a resume from a restart, whatever the count)
    expect()(bar).to_have_attribute("value", re.compile(r"^[1-9][0-9]*$"), timeout=300_000)
    seen = int(bar.get_attribute("value"))
    page.locator("#index-cancel").click()
    # "Cancelling scifact" shows until the worker stops; a worker that stops within one poll goes straight to the end
    expect()(page.locator("#data-message")).to_contain_text(re.compile(r"Cancelling scifact|scifact cancelled at \d"))
    expect()(page.locator("#index-progress")).to_contain_text("cancelled", timeout=120_000)
    stored = int(bar.get_attribute("value"))
    assert 0 < seen <= stored < 23_341
    expect()(page.locator("#active-corpus")).to_contain_text("shipped")  # never switched to a half-built corpus

    pick(page, "scifact")  # resumes: the bar starts at what the store already holds, not at 0
    expect()(page.locator("#index-progress")).to_contain_text("scifact: indexing", timeout=120_000)
    first = page.wait_for_function(
        "() => +document.querySelector('#index-progress progress').value || null", polling=100, timeout=300_000
    ).json_value()
    assert first >= stored, f"indexing restarted at {first} instead of resuming from the {stored} stored sub-chunks"
    # ... and the build kept the stored vectors: a restart shows 16, 32, ... as well, which a small stored count
    # would not tell from a resume
    resumed = rf"holds {stored} vectors but the corpus has 23341 sub-chunks \(a half-written build\); resuming"
    assert re.search(resumed, server.log_path.read_text(errors="replace")), server.log_tail()
    page.locator("#index-cancel").click()
    expect()(page.locator("#index-progress")).to_contain_text("cancelled", timeout=120_000)
    expect()(page.locator("#active-corpus")).to_contain_text("shipped")


def test_delete_a_corpus_and_its_store_then_screenshot(browser, server, page, files, tmp_path):
    if "team-kb" not in UPLOADED:  # another session uploads team-kb (run alone: no earlier test's session did)
        other, other_page = new_page(browser, server)
        try:
            upload(other_page, files["csv"])
            expect()(other_page.locator("#active-corpus")).to_contain_text("team-kb", timeout=300_000)
        finally:
            other.close()
    upload(page, files["csv"])  # uploaded by another session: the same content is reused and ready at once
    expect()(page.locator("#active-corpus")).to_contain_text("team-kb", timeout=300_000)
    page.locator("#corpus-delete").click()  # not this session's upload (issue 19, defect 2): refused
    expect()(page.locator("#data-message")).to_contain_text(
        "'team-kb' was uploaded or attached from another browser session"
    )
    expect()(page.locator("#active-corpus")).to_contain_text("team-kb")
    handout = files["csv"].with_name("handout.csv")
    handout.write_text("ID,Title,Text\nh-1,Handout,Bring the handout to the clinic visit.\n", encoding="utf-8")
    upload(page, handout)  # this session's own upload: it may delete it
    expect()(page.locator("#active-corpus")).to_contain_text("handout", timeout=300_000)
    page.locator("#corpus-delete").click()
    expect()(page.locator("#data-message")).to_contain_text("Deleted handout (1 Chroma collection removed)")
    expect()(page.locator("#active-corpus")).to_contain_text("shipped")
    upload(page, files["broken"])  # the screenshot shows a refused upload's message and the picker
    expect()(page.locator("#data-message")).to_contain_text("own cards.jsonl:2")
    out = tmp_path / "data-tab.png"
    page.screenshot(path=str(out), full_page=True)
    assert out.stat().st_size > 10_000
