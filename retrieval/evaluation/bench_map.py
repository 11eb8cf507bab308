"""What the map below the columns costs (``python -m retrieval bench-map``): at each corpus size, the PCA fit, keeping
the map in the Chroma store and loading it back (what a restart or another process does instead of fitting), and
what the map adds to a turn's second event (``inspector.map_view.for_turn`` plus the figure's JSON, as Gradio
sends it), over the labeled turns, with the size of that JSON.

The shipped cards are measured as they are; a larger size is the shipped cards replicated to that many sub-chunks
(``bench.replicate_chunks`` with ``bench.ReplicaEmbedder``: each replica a distinct vector near its original's,
one Chroma row per sub-chunk), in a temporary store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from retrieval.settings import Settings


def _ms(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn()
    return value, (time.perf_counter() - started) * 1000


def _cpu_ms(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``, its wall time and this thread's CPU time in ms (the CPU time hardly moves with the machine's load,
    the wall time does: both are reported)."""
    started, cpu = time.perf_counter(), time.thread_time()
    value = fn()
    return value, (time.perf_counter() - started) * 1000, (time.thread_time() - cpu) * 1000


def measure(retriever: Any, settings: Settings, turns: Sequence[str], runs: int = 3) -> dict[str, Any]:
    """The map's costs on one retriever (its dense store must be open)."""
    from inspector import map_view
    from retrieval import projection
    from retrieval.evaluation.machine import summary

    store = retriever.dense
    if store is None:
        raise ValueError(f"the dense store is unavailable ({retriever.dense_error}): the map needs its vectors")
    key = projection.key_for(store)
    made, fit_ms = _ms(lambda: projection.fit_projection(store.embeddings, key, store.embedder.name))
    _, save_ms = _ms(lambda: projection.save(store.client, made))
    loaded, load_ms = _ms(lambda: projection.load(store.client, key, len(store.embeddings)))
    if loaded is None:
        raise RuntimeError("the map just saved could not be loaded back")
    projection.request(store).wait()  # the page's job: loads the map just kept
    warm = retriever.retrieve(turns[0], settings, prescore=False)
    map_view.for_turn(retriever, warm).to_json()  # (imports and first-call work out of the samples)
    per_turn, per_turn_cpu, sizes = [], [], []
    for _ in range(runs):
        for turn in turns:
            result = retriever.retrieve(turn, settings, prescore=False)  # no background scoring while timing

            def draw(r: Any = result) -> str:
                return map_view.for_turn(retriever, r).to_json()

            text, wall, cpu = _cpu_ms(draw)
            per_turn.append(wall)
            per_turn_cpu.append(cpu)
            sizes.append(len(text))
    last_json = text
    return {
        "sub_chunks": len(store.embeddings),
        "dim": int(store.embeddings.shape[1]),
        "explained": [round(v, 4) for v in made.explained],
        "fit_ms": round(fit_ms, 1),
        "save_ms": round(save_ms, 1),
        "load_ms": round(load_ms, 1),
        "turns": len(per_turn),
        "map_ms_per_turn": summary(per_turn, 2),
        "map_cpu_ms_per_turn": summary(per_turn_cpu, 2),
        "json_kb": round(sum(sizes) / len(sizes) / 1024, 1),
        "figure_json": last_json,
    }


def browser_draw(figure_json: str, chromium: str = "/usr/lib/chromium/chromium", repeat: int = 3) -> dict[str, Any]:
    """How long headless Chromium (software WebGL: SwiftShader, no GPU here) takes to draw the figure with the
    plotly.js that ships with plotly (``Plotly.newPlot`` to its promise), in ms: the median of ``repeat`` draws."""
    import pathlib
    import statistics

    import plotly
    from playwright.sync_api import sync_playwright

    script = pathlib.Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    with tempfile.TemporaryDirectory(prefix="bench-map-page-") as folder:
        page_path = pathlib.Path(folder) / "map.html"
        page_path.write_text(
            f"<!doctype html><meta charset='utf-8'><div id='p' style='width:1300px;height:460px'></div>"
            f"<script src='{script.as_uri()}'></script><script>const fig = {figure_json};"
            "window.draw = () => { Plotly.purge('p'); const t0 = performance.now();"
            " return Plotly.newPlot('p', fig.data, fig.layout).then(() => performance.now() - t0); };</script>",
            encoding="utf-8",
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium,
                args=[
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--use-angle=swiftshader",
                    "--enable-unsafe-swiftshader",
                ],
            )
            page = browser.new_page(viewport={"width": 1400, "height": 600})
            page.goto(page_path.as_uri())
            draws = [page.evaluate("draw()") for _ in range(repeat)]
            browser.close()
    return {"draw_ms": round(statistics.median(draws), 1), "draws": [round(d, 1) for d in draws]}


