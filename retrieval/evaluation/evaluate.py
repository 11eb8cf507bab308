"""``python -m retrieval eval``: does the hybrid beat each branch alone? Metrics per configuration, per category.

Configurations, all scored at parent (card / document) level after ``best_per_parent``:

- ``bm25``: the BM25 branch alone; ``dense``: the dense branch alone;
- ``rrf``: both branches fused with Reciprocal Rank Fusion;
- ``full``: what the pipeline returns: the cross-encoder reorders the fused head, the fused tail follows.

One deep ``retrieve`` call per turn yields all four lists (top_k=100, a per-branch depth of 200 sub-chunks by
default, no similarity cut). A second call with the *configured* settings gives the per-turn latency and the
refusal decision at the configured ``MIN_SIMILARITY``; two more (reranker off, hybrid off) give the refusal of
``rrf`` and of the legacy dense path. The pipeline caches branch lists, query embeddings and rerank scores, so
these extra calls and the sweeps cost few model calls.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.corpus import QUERY_CATEGORIES, Dataset, LabeledQuery
from retrieval.evaluation.metrics import METRICS, score_turn
from retrieval.evaluation.significance import DEFAULT_RESAMPLES, compare, holm
from retrieval.parents import best_per_parent
from retrieval.settings import Settings, knob_for

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever
    from retrieval.types import RetrievalResult

CONFIGS: tuple[str, ...] = ("bm25", "dense", "rrf", "full")
BRANCHES: tuple[str, ...] = ("bm25", "dense")
DEFAULT_DEPTH = 200
BASELINE_REFUSAL = "full (cosine rule)"
LIST_LENGTH = 100
ALPHA = 0.05
LATENCY_NOTE = (
    "ms per turn from the first (uncached) call of each turn at the configured settings: "
    "bm25 = BM25 search; dense = query embedding + Chroma query; rrf = max(bm25, dense) + fusion + "
    "dedup (the branches run concurrently); full = rrf + cross-encoder reranking"
)

Progress = Callable[[int, int, str], None]


# ------------------------------------------------------------------------------------------------- settings
def eval_settings(base: Settings, depth: int = DEFAULT_DEPTH) -> Settings:
    """``base`` made deep enough to score ranked lists: ``depth`` sub-chunks per branch, up to 100 cards kept,
    no refusal (the cosine rule at -1 cuts nothing; refusals are measured at the configured settings), generous
    stage budgets (a measurement must not time out). Everything else stays."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1000:
        raise ValueError(f"depth must be a whole number of sub-chunks per branch from 1 to 1000, got {depth!r}.")
    top_k = max(d for d in range(1, LIST_LENGTH + 1) if depth % d == 0)
    return base.replace(
        top_k=top_k,
        candidate_multiplier=depth // top_k,
        min_similarity=-1.0,
        refusal_rule="cosine",
        bm25_timeout_ms=600_000,
        dense_timeout_ms=600_000,
        rerank_timeout_ms=600_000,
    )


def parse_set(pairs: Iterable[str]) -> dict[str, Any]:
    """``["rrf_k=20", "FUSION=convex"]`` -> typed Settings overrides (attribute or environment names)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set {pair!r}: write KEY=VALUE, e.g. --set rrf_k=20.")
        spec = knob_for(key)
        if spec is None:
            raise ValueError(f"--set {key}: unknown setting. Known: {', '.join(sorted(Settings.knobs()))}.")
        out[spec.name] = spec.parse(raw)
    return out


# ------------------------------------------------------------------------------------------------ one turn
@dataclass(frozen=True)
class TurnRun:
    """One labeled turn through every configuration: parent lists, latency and refusals."""

    query: LabeledQuery
    ranked: dict[str, list[str]]
    ms: dict[str, float] = field(default_factory=dict)
    refused: dict[str, bool] = field(default_factory=dict)
    level: str = ""
    reranked: bool = True
    cached: bool = False

    @property
    def answerable(self) -> bool:
        return any(g > 0 for g in self.query.relevant.values())


def ranked_parents(result: RetrievalResult, config: str) -> list[str]:
    """The parent ids a configuration ranks for one turn, best first."""
    if config == "bm25":
        hits = result.bm25.hits
    elif config == "dense":
        hits = result.dense.hits
    elif config == "rrf":
        hits = result.fused
    elif config == "full":
        return [h.parent_id for h in result.final]
    else:
        raise ValueError(f"unknown configuration {config!r}: choose from {', '.join(CONFIGS)}.")
    return [h.parent_id for h in best_per_parent(hits)]


def latency(timings: Mapping[str, float]) -> dict[str, float]:
    """Per-configuration latency of one turn from the pipeline's stage timings (see ``LATENCY_NOTE``)."""
    bm25 = timings.get("bm25", 0.0)
    dense = timings.get("embed_query", 0.0) + timings.get("chroma_query", 0.0)
    rrf = max(bm25, dense) + timings.get("fusion", 0.0) + timings.get("dedup_threshold", 0.0)
    return {"bm25": bm25, "dense": dense, "rrf": rrf, "full": rrf + timings.get("rerank", 0.0)}


