"""``python -m retrieval tune``: search the fusion and rerank settings for one corpus, and report on turns the
search did not see.

1. The labeled turns with at least one relevant card are split in two with a seeded shuffle: half to tune on, half
   held out. Fewer than ``MIN_TURNS`` turns and it says it cannot tell, and suggests nothing: with ``n`` held-out
   turns the paired randomization test's smallest two-sided p-value is ``2 / 2**n``, below 0.05 only from
   ``n = 6``, so a split needs 6 turns on each side.
2. Each turn's branch lists are taken once, as deep as the deepest setting tried (one pipeline call per turn and
   tokenizer, reranker off); every grid point is then computed from them: the lists cut at its depth, its
   query-aware weights, fusion, and the cross-encoder's blend or replacement of the head, from pair scores scored
   once per (turn, sub-chunk) and cached (``retrieval.rerank.PAIR_SCORES``). The scored list is every card in the
   order the pipeline would rank it (no top_k or threshold cut), at parent level, as ``eval`` scores ``full``.
3. The grid point with the best mean nDCG@10 on the tuning half is compared on the held-out half with today's
   settings and with each branch alone (paired randomization test, ``significance.compare``). It is suggested only
   if it beats the settings and each branch alone there (the class's rule: a hybrid must beat each branch).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrieval.corpus import Dataset, LabeledQuery
from retrieval.evaluation.metrics import score_turn
from retrieval.evaluation.significance import DEFAULT_RESAMPLES, compare
from retrieval.fusion import fuse_branches
from retrieval.parents import best_per_parent
from retrieval.settings import Settings, env_name
from retrieval.types import BranchResult, Hit
from retrieval.weighting import weigh_turn

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever

Progress = Callable[[int, int, str], None]
"""``progress(done, total, label)``, called as the work goes."""
MIN_TURNS = 12
METRIC = "ndcg@10"
# The values tried per setting; today's value of each is always added.
FUSION_GRID: dict[str, tuple[Any, ...]] = {
    "candidate_multiplier": (4, 10, 20),
    "bm25_tokenizer": ("snowball", "plain"),
    "fusion": ("rrf", "convex"),
    "rrf_k": (5, 10, 20, 60),
    "dense_weight": (0.5, 1.0, 2.0, 3.0),  # BM25's weight stays: RRF and convex fusion depend on the ratio only
}
RERANK_GRID: dict[str, tuple[Any, ...]] = {
    "reranker_max_input": (0, 10, 20),
    "rerank_mode": ("rrf", "replace"),
    "rerank_weight": (0.25, 0.5, 1.0),
}
TUNED = (*FUSION_GRID, *RERANK_GRID)


@dataclass(frozen=True)
class TurnLists:
    """One turn's branch lists, as deep as the deepest grid point (BM25 per tokenizer)."""

    query: LabeledQuery
    bm25: dict[str, tuple[Hit, ...]]
    dense: tuple[Hit, ...]


def _values(grid: dict[str, tuple[Any, ...]], base: Settings) -> dict[str, list[Any]]:
    return {k: sorted({*v, getattr(base, k)}, key=lambda x: (str(type(x)), x)) for k, v in grid.items()}


def fusion_points(base: Settings) -> list[dict[str, Any]]:
    """Every fusion grid point (rrf_k only varies under RRF fusion)."""
    grid = _values(FUSION_GRID, base)
    out = []
    for combo in itertools.product(*grid.values()):
        point = dict(zip(grid, combo))
        if point["fusion"] == "convex" and point["rrf_k"] != base.rrf_k:
            continue
        out.append(point)
    return out


def rerank_points(base: Settings) -> list[dict[str, Any]]:
    """Every rerank grid point (the mode and weight only vary when the reranker runs; the weight only in rrf)."""
    grid = _values(RERANK_GRID, base)
    out = []
    for n, mode, weight in itertools.product(*grid.values()):
        off = n == 0
        if (off and (mode != base.rerank_mode or weight != base.rerank_weight)) or (
            mode == "replace" and weight != base.rerank_weight
        ):
            continue
        out.append({"reranker_max_input": n, "rerank_mode": mode, "rerank_weight": weight})
    return out


