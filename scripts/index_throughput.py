"""Indexing throughput of the bundled embedder, one sequence per model call, under two schemes (issue 12):

A. one session with 2 intra-op threads, one text after another (the indexing path before issue 12);
B. two worker threads, each with its own session with 1 intra-op thread (``OnnxEmbedder.embed_documents``, the
   indexing path now, ``retrieval.encoders.INDEX_WORKERS``).

The schemes alternate in rounds over the same texts, so a load change on a shared machine hits both alike; the
vectors of both are compared (one sequence per call: they must be identical). Usage:

    python scripts/index_throughput.py [--texts 400] [--rounds 4] [--beir ../shared/eval/scifact]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from retrieval.corpus import load_cards, split_cards  # noqa: E402
from retrieval.formats import load_any  # noqa: E402
from retrieval.settings import PROJECT_ROOT  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--beir", default=str(PROJECT_ROOT.parent / "shared" / "eval" / "scifact"))
    args = parser.parse_args()
    from retrieval.encoders import load_embedder

    source = Path(args.beir)
    cards = (
        load_any(source).cards
        if (source / "corpus.jsonl").exists()
        else load_cards(PROJECT_ROOT / "corpus" / "cards.jsonl")
    )
    texts = [c.indexed_text for c in split_cards(cards)[: args.texts]]
    emb = load_embedder("bge-small-en-v1.5")
    emb.embed_document("warm up")
    emb.embed_documents(["warm up", "warm up"])
    per_round = max(1, len(texts) // args.rounds)
    spent = {"A": 0.0, "B": 0.0}
    va, vb = [], []
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        chunk = texts[r * per_round : (r + 1) * per_round]
        for scheme in ("A", "B") if r % 2 == 0 else ("B", "A"):
            t = time.perf_counter()
            if scheme == "A":
                va.append(np.stack([emb.embed_document(x) for x in chunk]))
            else:
                vb.append(emb.embed_documents(chunk))
            spent[scheme] += time.perf_counter() - t
        load.append(os.getloadavg()[0])
    n = per_round * args.rounds
    a, b = np.concatenate(va), np.concatenate(vb)
    print(
        json.dumps(
            {
                "texts": n,
                "mean_words": round(float(np.mean([len(x.split()) for x in texts[:n]])), 1),
                "A_2_intra_threads_one_text_per_call_per_s": round(n / spent["A"], 1),
                "B_2_workers_x_1_thread_per_s": round(n / spent["B"], 1),
                "identical_vectors": bool(np.array_equal(a, b)),
                "max_abs_diff": float(np.abs(a - b).max()),
                "load_avg_1m": [round(x, 2) for x in load],
                "cpus": os.cpu_count(),
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