def run_turn(
    retriever: HybridRetriever,
    query: LabeledQuery,
    settings: Settings,
    deep: Settings,
    configs: Sequence[str] = CONFIGS,
    *,
    refusals: bool = True,
) -> TurnRun:
    """Run one turn: configured settings first (latency, refusal), then the deep call the lists come from."""
    ms: dict[str, float] = {}
    refused: dict[str, bool] = {}
    level = ""
    cached = False

    def turn(s: Settings) -> RetrievalResult:  # no control moves here: nothing to score ahead in the background
        return retriever.retrieve(query.text, s, prescore=False)

    if refusals:
        configured = turn(settings)
        level = configured.hybrid_path
        cached = configured.timings_ms.get("embed_query", 1.0) == 0.0
        ms = {c: v for c, v in latency(configured.timings_ms).items() if c in configs}
        refused["full"] = configured.refused
        refused["rrf"] = turn(settings.replace(simulate_reranker_failure=True)).refused
        refused["dense"] = turn(settings.replace(hybrid_enabled=False)).refused
        refused = {c: v for c, v in refused.items() if c in configs}
        if "full" in configs and settings.refusal_rule != "cosine":  # today's rule, measured the same way
            refused[BASELINE_REFUSAL] = turn(settings.replace(refusal_rule="cosine")).refused
    result = turn(deep)
    return TurnRun(
        query=query,
        ranked={c: ranked_parents(result, c) for c in configs},
        ms=ms,
        refused=refused,
        level=level,
        reranked=bool(result.reranked),
        cached=cached,
    )


def run_turns(
    dataset: Dataset,
    retriever: HybridRetriever,
    settings: Settings,
    *,
    configs: Sequence[str] = CONFIGS,
    depth: int = DEFAULT_DEPTH,
    refusals: bool = True,
    progress: Progress | None = None,
    label: str = "eval",
) -> list[TurnRun]:
    """Every labeled turn of ``dataset`` through ``run_turn``.

    Raises:
        ValueError: ``settings`` name another embedding model than the retriever's index (its dense scores would be
            that index's model's, not the settings': a false result).
    """
    _check_configs(configs)
    check_index(retriever, settings, label)
    if not dataset.queries:
        raise ValueError(f"dataset {dataset.name!r} has no labeled turns to evaluate.")
    deep = eval_settings(settings, depth)
    if "full" not in configs:
        deep = deep.replace(reranker_max_input=0)  # the other lists do not need the cross-encoder: skip its cost
    runs = []
    total = len(dataset.queries)
    with retriever.using() if hasattr(retriever, "using") else contextlib.nullcontext():  # never evicted meanwhile
        for i, q in enumerate(dataset.queries, start=1):
            runs.append(run_turn(retriever, q, settings, deep, configs, refusals=refusals))
            if progress:
                progress(i, total, label)
    return runs