def gather(
    dataset: Dataset, retriever: HybridRetriever, base: Settings, progress: Progress | None = None
) -> list[TurnLists]:
    """Each answerable turn's branch lists, as deep as the deepest grid point, per tokenizer."""
    depth_mult = max(_values(FUSION_GRID, base)["candidate_multiplier"])
    deep = base.replace(
        candidate_multiplier=depth_mult,
        reranker_max_input=0,
        min_similarity=-1.0,
        refusal_rule="cosine",
        bm25_timeout_ms=600_000,
        dense_timeout_ms=600_000,
    )
    out = []
    turns = [q for q in dataset.queries if any(g > 0 for g in q.relevant.values())]
    for i, q in enumerate(turns, start=1):
        bm25: dict[str, tuple[Hit, ...]] = {}
        dense: tuple[Hit, ...] = ()
        for tokenizer in _values(FUSION_GRID, base)["bm25_tokenizer"]:
            result = retriever.retrieve(q.text, deep.replace(bm25_tokenizer=tokenizer))
            if not (result.bm25.usable and result.dense.usable):
                raise ValueError(f"turn {q.id}: a branch did not run ({result.reason}); tuning needs both.")
            bm25[tokenizer], dense = result.bm25.hits, result.dense.hits
        out.append(TurnLists(q, bm25, dense))
        if progress:
            progress(i, len(turns), "tune: branch lists")
    return out


def _fused(turn: TurnLists, s: Settings, retriever: HybridRetriever) -> list:
    depth = s.candidate_depth
    bm25 = BranchResult("bm25", turn.bm25[s.bm25_tokenizer][:depth])
    dense = BranchResult("dense", turn.dense[:depth])
    weights = weigh_turn(turn.query.text, s, bm25, dense, retriever.bm25_index).as_dict()
    return fuse_branches([bm25, dense], weights, retriever.parent_of, fusion=s.fusion, k=s.rrf_k)


def _ranked(fused: Sequence, s: Settings, logits: dict[str, float]) -> list[str]:
    """The cards in the pipeline's order: the reranked head, then the fused tail, best sub-chunk per card."""
    from retrieval.rerank import order_head

    head = list(fused[: s.reranker_max_input])
    ranked = order_head(head, [logits[h.chunk_id] for h in head], s) if head else []
    return [h.parent_id for h in best_per_parent([*ranked, *fused[len(ranked) :]])]


def _logits(turn: TurnLists, chunk_ids: set[str], retriever: HybridRetriever, s: Settings) -> dict[str, float]:
    from retrieval.rerank import load_reranker, score_pairs

    scorer = load_reranker(s.reranker_model)
    if scorer is None:
        raise ValueError(f"the cross-encoder {s.reranker_model!r} is unavailable: tuning the rerank settings needs it.")
    ids = sorted(chunk_ids)
    scores = score_pairs(scorer, turn.query.text, [retriever.by_id[c].indexed_text for c in ids])
    out: dict[str, float] = {}
    for c, v in zip(ids, scores, strict=True):
        if v is None:  # score_pairs without a stop scores every pair
            raise RuntimeError(f"the cross-encoder returned no score for {c}")
        out[c] = float(v)
    return out


def score_grid(
    turns: Sequence[TurnLists],
    points: Sequence[dict[str, Any]],
    base: Settings,
    retriever: HybridRetriever,
    progress: Progress | None = None,
) -> list[list[float]]:
    """nDCG@10 of every grid point (``points``: full settings overrides) on every turn: [point][turn]."""
    table = [[0.0] * len(turns) for _ in points]
    by_fusion: dict[tuple, list[int]] = {}
    for p, point in enumerate(points):
        key = tuple((k, point[k]) for k in FUSION_GRID)
        by_fusion.setdefault(key, []).append(p)
    deepest = max(pt["reranker_max_input"] for pt in points)
    # Each point's settings once, not once per turn: building a Settings checks every knob, and a full grid (about
    # a thousand points) rebuilt them for every turn, a third of the grid's time.
    fusion_settings = {key: base.replace(**dict(key)) for key in by_fusion}
    point_settings = [base.replace(**point) for point in points]
    for t, turn in enumerate(turns):
        fused_of = {key: _fused(turn, fusion_settings[key], retriever) for key in by_fusion}
        heads = {h.chunk_id for fused in fused_of.values() for h in fused[:deepest]}
        logits = _logits(turn, heads, retriever, base) if deepest else {}
        for key, members in by_fusion.items():
            for p in members:
                ranked = _ranked(fused_of[key], point_settings[p], logits)
                table[p][t] = score_turn(ranked, turn.query.relevant, (METRIC,))[METRIC]
        if progress:
            progress(t + 1, len(turns), "tune: grid")
    return table


