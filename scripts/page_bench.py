"""How soon a person sees a turn, in a real browser: time from Run to the fused list on screen, and to the reranked
list (issue 18: a streamed turn). Starts the app (``python app.py``) on a free port with a fresh store, drives
headless Chromium through the shipped labeled turns (each turn once, so every cross-encoder pair is new), and
prints one JSON object: per-turn times and their p50 / p95, and the ratio of the two p50s; and how long the page's
renderer main thread was busy (Chrome's own ``Performance.getMetrics``: TaskDuration, ScriptDuration) to load the
page, and for each turn from its Run to the next (its columns, the charts below them and the follow-up events).

    python scripts/page_bench.py [--turns 30] [--pause 2] [--json-out docs/page-bench.json]

Times are measured inside the page (``performance.now()``) from the click on Run to the first frame where the
column shows the new turn's rows: the fused list with the badge saying the reranker is still scoring (or the whole
turn, when it came in one step), then the final level with the reranked cards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.app_server import CHROMIUM, CHROMIUM_ARGS, SHIPPED, AppServer  # noqa: E402  (the tests' launcher)

# Installed before each Run: records when the new turn's fused rows and its reranked rows first appear.
WATCH_JS = """(text) => {
  window.__seen = {};
  const turnShown = () => { const t = document.querySelector('#hybrid-path .turn');
                            return t && t.textContent.includes(text); };
  const check = () => {
    const now = performance.now();
    if (!turnShown()) { return; }
    if (!('fused' in window.__seen) && document.querySelector('#list-rrf .hit')) { window.__seen.fused = now; }
    const pending = document.querySelector('#hybrid-path .level-pending');
    if (!('reranked' in window.__seen) && !pending &&
        document.querySelector('#list-reranked .col:not(.pending) .hit, #list-reranked .refusal')) {
      window.__seen.reranked = now; window.__seen.streamed = !!window.__wasPending; }
    if (pending) { window.__wasPending = true; }
  };
  window.__wasPending = false;
  if (window.__obs) { window.__obs.disconnect(); }
  window.__obs = new MutationObserver(check);
  window.__obs.observe(document.body, {subtree: true, childList: true, characterData: true});
  window.__t0 = performance.now();
  document.querySelector('#run').click();
}"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30, help="labeled turns to run (each once), after one warm-up")
    parser.add_argument("--json-out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--pause",
        type=float,
        default=2.0,
        help="seconds between a turn's reranked list and the next Run (a person reads, then types; "
        "meanwhile the page draws the charts and the app scores ahead); 0 = at once",
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    turns = [
        json.loads(line)["text"]
        for line in (ROOT / "corpus" / "queries.jsonl").read_text().splitlines()
        if line.strip()
    ][: args.turns + 1]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, AppServer(Path(tmp), SHIPPED).running() as app, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.set_default_timeout(120_000)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")

        def busy() -> tuple[float, float]:  # the renderer main thread's busy and script seconds so far
            m = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
            return m["TaskDuration"], m["ScriptDuration"]

        before_load = busy()
        page.goto(app.url)
        page.locator("#query textarea").wait_for()
        page.wait_for_timeout(args.pause * 1000)
        load_busy = [round(1000 * (b - a)) for a, b in zip(before_load, busy())]
        marks = []
        for i, text in enumerate(turns):
            page.wait_for_timeout(args.pause * 1000)
            marks.append(busy())
            page.locator("#query textarea").fill(text)
            page.evaluate(WATCH_JS, text)
            try:
                page.wait_for_function("() => 'reranked' in (window.__seen || {})", timeout=120_000)
            except Exception as exc:
                shown = page.locator("#hybrid-path").inner_text()[:300]
                raise SystemExit(
                    f"turn {i} ({text!r}) never showed its reranked list; the badge says: {shown}"
                ) from exc
            seen = page.evaluate("() => ({...window.__seen, t0: window.__t0})")
            if i == 0:
                continue  # the warm-up: the first turn after start-up loads the page's scripts and charts
            rows.append(
                {
                    "turn": text,
                    "fused_ms": round(seen["fused"] - seen["t0"], 1),
                    "reranked_ms": round(seen["reranked"] - seen["t0"], 1),
                    "streamed": seen["streamed"],
                }
            )
        page.wait_for_timeout(args.pause * 1000)
        marks.append(busy())
        browser.close()
    for row, (start, end) in zip(rows, list(zip(marks, marks[1:]))[1:]):  # turn i: its Run to the next Run
        row["renderer_busy_ms"], row["renderer_script_ms"] = (round(1000 * (b - a)) for a, b in zip(start, end))
    fused = [r["fused_ms"] for r in rows]
    reranked = [r["reranked_ms"] for r in rows]
    out = {
        "what": "time from Run to the fused list and to the reranked list on screen, and the renderer main "
        "thread's busy time per page load and per turn, headless Chromium 1280x720",
        "command": "python scripts/page_bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "cpu": platform.processor() or platform.machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "turns": len(rows),
        "pause_s": args.pause,
        "fused_ms": {"p50": statistics.median(fused), "p95": percentile(fused, 0.95)},
        "reranked_ms": {"p50": statistics.median(reranked), "p95": percentile(reranked, 0.95)},
        "fused_over_reranked_p50": round(statistics.median(fused) / statistics.median(reranked), 3),
        "streamed_turns": sum(r["streamed"] for r in rows),
        "renderer_busy_ms": {
            "page_load": load_busy[0],
            "page_load_script": load_busy[1],
            "turn_p50": statistics.median(r["renderer_busy_ms"] for r in rows),
            "turn_p95": percentile([r["renderer_busy_ms"] for r in rows], 0.95),
            "turn_script_p50": statistics.median(r["renderer_script_ms"] for r in rows),
        },
        "rows": rows,
    }
    text = json.dumps(out, indent=1, ensure_ascii=False)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