def check_index(retriever: HybridRetriever, settings: Settings, label: str = "eval") -> None:
    """Refuse to score ``settings`` on a retriever indexed with another embedding model: ``retrieve`` keeps the
    retriever's own model whatever the settings say, so both sides of an A vs B would be one model (a false tie)."""
    from retrieval.encoders import canonical_embedder

    built = getattr(getattr(retriever, "settings", None), "embedding_model", None)
    if built and canonical_embedder(built) != canonical_embedder(settings.embedding_model):
        raise ValueError(
            f"{label}: the settings ask for embedding model {settings.embedding_model} but this index "
            f"was built with {built}; score them on an index of {settings.embedding_model}."
        )


# ------------------------------------------------------------------------------------------------- scoring
def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def per_turn_scores(runs: Sequence[TurnRun], configs: Sequence[str]) -> list[dict[str, dict[str, float]]]:
    """For every answerable turn: metric -> config -> value."""
    out = []
    for run in runs:
        if not run.answerable:
            continue
        scores = {c: score_turn(run.ranked[c], run.query.relevant) for c in configs}
        out.append({m: {c: scores[c][m] for c in configs} for m in METRICS})
    return out


def aggregate(runs: Sequence[TurnRun], configs: Sequence[str], *, deep_enough: bool = True) -> dict[str, dict]:
    """Mean metrics per configuration over the answerable turns (plus ms per turn when measured)."""
    answerable = [r for r in runs if r.answerable]
    scores = per_turn_scores(answerable, configs)
    out: dict[str, dict] = {}
    for c in configs:
        row = {m: _mean([s[m][c] for s in scores]) for m in METRICS}
        if not deep_enough:
            row["recall@100"] = None
        timed = [r.ms[c] for r in runs if c in r.ms]
        if timed:
            row["ms_per_turn"] = round(sum(timed) / len(timed), 3)
        out[c] = row
    return out


def refusal_report(
    runs: Sequence[TurnRun], settings: Settings, configs: Sequence[str], thresholds: str = "defaults"
) -> dict[str, Any]:
    """Refusal rate on ``no_match`` turns and false-refusal rate on answerable turns, at the configured threshold.

    ``thresholds`` says where the evidence rule's thresholds came from (``defaults``, or the corpus's stored
    calibration, which the page's turns on that corpus use too)."""
    no_match = [r for r in runs if r.query.category == "no_match" or not r.answerable]
    answerable = [r for r in runs if r.answerable]
    measured = [c for c in (*configs, BASELINE_REFUSAL) if any(c in r.refused for r in runs)]

    def rate(group: Sequence[TurnRun], c: str) -> float | None:
        return round(sum(r.refused[c] for r in group) / len(group), 6) if group else None

    return {
        "min_similarity": settings.min_similarity,
        "top_k": settings.top_k,
        "no_match_turns": len(no_match),
        "answerable_turns": len(answerable),
        "refusal_rate": {c: rate(no_match, c) for c in measured},
        "false_refusal_rate": {c: rate(answerable, c) for c in measured},
        "refusal_rule": settings.refusal_rule,
        "thresholds": thresholds,
        "note": (
            "refusal = the pipeline's no_match level; full = configured settings, rrf = reranker off, "
            "dense = the legacy dense-only path (RETRIEVAL_HYBRID_ENABLED=false); the pipeline has no "
            f"BM25-only switch, so bm25 has no refusal rate; {BASELINE_REFUSAL} = full with "
            "REFUSAL_RULE=cosine (only the MIN_SIMILARITY cut), the baseline"
        ),
    }


