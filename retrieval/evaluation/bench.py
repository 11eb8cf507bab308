"""``python -m retrieval bench``: how fast the pipeline is and where its time goes.

On the corpus at ``CORPUS_PATH`` with its labeled turns (``queries.jsonl`` beside it), every turn is run
``--runs`` times with the per-turn caches cleared first, so each sample is a fresh (uncached) turn. It reports:

- per-stage p50/p95 (BM25, query embedding, Chroma query, fusion, rerank, dedup + threshold) and the full turn;
- a cached control change: the same turn again with another ``rrf_k``, and how many model calls that made;
- the reference floor: the turn's first 20 fused candidates (the head reranked before issue 20) through a bare
  ``onnxruntime`` session of the shipped graph with two intra-op threads, one pair per call, pre-tokenized; the
  full turn and the pipeline's rerank are reported over it. That session's worker thread spins about 30 ms after its
  last pair, so the next turn starts once the process is idle again (``settle``; ``--no-settle`` starts it at once);
- process cold start to the first answer with a fresh build and with the persisted store (each in a child
  process), indexing throughput (chunks/s) and the peak resident memory;
- with ``--scale 50000,1000000``: the same turns on the corpus replicated to that many sub-chunks, with per-branch
  p50/p95, BM25 and Chroma build times, the peak RSS of each scale and Chroma's size on disk. Each distinct text is
  embedded once and its vector reused for its replicas (the output says so).

The store is a temporary embedded Chroma folder (deleted afterwards), never the configured ``CHROMA_PATH``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.evaluation.cold_start import _compile_project, cold_start
from retrieval.evaluation.machine import disk_usage_mb, hardware, peak_rss_mb, percentile, reset_peak_rss
from retrieval.evaluation.replicas import ReplicaEmbedder, replicate_chunks, retriever_with_embedder
from retrieval.evaluation.turn_timing import REFERENCE_PAIRS, STAGES, RerankFloor, load_turns, measure_turns
from retrieval.settings import Settings
from retrieval.types import Chunk

if TYPE_CHECKING:
    pass

STAGE_LABELS = {
    "bm25": "BM25 search",
    "embed_query": "query embedding (bge-small, ONNX int8)",
    "chroma_query": "Chroma query (HNSW)",
    "fusion": "RRF fusion",
    "rerank": "cross-encoder rerank",
    "dedup_threshold": "parent dedup + top_k + threshold",
}
# The settings a report names beside its numbers (the ones that change a turn's cost or its lists).
REPORTED_SETTINGS = (
    "embedding_model",
    "reranker_model",
    "rrf_k",
    "top_k",
    "candidate_multiplier",
    "reranker_max_input",
    "bm25_tokenizer",
    "fusion",
    "min_similarity",
)
REPLICA_NOTE = (
    "corpus replicated with suffixed card ids and titles (<id>~r<n>); each distinct text embedded once, "
    "each replica's vector that one nudged by a fixed offset of its own (cosine ~0.995), so Chroma holds "
    "a row per sub-chunk"
)


# --------------------------------------------------------------------------------------------------- bench
def run_benchmark(
    settings: Settings,
    turns: Sequence[str],
    runs: int = 3,
    cold_runs: int = 1,
    scale: Sequence[int] = (),
    scale_runs: int = 1,
    workdir: Path | None = None,
    before: bool = False,
    settled: bool = True,
    turns_source: str = "",
    log: Callable[[str], None] = lambda msg: None,
) -> dict[str, Any]:
    """Measure the pipeline (see the module docstring) and return the report as a dict."""
    from retrieval.corpus import load_cards
    from retrieval.pipeline import HybridRetriever

    if runs < 1 or cold_runs < 1 or scale_runs < 1:
        raise ValueError("--runs, --cold-runs and --scale-runs must be at least 1.")
    if not turns:
        raise ValueError("no turns to run: give a queries file with --queries.")
    owned = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="retrieval-bench-")) if workdir is None else Path(workdir)
    store = workdir / "chroma"
    s = settings.replace(chroma_path=str(store), chroma_host=None)
    load_start = round(os.getloadavg()[0], 2)
    try:
        cards = load_cards(s.corpus_path)
        precompiled = _compile_project()
        log("cold start with a fresh build (child process)")
        fresh = cold_start(s, store, turns[0])
        persisted = []
        for i in range(cold_runs):
            log(f"cold start with the persisted store (child process) {i + 1}/{cold_runs}")
            persisted.append(cold_start(s, store, turns[0]))

        log("loading the retriever in this process")
        retriever = HybridRetriever(s, progress=lambda done, total: None)
        if retriever.dense is None:
            raise RuntimeError(f"the dense branch is unavailable: {retriever.dense_error}")
        control_k = 20 if s.rrf_k != 20 else 60
        retriever.retrieve(turns[0], s)  # warm-up (not measured): first calls into each model are slower
        log(f"measuring {len(turns)} turns x {runs} runs")
        floor_timer = RerankFloor(s)
        measured = measure_turns(
            retriever, s, turns, runs, control_k=control_k, floor=floor_timer, before=before, settled=settled
        )
        floor = floor_timer.report()
        turn_p50, floor_p50 = measured["turn_ms"]["p50"], floor["floor_ms"]["p50"]
        index_s = fresh.get("index_s") or 0.0
        report: dict[str, Any] = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "hardware": hardware(),
            "corpus": {
                "path": str(s.corpus_path),
                "cards": len(cards),
                "chunks": len(retriever.chunks),
                "turns": len(turns),
                "turns_source": turns_source,
            },
            "runs": runs,
            "samples": runs * len(turns),
            "settings": {k: getattr(s, k) for k in REPORTED_SETTINGS},
            "turn_ms": measured["turn_ms"],
            "stages_ms": measured["stages_ms"],
            "dense_ms": measured["dense_ms"],
            "levels": measured["levels"],
            "rerank_pairs": measured["rerank_pairs"],
            "cached_control_ms": {
                **measured["control_ms"],
                "rrf_k": [s.rrf_k, control_k],
                "model_calls": measured["control_calls"],
            },
            "full_turn_p50_ms": turn_p50,
            "reference_floor_p50_ms": floor_p50,
            "turn_over_floor": round(turn_p50 / floor_p50, 3) if turn_p50 and floor_p50 else None,
            "turn_over_floor_target": 0.5,
            "prescore_wait_ms": measured["prescore_wait_ms"],
            "settled": settled,
            "settle_ms": measured["settle_ms"],
            "before": measured["before"],
            "rerank_floor_ms": floor["floor_ms"],
            "rerank_tokenize_ms": floor["tokenize_ms"],
            "rerank_floor_note": floor["note"],
            "rerank_overhead_ratio": floor["ratio"]["p50"],
            "rerank_overhead": floor["ratio"],
            "cold_start_s": {
                "persisted": round(percentile([p["wall_s"] for p in persisted], 50), 3),
                "fresh": fresh["wall_s"],
            },
            "cold_start_detail": {"fresh": fresh, "persisted": persisted, "precompiled": precompiled},
            "indexing": {
                "chunks": fresh.get("chunks"),
                "seconds": index_s,
                "chunks_per_s": round(fresh["chunks"] / index_s, 1) if index_s else None,
                "bm25_build_ms": round(retriever.bm25_build_ms, 1),
            },
            "peak_rss_mb": peak_rss_mb(),
            "load_avg_1m": {"start": load_start, "end": round(os.getloadavg()[0], 2)},
        }
        if scale:
            report["scale"] = [
                run_scale(s, retriever.chunks, turns, target, scale_runs, workdir, log) for target in scale
            ]
            report["scale_note"] = REPLICA_NOTE
        return report
    finally:
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)


def run_scale(
    settings: Settings,
    base: Sequence[Chunk],
    turns: Sequence[str],
    target: int,
    runs: int,
    workdir: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The same turns on ``base`` replicated to ``target`` sub-chunks."""
    from retrieval.encoders import load_embedder

    own_peak = reset_peak_rss()
    chunks = replicate_chunks(base, target, mark_titles=True)
    embedder = ReplicaEmbedder(load_embedder(settings.embedding_model))
    log(f"scale {len(chunks):,} sub-chunks: building BM25 and the Chroma collection")
    s = settings.replace(chroma_path=str(workdir / f"chroma-{target}"))
    start = time.perf_counter()
    retriever = retriever_with_embedder(s, chunks, embedder)
    build_s = time.perf_counter() - start
    if retriever.dense is None:
        raise RuntimeError(f"the dense branch is unavailable at scale {target}: {retriever.dense_error}")
    retriever.retrieve(turns[0], s)  # warm-up
    log(f"scale {len(chunks):,}: measuring {len(turns)} turns x {runs} runs")
    measured = measure_turns(retriever, s, turns, runs)
    stages = measured["stages_ms"]
    out = {
        "target": target,
        "chunks": len(chunks),
        "distinct_texts_embedded": embedder.distinct,
        "build_s": round(build_s, 2),
        "bm25_build_ms": round(retriever.bm25_build_ms, 1),
        "index_s": round(retriever.dense.index_seconds, 2),
        "turn_ms": measured["turn_ms"],
        "stages_ms": stages,
        "dense_ms": measured["dense_ms"],
        "levels": measured["levels"],
        "peak_rss_mb": peak_rss_mb(),
        "peak_rss_scope": "this scale" if own_peak else "the process so far",
        "chroma_disk_mb": disk_usage_mb(workdir / f"chroma-{target}"),
    }
    del retriever
    shutil.rmtree(workdir / f"chroma-{target}", ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------------------- output
def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_table(report: dict[str, Any], command: str = "python -m retrieval bench") -> str:
    """The README's benchmark table (markdown): hardware, corpus size, runs and units in the caption."""
    hw, corpus = report["hardware"], report["corpus"]
    stages = report["stages_ms"]
    control = report["cached_control_ms"]
    calls = sum(control.get("model_calls", {}).values())
    load = report.get("load_avg_1m")
    load_text = f"; 1-min load average {load['start']:g} at start, {load['end']:g} at end" if load else ""
    lines = [
        f"Measured {report['date'][:10]} on {hw['cpu_model']}, {hw['nproc']} cores (onnxruntime {hw['onnxruntime']},"
        f" chromadb {hw['chromadb']}{load_text}); corpus {corpus['cards']:,} cards / {corpus['chunks']:,} sub-chunks; "
        f"{corpus['turns']} labeled turns x {report['runs']} runs = {report['samples']:,} uncached turns. "
        f"Command: `{command}`.",
        "",
        "| Measure | p50 | p95 |",
        "|---|---:|---:|",
        f"| Full turn, uncached (ms) | {_fmt(report['turn_ms']['p50'])} | {_fmt(report['turn_ms']['p95'])} |",
    ]
    if report.get("before"):
        old = report["before"]
        lines += [
            f"| &nbsp;&nbsp;before: full turn scored as before issue 20, one two-thread session (ms) | "
            f"{_fmt(old['turn_ms']['p50'])} | {_fmt(old['turn_ms']['p95'])} |",
            f"| &nbsp;&nbsp;before: its cross-encoder rerank (ms) | {_fmt(old['rerank_ms']['p50'])} | "
            f"{_fmt(old['rerank_ms']['p95'])} |",
        ]
    for name in STAGES:
        label = STAGE_LABELS[name]
        if name == "rerank":
            label += f", {_fmt(report['rerank_pairs']['p50'], 0)} pairs"
        lines.append(f"| &nbsp;&nbsp;{label} (ms) | {_fmt(stages[name]['p50'], 2)} | {_fmt(stages[name]['p95'], 2)} |")
    lines += [
        f"| Same turn again, rrf_k {control['rrf_k'][0]} -> {control['rrf_k'][1]} (ms; {calls} model calls) | "
        f"{_fmt(control['p50'], 2)} | {_fmt(control['p95'], 2)} |",
        f"| Reference floor: bare onnxruntime, first {REFERENCE_PAIRS} fused pairs (ms) | "
        f"{_fmt(report['rerank_floor_ms']['p50'])} | {_fmt(report['rerank_floor_ms']['p95'])} |",
        f"| Pipeline rerank / floor, per turn (ratio) | {_fmt(report['rerank_overhead']['p50'], 2)} | "
        f"{_fmt(report['rerank_overhead']['p95'], 2)} |",
        f"| **Full turn p50 / reference floor p50** (target <= {report['turn_over_floor_target']:g}) | "
        f"{_fmt(report['turn_over_floor'], 2)} | |",
        f"| Background pre-scoring still running once the turn was answered (ms) | "
        f"{_fmt(report['prescore_wait_ms']['p50'], 1)} | {_fmt(report['prescore_wait_ms']['p95'], 1)} |",
        f"| Cold start to first answer, persisted store (s) | {_fmt(report['cold_start_s']['persisted'], 2)} | |",
        f"| Cold start to first answer, fresh build (s) | {_fmt(report['cold_start_s']['fresh'], 2)} | |",
        f"| Indexing throughput (sub-chunks/s) | {_fmt(report['indexing']['chunks_per_s'])} | |",
        f"| Peak RSS of the bench process (MB) | {_fmt(report['peak_rss_mb'], 0)} | |",
    ]
    for row in report.get("scale", []):
        st = row["stages_ms"]
        lines.append(
            f"| {row['chunks']:,} sub-chunks: BM25 / dense / full turn (ms) | "
            f"{_fmt(st['bm25']['p50'])} / {_fmt(row['dense_ms']['p50'])} / {_fmt(row['turn_ms']['p50'])} | "
            f"{_fmt(st['bm25']['p95'])} / {_fmt(row['dense_ms']['p95'])} / {_fmt(row['turn_ms']['p95'])} |"
        )
    if report.get("scale"):
        lines += ["", f"Scale rows: {report['scale_note']}; dense = query embedding + Chroma query.", ""]
        lines += format_scale_table(report["scale"])
    return "\n".join(lines)


def format_scale_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per scale: per-branch p50 / p95, build times, peak RSS and Chroma's size on disk."""
    lines = [
        "| Sub-chunks | BM25 p50 / p95 (ms) | dense p50 / p95 (ms) | full turn p50 / p95 (ms) | BM25 build (s) "
        "| Chroma index (s) | peak RSS (MB) | Chroma on disk (MB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        bm25, dense, turn = row["stages_ms"]["bm25"], row["dense_ms"], row["turn_ms"]
        lines.append(
            f"| {row['chunks']:,} | {_fmt(bm25['p50'])} / {_fmt(bm25['p95'])} | {_fmt(dense['p50'])} / "
            f"{_fmt(dense['p95'])} | {_fmt(turn['p50'])} / {_fmt(turn['p95'])} | "
            f"{_fmt(row['bm25_build_ms'] / 1000, 2)} | {_fmt(row['index_s'], 1)} | {_fmt(row['peak_rss_mb'], 0)} | "
            f"{_fmt(row.get('chroma_disk_mb'), 1)} |"
        )
    return lines


def register(sub: argparse._SubParsersAction) -> None:
    from retrieval.cli import add_common

    p = sub.add_parser(
        "bench",
        help="latency per stage, cold start, indexing throughput, memory (and scale)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--runs", type=int, default=3, help="uncached passes over the labeled turns (default 3)")
    p.add_argument("--cold-runs", type=int, default=1, help="cold starts with the persisted store (default 1)")
    p.add_argument("--queries", metavar="PATH", help="turns JSONL (default: queries.jsonl beside CORPUS_PATH)")
    p.add_argument("--limit", type=int, help="only the first N turns (a quick look)")
    p.add_argument(
        "--scale",
        metavar="N[,N...]",
        help="also run on the corpus replicated to N sub-chunks, e.g. --scale 10000,50000",
    )
    p.add_argument("--scale-runs", type=int, default=1, help="passes over the turns at each scale (default 1)")
    p.add_argument(
        "--corpus",
        metavar="NAME|PATH",
        help="instead: indexing throughput (sub-chunks/s) and reopen "
        "time of this corpus (retrieval/evaluation/corpus_bench.py)",
    )
    p.add_argument("--index-chunks", type=int, metavar="N", help="with --corpus: only its first N sub-chunks")
    p.add_argument(
        "--before",
        action="store_true",
        help="also run each turn the way the pipeline scored before "
        "issue 20 (one two-thread session), alternating, for a "
        "before/after table from one run",
    )
    p.add_argument(
        "--no-settle",
        action="store_true",
        help="start each turn right after the floor, while the floor's "
        "two-thread session still spins (as the bench did until "
        "2026-12-01), to compare",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_common(p)
    p.set_defaults(func=run_bench)


def parse_scale(text: str | None) -> list[int]:
    """``"10000,50000"`` -> ``[10000, 50000]``."""
    if not text:
        return []
    out = []
    for part in text.split(","):
        try:
            value = int(part.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"--scale {text!r}: give comma-separated sub-chunk counts, e.g. 10000,50000.") from None
        if value < 1:
            raise ValueError(f"--scale {text!r}: counts must be positive.")
        out.append(value)
    return out


def run_bench(args: argparse.Namespace) -> int:
    import logging

    from retrieval.cli import settings_from_args

    settings = settings_from_args(args)
    if getattr(args, "corpus", None):
        from retrieval.cli import corpus_from_args
        from retrieval.evaluation import corpus_bench

        logging.getLogger("retrieval").setLevel(logging.ERROR)
        data = corpus_from_args(args, settings)
        assert data is not None  # --corpus was given
        report = corpus_bench.run(
            settings,
            data,
            args.index_chunks,
            hardware=hardware(),
            log=lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True),
        )
        print(
            json.dumps(report, ensure_ascii=False)
            if args.json
            else corpus_bench.format_report(report, "python -m retrieval bench " + " ".join(sys.argv[2:]))
        )
        return 0
    turns, source = load_turns(settings, args.queries)
    if args.limit is not None:
        if args.limit < 1:
            raise ValueError("--limit must be at least 1.")
        turns = turns[: args.limit]
    logging.getLogger("retrieval").setLevel(logging.ERROR)  # a degraded turn is data in the report, not noise
    report = run_benchmark(
        settings,
        turns,
        runs=args.runs,
        cold_runs=args.cold_runs,
        scale=parse_scale(args.scale),
        scale_runs=args.scale_runs,
        turns_source=source,
        before=args.before,
        settled=not args.no_settle,
        log=lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(
            format_table(
                report,
                "python -m retrieval bench " + " ".join(sys.argv[2:])
                if sys.argv[1:2] == ["bench"]
                else "python -m retrieval bench",
            )
        )
    return 0
