"""Take the documentation's pictures of the page (``make screenshots``): the real app on the shipped corpus, a real
headless Chromium, written into docs/. The tests never write there (they save what they look at under tmp_path).

    python scripts/screenshots.py               # every picture
    python scripts/screenshots.py --only presenter inspector
    python scripts/screenshots.py --out /tmp/pics

Pictures: inspector.png (the first screen at 1440x900 after Run), inspector-1024.png (1024x768: the answer's row
first), inspector-full.png (the whole page with the charts, 1400 px), presenter.png (presenter mode at 1280x720,
step 1 of the tour), presenter-levels.png (the tour's hybrid-off step, dense_only), compare.png (compare mode, the
ADR recipe as B), data-tab.png (the Data tab).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.app_server import CHROMIUM, CHROMIUM_ARGS, SHIPPED, AppServer  # noqa: E402  (the tests' launcher)

TIMEOUT_MS = 180_000
TURN = "GS-40 E-09"
MAP_DRAWN_JS = """() => { const d = document.querySelector('#turn-map .js-plotly-plot');
  return !!(d && d.data && d.data.some(t => t.name === 'turn' && t.x && t.x.length === 1)); }"""


def _page(browser, url: str, width: int, height: int):
    pg = browser.new_context(viewport={"width": width, "height": height}).new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(url)
    return pg


def _settled(pg, level: str = "full") -> None:
    from playwright.sync_api import expect

    expect(pg.locator("#hybrid-path .badge")).to_have_text(level, timeout=TIMEOUT_MS)
    pg.locator("#list-reranked .hit").first.wait_for()
    pg.wait_for_function(MAP_DRAWN_JS, timeout=TIMEOUT_MS)  # the map comes with the turn's second event
    pg.wait_for_timeout(800)  # fonts and the last layout


def first_screen(browser, url: str, out: Path, width: int, height: int) -> None:
    pg = _page(browser, f"{url}?q={TURN.replace(' ', '+')}", width, height)
    _settled(pg)
    pg.screenshot(path=str(out))
    pg.context.close()


def full_page(browser, url: str, out: Path) -> None:
    pg = _page(browser, url, 1400, 1000)
    pg.locator("#examples").get_by_text("Lexical: part number LC-42").click()
    _settled(pg)
    pg.locator("#chart-contributions .main-svg").first.wait_for()
    pg.wait_for_timeout(1500)  # plotly's transitions
    bottom = pg.locator("#chart-contributions").bounding_box()
    pg.screenshot(path=str(out), full_page=True, clip={"x": 0, "y": 0, "width": 1400, "height": bottom["y"] + 400})
    pg.context.close()


def presenter(browser, url: str, out: Path, steps: int = 1, level: str = "full") -> None:
    from playwright.sync_api import expect

    pg = _page(browser, url + "?present=1", 1280, 720)
    pg.locator("#tour-bar").wait_for()
    for n in range(1, steps + 1):
        pg.keyboard.press("ArrowRight")
        expect(pg.locator("#tour-caption")).to_contain_text(f"{n}/", timeout=TIMEOUT_MS)
    _settled(pg, level)
    pg.screenshot(path=str(out))
    pg.context.close()


def compare(browser, url: str, out: Path) -> None:
    pg = _page(browser, f"{url}?q=GS-40+E-09&compare=1&b=ADR+recipe", 1400, 1000)
    pg.locator("#cmp-final-b .cmp-row").first.wait_for(timeout=TIMEOUT_MS)
    pg.wait_for_timeout(800)
    top, bottom = pg.locator("#compare-share").bounding_box(), pg.locator("#compare-view").bounding_box()
    clip = {"x": 0, "y": top["y"] - 8, "width": 1400, "height": bottom["y"] + bottom["height"] - top["y"] + 16}
    pg.screenshot(path=str(out), full_page=True, clip=clip)
    pg.context.close()


def data_tab(browser, url: str, out: Path) -> None:
    """The Data tab after a refused upload: a JSONL file whose second line is no JSON, and the message naming it."""
    from playwright.sync_api import expect

    pg = _page(browser, url, 1400, 1000)
    pg.get_by_role("tab", name="Data").click()
    pg.locator("#active-corpus").wait_for()
    with tempfile.TemporaryDirectory() as tmp:
        broken = Path(tmp) / "own cards.jsonl"
        broken.write_text(
            '{"id": "own-1", "title": "Morning pills", "text": "Take the blue pill with breakfast."}\n'
            '{"id": "own-alarm", "title": "Evening alarm", "text": <script>alert(1)</script>\n',
            encoding="utf-8",
        )
        pg.locator("#corpus-upload input[type=file]").set_input_files(str(broken))
        pg.locator("#corpus-upload").get_by_text(broken.name).first.wait_for()
        expect(pg.locator("#corpus-upload")).not_to_contain_text("Uploading", timeout=TIMEOUT_MS)  # all sent
        pg.locator("#corpus-add").click()
        expect(pg.locator("#data-message")).to_contain_text("own cards.jsonl:2", timeout=TIMEOUT_MS)
    pg.wait_for_timeout(800)
    pg.screenshot(path=str(out), full_page=True)
    pg.context.close()


PICTURES: dict[str, Callable[..., None]] = {
    "inspector": lambda b, u, o: first_screen(b, u, o / "inspector.png", 1440, 900),
    "inspector-1024": lambda b, u, o: first_screen(b, u, o / "inspector-1024.png", 1024, 768),
    "inspector-full": lambda b, u, o: full_page(b, u, o / "inspector-full.png"),
    "presenter": lambda b, u, o: presenter(b, u, o / "presenter.png"),
    "presenter-levels": lambda b, u, o: presenter(b, u, o / "presenter-levels.png", 2, "dense_only"),
    "compare": lambda b, u, o: compare(b, u, o / "compare.png"),
    "data-tab": lambda b, u, o: data_tab(b, u, o / "data-tab.png"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(PICTURES), help="take only these pictures")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="folder to write into (default: docs/)")
    args = parser.parse_args(argv)
    if not SHIPPED.exists():
        parser.error(f"the pictures show the shipped corpus: {SHIPPED} is missing")
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        parser.error(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(PICTURES)
    with tempfile.TemporaryDirectory() as tmp, AppServer(Path(tmp), SHIPPED).running() as app, sync_playwright() as p:
        executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        for name in names:
            PICTURES[name](browser, app.url, args.out)
            print(f"wrote {args.out / (name + '.png')}")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