def significance(
    runs: Sequence[TurnRun],
    configs: Sequence[str],
    *,
    metric: str = "ndcg@10",
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> dict[str, Any] | None:
    """Each configuration vs the best single branch on ``metric``: paired randomization test (explicit seed),
    bootstrap 95% interval of the difference, Holm-adjusted p-values across the comparisons."""
    branches = [c for c in BRANCHES if c in configs]
    scores = per_turn_scores(runs, configs)
    if not branches or len(scores) < 2:
        return None
    means = {c: sum(s[metric][c] for s in scores) / len(scores) for c in configs}
    baseline = max(branches, key=lambda c: (means[c], c == "bm25"))
    base = [s[metric][baseline] for s in scores]
    tests = {
        c: compare([s[metric][c] for s in scores], base, seed=seed, resamples=resamples).to_dict()
        for c in configs
        if c != baseline
    }
    adjusted = holm({c: t["p_value"] for c, t in tests.items()})
    for c, t in tests.items():
        wins = sum(s[metric][c] > s[metric][baseline] for s in scores)
        losses = sum(s[metric][c] < s[metric][baseline] for s in scores)
        t.update(
            p_holm=round(adjusted[c], 6),
            significant=adjusted[c] < ALPHA,
            wins=wins,
            losses=losses,
            ties=len(scores) - wins - losses,
        )
        for key in ("mean_a", "mean_b", "diff", "p_value", "ci_low", "ci_high"):
            t[key] = round(t[key], 6)
    return {
        "metric": metric,
        "baseline": baseline,
        "alpha": ALPHA,
        "method": "paired randomization test (sign flip), two-sided; bootstrap 95% CI of the mean difference; "
        "Holm correction across the comparisons",
        "seed": seed,
        "resamples": resamples,
        "tests": tests,
    }


def verdict(
    configs_report: Mapping[str, Mapping[str, Any]], sig: Mapping[str, Any] | None, metric: str = "ndcg@10"
) -> dict[str, dict[str, Any]]:
    """The class rule: a hybrid earns its double cost only if it beats each branch alone."""
    out = {}
    for c in configs_report:
        if c in BRANCHES:
            continue
        value = configs_report[c][metric]
        beats = {f"beats_{b}": value > configs_report[b][metric] for b in BRANCHES if b in configs_report}
        test = (sig or {}).get("tests", {}).get(c)
        out[c] = {
            metric: value,
            **beats,
            "beats_each_branch": all(beats.values()) if beats else None,
            "significant_vs_best_branch": bool(test and test["significant"] and test["diff"] > 0),
        }
    return out


def evaluate(
    dataset: Dataset,
    retriever: HybridRetriever,
    settings: Settings,
    configs: Sequence[str] = CONFIGS,
    *,
    depth: int = DEFAULT_DEPTH,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    refusals: bool = True,
    progress: Progress | None = None,
    runs: Sequence[TurnRun] | None = None,
    store_text: bool = True,
) -> dict[str, Any]:
    """Score ``configs`` on ``dataset``: overall, per category, refusals, significance, per turn.

    Args:
        dataset: the labeled turns (``load_shipped`` or ``load_beir``).
        retriever: a ``HybridRetriever`` over the dataset's chunks.
        settings: the configured settings (threshold, reranker, rrf_k, weights, ...); lists are scored with
            ``eval_settings(settings, depth)``.
        configs: any of ``bm25``, ``dense``, ``rrf``, ``full``.
        depth: sub-chunks per branch for the scored lists.
        seed / resamples: for the significance test.
        refusals: also run the configured settings (latency and refusal rates).
        progress: ``progress(done, total, label)`` after each turn.
        runs: reuse turns already run (``run_turns``) instead of running them.
        store_text: keep each turn's text in ``per_turn`` (off for third-party sets whose license forbids
            copying them, e.g. SciFact: ids only).

    Returns:
        A JSON-ready dict: ``dataset``, ``turns``, ``configs`` {config: {metric: value, "ms_per_turn": ms}},
        ``categories``, ``refusal``, ``significance``, ``verdict``, ``settings``, ``per_turn``, ``notes``.
    """
    _check_configs(configs)
    if runs is None:
        runs = run_turns(
            dataset, retriever, settings, configs=configs, depth=depth, refusals=refusals, progress=progress
        )
    deep = eval_settings(settings, depth)
    deep_enough = deep.top_k >= 100 and deep.candidate_depth >= 100
    overall = aggregate(runs, configs, deep_enough=deep_enough)
    categories: dict[str, Any] = {}
    for cat in _categories(runs):
        group = [r for r in runs if r.query.category == cat and r.answerable]
        categories[cat] = {"turns": len(group), **aggregate(group, configs, deep_enough=deep_enough)}
    sig = significance(runs, configs, seed=seed, resamples=resamples)
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "turns": len(runs),
        "answerable_turns": sum(r.answerable for r in runs),
        "configs": overall,
        "categories": categories,
        "refusal": refusal_report(runs, settings, configs, thresholds_source(retriever, settings))
        if refusals
        else None,
        "significance": sig,
        "verdict": verdict(overall, sig),
        "settings": {
            "configured": _settings_summary(settings),
            "evaluation": {"top_k": deep.top_k, "candidate_depth": deep.candidate_depth, "min_similarity": -1.0},
            "documents": len({c.parent_id for c in retriever.chunks}),
            "chunks": len(retriever.chunks),
        },
        "configured_levels": _count(r.level for r in runs if r.level),
        "reranker_missing_turns": sum(not r.reranked for r in runs) if "full" in configs else 0,
        "cached_turns": sum(r.cached for r in runs),
        "notes": {
            "level": "parent (card / document) level: each branch list is deduped to its best sub-chunk per parent",
            "metrics": "mean over answerable turns; nDCG uses graded linear gains and a log2 discount",
            "latency": LATENCY_NOTE,
            "recall@100": (
                "measured"
                if deep_enough
                else f"null: the lists hold at most {deep.top_k} cards (depth {deep.candidate_depth})"
            ),
        },
        "per_turn": _per_turn(runs, configs, store_text),
    }
    return report


