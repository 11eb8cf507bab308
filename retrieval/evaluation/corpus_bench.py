"""``python -m retrieval bench --corpus NAME|PATH``: indexing throughput and reopen time of a persisted corpus.

The corpus (optionally its first ``--index-chunks`` sub-chunks) is embedded into a fresh Chroma folder in this
process, one sequence per model call as the page and ``index`` do (``retrieval.encoders.INDEX_WORKERS`` worker
sessions); then a fresh Python process reopens the persisted store, as the page does when the corpus is picked
again, and answers one turn. Numbers are printed with the hardware and the load average, never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.settings import PROJECT_ROOT, Settings

if TYPE_CHECKING:
    from retrieval.corpus_entries import CorpusData

_REOPEN = r"""
import json, sys, time
t0 = time.perf_counter()
from retrieval.corpus import split_cards, DEFAULT_CHUNK_WORDS
from retrieval.formats import load_any
from retrieval.pipeline import HybridRetriever
from retrieval.settings import Settings
s = Settings.from_env()
chunks = split_cards(load_any(sys.argv[1]).cards, DEFAULT_CHUNK_WORDS)[: int(sys.argv[2])]
t_loaded = time.perf_counter()
r = HybridRetriever(s, chunks=chunks, progress=lambda d, t: None)
t_open = time.perf_counter()
res = r.retrieve(sys.argv[3], s)
print(json.dumps({"import_and_load_s": t_loaded - t0, "reopen_s": t_open - t_loaded,
                  "built": bool(r.dense and r.dense.built), "first_turn_s": time.perf_counter() - t_open,
                  "level": res.hybrid_path, "error": r.dense_error}))
"""


def run(
    settings: Settings,
    data: CorpusData,
    index_chunks: int | None = None,
    workdir: Path | None = None,
    log: Callable[[str], None] = lambda msg: None,
    hardware: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Index ``data`` (a ``retrieval.corpora.CorpusData``) into a fresh store, reopen it in a fresh process and
    return the report; ``hardware`` is what ``bench.hardware()`` says about the machine."""
    from retrieval.encoders import INDEX_WORKERS
    from retrieval.pipeline import HybridRetriever

    chunks = data.chunks[:index_chunks] if index_chunks else data.chunks
    workdir = Path(workdir or tempfile.mkdtemp(prefix="retrieval-corpus-bench-"))
    s = settings.replace(chroma_path=str(workdir / "chroma"), chroma_host=None)
    load = os.getloadavg()[0]
    log(f"indexing {len(chunks):,} sub-chunks of {data.entry.name} into a fresh store at {s.chroma_path}")
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if time.monotonic() - last[0] > 5 or done == total:
            last[0] = time.monotonic()
            log(f"  {done:,}/{total:,}")

    started = time.perf_counter()
    retriever = HybridRetriever(s, chunks=chunks, progress=progress)
    build_s = time.perf_counter() - started
    if retriever.dense is None:
        raise RuntimeError(f"the dense branch is unavailable: {retriever.dense_error}")
    index_s = retriever.dense.index_seconds
    turn = data.queries[0].text if data.queries else chunks[0].title or chunks[0].text[:80]
    log("reopening the persisted store in a fresh process")
    env = dict(
        os.environ,
        CHROMA_PATH=s.chroma_path,
        EMBEDDING_MODEL=s.embedding_model,
        PYTHONPATH=os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    env.pop("CHROMA_HOST", None)
    source = data.entry.source
    if not source or not Path(source).exists():  # a corpus kept in the store: its cards, as a file for the child
        source = str(workdir / "cards.jsonl")
        Path(source).write_text(
            "".join(
                json.dumps(
                    {"id": c.id, "title": c.title, "text": c.text, "lang": c.lang, "topic": c.topic}, ensure_ascii=False
                )
                + "\n"
                for c in data.cards
            ),
            encoding="utf-8",
        )
    wall = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _REOPEN, source, str(len(chunks)), turn],
        capture_output=True,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
        timeout=1800,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"reopen child failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    reopen = json.loads(proc.stdout.strip().splitlines()[-1])
    reopen["wall_s"] = time.perf_counter() - wall
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "hardware": hardware or {},
        "load_avg_1m": {"start": round(load, 2), "end": round(os.getloadavg()[0], 2)},
        "corpus": {
            "name": data.entry.name,
            "format": data.entry.format,
            "sub_chunks": len(chunks),
            "of_total": len(data.chunks),
        },
        "embedding_model": s.embedding_model,
        "index_workers": INDEX_WORKERS,
        "index_s": round(index_s, 1),
        "build_s": round(build_s, 1),
        "sub_chunks_per_s": round(len(chunks) / index_s, 1) if index_s else None,
        "bm25_build_ms": round(retriever.bm25_build_ms, 1),
        "reopen": {k: (round(v, 2) if isinstance(v, float) else v) for k, v in reopen.items()},
    }


def format_report(r: dict[str, Any], command: str) -> str:
    hw, c = r["hardware"], r["corpus"]
    return "\n".join(
        [
            f"`{command}` on {r['date']}: {hw.get('cpu_model', '?')}, {hw.get('nproc', '?')} cores, load average "
            f"{r['load_avg_1m']['start']} -> {r['load_avg_1m']['end']}; {r['embedding_model']}, "
            f"{r['index_workers']} worker session(s) x 1 thread, one sequence per call.",
            "",
            "| corpus | sub-chunks | index (s) | sub-chunks/s | BM25 build (ms) | reopen in a fresh process (s) | "
            "first turn after reopen (s) |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| {c['name']} ({c['format']}) | {c['sub_chunks']:,} of {c['of_total']:,} | {r['index_s']} | "
            f"{r['sub_chunks_per_s']} | {r['bm25_build_ms']} | {r['reopen']['reopen_s']} | "
            f"{r['reopen']['first_turn_s']} |",
        ]
    )