def _branch_alone(turns: Sequence[TurnLists], base: Settings, branch: str) -> list[float]:
    depth = base.candidate_depth
    out = []
    for turn in turns:
        hits = turn.bm25[base.bm25_tokenizer] if branch == "bm25" else turn.dense
        ranked = [h.parent_id for h in best_per_parent(hits[:depth])]
        out.append(score_turn(ranked, turn.query.relevant, (METRIC,))[METRIC])
    return out


def split(turns: Sequence[TurnLists], seed: int) -> tuple[list[TurnLists], list[TurnLists]]:
    """A seeded shuffle cut in half: (tune, held out); the held-out half gets the odd turn."""
    order = list(range(len(turns)))
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    return [turns[i] for i in sorted(order[:half])], [turns[i] for i in sorted(order[half:])]


def _mean(xs: Sequence[float]) -> float:
    return round(sum(xs) / len(xs), 6) if xs else 0.0


def cannot_tell(answerable: int) -> str:
    return (
        f"cannot tell: {answerable} labeled turn{'s' if answerable != 1 else ''} with a relevant card; tuning "
        f"needs at least {MIN_TURNS} (6 to tune on, 6 held out): with n held-out turns the paired randomization "
        "test's smallest two-sided p-value is 2/2^n, below 0.05 only from n = 6. Nothing is suggested; label or "
        "judge more turns."
    )


def tune(
    dataset: Dataset,
    retriever: HybridRetriever,
    base: Settings,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    progress: Progress | None = None,
    fusion_only: bool = False,
) -> dict[str, Any]:
    """The held-out comparison and the suggestion (or None) for ``dataset`` on ``retriever`` (see the module).
    ``fusion_only`` keeps today's rerank settings and grids fusion alone (a large set: fewer pairs to score)."""
    started = time.perf_counter()
    answerable = sum(any(g > 0 for g in q.relevant.values()) for q in dataset.queries)
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "turns": len(dataset.queries),
        "answerable_turns": answerable,
        "metric": METRIC,
        "seed": seed,
        "minimum_turns": MIN_TURNS,
        "suggestion": None,
        "defaults": {k: getattr(base, k) for k in TUNED},
    }
    if answerable < MIN_TURNS:
        report.update(verdict=cannot_tell(answerable), held_out=None, wall_seconds=0.0)
        return report
    turns = gather(dataset, retriever, base, progress)
    tune_set, held = split(turns, seed)
    reranks = [{k: getattr(base, k) for k in RERANK_GRID}] if fusion_only else rerank_points(base)
    points = [{**f, **r} for f in fusion_points(base) for r in reranks]
    table = score_grid(tune_set, points, base, retriever, progress)
    means = [sum(row) / len(row) for row in table]
    defaults = {k: getattr(base, k) for k in TUNED}
    # Best mean on the tuning half; a tie goes to the point nearest today's settings (fewest changed values).
    best = max(range(len(points)), key=lambda p: (round(means[p], 9), -sum(points[p][k] != defaults[k] for k in TUNED)))
    chosen = points[best]
    held_scores = {
        "suggested": score_grid(held, [chosen], base, retriever)[0],
        "defaults": score_grid(held, [defaults], base, retriever)[0],
        "bm25": _branch_alone(held, base, "bm25"),
        "dense": _branch_alone(held, base, "dense"),
    }
    tests = {
        name: compare(held_scores["suggested"], held_scores[name], seed=seed, resamples=resamples).to_dict()
        for name in ("defaults", "bm25", "dense")
    }
    means_held = {k: _mean(v) for k, v in held_scores.items()}
    changed = {k: v for k, v in chosen.items() if v != defaults[k]}
    beats = {name: means_held["suggested"] > means_held[name] for name in ("defaults", "bm25", "dense")}
    if changed and all(beats.values()):
        report["suggestion"] = {"settings": changed, "env": {env_name(k): v for k, v in changed.items()}}
    verdict = _verdict(changed, beats, means_held, tests["defaults"]["p_value"])
    report.update(
        split={
            "tune": len(tune_set),
            "held_out": len(held),
            "tune_ids": [t.query.id for t in tune_set],
            "held_out_ids": [t.query.id for t in held],
        },
        grid={
            "points": len(points),
            "fusion_only": fusion_only,
            "fusion": {k: list(v) for k, v in _values(FUSION_GRID, base).items()},
            "rerank": {k: list(v) for k, v in _values(RERANK_GRID, base).items()},
        },
        best_on_tune={
            "settings": chosen,
            METRIC: round(means[best], 6),
            "defaults_" + METRIC: round(means[points.index(defaults)] if defaults in points else 0.0, 6),
        },
        held_out={
            "means": means_held,
            "tests": {
                k: {x: (round(v, 6) if isinstance(v, float) else v) for x, v in t.items()} for k, t in tests.items()
            },
            "beats": beats,
        },
        verdict=verdict,
        wall_seconds=round(time.perf_counter() - started, 1),
    )
    return report