def _per_turn(runs: Sequence[TurnRun], configs: Sequence[str], store_text: bool = True) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        row: dict[str, Any] = {
            "id": r.query.id,
            "category": r.query.category,
            "relevant": dict(r.query.relevant),
            "top3": {c: r.ranked[c][:3] for c in configs},
        }
        if store_text:
            row["text"] = r.query.text
        if r.answerable:
            row.update(
                {
                    m: {c: round(v, 6) for c, v in scores.items()}
                    for m, scores in per_turn_scores([r], configs)[0].items()
                    if m in ("ndcg@10", "mrr@10")
                }
            )
        if r.refused:
            row["refused"] = dict(r.refused)
        if r.level:
            row["level"] = r.level
        out.append(row)
    return out


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _categories(runs: Sequence[TurnRun]) -> list[str]:
    present = {r.query.category for r in runs if r.answerable}
    return [c for c in QUERY_CATEGORIES if c in present] + sorted(present - set(QUERY_CATEGORIES))


def _settings_summary(s: Settings) -> dict[str, Any]:
    keep = (
        "rrf_k",
        "bm25_weight",
        "dense_weight",
        "embedding_model",
        "reranker_model",
        "reranker_max_input",
        "top_k",
        "candidate_multiplier",
        "min_similarity",
        "hybrid_enabled",
        "bm25_tokenizer",
        "fusion",
        "query_weighting",
        "rerank_mode",
        "rerank_weight",
    )
    data = s.to_dict()
    return {k: data[k] for k in keep if k in data}


def _check_configs(configs: Sequence[str]) -> None:
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        raise ValueError(f"unknown configurations {unknown or '(none given)'}: choose from {', '.join(CONFIGS)}.")


