"""How the BM25 branch alone holds as the corpus grows: build time, per-turn search time and memory.

    .venv/bin/python scripts/bm25_scale.py                          # 50,000 and 1,000,000 sub-chunks, both analyzers
    .venv/bin/python scripts/bm25_scale.py --scale 10000,50000 --tokenizers snowball --runs 5 [--json]

The shipped sub-chunks (corpus/cards.jsonl split as the pipeline splits it) are replicated to exactly N with
suffixed card ids (``<id>~r<n>``, texts unchanged, as ``bench --scale`` does) and indexed by
``retrieval.bm25.BM25Index``. Every shipped turn (corpus/queries.jsonl) is searched ``--runs`` times at the
pipeline's depth (top_k x candidate_multiplier, 50 by default). Each (N, analyzer) runs in its own child process so
its peak RSS is its own; the RSS before the build (the process with the replicated chunk list) is reported beside
it, so the index's share is the difference. The build is single-threaded: its CPU seconds are what the wall time
would be on an idle machine, and the 1-minute load average at the start of the build says how busy this one was.

A replicated corpus is a hard case for the cut at ``depth``: every score is shared by all replicas of a chunk, so
the ties at the cut are thousands of chunks, settled by chunk id. Its vocabulary does not grow with N, which a
real corpus's would; a turn's cost is the length of its terms' postings, which grows with N in both.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_SCALES = "50000,1000000"


def _proc_status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return math.nan


def _percentile(values: list[float], q: float) -> float:
    data = sorted(values)
    pos = (len(data) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def replicate(chunks: list, target: int) -> list:
    """``chunks`` repeated to exactly ``target``: replica 0 keeps the ids, replica n renames card c to c~r<n>."""
    from retrieval.types import Chunk

    out = list(chunks[:target])
    n = 1
    while len(out) < target:
        for c in chunks:
            if len(out) == target:
                break
            parent = f"{c.parent_id}~r{n}"
            out.append(
                Chunk(
                    chunk_id=f"{parent}#{c.chunk_id.rsplit('#', 1)[-1]}",
                    parent_id=parent,
                    title=c.title,
                    lang=c.lang,
                    text=c.text,
                )
            )
        n += 1
    return out


def measure(n: int, tokenizer: str, runs: int, depth: int) -> dict:
    """One (scale, analyzer) in this process: build, then every shipped turn ``runs`` times."""
    from retrieval.bm25 import BM25Index
    from retrieval.corpus import load_cards, load_queries, split_cards

    base = split_cards(load_cards(ROOT / "corpus" / "cards.jsonl"))
    turns = [q.text for q in load_queries(ROOT / "corpus" / "queries.jsonl")]
    chunks = replicate(base, n)
    rss_before = _proc_status_mb("VmRSS")
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    index = BM25Index(chunks, tokenizer)
    build_s, build_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    rss_after_build = _proc_status_mb("VmRSS")
    matrix_mb = sum(a.nbytes for a in (index._indptr, index._indices, index._data)) / 2**20
    for turn in turns:  # warm-up: first-touch page faults and the stemmer's cache
        index.search(turn, depth)
    samples, cpu, hits = [], [], 0
    for _ in range(runs):
        for turn in turns:
            t, c = time.perf_counter(), time.process_time()
            found = index.search(turn, depth)
            samples.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            hits += len(found)
    return {
        "chunks": n,
        "tokenizer": tokenizer,
        "build_s": round(build_s, 2),
        "build_cpu_s": round(build_cpu_s, 2),
        "load_avg_1m": round(load, 2),
        "search_ms": {
            "p50": round(_percentile(samples, 50), 2),
            "p95": round(_percentile(samples, 95), 2),
            "max": round(max(samples), 2),
            "n": len(samples),
        },
        "search_cpu_ms": {"p50": round(_percentile(cpu, 50), 2), "p95": round(_percentile(cpu, 95), 2)},
        "mean_hits": round(hits / len(samples), 1),
        "terms": len(index._vocab),
        "postings": int(index._data.size),
        "matrix_mb": round(matrix_mb, 1),
        "rss_before_build_mb": rss_before,
        "rss_after_build_mb": rss_after_build,
        "peak_rss_mb": _proc_status_mb("VmHWM"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default=DEFAULT_SCALES, help="comma-separated sub-chunk counts")
    parser.add_argument("--tokenizers", default="plain,snowball", help="comma-separated analyzers")
    parser.add_argument("--runs", type=int, default=3, help="passes over the shipped turns per scale")
    parser.add_argument("--depth", type=int, default=50, help="hits per search (the pipeline's branch depth)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--child", nargs=2, metavar=("N", "TOKENIZER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(int(args.child[0]), args.child[1], args.runs, args.depth)))
        return 0
    try:
        scales = [int(s.replace("_", "")) for s in args.scale.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--scale must be comma-separated whole numbers such as 50000,1000000, got {args.scale!r}.")
    if not scales or min(scales) < 1:
        parser.error("--scale needs at least one positive number of sub-chunks, e.g. --scale 50000.")
    tokenizers = [t.strip() for t in args.tokenizers.split(",") if t.strip()]
    if not set(tokenizers) <= {"plain", "snowball"}:
        parser.error(f"--tokenizers takes plain and/or snowball, got {args.tokenizers!r}.")
    rows = []
    for n in scales:
        for tok in tokenizers:
            print(f"measuring {n:,} sub-chunks, {tok} ...", file=sys.stderr, flush=True)
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(n),
                    tok,
                    "--runs",
                    str(args.runs),
                    "--depth",
                    str(args.depth),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode:
                print(out.stderr, file=sys.stderr)
                return out.returncode
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "runs": args.runs,
        "depth": args.depth,
        "command": "python scripts/bm25_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=2))
        return 0
    print(
        f"# BM25 at scale ({meta['date']}, {meta['nproc']} CPUs, Python {meta['python']}, depth {args.depth}, "
        f"{args.runs} passes over the shipped turns)"
    )
    print(
        "| sub-chunks | analyzer | build wall / CPU (s) | search p50 / p95 (ms) | search CPU p50 / p95 (ms) "
        "| postings | matrix (MB) | RSS before build / peak (MB) | load avg |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['chunks']:,} | {r['tokenizer']} | {r['build_s']:.1f} / {r['build_cpu_s']:.1f} | "
            f"{r['search_ms']['p50']:.1f} / {r['search_ms']['p95']:.1f} | "
            f"{r['search_cpu_ms']['p50']:.1f} / {r['search_cpu_ms']['p95']:.1f} | "
            f"{r['postings']:,} | {r['matrix_mb']:.0f} | "
            f"{r['rss_before_build_mb']:,.0f} / {r['peak_rss_mb']:,.0f} | {r['load_avg_1m']:g} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