def _verdict(changed: dict[str, Any], beats: dict[str, bool], means: dict[str, float], p: float) -> str:
    """The held-out outcome in words: the suggestion (with whether it is significant), or why there is none."""
    point = ", ".join(f"{env_name(k)}={v}" for k, v in changed.items())
    if not changed:
        return "today's settings are the best grid point on the tuning turns: nothing to suggest."
    if all(beats.values()):
        caveat = "" if p < 0.05 else ": not significant at 0.05, more turns could tell"
        return (
            f"suggest {point}: held-out {METRIC} {means['suggested']:.4f} vs {means['defaults']:.4f} with today's "
            f"settings (p = {p:.3g}{caveat}), and above BM25 alone ({means['bm25']:.4f}) and dense alone "
            f"({means['dense']:.4f})."
        )
    lost = ", ".join("today's settings" if n == "defaults" else f"{n} alone" for n, ok in beats.items() if not ok)
    others = ", ".join(f"{n} {means[n]:.4f}" for n in ("defaults", "bm25", "dense"))
    return (
        f"nothing suggested: the best grid point on the tuning turns ({point}) does not beat {lost} on the "
        f"held-out turns ({METRIC} {means['suggested']:.4f} vs {others})."
    )


def format_tune(report: dict[str, Any]) -> str:
    lines = [
        f"dataset: {report['dataset']}  turns: {report['turns']} ({report['answerable_turns']} with a relevant "
        f"card)  seed: {report['seed']}"
    ]
    if report.get("held_out"):
        sp, ho = report["split"], report["held_out"]
        lines += [
            f"split: {sp['tune']} turns to tune on, {sp['held_out']} held out; grid: {report['grid']['points']} points",
            "best on the tuning turns: " + ", ".join(f"{k}={v}" for k, v in report["best_on_tune"]["settings"].items()),
            "",
            f"held-out {report['metric']}:",
        ]
        for name, value in ho["means"].items():
            t = ho["tests"].get(name)
            vs = f"   suggested - {name}: {t['diff']:+.4f}, p = {t['p_value']:.3g}" if t else ""
            lines.append(f"  {name:<10} {value:.4f}{vs}")
    lines += ["", report["verdict"], f"({report['wall_seconds']} s)"]
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="search the fusion and rerank settings for a corpus; report on held-out turns",
        description="A seeded split of the labeled turns; a grid over fusion and rerank settings "
        "from each turn's cached branch lists and pair scores; the best on one half "
        "against today's settings and each branch alone on the other half "
        "(retrieval/evaluation/tune.py).",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--corpus", metavar="NAME", help="a corpus with labeled turns or judgments (default shipped)")
    source.add_argument("--beir", metavar="PATH", help="a BEIR-layout folder")
    p.add_argument("--split", default="test", help="BEIR qrels split (default: test)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and the significance test (default 0)")
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    p.add_argument("--fusion-only", action="store_true", help="keep today's rerank settings, grid fusion alone")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.dense_build import stderr_progress
    from retrieval.evaluation.prepare import build_retriever, load_dataset

    settings = Settings.from_env()
    args.limit, args.queries = None, None
    args.corpus = args.corpus or (None if args.beir else "shipped")
    dataset = load_dataset(args, settings)
    answerable = sum(any(g > 0 for g in q.relevant.values()) for q in dataset.queries)
    if answerable < MIN_TURNS:  # said before any model loads
        report = tune(dataset, None, settings, seed=args.seed)  # type: ignore[arg-type]
    else:
        retriever, settings = build_retriever(dataset, settings, args.beir, stderr_progress)
        report = tune(
            dataset,
            retriever,
            settings,
            seed=args.seed,
            resamples=args.resamples,
            progress=_progress,
            fusion_only=args.fusion_only,
        )
    print(json.dumps(report, ensure_ascii=False) if args.json else format_tune(report))
    return 0


def _progress(done: int, total: int, label: str) -> None:
    if done == total or done % 10 == 0:
        print(f"{label}: {done}/{total} turns", file=sys.stderr, flush=True)