# ---------------------------------------------------------------------------------------------------- output
def format_report(report: Mapping[str, Any]) -> str:
    """A readable text table of an ``evaluate`` report."""
    configs = list(report["configs"])
    metrics = ["ndcg@10", "recall@10", "recall@100", "mrr@10", "ms_per_turn"]
    lines = [
        f"dataset: {report['dataset']}   turns: {report['turns']} ({report['answerable_turns']} answerable)   "
        f"documents: {report['settings']['documents']}   chunks: {report['settings']['chunks']}",
        f"parent-level metrics; lists from {report['settings']['evaluation']['candidate_depth']} sub-chunks "
        f"per branch, top {report['settings']['evaluation']['top_k']} cards",
        "configured: " + ", ".join(f"{k}={v}" for k, v in report["settings"]["configured"].items()),
        "",
    ]
    lines += _table(["config", *metrics], [[c, *(report["configs"][c].get(m) for m in metrics)] for c in configs])
    sig = report.get("significance")
    if sig:
        lines += [
            "",
            f"significance vs best single branch ({sig['baseline']}) on {sig['metric']}: "
            f"paired randomization, seed {sig['seed']}, {sig['resamples']} resamples, Holm-adjusted",
        ]
        rows = [
            [
                c,
                t["diff"],
                f"[{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]",
                t["p_value"],
                t["p_holm"],
                f"{t['wins']}/{t['losses']}/{t['ties']}",
                "yes" if t["significant"] else "no",
            ]
            for c, t in sig["tests"].items()
        ]
        lines += _table(["config", "diff", "95% CI", "p", "p_holm", "win/loss/tie", "significant"], rows)
    for c, v in report.get("verdict", {}).items():
        beats = ", ".join(
            f"{k.removeprefix('beats_')}: {'yes' if ok else 'NO'}"
            for k, ok in v.items()
            if k.startswith("beats_") and k != "beats_each_branch"
        )
        lines.append(
            f"{c} beats each branch alone on ndcg@10? {'yes' if v['beats_each_branch'] else 'NO'} "
            f"({beats}); significant vs best branch: {'yes' if v['significant_vs_best_branch'] else 'no'}"
        )
    cats = report.get("categories") or {}
    if len(cats) > 1 or (cats and next(iter(cats)) != "beir"):
        lines += ["", "nDCG@10 by category"]
        lines += _table(
            ["category", "turns", *configs],
            [[cat, row["turns"], *(row[c]["ndcg@10"] for c in configs)] for cat, row in cats.items()],
        )
    ref = report.get("refusal")
    if ref and ref["refusal_rate"]:
        rule = ref.get("refusal_rule", "cosine")
        source = f" (thresholds: {ref['thresholds']})" if rule == "evidence" and ref.get("thresholds") else ""
        lines += [
            "",
            f"refusals by REFUSAL_RULE={rule}{source} at MIN_SIMILARITY="
            f"{ref['min_similarity']:g}, top_k={ref['top_k']} "
            f"({ref['no_match_turns']} no_match turns, {ref['answerable_turns']} answerable)",
        ]
        lines += _table(
            ["config", "refusal rate (no_match)", "false refusals (answerable)"],
            [[c, ref["refusal_rate"][c], ref["false_refusal_rate"][c]] for c in ref["refusal_rate"]],
        )
    levels = report.get("configured_levels") or {}
    if set(levels) - {"full", "no_match"}:
        lines.append(
            "levels of the configured calls: "
            + ", ".join(f"{k}={v}" for k, v in levels.items())
            + " (a turn below full lost a stage, e.g. the reranker's time budget)"
        )
    if report.get("reranker_missing_turns"):
        lines.append(
            f"warning: the reranker did not run on {report['reranker_missing_turns']} turns (full = fused order there)"
        )
    if report.get("cached_turns"):
        lines.append(f"warning: {report['cached_turns']} turns were already cached: their latency is not a cold call")
    lines += ["", f"latency: {report['notes']['latency']}"]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.4f}"
    return str(v)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [[str(h) for h in header]] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    fmt = lambda r: "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths)))  # noqa: E731
    return [fmt(cells[0]), fmt(["-" * w for w in widths]), *(fmt(r) for r in cells[1:])]


