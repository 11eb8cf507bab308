"""How long a qrels import takes and how much memory it holds: ``python scripts/measure_qrels_import.py [LINES]
[--per-query K] [--root REPO]``.

Writes a BEIR folder of LINES qrels lines (default 100,000; K cards per query, default 1: the most queries, the
worst case for the store) over the shipped cards into a temporary folder, then runs ``python -m retrieval judgments
import --corpus shipped --beir DIR`` in a fresh process on a fresh store (``--root``: the checkout whose code runs,
default this one) and prints one JSON line: lines, queries, wall seconds, the child's peak RSS (MB), and what
``judgments list --json`` then counts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lines", nargs="?", type=int, default=100_000)
    ap.add_argument("--per-query", type=int, default=1)
    ap.add_argument("--root", default=str(ROOT))
    args = ap.parse_args()
    cards = [json.loads(line)["id"] for line in (ROOT / "corpus" / "cards.jsonl").read_text().splitlines() if line]
    with tempfile.TemporaryDirectory() as tmp:
        beir = Path(tmp) / "beir"
        (beir / "qrels").mkdir(parents=True)
        n_queries = -(-args.lines // args.per_query)
        with (beir / "queries.jsonl").open("w") as out:
            for q in range(n_queries):
                out.write(json.dumps({"_id": f"q{q}", "text": f"synthetic judged question number {q}"}) + "\n")
        with (beir / "qrels" / "test.tsv").open("w") as out:
            out.write("query-id\tcorpus-id\tscore\n")
            for i in range(args.lines):
                out.write(f"q{i // args.per_query}\t{cards[i % len(cards)]}\t{1 + i % 3}\n")
        env = {**os.environ, "CHROMA_PATH": str(Path(tmp) / "chroma"), "DATA_DIR": str(Path(tmp) / "data")}
        env.update(HF_HUB_OFFLINE="1", DATA_ROOT=str(Path(tmp) / "none"))
        cmd = [sys.executable, "-m", "retrieval", "judgments", "import", "--corpus", "shipped", "--beir", str(beir)]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=args.root, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        listed = subprocess.run(
            [sys.executable, "-m", "retrieval", "judgments", "list", "--corpus", "shipped", "--json"],
            cwd=args.root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        count = len(json.loads(listed.stdout)) if listed.returncode == 0 else f"list failed: {listed.stderr[-200:]}"
        print(
            json.dumps(
                {
                    "lines": args.lines,
                    "queries": n_queries,
                    "import_s": round(seconds, 1),
                    "import_ok": done.returncode == 0 or done.stderr[-300:],
                    "peak_rss_mb": round(peak_mb),
                    "listed": count,
                    "root": args.root,
                    "load": os.getloadavg()[0],
                }
            )
        )


if __name__ == "__main__":
    main()
