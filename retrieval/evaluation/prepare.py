"""What an evaluation runs on, as the command line names it: ``--set`` overrides, the dataset, a retriever over
it, the corpus's stored refusal calibration (and where its thresholds come from), ``--adr-recipe``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.corpus import Dataset
from retrieval.settings import Settings, knob_for

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever


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

    holder: Any = retriever  # not a declared attribute: the pipeline reads it with getattr, None when never set
    holder.calibration = calibration.load(settings, retriever.chunks)


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