def run(
    settings: Settings,
    sizes: Sequence[int],
    turns: Sequence[str],
    runs: int,
    log: Callable[[str], None],
    browser: bool = False,
) -> dict[str, Any]:
    """One row per size: the shipped cards at their own size, replicas above it."""
    from retrieval.corpus import DEFAULT_CHUNK_WORDS, load_cards, split_cards
    from retrieval.encoders import load_embedder
    from retrieval.evaluation.machine import hardware
    from retrieval.evaluation.replicas import ReplicaEmbedder, replicate_chunks, retriever_with_embedder
    from retrieval.pipeline import HybridRetriever

    chunks = split_cards(load_cards(settings.corpus_path), DEFAULT_CHUNK_WORDS)
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-map-") as store:
            s = settings.replace(chroma_path=store)
            started = time.perf_counter()
            if size <= len(chunks):
                log(f"{len(chunks):,} sub-chunks: indexing the shipped cards")
                retriever = HybridRetriever(s, chunks=chunks, progress=lambda done, total: None)
            else:
                log(f"{size:,} sub-chunks: indexing the replicated cards (one Chroma row each)")
                embedder = ReplicaEmbedder(load_embedder(s.embedding_model))
                retriever = retriever_with_embedder(s, replicate_chunks(chunks, size, mark_titles=True), embedder)
            log(f"indexed in {time.perf_counter() - started:.0f} s; measuring the map over {len(turns)} turns x {runs}")
            row = measure(retriever, s, turns, runs)
            figure = row.pop("figure_json")
            if browser:
                log(f"drawing the last turn's map in headless Chromium ({len(figure) / 2**20:.1f} MB of JSON)")
                row["browser"] = browser_draw(figure)
            rows.append(row)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "hardware": hardware(),
        "load": load,
        "rows": rows,
    }


def format_report(report: dict[str, Any], command: str) -> str:
    hw = report["hardware"]
    lines = [
        f"`{command}` ({report['when']}; {hw.get('cpu_model', '?')}, {hw.get('nproc', '?')} cores, "
        f"load average at the end {report.get('load', '?')})",
        "",
        "| sub-chunks | PCA fit (ms) | keep in Chroma (ms) | load from Chroma (ms) | map per turn, wall median / p95 "
        "(ms) | map per turn, CPU median / p95 (ms) | figure JSON (KB) | drawn in Chromium (ms) | variance kept |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        t, c = r["map_ms_per_turn"], r["map_cpu_ms_per_turn"]
        drawn = r["browser"]["draw_ms"] if "browser" in r else "–"
        lines.append(
            f"| {r['sub_chunks']:,} | {r['fit_ms']:,} | {r['save_ms']:,} | {r['load_ms']:,} | "
            f"{t['p50']} / {t['p95']} | {c['p50']} / {c['p95']} | {r['json_kb']:,} | "
            f"{drawn} | {r['explained'][0]:.1%} + {r['explained'][1]:.1%} |"
        )
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    from retrieval.cli import add_common

    p = sub.add_parser("bench-map", help="what the map below the columns costs, per corpus size", description=__doc__)
    p.add_argument("--sizes", default="232,50000", metavar="N[,N...]", help="sub-chunk counts (default 232,50000)")
    p.add_argument("--runs", type=int, default=3, help="passes over the turns at each size (default 3)")
    p.add_argument("--limit", type=int, default=10, help="the first N labeled turns (default 10)")
    p.add_argument(
        "--browser",
        action="store_true",
        help="also time headless Chromium drawing the last turn's map (needs playwright)",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_common(p)
    p.set_defaults(func=run_bench_map)


def run_bench_map(args: argparse.Namespace) -> int:
    import logging

    from retrieval.cli import settings_from_args
    from retrieval.evaluation.bench import parse_scale
    from retrieval.evaluation.turn_timing import load_turns

    settings = settings_from_args(args)
    sizes = parse_scale(args.sizes)
    if args.runs < 1 or args.limit < 1:
        raise ValueError("--runs and --limit must be at least 1.")
    turns = load_turns(settings, None)[0][: args.limit]
    logging.getLogger("retrieval").setLevel(logging.ERROR)
    report = run(
        settings,
        sizes,
        turns,
        args.runs,
        log=lambda msg: print(f"bench-map: {msg}", file=sys.stderr, flush=True),
        browser=args.browser,
    )
    command = "python -m retrieval bench-map " + " ".join(sys.argv[2:])
    print(json.dumps(report, ensure_ascii=False) if args.json else format_report(report, command.strip()))
    return 0
