"""``python -m retrieval lab --seed N``: the class lab contract, and the RRF classroom arithmetic.

The lab prints one JSON object: ``kind``, ``seed``, ``inputs``, ``decisions``, a structured ``result`` (metrics
per configuration on the shipped labeled set, the class example's fused order), ``evidence`` (checkable facts,
each with its number) and ``limitations``. Same seed, same output, byte for byte: timings are left out unless
``--with-timings`` asks for them (under the separate key ``timings``).

The classroom functions are pure: ranked lists in, every term of the RRF sum out, so the inspector only renders.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.fusion import reciprocal_rank_fusion, rrf_terms
from retrieval.rounding import round_half_up

if TYPE_CHECKING:
    from retrieval.corpus import Dataset
    from retrieval.pipeline import HybridRetriever
    from retrieval.settings import Settings

LAB_VERSION = 1
CLASS_K = 60
CLASS_EXAMPLE: dict[str, list[str]] = {"BM25": ["A", "B", "C", "D"], "Dense": ["C", "A", "E", "B"]}
"""The worked example of the class: two rankings of the same turn."""

CONSENSUS_EXAMPLE: dict[str, list[str]] = {"BM25": ["B", "A", "D", "C"], "Dense": ["C", "A", "E", "B"]}
"""A variant where the winner is first in no list: A is second in both (2/62 beats 1/61 + 1/64)."""

RAW_EXAMPLE: dict[str, list[tuple[str, float]]] = {
    "BM25": [("A", 12.4), ("B", 9.1), ("C", 7.7), ("D", 3.2)],
    "Dense": [("C", 0.82), ("A", 0.79), ("E", 0.75), ("B", 0.61)],
}
"""The same two rankings with raw scores in their own units: BM25 is unbounded, the cosine lives in [-1, 1]."""

MAX_LISTS = 6
MAX_ITEMS = 50
MAX_ID_CHARS = 40


# ---------------------------------------------------------------------------------------------- parsing
def parse_ranking(text: str, name: str = "list") -> list[str]:
    """``"A, B, C"`` (commas, spaces or new lines) -> ``["A", "B", "C"]``; duplicates and oversize are errors."""
    if not isinstance(text, str):
        raise TypeError(f"{name}: expected text such as 'A, B, C', got {type(text).__name__}.")
    items = [t for t in text.replace(",", " ").replace(";", " ").split() if t]
    _check_ids(items, name)
    return items


def parse_scored(text: str, name: str = "list") -> list[tuple[str, float]]:
    """``"A:12.4, B:9.1"`` -> ``[("A", 12.4), ("B", 9.1)]`` in the order written (best first)."""
    if not isinstance(text, str):
        raise TypeError(f"{name}: expected text such as 'A:12.4, B:9.1', got {type(text).__name__}.")
    out: list[tuple[str, float]] = []
    for item in (t for t in text.replace(";", ",").replace("\n", ",").split(",") if t.strip()):
        doc, sep, raw = item.strip().partition(":")
        if not sep:
            raise ValueError(f"{name}: {item.strip()!r} has no score: write id:score, e.g. A:12.4.")
        try:
            score = float(raw)
        except ValueError:
            raise ValueError(f"{name}: the score of {doc.strip()!r} is {raw.strip()!r}, not a number.") from None
        if not math.isfinite(score):
            raise ValueError(f"{name}: the score of {doc.strip()!r} must be a finite number.")
        out.append((doc.strip(), score))
    _check_ids([d for d, _ in out], name)
    scores = [s for _, s in out]
    if any(a < b for a, b in zip(scores, scores[1:])):
        raise ValueError(f"{name}: scores must not increase down the list (best first): {scores}.")
    return out


def _check_ids(items: list[str], name: str) -> None:
    if len(items) > MAX_ITEMS:
        raise ValueError(f"{name}: {len(items)} items; the classroom takes at most {MAX_ITEMS}.")
    for doc in items:
        if not doc or len(doc) > MAX_ID_CHARS or any(ch.isspace() for ch in doc):
            raise ValueError(f"{name}: {doc!r} is not a usable id (1-{MAX_ID_CHARS} characters, no spaces).")
    seen: set[str] = set()
    for doc in items:
        if doc in seen:
            raise ValueError(f"{name}: {doc!r} appears twice; each id may appear once per list.")
        seen.add(doc)


# -------------------------------------------------------------------------------------------- classroom
def classroom(
    rankings: Mapping[str, Sequence[str]], k: int = CLASS_K, weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """The RRF arithmetic of the classroom: every term, every sum, the fused order and what it teaches.

    Returns:
        ``{"k", "lists", "weights", "rows": [{"doc", "rank" (fused), "score", "ranks": {list: rank|None},
        "terms": {list: w/(k+rank) or 0}, "formula"}], "order", "lessons": [str]}``, rows in fused order.
    """
    lists = {str(n): list(v) for n, v in rankings.items() if list(v)}
    if not lists:
        raise ValueError("give at least one non-empty ranked list, e.g. BM25 = A, B, C.")
    if len(lists) > MAX_LISTS:
        raise ValueError(f"{len(lists)} lists; the classroom takes at most {MAX_LISTS}.")
    w = {n: float((weights or {}).get(n, 1.0)) for n in lists}
    fused = reciprocal_rank_fusion(lists, k=k, weights=w)
    terms = rrf_terms(lists, k=k, weights=w)
    rows = []
    for rank, (doc, score) in enumerate(fused, start=1):
        parts = terms[doc]
        formula = " + ".join(
            (f"1/({k}+{r})" if w[n] == 1 else f"{w[n]:g}/({k}+{r})") for n, (r, _) in parts.items() if r is not None
        )
        rows.append(
            {
                "doc": doc,
                "rank": rank,
                "score": score,
                "ranks": {n: r for n, (r, _) in parts.items()},
                "terms": {n: t for n, (_, t) in parts.items()},
                "formula": formula,
            }
        )
    return {
        "k": k,
        "lists": lists,
        "weights": w,
        "rows": rows,
        "order": [r["doc"] for r in rows],
        "lessons": lessons(rows, list(lists)),
    }


def lessons(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    """Plain sentences on why the fused order is what it is (the winner, consensus, one-list documents)."""
    if not rows:
        return []
    out = []
    top = rows[0]
    firsts = [n for n in names if top["ranks"].get(n) == 1]
    seen_in = [n for n in names if top["ranks"].get(n) is not None]
    where = ", ".join(f"{n} #{top['ranks'][n]}" for n in seen_in)
    if firsts:
        out.append(f"{top['doc']} wins with {round_half_up(top['score'])}: first in {', '.join(firsts)} ({where}).")
    else:
        out.append(
            f"{top['doc']} wins with {round_half_up(top['score'])} without being first in any list ({where}): "
            f"RRF rewards consensus, being near the top of several lists."
        )
    if len(names) > 1:
        single = [r for r in rows if sum(r["ranks"][n] is not None for n in names) == 1]
        multi = [r for r in rows if sum(r["ranks"][n] is not None for n in names) > 1]
        if single and multi:
            lowest_multi = min(r["score"] for r in multi)
            below = [r for r in single if r["score"] < lowest_multi]
            above = [r for r in single if r["score"] >= lowest_multi]
            if below:
                out.append(
                    f"{', '.join(r['doc'] for r in below)} appear in one list only and fall below every "
                    f"document seen by two or more lists: here one term is worth less than any two."
                )
            if above:
                weakest = min(multi, key=lambda r: (r["score"], r["doc"]))
                out.append(
                    f"{', '.join(r['doc'] for r in above)}, seen by one list only, still beat "
                    f"{weakest['doc']} ({weakest['formula']}): with a small k a single top rank can outweigh "
                    f"consensus."
                )
        for r in rows:
            if any(r["ranks"][n] == 1 for n in names) and r is not top:
                first_in = [n for n in names if r["ranks"][n] == 1]
                out.append(
                    f"{r['doc']} is first in {', '.join(first_in)} but ends #{r['rank']}: "
                    f"{r['formula']} = {round_half_up(r['score'])} < {top['formula']} = {round_half_up(top['score'])}."
                )
    for a, b in zip(rows, rows[1:]):
        if math.isclose(a["score"], b["score"], rel_tol=0, abs_tol=1e-15):
            out.append(
                f"{a['doc']} and {b['doc']} tie at {round_half_up(a['score'])}; the tie is broken by id, so the order "
                f"is deterministic."
            )
    return out


def k_curve(ks: Sequence[int], max_rank: int = 20) -> dict[int, list[float]]:
    """``1/(k + rank)`` for ranks 1..max_rank, per k: how k flattens the credit of the top positions."""
    if max_rank < 1:
        raise ValueError(f"max_rank must be at least 1, got {max_rank}.")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}.")
    return {k: [1 / (k + r) for r in range(1, max_rank + 1)] for k in ks}


def raw_sum(scored: Mapping[str, Sequence[tuple[str, float]]]) -> list[tuple[str, float]]:
    """The mistake the class warns about: add raw scores across lists (a missing document adds 0).
    Whichever engine has the bigger scale decides the order. Teaching only; the pipeline never does this."""
    out: dict[str, float] = {}
    for items in scored.values():
        for doc, score in items:
            out[doc] = out.get(doc, 0.0) + score
    return sorted(out.items(), key=lambda item: (-item[1], item[0]))


def score_fusions(scored: Mapping[str, Sequence[tuple[str, float]]], k: int = CLASS_K) -> dict[str, Any]:
    """The same lists fused three ways: raw sum, min-max normalisation (equal weights) and RRF (ranks only)."""
    lists = {n: list(v) for n, v in scored.items() if list(v)}
    if not lists:
        raise ValueError("give at least one list of id:score pairs, e.g. A:12.4, B:9.1.")
    for n, items in lists.items():
        _check_ids([d for d, _ in items], n)
    from retrieval.fusion import convex_fusion  # the pipeline's score fusion (FUSION=convex)

    rrf = reciprocal_rank_fusion({n: [d for d, _ in v] for n, v in lists.items()}, k=k)
    return {
        "raw_sum": raw_sum(lists),
        "min_max": convex_fusion(lists),
        "rrf": rrf,
        "scales": {n: [min(s for _, s in v), max(s for _, s in v)] for n, v in lists.items()},
    }


# --------------------------------------------------------------------------------------------------- lab
def run_lab(
    seed: int,
    settings: Settings | None = None,
    retriever: HybridRetriever | None = None,
    dataset: Dataset | None = None,
    *,
    resamples: int = 10_000,
    with_timings: bool = False,
) -> dict[str, Any]:
    """The lab contract as a dict (see the module docstring). Deterministic for a given seed and index."""
    from retrieval.corpus import fingerprint, load_shipped
    from retrieval.evaluation.evaluate import evaluate
    from retrieval.evaluation.turn_runs import DEFAULT_DEPTH
    from retrieval.settings import PROJECT_ROOT, Settings

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"--seed must be a whole number, got {seed!r}.")
    started = time.perf_counter()
    settings = settings or Settings.from_env()
    dataset = dataset or load_shipped(settings.corpus_path)
    if retriever is None:
        from retrieval.evaluation.prepare import build_retriever

        retriever, settings = build_retriever(dataset, settings)
    report = evaluate(dataset, retriever, settings, depth=DEFAULT_DEPTH, seed=seed, resamples=resamples)
    example = classroom(CLASS_EXAMPLE, CLASS_K)
    fusions = score_fusions(RAW_EXAMPLE, CLASS_K)
    corpus = Path(settings.corpus_path).resolve()
    try:
        corpus_name = str(corpus.relative_to(PROJECT_ROOT))
    except ValueError:
        corpus_name = corpus.name
    categories: dict[str, int] = {}
    for q in dataset.queries:
        categories[q.category] = categories.get(q.category, 0) + 1
    metrics = {c: {m: v for m, v in row.items() if m != "ms_per_turn"} for c, row in report["configs"].items()}
    by_category = {cat: {c: row[c]["ndcg@10"] for c in metrics} for cat, row in report["categories"].items()}
    out: dict[str, Any] = {
        "kind": "retrieval",
        "seed": seed,
        "lab_version": LAB_VERSION,
        "inputs": {
            "corpus": corpus_name,
            "cards": len(dataset.cards),
            "chunks": len(retriever.chunks),
            "corpus_fingerprint": fingerprint(retriever.chunks),
            "labeled_turns": len(dataset.queries),
            "turns_by_category": categories,
            "embedding_model": settings.embedding_model,
            "reranker_model": settings.reranker_model,
            "classroom_lists": CLASS_EXAMPLE,
            "raw_score_lists": {n: [[d, s] for d, s in v] for n, v in RAW_EXAMPLE.items()},
        },
        "decisions": {
            "configurations": list(metrics),
            "rrf_k": settings.rrf_k,
            "branch_weights": {"bm25": settings.bm25_weight, "dense": settings.dense_weight},
            "reranker_max_input": settings.reranker_max_input,
            "evaluation_depth_per_branch": report["settings"]["evaluation"]["candidate_depth"],
            "refusal_threshold_min_similarity": settings.min_similarity,
            "top_k": settings.top_k,
            "level": "parent (card): each list deduped to its best sub-chunk per card before scoring",
            "significance": f"paired randomization test vs the best single branch, seed {seed}, "
            f"{resamples} resamples, Holm-adjusted; bootstrap 95% CI",
            "classroom_k": CLASS_K,
        },
        "result": {
            "metrics": metrics,
            "ndcg@10_by_category": by_category,
            "refusal": {
                k: report["refusal"][k]
                for k in ("refusal_rate", "false_refusal_rate", "no_match_turns", "answerable_turns")
            },
            "significance": report["significance"],
            "verdict": report["verdict"],
            "classroom": {
                "k": CLASS_K,
                "order": example["order"],
                "scores": {r["doc"]: round(r["score"], 6) for r in example["rows"]},
                "formulas": {r["doc"]: r["formula"] for r in example["rows"]},
            },
            "raw_score_demo": {name: [d for d, _ in fusions[name]] for name in ("raw_sum", "min_max", "rrf")},
        },
        "evidence": _evidence(report, example, fusions),
        "limitations": limitations(len(dataset.cards), report["answerable_turns"]),
    }
    if with_timings:
        out["timings"] = {
            "ms_per_turn": {c: row.get("ms_per_turn") for c, row in report["configs"].items()},
            "wall_seconds": round(time.perf_counter() - started, 2),
            "note": "not deterministic: left out of the contract unless --with-timings",
        }
    return out


def limitations(cards: int, answerable: int) -> list[str]:
    """What stops this lab from being presented as production."""
    return [
        f"The corpus ({cards} cards) and the labeled turns are 100% synthetic and were written by the team that "
        "built the retriever; the categories were shaped so that each branch has a weakness. The numbers teach the "
        "method and do not predict behaviour on real patient questions.",
        f"{answerable} answerable turns: the bootstrap intervals are wide, and one relabeled turn moves a mean by "
        f"up to {1 / max(answerable, 1):.3f}. Significance is a paired randomization test with one seed; another "
        "seed moves a Monte Carlo p-value slightly.",
        "Relevance grades come from one author, without a second annotator or an agreement measure.",
        "The embedding model (bge-small-en-v1.5) and the cross-encoder (ms-marco-MiniLM-L-12-v2) are English "
        "models, int8-quantized; Spanish and Portuguese turns are outside their training domain.",
        "The refusal rule is a cosine threshold, not a calibrated probability; a good refusal rate on these turns "
        "does not bound the rate of confident wrong answers on real traffic.",
        "Not a medical device and not medical advice: no clinical review, no safety or privacy assessment, no "
        "load test. Byte-for-byte reproducibility holds for one index build and one set of model files.",
    ]


def _evidence(
    report: Mapping[str, Any], example: Mapping[str, Any], fusions: Mapping[str, Any]
) -> list[dict[str, Any]]:
    rows = {r["doc"]: r for r in example["rows"]}
    facts: list[dict[str, Any]] = []

    def add(fact: str, value: float | int, check: str) -> None:
        facts.append({"fact": fact, "value": round(value, 6) if isinstance(value, float) else value, "check": check})

    a = rows["A"]
    ranks = ", ".join(f"{n} #{r}" for n, r in a["ranks"].items())
    add(
        f"Class example, k={CLASS_K}: RRF(A) = {a['formula']}; the fused order is {''.join(example['order'])}.",
        a["score"],
        "1/61 + 1/62 by hand; python -c 'from retrieval.evaluation.lab import *; print(classroom(CLASS_EXAMPLE))'",
    )
    first_in = [n for n, r in a["ranks"].items() if r == 1]
    add(
        f"Correction to the class text: it says A wins without being first in any ranking, but in the lists as "
        f"printed A is first in {', '.join(first_in) or 'no list'} ({ranks}). A wins because it is near the top of "
        f"both lists; C, first in Dense but third in BM25, ends second. The value is A's best rank.",
        min(r for r in a["ranks"].values() if r is not None),
        "BM25 = [A, B, C, D]: A is at position 1; CONSENSUS_EXAMPLE shows a winner that is first nowhere",
    )
    cons = classroom(CONSENSUS_EXAMPLE, CLASS_K)
    top = cons["rows"][0]
    add(
        f"Consensus example {cons['lists']}: {top['doc']} wins with {top['formula']} while first in no list.",
        top["score"],
        "2/62 by hand, against 1/61 + 1/64 for the documents that are first somewhere",
    )
    tail = example["order"][-2:]
    add(
        f"D and E, each in one list only, are the last two of the fused order ({', '.join(tail)}); RRF(D) = 1/64.",
        rows["D"]["score"],
        "1/(60+4); every document in both lists scores above 1/63",
    )
    bm25_scale = fusions["scales"]["BM25"][1]
    dense_scale = fusions["scales"]["Dense"][1]
    raw = [d for d, _ in fusions["raw_sum"]]
    bm25_order = [d for d, _ in RAW_EXAMPLE["BM25"]]
    kept = [d for d in raw if d in bm25_order] == bm25_order
    add(
        f"Raw-sum fusion orders {''.join(raw)}; it {'keeps' if kept else 'changes'} the BM25 order "
        f"{''.join(bm25_order)}: the top BM25 score is this many times the top cosine, so BM25's scale decides.",
        bm25_scale / dense_scale,
        "12.4 / 0.82; compare raw_sum, min_max and rrf in result.raw_score_demo",
    )
    cfg = report["configs"]
    for c in ("rrf", "full"):
        if c in cfg:
            for b in ("bm25", "dense"):
                add(
                    f"{report['dataset'].capitalize()} set: {c} nDCG@10 minus {b} nDCG@10 "
                    f"({cfg[c]['ndcg@10']:.4f} - {cfg[b]['ndcg@10']:.4f}).",
                    cfg[c]["ndcg@10"] - cfg[b]["ndcg@10"],
                    "result.metrics; python -m retrieval eval",
                )
    sig = report.get("significance")
    if sig:
        for c, t in sig["tests"].items():
            add(
                f"Paired randomization p-value (Holm-adjusted) of {c} vs {sig['baseline']} on nDCG@10, seed "
                f"{sig['seed']}: {'significant' if t['significant'] else 'not significant'} at 0.05.",
                t["p_holm"],
                "result.significance; same seed gives the same p",
            )
    cats = report["categories"]
    for b, other in (("bm25", "dense"), ("dense", "bm25")):
        losing = [
            (cat, row[b]["ndcg@10"] - row[other]["ndcg@10"]) for cat, row in cats.items() if b in row and other in row
        ]
        if losing:
            cat, gap = min(losing, key=lambda x: (x[1], x[0]))
            add(
                f"{b} alone, worst category relative to {other}: {cat} (nDCG@10 gap {b} - {other}).",
                gap,
                "result.ndcg@10_by_category",
            )
    ref = report.get("refusal") or {}
    if ref.get("refusal_rate", {}).get("full") is not None:
        add(
            f"Refusal rate of the configured pipeline on the {ref['no_match_turns']} no_match turns at "
            f"MIN_SIMILARITY={ref['min_similarity']:g}.",
            ref["refusal_rate"]["full"],
            "result.refusal",
        )
        add(
            f"False-refusal rate of the configured pipeline on the {ref['answerable_turns']} answerable turns.",
            ref["false_refusal_rate"]["full"],
            "result.refusal",
        )
    return facts


# --------------------------------------------------------------------------------------------------- CLI
def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="the class lab contract: one JSON object (kind, seed, evidence, limitations)")
    p.add_argument("--seed", type=int, default=0, help="seed of the significance test (default 0)")
    p.add_argument("--resamples", type=int, default=10_000, help="randomization / bootstrap resamples")
    p.add_argument("--with-timings", action="store_true", help="add a 'timings' key (not reproducible byte for byte)")
    p.add_argument(
        "--adr-recipe",
        action="store_true",
        help="the untuned recipe exactly as ADR-0022 writes it (retrieval.settings.ADR_RECIPE)",
    )
    p.set_defaults(func=run_lab_command)


def run_lab_command(args: argparse.Namespace) -> int:
    from retrieval.evaluation.prepare import recipe_overrides
    from retrieval.settings import Settings

    settings = Settings.from_env(**recipe_overrides(args))
    result = run_lab(args.seed, settings, resamples=args.resamples, with_timings=args.with_timings)
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0
