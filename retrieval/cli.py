"""The core's command line: ``python -m retrieval query``, and the flags every pipeline command shares.

``retrieval/__main__.py`` adds the measuring tools' commands (``eval``, ``bench``, ``lab`` from
``retrieval.evaluation.cli``); each command module exposes ``register(subparsers)`` and stays light at import time
(models load when a command runs).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.calibration_jobs import CalibrationJob
    from retrieval.corpus_entries import CorpusData
    from retrieval.types import RetrievalResult

Registrar = Callable[[argparse._SubParsersAction], None]


def settings_from_args(args: argparse.Namespace, **extra: Any) -> Settings:
    """Settings from the environment, overridden by the common command-line flags that were given."""
    overrides = dict(extra)
    for flag, attr in (
        ("rrf_k", "rrf_k"),
        ("top_k", "top_k"),
        ("bm25_weight", "bm25_weight"),
        ("dense_weight", "dense_weight"),
        ("embedding_model", "embedding_model"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[attr] = value
    if getattr(args, "no_hybrid", False):
        overrides["hybrid_enabled"] = False
    if getattr(args, "simulate_reranker_failure", False):
        overrides["simulate_reranker_failure"] = True
    if getattr(args, "simulate_empty_bm25", False):
        overrides["simulate_empty_bm25"] = True
    return Settings.from_env(**overrides)


def add_common(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every command that runs the pipeline."""
    parser.add_argument("--rrf-k", type=int, help=f"RRF constant (default: RRF_K or {Settings.rrf_k})")
    parser.add_argument("--top-k", type=int, help=f"cards returned (default: TOP_K or {Settings.top_k})")
    parser.add_argument("--bm25-weight", type=float, help="weight of the BM25 ranking in fusion")
    parser.add_argument("--dense-weight", type=float, help="weight of the dense ranking in fusion")
    parser.add_argument(
        "--embedding-model",
        help="bge-small-en-v1.5 (default), all-MiniLM-L6-v2, or a sentence-transformers model on disk",
    )
    parser.add_argument("--no-hybrid", action="store_true", help="legacy dense-only path")
    parser.add_argument("--simulate-reranker-failure", action="store_true", help="pretend the reranker failed to load")
    parser.add_argument("--simulate-empty-bm25", action="store_true", help="pretend the BM25 index is empty")


def add_corpus(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        metavar="NAME|PATH",
        help="a corpus by name (`python -m retrieval index` lists "
        "them) or a file/folder path; default: the shipped cards",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="run one turn through the pipeline")
    p.add_argument("text", help="the user turn")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    add_corpus(p)
    add_common(p)
    p.set_defaults(func=run_query)
    p = sub.add_parser(
        "why",
        help="why is (or is not) this card among the final cards of this turn?",
        description="One card through every stage of one turn at the current settings: whole-corpus "
        "BM25 and dense ranks, fusion, the cross-encoder, dedup, top_k, the threshold and "
        "the refusal rule; the first stage that lost it and the smallest single change "
        "of one control that brings it in (retrieval/why.py).",
    )
    p.add_argument("text", help="the user turn")
    p.add_argument("card", metavar="CARD_ID", help="the card's id, or words of its title")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.add_argument("--no-search", action="store_true", help="skip the search for the smallest single change")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="stop that search after SECONDS (default: none)")
    add_corpus(p)
    add_common(p)
    p.set_defaults(func=run_why)
    p = sub.add_parser(
        "index",
        help="validate and index a corpus (cards JSONL, BEIR folder/zip, CSV/TSV, zip of "
        ".txt/.md); without PATH, list the corpora",
        description="Validate a corpus, keep its cards in the Chroma store (CHROMA_PATH or CHROMA_HOST, "
        "where every app process on that store lists it) and embed it into its own Chroma "
        "collection (resumes a cancelled or interrupted build).",
    )
    p.add_argument("path", nargs="?", help="the file or folder to index (omit to list the corpora)")
    p.add_argument("--name", help="the corpus name (default: the file name)")
    p.add_argument(
        "--attach",
        metavar="COLLECTION",
        help="open a Chroma collection made elsewhere (documents + "
        "embeddings, in CHROMA_PATH or on CHROMA_HOST) as a corpus: its vectors are checked against "
        "--embedding-model (dimension, and a sample re-embedded), BM25 is built from its documents, and "
        "it is never written",
    )
    p.add_argument(
        "--text-field",
        default="",
        help="with --attach: the metadata field holding each row's text (default: the documents)",
    )
    p.add_argument(
        "--title-field",
        default="",
        help="with --attach: a metadata field holding a title that was "
        "embedded before the text (title + newline + text)",
    )
    p.add_argument(
        "--delete",
        metavar="NAME",
        help="delete this corpus and its dense collections (any corpus of "
        "the store: uploaded from a page, indexed or attached; an attached collection itself is kept)",
    )
    add_common(p)
    p.set_defaults(func=run_index)
    p = sub.add_parser(
        "calibrate",
        help="choose a corpus's refusal thresholds from its own evidence and store them",
        description="Run the corpus's answerable turns (its labeled ones, else synthetic ones from its "
        "cards) and the shipped out-of-domain pool through the pipeline, choose the refusal "
        "rule's thresholds on the fitting halves, report the held-out halves, and keep the "
        "calibration in the store (retrieval/calibration.py). The shipped cards keep the "
        "defaults tuned on their dev sets: for them this only reports.",
    )
    add_corpus(p)
    add_common(p)
    p.add_argument("--json", action="store_true", help="print the calibration as JSON")
    p.set_defaults(func=run_calibrate)


