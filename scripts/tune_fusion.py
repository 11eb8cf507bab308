"""Measure the branch-evidence weights (QUERY_WEIGHTING=adaptive) against today's query-aware weights (auto).

    .venv/bin/python scripts/tune_fusion.py                                   # the shipped labeled turns
    .venv/bin/python scripts/tune_fusion.py --beir ../shared/eval/scifact --split train
    .venv/bin/python scripts/tune_fusion.py --beir ../shared/eval/scifact --split test --limit 300

Each turn runs once through the real pipeline at evaluation depth (no reranker); its branch lists are kept and every
variant is fused again from them with the run-time code (``retrieval.weighting.weigh_turn`` and
``retrieval.fusion.fuse_branches``), so a sweep of the rule's threshold costs no model call. Reports nDCG@10 at
card level for bm25, dense, ``auto`` and ``adaptive`` at each LOW_COVERAGE, how many turns the rule moved, and a
paired randomization test against ``auto``. A BEIR set is embedded once into ``<CHROMA_PATH>/beir-<folder>``
(tens of minutes on a busy 2-core machine) and reused; its text is never written anywhere (license).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval import weighting  # noqa: E402
from retrieval.evaluation.metrics import score_turn  # noqa: E402
from retrieval.evaluation.prepare import build_retriever, load_dataset  # noqa: E402
from retrieval.evaluation.significance import compare  # noqa: E402
from retrieval.evaluation.turn_runs import eval_settings  # noqa: E402
from retrieval.fusion import fuse_branches  # noqa: E402
from retrieval.parents import best_per_parent  # noqa: E402
from retrieval.settings import Settings  # noqa: E402


def ndcg(hits, relevant) -> float:
    return score_turn([h.parent_id for h in best_per_parent(hits)][:100], relevant, ["ndcg@10"])["ndcg@10"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", help="a BEIR folder (default: the shipped labeled turns)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--queries", help="labeled turns for the shipped cards (default: queries.jsonl beside them)")
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=int, default=None, help="only the first N turns")
    ap.add_argument("--low", default="0.2,0.25,0.3,0.35,0.4", help="LOW_COVERAGE values to try")
    args = ap.parse_args()
    settings = Settings.from_env()
    dataset = load_dataset(args, settings)
    retriever, settings = build_retriever(dataset, settings, args.beir)
    deep = eval_settings(settings, 200).replace(reranker_max_input=0)
    turns = []
    for i, q in enumerate(dataset.queries, 1):
        if any(g > 0 for g in q.relevant.values()):
            r = retriever.retrieve(q.text, deep)
            turns.append((q, r.bm25, r.dense))
        print(f"\r{i}/{len(dataset.queries)} turns", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)

    def run(mode: str) -> tuple[list[float], int]:
        s = settings.replace(query_weighting=mode)
        scores, moved = [], 0
        for q, bm25, dense in turns:
            tw = weighting.weigh_turn(q.text, s, bm25, dense, retriever.bm25_index)
            moved += "low_coverage" in tw.features
            fused = fuse_branches(
                [b for b in (bm25, dense) if b.usable], tw.as_dict(), retriever.parent_of, fusion=s.fusion, k=s.rrf_k
            )
            scores.append(ndcg(fused, q.relevant))
        return scores, moved

    n = len(turns)
    print(f"dataset {dataset.name}: {n} answerable turns, {len(retriever.chunks)} chunks")
    print(f"bm25   {sum(ndcg(b.hits, q.relevant) for q, b, _ in turns) / n:.4f}")
    print(f"dense  {sum(ndcg(d.hits, q.relevant) for q, _, d in turns) / n:.4f}")
    auto, _ = run("auto")
    print(f"auto   {sum(auto) / n:.4f}")
    default_low = weighting.LOW_COVERAGE
    try:
        for low in (float(x) for x in args.low.split(",")):
            weighting.LOW_COVERAGE = low
            scores, moved = run("adaptive")
            t = compare(scores, auto, seed=0, resamples=10000)
            print(
                f"adaptive LOW_COVERAGE={low:g}: {sum(scores) / n:.4f} (vs auto {t.diff:+.4f}, p {t.p_value:.3f}; "
                f"BM25 halved on {moved} turns){'  <- default' if low == default_low else ''}"
            )
    finally:
        weighting.LOW_COVERAGE = default_low
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