def save_runs(
    folder: str | Path, runs: Sequence[TurnRun], report: Mapping[str, Any], configs: Sequence[str]
) -> list[Path]:
    """Write TREC run files (``<config>.trec``: qid Q0 docid rank score tag, score = list length - rank + 1,
    so any tool sorts them back into our order), the qrels (``qrels.trec``) and the report (``report.json``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for c in configs:
        path = folder / f"{c}.trec"
        with path.open("w", encoding="utf-8") as out:
            for r in runs:
                n = len(r.ranked[c])
                for rank, doc in enumerate(r.ranked[c], start=1):
                    out.write(f"{_trec_id(r.query.id)} Q0 {_trec_id(doc)} {rank} {n - rank + 1} {c}\n")
        written.append(path)
    qrels = folder / "qrels.trec"
    with qrels.open("w", encoding="utf-8") as out:
        for r in runs:
            for doc, grade in sorted(r.query.relevant.items()):
                out.write(f"{_trec_id(r.query.id)} 0 {_trec_id(doc)} {grade}\n")
    written.append(qrels)
    path = folder / "report.json"
    path.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    written.append(path)
    return written


def _trec_id(value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"id {value!r} cannot go into a TREC file: ids must be non-empty and have no whitespace.")
    return value


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a ``report.json`` written by ``--save-runs`` (the Evaluation tab's cached results)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(
            f"{path}: no such report. Write one with `python -m retrieval eval --save-runs DIR`."
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}). Re-run the eval to rewrite it.") from None
    if not isinstance(data, dict) or not {"dataset", "turns", "configs"} <= set(data):
        raise ValueError(f"{path}: not an eval report (needs dataset, turns, configs).")
    return data


def load_dataset(args: argparse.Namespace, settings: Settings) -> Dataset:
    """The dataset named by the command line: ``--beir PATH`` or the shipped cards (+ ``--queries``)."""
    from retrieval.corpus import load_beir, load_shipped
    from retrieval.evaluation.labeled import limit_turns

    if getattr(args, "corpus", None) and args.beir:
        raise ValueError("give either --corpus or --beir, not both.")
    if getattr(args, "corpus", None):  # the same loader as the Evaluation tab's live entries
        from retrieval.evaluation.labeled import labeled_dataset

        ds = labeled_dataset(args.corpus, settings, paths=True)[1]
    elif args.beir:
        ds = load_beir(args.beir, args.split)
    else:
        ds = load_shipped(settings.corpus_path, args.queries)
    if args.limit is not None:
        if args.limit < 1:
            raise ValueError(f"--limit must be at least 1, got {args.limit}.")
        ds = limit_turns(ds, args.limit)
    return ds


def build_retriever(
    dataset: Dataset,
    settings: Settings,
    beir_folder: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[HybridRetriever, Settings]:
    """A retriever over the dataset's chunks, with a cache large enough for a whole evaluation. A BEIR set gets
    its own Chroma folder, ``<CHROMA_PATH>/beir-<folder name>``, embedded once and reused."""
    from retrieval.corpus import split_cards
    from retrieval.pipeline import HybridRetriever

    if beir_folder:
        settings = settings.replace(chroma_path=str(Path(settings.chroma_path) / f"beir-{Path(beir_folder).name}"))
    chunks = split_cards(dataset.cards, dataset.chunk_words)
    retriever = HybridRetriever(
        settings, chunks=chunks, progress=progress, cache_size=max(4096, 400 * len(dataset.queries))
    )
    if retriever.dense is None:
        raise ValueError(f"the dense branch is unavailable ({retriever.dense_error}); fix it before evaluating.")
    return retriever, settings


def use_stored_calibration(retriever: HybridRetriever, settings: Settings) -> None:
    """Give ``retriever`` the refusal calibration stored for its chunks and models (if any), as the page's turns on
    that corpus have: the CLI's refusal rates of an uploaded corpus are then the page's. Not for the shipped cards:
    their calibration is a report only (the page keeps the defaults chosen on their dev splits)."""
    from retrieval import calibration

    retriever.calibration = calibration.load(settings, retriever.chunks)


def thresholds_source(retriever: HybridRetriever, settings: Settings) -> str:
    """Where the refusal rule's thresholds of ``retriever``'s turns come from: ``defaults`` or its calibration."""
    from retrieval.refusal_turn import thresholds_for

    return thresholds_for(getattr(retriever, "calibration", None), settings).source or "defaults"


def recipe_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``retrieval.settings.ADR_RECIPE`` when ``--adr-recipe`` is given, else nothing."""
    if not getattr(args, "adr_recipe", False):
        return {}
    from retrieval import settings as settings_module

    recipe = getattr(settings_module, "ADR_RECIPE", None)
    if not isinstance(recipe, dict):
        raise ValueError("--adr-recipe: this version has no retrieval.settings.ADR_RECIPE; use --set KEY=VALUE.")
    return dict(recipe)