def corpus_from_args(args: argparse.Namespace, settings: Settings) -> CorpusData | None:
    """The ``--corpus`` given (loaded and validated), or None for the shipped cards at CORPUS_PATH."""
    if not getattr(args, "corpus", None):
        return None
    from retrieval.corpora import Registry

    return Registry(settings).open(args.corpus, paths=True)


def run_index(args: argparse.Namespace) -> int:
    from retrieval.corpora import Registry
    from retrieval.index_jobs import start_index

    settings = settings_from_args(args)
    registry = Registry(settings)
    if args.delete:
        print(registry.delete(args.delete))
        return 0
    if not args.path and not args.attach:
        for entry in registry.entries():
            print(entry.label() + f"  <- {entry.source or entry.collection}")
        return 0
    if args.attach:
        from retrieval.corpora import attach

        data, new = attach(
            settings, args.attach, name=args.name, text_field=args.text_field, title_field=args.title_field
        )
    else:
        data, new = registry.add(os.path.abspath(args.path), args.name)
    print(f"{'registered' if new else 'already registered'}: {data.entry.label()}", file=sys.stderr)
    for note in data.notes:
        print(f"note: {note}", file=sys.stderr)
    job = start_index(data, settings)
    while job.running:
        snap = job.wait(1.0)
        eta = f", {snap['eta_s']:.0f} s left" if snap["eta_s"] is not None else ""
        print(
            f"\rembedding {snap['done']:,}/{snap['total']:,} sub-chunks ({snap['rate']:.1f}/s{eta})   ",
            end="",
            file=sys.stderr,
            flush=True,
        )
    snap = job.snapshot()
    print(file=sys.stderr)
    if snap["status"] != "done":
        print(f"error: indexing {data.entry.name} {snap['status']}: {snap['error']}", file=sys.stderr)
        return 1
    _wait_calibration(data, settings)
    _wait_map(data, settings)
    print(
        json.dumps(
            {
                "name": data.entry.name,
                "format": data.entry.format,
                "cards": data.entry.cards,
                "sub_chunks": data.entry.chunks,
                "labeled_turns": data.entry.turns,
                "fingerprint": data.entry.fingerprint,
                "index_s": round(snap["elapsed_s"], 1),
                "sub_chunks_per_s": round(snap["rate"], 1),
                "store": settings.chroma_host or settings.chroma_path,
            },
            ensure_ascii=False,
        )
    )
    return 0


def _wait_calibration(data: CorpusData, settings: Settings, job: CalibrationJob | None = None) -> None:
    """Wait for the corpus's refusal calibration (started when it was indexed), printing its progress."""
    from retrieval.corpus_retrievers import calibration_state

    job = job or calibration_state(data, settings)[1]
    while job is not None and job.active:  # queued behind another corpus's, or running
        job.wait(1.0)
        print(
            f"\rcalibrating the refusal rule: {job.done}/{job.total or '?'} turns   ",
            end="",
            file=sys.stderr,
            flush=True,
        )
    if job is not None:
        print(file=sys.stderr)
        if job.status == "failed":
            print(f"warning: calibrating {data.entry.name} failed: {job.error}", file=sys.stderr)


