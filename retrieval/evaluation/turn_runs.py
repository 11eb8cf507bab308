"""Labeled turns through every configuration (``bm25``, ``dense``, ``rrf``, ``full``): the deep settings the ranked
lists come from, each turn's parent-level lists, its latency and its refusals at the configured settings."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrieval.corpus import Dataset, LabeledQuery
from retrieval.parents import best_per_parent
from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever
    from retrieval.types import FusedHit, Hit, RetrievalResult

CONFIGS: tuple[str, ...] = ("bm25", "dense", "rrf", "full")
BRANCHES: tuple[str, ...] = ("bm25", "dense")
DEFAULT_DEPTH = 200
BASELINE_REFUSAL = "full (cosine rule)"
LIST_LENGTH = 100
LATENCY_NOTE = (
    "ms per turn from the first (uncached) call of each turn at the configured settings: "
    "bm25 = BM25 search; dense = query embedding + Chroma query; rrf = max(bm25, dense) + fusion + "
    "dedup (the branches run concurrently); full = rrf + cross-encoder reranking"
)

Progress = Callable[[int, int, str], None]


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
    hits: Sequence[Hit | FusedHit]
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
    check_configs(configs)
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


def check_configs(configs: Sequence[str]) -> None:
    """Refuse an empty or unknown list of configurations (the message names the known ones)."""
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        raise ValueError(f"unknown configurations {unknown or '(none given)'}: choose from {', '.join(CONFIGS)}.")
