"""The measuring tools' commands: ``python -m retrieval eval|bench|lab`` (the core's own, ``query``, live in
``retrieval.cli``). ``retrieval/__main__.py`` puts both together."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.evaluation import bench, bench_map, lab, tune
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.prepare import (
    build_retriever,
    load_dataset,
    parse_set,
    recipe_overrides,
    use_stored_calibration,
)
from retrieval.evaluation.report_text import format_report
from retrieval.evaluation.run_files import save_runs
from retrieval.evaluation.significance import DEFAULT_RESAMPLES
from retrieval.evaluation.sweeps import DEFAULT_SWEEPS, format_sweep, parse_sweep, sweep, sweep_figure
from retrieval.evaluation.turn_runs import CONFIGS, DEFAULT_DEPTH, check_configs, run_turns

if TYPE_CHECKING:
    from retrieval.corpus import Dataset
    from retrieval.pipeline import HybridRetriever
    from retrieval.settings import Settings


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``eval``, ``bench`` and ``lab`` to the ``python -m retrieval`` parser."""
    register_eval(sub)
    bench.register(sub)
    bench_map.register(sub)
    lab.register(sub)
    tune.register(sub)


def register_eval(sub: argparse._SubParsersAction) -> None:
    from retrieval.cli import add_common

    p = sub.add_parser(
        "eval",
        help="metrics per configuration (bm25, dense, rrf, full) over labeled turns",
        description="Score bm25, dense, rrf and full at parent level on the shipped labeled set "
        "or a BEIR folder; optional sweeps and a significance test.",
    )
    p.add_argument("--beir", metavar="PATH", help="a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")
    p.add_argument(
        "--corpus",
        metavar="NAME|PATH",
        help="a registered corpus with labeled turns (by name, see "
        "`python -m retrieval index`), sub-chunked as in the page",
    )
    p.add_argument("--split", default="test", help="BEIR qrels split (default: test)")
    p.add_argument(
        "--queries",
        metavar="PATH",
        help="labeled turns for the cards at CORPUS_PATH (default: queries.jsonl beside them)",
    )
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of bm25,dense,rrf,full")
    p.add_argument(
        "--depth",
        type=int,
        default=DEFAULT_DEPTH,
        help=f"sub-chunks per branch for the scored lists (default {DEFAULT_DEPTH})",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any setting, e.g. --set rrf_k=20 --set RERANKER_MAX_INPUT=10 (repeatable)",
    )
    p.add_argument(
        "--adr-recipe",
        action="store_true",
        help="evaluate the untuned recipe exactly as ADR-0022 writes it (retrieval.settings.ADR_RECIPE) "
        "instead of the current defaults; --set and the flags above still win",
    )
    p.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="PARAM[=V1,V2,...]",
        help="sweep rrf_k, depth, reranker_max_input or any setting; default values: "
        + "; ".join(f"{k}={','.join(map(str, v))}" for k, v in DEFAULT_SWEEPS.items()),
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the significance test (default 0)")
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="randomization / bootstrap resamples")
    p.add_argument("--limit", type=int, help="only the first N labeled turns (a quick look)")
    p.add_argument(
        "--no-refusals", action="store_true", help="skip the configured-settings calls (no latency, no refusal rates)"
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--save-runs", metavar="DIR", help="write TREC run files, qrels and report.json to DIR")
    p.add_argument("--chart-dir", metavar="DIR", help="write each sweep as a plotly HTML chart to DIR")
    p.add_argument(
        "--ablation",
        action="store_true",
        help="the quality levers added one at a time, from the ADR "
        "recipe to the defaults (retrieval/evaluation/ablation.py)",
    )
    p.add_argument("--no-rerank", action="store_true", help="with --ablation: skip the cross-encoder rows")
    p.add_argument(
        "--compare",
        metavar="KEY=VALUE[,...]",
        help="A vs B: A = the settings above, B = A with these overrides (e.g. --compare rrf_k=60,"
        "dense_weight=1); metrics of both, the paired randomization test and the turns B fixed "
        "and broke (retrieval/evaluation/compare.py)",
    )
    add_common(p)
    p.set_defaults(func=run_eval)


def _stderr_progress(done: int, total: int, label: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{label}: {done}/{total} turns", end="\n" if done == total else "", file=sys.stderr, flush=True)
    elif done == total or done % 25 == 0:
        print(f"{label}: {done}/{total} turns", file=sys.stderr, flush=True)


def run_eval(args: argparse.Namespace) -> int:
    from retrieval.cli import settings_from_args
    from retrieval.dense_build import stderr_progress

    started = time.perf_counter()
    settings = settings_from_args(args, **{**recipe_overrides(args), **parse_set(args.set)})
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    check_configs(configs)
    sweeps = [parse_sweep(s) for s in args.sweep]
    for name, values in sweeps:  # a bad value is refused now, not after the whole evaluation has run
        for value in values if name != "depth" else ():
            settings.replace(**{name: value})
    dataset = load_dataset(args, settings)
    retriever, settings = build_retriever(dataset, settings, args.beir, stderr_progress)
    if getattr(args, "corpus", None) and args.corpus != "shipped":  # refused as its turns are in the page
        use_stored_calibration(retriever, settings)
    if args.compare is not None:
        return _run_compare(args, dataset, retriever, settings, started)
    if args.ablation:
        from retrieval.evaluation.ablation import format_ablation, run_ablation

        report = run_ablation(
            dataset,
            retriever,
            settings,
            depth=args.depth,
            seed=args.seed,
            resamples=args.resamples,
            rerank=not args.no_rerank,
            progress=_stderr_progress,
        )
        report["wall_seconds"] = round(time.perf_counter() - started, 1)
        print(json.dumps(report, ensure_ascii=False) if args.json else format_ablation(report))
        return 0
    runs = run_turns(
        dataset,
        retriever,
        settings,
        configs=configs,
        depth=args.depth,
        refusals=not args.no_refusals,
        progress=_stderr_progress,
    )
    report = evaluate(
        dataset,
        retriever,
        settings,
        configs,
        depth=args.depth,
        seed=args.seed,
        resamples=args.resamples,
        refusals=not args.no_refusals,
        runs=runs,
        store_text=not args.beir,
    )  # a BEIR set's text stays where it is (license): ids only
    if sweeps:
        report["sweeps"] = [
            sweep(dataset, retriever, settings, name, values, configs, depth=args.depth, progress=_stderr_progress)
            for name, values in sweeps
        ]
    report["command"] = (
        ("python -m retrieval " + " ".join(sys.argv[1:])) if sys.argv[1:2] == ["eval"] else "(in-process)"
    )
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    report["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    if args.chart_dir:
        folder = Path(args.chart_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for s in report.get("sweeps", []):
            path = folder / f"sweep-{report['dataset']}-{s['param']}.html"
            sweep_figure(s).write_html(path, include_plotlyjs=True)  # offline: the JS is embedded
            print(f"chart: {path}", file=sys.stderr)
    if args.save_runs:
        for path in save_runs(args.save_runs, runs, report, configs):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print("\n\n".join([format_report(report), *(format_sweep(s) for s in report.get("sweeps", []))]))
    return 0


def _run_compare(
    args: argparse.Namespace, dataset: Dataset, retriever: HybridRetriever, settings: Settings, started: float
) -> int:
    from retrieval.evaluation.compare import compare_configs, format_compare

    pairs = [p.strip() for p in args.compare.split(",") if p.strip()]
    if not pairs:
        raise ValueError("--compare needs at least one KEY=VALUE override for B, e.g. --compare rrf_k=60.")
    b = settings.replace(**parse_set(pairs))
    retriever_b = retriever
    if b.embedding_model != settings.embedding_model:  # B is scored on an index of its own model
        from retrieval.dense_build import stderr_progress

        retriever_b, b = build_retriever(dataset, b, None, stderr_progress)  # b already has the BEIR store path
    report = compare_configs(
        dataset,
        retriever,
        settings,
        b,
        depth=args.depth,
        seed=args.seed,
        resamples=args.resamples,
        progress=_stderr_progress,
        retriever_b=retriever_b,
    )
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, ensure_ascii=False) if args.json else format_compare(report))
    return 0