def _wait_map(data: CorpusData, settings: Settings) -> None:
    """Wait for the corpus's map (``retrieval.projection``, started when it was indexed), printing its progress: a
    daemon thread would die with this process before the map is kept in the store."""
    from retrieval import projection
    from retrieval.corpus_retrievers import retriever_for

    store = retriever_for(data, settings).dense
    job = projection.request(store, data.entry.name) if store is not None else None
    while job is not None and job.wait(1.0) is None and job.status != projection.FAILED:
        snap = job.snapshot()
        print(f"\rmap: {snap.state}, {snap.stage} {snap.done:,}/{snap.total:,}   ", end="", file=sys.stderr, flush=True)
    if job is not None:
        print(f"\rmap: {'kept in the store' if job.status == projection.READY else job.error}", file=sys.stderr)


def run_calibrate(args: argparse.Namespace) -> int:
    from retrieval import calibration
    from retrieval.corpora import Registry
    from retrieval.corpus_retrievers import start_calibration

    settings = settings_from_args(args)
    data = Registry(settings).open(getattr(args, "corpus", None), paths=True)
    job = start_calibration(data, settings)
    _wait_calibration(data, settings, job)
    result = job.result
    if job.status != "done" or result is None:  # a job that is done holds its calibration
        return 1
    print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2) if args.json else calibration.describe(result))
    if data.key is None:
        print("(the shipped cards keep the defaults tuned on their dev sets: this calibration is a report only)")
    return 0


def run_query(args: argparse.Namespace) -> int:
    from retrieval.corpus_retrievers import retriever_for
    from retrieval.retriever_cache import get_retriever

    settings = settings_from_args(args)
    data = corpus_from_args(args, settings)
    retriever = get_retriever(settings) if data is None else retriever_for(data, settings)
    result = retriever.retrieve(args.text, settings)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(format_result(result))
    return 0


def run_why(args: argparse.Namespace) -> int:
    from retrieval.corpus_retrievers import retriever_for
    from retrieval.retriever_cache import get_retriever
    from retrieval.why import explain
    from retrieval.why_report import format_why

    settings = settings_from_args(args)
    data = corpus_from_args(args, settings)
    retriever = get_retriever(settings) if data is None else retriever_for(data, settings)
    why = explain(retriever, args.text, args.card, settings, search=not args.no_search, budget_s=args.budget)
    print(json.dumps(why.to_dict(), ensure_ascii=False, indent=2) if args.json else format_why(why))
    return 0


def format_result(result: RetrievalResult) -> str:
    """A readable text table of one turn."""
    lines = [f"turn:   {result.query}", f"level:  {result.hybrid_path}  ({result.reason})", ""]

    def block(title: str, rows: list[str]) -> None:
        lines.append(title)
        lines.extend(rows or ["  (none)"])
        lines.append("")

    for branch in (result.bm25, result.dense):
        status = "" if branch.status == "ok" else f"  [{branch.status}: {branch.reason}]"
        block(f"{branch.name}{status}", [f"  {h.rank:>3}  {h.score:8.4f}  {h.chunk_id}" for h in branch.hits[:10]])
    block(
        "rrf fused", [f"  {h.rank:>3}  {h.score:8.5f}  {h.chunk_id}  ranks={h.branch_ranks}" for h in result.fused[:10]]
    )
    block(
        "reranked",
        [f"  {h.rank:>3}  {h.score:8.4f}  {h.chunk_id}  (fused #{h.fused_rank})" for h in result.reranked[:10]],
    )
    block(
        "final",
        [
            f"  {h.rank:>3}  {h.parent_id}  sim={h.similarity if h.similarity is None else round(h.similarity, 3)}"
            for h in result.final
        ],
    )
    if result.cut:
        block("cut", [f"  ---  {h.parent_id}  {h.cut_reason}" for h in result.cut[:10]])
    lines.append("timings ms: " + ", ".join(f"{k}={v:.1f}" for k, v in result.timings_ms.items()))
    return "\n".join(lines)


def _judgments(sub: argparse._SubParsersAction) -> None:
    from retrieval import judgment_files

    judgment_files.register(sub)


def build_parser(registrars: Sequence[Registrar] = ()) -> argparse.ArgumentParser:
    """The parser with the core's commands, then each ``registrars`` entry's (e.g. the evaluation tools')."""
    parser = argparse.ArgumentParser(
        prog="python -m retrieval",
        description="Hybrid retrieval (ADR-0022): query, "
        "evaluate, benchmark and teach BM25 + dense + RRF + cross-encoder.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (register, _judgments, *registrars):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None, registrars: Sequence[Registrar] = ()) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser(registrars)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:  # settings, corpus and dataset errors carry a message that says how to fix them
        print(f"error: {exc}", file=sys.stderr)
        return 2
