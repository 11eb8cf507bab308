"""One frozen Settings dataclass, read from environment variables and validated.

Every field has a default that runs on a fresh machine with the bundled models. Invalid values raise
``ValueError`` naming the environment variable and the allowed range, so a typo never reaches a request.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.knobs import Knob
from retrieval.refusal_thresholds import DEFAULT_MAX_OOD_MARGIN as OOD_MARGIN
from retrieval.refusal_thresholds import DEFAULT_MAX_UNEXPLAINED_WORDS as UNEXPLAINED
from retrieval.refusal_thresholds import DEFAULT_MIN_ANSWERABILITY as ANSWERABLE
from retrieval.refusal_thresholds import (
    DEFAULT_MIN_CROSS_ENCODER,
    DEFAULT_MIN_FALLBACK_COSINE,
    DEFAULT_MIN_RESCUE_COSINE,
)
from retrieval.refusal_thresholds import DEFAULT_MIN_CROSS_ENCODER_FOREIGN as FOREIGN
from retrieval.refusal_thresholds import DEFAULT_MIN_CROSS_ENCODER_UNEXPLAINED as SURE
from retrieval.refusal_thresholds import DEFAULT_MIN_MULTILINGUAL_COSINE as MULTI
from retrieval.refusal_thresholds import DEFAULT_MIN_MULTILINGUAL_Z as MULTI_Z
from retrieval.settings_knobs import SETTING_KNOBS

PROJECT_ROOT = Path(__file__).resolve().parent.parent

DEFAULT_EMBEDDING_MODEL = "bge-small-en-v1.5"
DEFAULT_RERANKER_MODEL = "ms-marco-MiniLM-L-12-v2"

# Cosine scales differ per embedder, so MIN_SIMILARITY defaults per model: the value that refuses 9 of the 10
# out-of-domain turns of the shipped set without refusing any answerable one (`python -m retrieval eval` reports it).
DEFAULT_MIN_SIMILARITY = {
    "bge-small-en-v1.5": 0.55,
    "all-MiniLM-L6-v2": 0.25,
    "multilingual-e5-small": 0.81,
}
# Embedders whose cosine compares a turn and a card written in different languages (the others are English).
MULTILINGUAL_EMBEDDERS = frozenset({"multilingual-e5-small"})

# The refusal rule's defaults (scripts/tune_refusal.py, tuned with bge-small-en-v1.5 and the bundled
# cross-encoder): the cosine thresholds 0.64 and 0.59 are MIN_SIMILARITY 0.55 plus these margins.
DEFAULT_RESCUE_MARGIN = round(DEFAULT_MIN_RESCUE_COSINE - 0.55, 6)
DEFAULT_FALLBACK_MARGIN = round(DEFAULT_MIN_FALLBACK_COSINE - 0.55, 6)


@dataclass(frozen=True)
class Settings:
    """Every knob of the pipeline. Build with ``Settings.from_env()`` or directly; both validate.

    Each field's knob (``Settings.knobs()``, declared in ``retrieval.settings_knobs``) names its environment
    variable, its type, range or choices, (for the inspector's controls) its label, and what it does; the CLI, the
    UI, share links and the reference page (docs/reference/settings.md) derive theirs from it.
    """

    hybrid_enabled: bool = True
    rrf_k: int = 10
    bm25_weight: float = 1.0
    dense_weight: float = 2.0
    reranker_model: str = DEFAULT_RERANKER_MODEL
    # 10, not 20 (issue 20): half the cross-encoder's work per turn; nDCG@10 of `full` 0.8262 on the shipped set
    # and 0.7263 on SciFact test at 10, against 0.8286 and 0.7258 at 20, but 0.005-0.010 lower on the paraphrase and
    # cross-language files (README, Speed: the depth's price).
    reranker_max_input: int = 10
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    top_k: int = 5
    candidate_multiplier: int = 10
    min_similarity: float = 0.55
    chroma_path: str = str(PROJECT_ROOT / ".chroma")
    chroma_host: str | None = None
    chroma_port: int = 8000
    corpus_path: str = str(PROJECT_ROOT / "corpus" / "cards.jsonl")
    bm25_timeout_ms: int = 1000
    dense_timeout_ms: int = 5000
    rerank_timeout_ms: int = 5000
    simulate_reranker_failure: bool = False
    simulate_empty_bm25: bool = False
    bm25_tokenizer: str = "snowball"
    fusion: str = "rrf"
    query_weighting: str = "auto"
    rerank_mode: str = "rrf"
    rerank_weight: float = 0.5
    context_token_budget: int = 1000
    refusal_rule: str = "evidence"
    refusal_min_cross_encoder: float = DEFAULT_MIN_CROSS_ENCODER
    refusal_rescue_margin: float = DEFAULT_RESCUE_MARGIN
    refusal_fallback_margin: float = DEFAULT_FALLBACK_MARGIN
    refusal_unknown_codes: bool = True
    refusal_min_cross_encoder_foreign: float = FOREIGN
    refusal_max_unexplained_words: int = UNEXPLAINED
    refusal_min_cross_encoder_unexplained: float = SURE
    refusal_min_multilingual_cosine: float = MULTI
    refusal_max_ood_margin: float = OOD_MARGIN
    refusal_min_multilingual_z: float = MULTI_Z
    refusal_model: str | None = None
    refusal_min_answerability: float = ANSWERABLE
    refusal_calibration: bool = True
    refusal_calibrate_on_index: bool = True
    data_dir: str = str(PROJECT_ROOT / "data")
    data_root: str = str((PROJECT_ROOT.parent / "shared" / "eval").resolve())
    # The server's bounds on what its visitors may use (docs/guides/deploying.md): not controls of the page.
    trusted_proxies: str | None = None
    corpora_per_session: int = 3
    corpora_per_address: int = 10
    upload_idle_hours: float = 168.0
    max_request_kb: int = 256
    session_idle_s: float = 600.0
    listener_grace_s: float = 5.0
    attach_from_page: str = "embedded"

    def __post_init__(self) -> None:
        for spec in self.knobs().values():
            spec.check(getattr(self, spec.name))
        if self.trusted_proxies is not None:
            _check_proxies(self.trusted_proxies)
        if self.hybrid_enabled and self.bm25_weight == 0 and self.dense_weight == 0:
            raise ValueError(
                "BM25_WEIGHT and DENSE_WEIGHT are both 0: fusion would score every candidate 0. "
                "Give at least one branch a positive weight, or set RETRIEVAL_HYBRID_ENABLED=false."
            )

    @classmethod
    def knobs(cls) -> dict[str, Knob]:
        """Every field's ``Knob`` (environment variable, type, range, choices, label), in field order."""
        return _KNOBS

    @property
    def candidate_depth(self) -> int:
        """Sub-chunks each branch returns: ``top_k * candidate_multiplier``, bounded to 1000."""
        return min(self.top_k * self.candidate_multiplier, MAX_CANDIDATE_DEPTH)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read every field's environment variable from ``env`` (default ``os.environ``); ``overrides`` win."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for spec in cls.knobs().values():
            raw = env.get(spec.env)
            if raw is None or raw.strip() == "":
                continue
            values[spec.name] = spec.parse(raw)
        values.update(overrides)
        if "min_similarity" not in values:
            values["min_similarity"] = default_min_similarity(values.get("embedding_model", DEFAULT_EMBEDDING_MODEL))
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A validated copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _field_knobs() -> dict[str, Knob]:
    """Every field's knob in field order; a field without one, or a knob without a field, stops the import."""
    names = [f.name for f in dataclasses.fields(Settings)]
    if sorted(names) != sorted(SETTING_KNOBS):
        raise RuntimeError(f"Settings fields and retrieval.settings_knobs differ: {set(names) ^ set(SETTING_KNOBS)}")
    return {name: SETTING_KNOBS[name] for name in names}


_KNOBS: dict[str, Knob] = _field_knobs()
MAX_CANDIDATE_DEPTH = 1000

# The inspector's controls, in the order the page passes them (and the ``run_turn`` API takes them); each one's
# widget, range, choices and label come from its Knob.
CONTROLS: tuple[str, ...] = (
    "rrf_k",
    "hybrid_enabled",
    "simulate_reranker_failure",
    "simulate_empty_bm25",
    "top_k",
    "candidate_multiplier",
    "reranker_max_input",
    "min_similarity",
    "bm25_weight",
    "dense_weight",
    "embedding_model",
    "context_token_budget",
    "bm25_tokenizer",
    "fusion",
    "query_weighting",
    "rerank_mode",
    "rerank_weight",
)

ENV_VARS: dict[str, str] = {spec.env: name for name, spec in _KNOBS.items()}


def env_name(attr: str) -> str:
    """The environment variable behind a Settings attribute."""
    spec = _KNOBS.get(attr)
    return spec.env if spec else attr


def knob_for(key: str) -> Knob | None:
    """The Knob for an attribute name or an environment variable name (any case), or None."""
    if key in _KNOBS:
        return _KNOBS[key]
    by_env = {spec.env: spec for spec in _KNOBS.values()}
    return by_env.get(key.upper())


def default_min_similarity(embedding_model: str) -> float:
    """MIN_SIMILARITY's default for an embedding model (cosine scales differ between models)."""
    from retrieval.encoders import canonical_embedder

    return DEFAULT_MIN_SIMILARITY.get(canonical_embedder(embedding_model), 0.55)


def _check_proxies(value: str) -> None:
    import ipaddress

    for part in (p.strip() for p in value.split(",")):
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ValueError(
                f"TRUSTED_PROXIES has {part!r}, not an address or network: give the proxies' addresses separated "
                "by commas (e.g. 127.0.0.1 or 10.0.0.0/8), or leave it unset to trust none."
            ) from None


# The recipe exactly as ADR-0022 writes it, before tuning: the ablation's first row, and a one-flag way to compare
# (`--set` each of these, or `Settings.from_env(**ADR_RECIPE)`).
ADR_RECIPE: dict[str, Any] = {
    "bm25_tokenizer": "plain",
    "rrf_k": 60,
    "bm25_weight": 1.0,
    "dense_weight": 1.0,
    "query_weighting": "off",
    "fusion": "rrf",
    "rerank_mode": "replace",
    "reranker_max_input": 20,
    "candidate_multiplier": 4,
}
