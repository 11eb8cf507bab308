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
from typing import Any, Literal

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

Tokenizer = Literal["plain", "snowball"]
Fusion = Literal["rrf", "convex"]
RerankMode = Literal["replace", "rrf"]
QueryWeighting = Literal["off", "auto"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    """Every knob of the pipeline. Build with ``Settings.from_env()`` or directly; both validate.

    Attributes:
        hybrid_enabled: ``RETRIEVAL_HYBRID_ENABLED``; false restores the legacy dense-only path (ADR-0022 F/H).
        rrf_k: ``RRF_K``, the Reciprocal Rank Fusion constant (1-1000).
        bm25_weight / dense_weight: ``BM25_WEIGHT`` / ``DENSE_WEIGHT``, per-branch weights for weighted fusion.
        reranker_model: ``RERANKER_MODEL``; the bundled ONNX model or any sentence-transformers CrossEncoder.
        reranker_max_input: ``RERANKER_MAX_INPUT``, how many fused candidates the cross-encoder scores (0 = off).
        embedding_model: ``EMBEDDING_MODEL``; a bundled model or any sentence-transformers model.
        top_k: ``TOP_K``, cards returned after parent dedup.
        candidate_multiplier: ``CANDIDATE_MULTIPLIER``; each branch returns ``top_k * multiplier`` sub-chunks.
        min_similarity: ``MIN_SIMILARITY``, query-chunk cosine below which a final candidate is cut; unset, it
            defaults per embedding model (``DEFAULT_MIN_SIMILARITY``), since their cosine scales differ.
        chroma_path / chroma_host / chroma_port: the embedded store folder, or a Chroma server.
        corpus_path: ``CORPUS_PATH``, the cards JSONL file.
        bm25_timeout_ms / dense_timeout_ms / rerank_timeout_ms: per-stage latency budgets.
        simulate_reranker_failure / simulate_empty_bm25: fault injection for demos and tests.
        bm25_tokenizer: ``BM25_TOKENIZER``: ``plain`` (lowercase + punctuation) or ``snowball`` (stop words and
            Snowball stemming per language: en, es, pt).
        fusion: ``FUSION``: ``rrf`` (weighted Reciprocal Rank Fusion) or ``convex`` (weighted sum of min-max
            normalised branch scores).
        query_weighting: ``QUERY_WEIGHTING``: ``auto`` shifts the branch weights per turn (codes, digits, units,
            quotes and rare terms lean to BM25; long plain-language turns lean to dense); ``off`` keeps them.
        rerank_mode: ``RERANK_MODE``: ``replace`` (the cross-encoder's order replaces the fused order of the head it
            scored) or ``rrf`` (its ranking is fused with the fused ranking, weight ``RERANK_WEIGHT``).
        context_token_budget: ``CONTEXT_TOKEN_BUDGET``, approximate tokens of final cards handed to the language
            model (see ``retrieval.context``); cards that do not fit are dropped and listed.
    """

    hybrid_enabled: bool = True
    rrf_k: int = 10
    bm25_weight: float = 1.0
    dense_weight: float = 2.0
    reranker_model: str = DEFAULT_RERANKER_MODEL
    reranker_max_input: int = 20
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

    def __post_init__(self) -> None:
        _check_int("RRF_K", self.rrf_k, 1, 1000)
        _check_float("BM25_WEIGHT", self.bm25_weight, 0.0, 10.0)
        _check_float("DENSE_WEIGHT", self.dense_weight, 0.0, 10.0)
        if self.hybrid_enabled and self.bm25_weight == 0 and self.dense_weight == 0:
            raise ValueError(
                "BM25_WEIGHT and DENSE_WEIGHT are both 0: fusion would score every candidate 0. "
                "Give at least one branch a positive weight, or set RETRIEVAL_HYBRID_ENABLED=false."
            )
        _check_name("RERANKER_MODEL", self.reranker_model)
        _check_int("RERANKER_MAX_INPUT", self.reranker_max_input, 0, 200)
        _check_name("EMBEDDING_MODEL", self.embedding_model)
        _check_int("TOP_K", self.top_k, 1, 1000)
        _check_int("CANDIDATE_MULTIPLIER", self.candidate_multiplier, 1, 50)
        _check_float("MIN_SIMILARITY", self.min_similarity, -1.0, 1.0)
        _check_name("CHROMA_PATH", self.chroma_path)
        if self.chroma_host is not None:
            _check_name("CHROMA_HOST", self.chroma_host)
        _check_int("CHROMA_PORT", self.chroma_port, 1, 65535)
        _check_name("CORPUS_PATH", self.corpus_path)
        _check_int("BM25_TIMEOUT_MS", self.bm25_timeout_ms, 1, 600_000)
        _check_int("DENSE_TIMEOUT_MS", self.dense_timeout_ms, 1, 600_000)
        _check_int("RERANK_TIMEOUT_MS", self.rerank_timeout_ms, 1, 600_000)
        _check_choice("BM25_TOKENIZER", self.bm25_tokenizer, ("plain", "snowball"))
        _check_choice("FUSION", self.fusion, ("rrf", "convex"))
        _check_choice("QUERY_WEIGHTING", self.query_weighting, ("off", "auto"))
        _check_choice("RERANK_MODE", self.rerank_mode, ("replace", "rrf"))
        _check_float("RERANK_WEIGHT", self.rerank_weight, 0.0, 10.0)
        _check_int("CONTEXT_TOKEN_BUDGET", self.context_token_budget, 1, 1_000_000)

    @property
    def candidate_depth(self) -> int:
        """Sub-chunks each branch returns: ``top_k * candidate_multiplier``, bounded to 1000."""
        return min(self.top_k * self.candidate_multiplier, MAX_CANDIDATE_DEPTH)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read every ``ENV_NAME`` in ``ENV_VARS`` from ``env`` (default ``os.environ``); ``overrides`` win."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for env_name, attr in ENV_VARS.items():
            raw = env.get(env_name)
            if raw is None or raw.strip() == "":
                continue
            values[attr] = _parse(env_name, raw.strip(), types[attr])
        values.update(overrides)
        if "min_similarity" not in values:
            from retrieval.encoders import canonical_embedder

            model = canonical_embedder(values.get("embedding_model", DEFAULT_EMBEDDING_MODEL))
            values["min_similarity"] = DEFAULT_MIN_SIMILARITY.get(model, cls.min_similarity)
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A validated copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


MAX_CANDIDATE_DEPTH = 1000

ENV_VARS: dict[str, str] = {
    "RETRIEVAL_HYBRID_ENABLED": "hybrid_enabled",
    "RRF_K": "rrf_k",
    "BM25_WEIGHT": "bm25_weight",
    "DENSE_WEIGHT": "dense_weight",
    "RERANKER_MODEL": "reranker_model",
    "RERANKER_MAX_INPUT": "reranker_max_input",
    "EMBEDDING_MODEL": "embedding_model",
    "TOP_K": "top_k",
    "CANDIDATE_MULTIPLIER": "candidate_multiplier",
    "MIN_SIMILARITY": "min_similarity",
    "CHROMA_PATH": "chroma_path",
    "CHROMA_HOST": "chroma_host",
    "CHROMA_PORT": "chroma_port",
    "CORPUS_PATH": "corpus_path",
    "BM25_TIMEOUT_MS": "bm25_timeout_ms",
    "DENSE_TIMEOUT_MS": "dense_timeout_ms",
    "RERANK_TIMEOUT_MS": "rerank_timeout_ms",
    "SIMULATE_RERANKER_FAILURE": "simulate_reranker_failure",
    "SIMULATE_EMPTY_BM25": "simulate_empty_bm25",
    "BM25_TOKENIZER": "bm25_tokenizer",
    "FUSION": "fusion",
    "QUERY_WEIGHTING": "query_weighting",
    "RERANK_MODE": "rerank_mode",
    "RERANK_WEIGHT": "rerank_weight",
    "CONTEXT_TOKEN_BUDGET": "context_token_budget",
}
_ATTR_TO_ENV = {attr: env for env, attr in ENV_VARS.items()}


def env_name(attr: str) -> str:
    """The environment variable behind a Settings attribute."""
    return _ATTR_TO_ENV.get(attr, attr)


def _parse(name: str, raw: str, type_: Any) -> Any:
    type_s = str(type_)
    if type_s in {"bool", "<class 'bool'>"}:
        low = raw.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"{name}={raw!r} is not a boolean: use true or false (also 1/0, yes/no, on/off).")
    if type_s in {"int", "<class 'int'>"}:
        try:
            return int(raw)
        except ValueError:
            return raw  # the field's check rejects it and names the allowed range
    if type_s in {"float", "<class 'float'>"}:
        try:
            return float(raw)
        except ValueError:
            return raw
    return raw


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, str):
        raise ValueError(f"{name}={value!r} is not a whole number: give an integer from {lo} to {hi}.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}.")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is out of range: allowed {lo} to {hi}.")


def _check_float(name: str, value: Any, lo: float, hi: float) -> None:
    if isinstance(value, str):
        raise ValueError(f"{name}={value!r} is not a number: give a decimal from {lo} to {hi}.")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{name} must be a number from {lo} to {hi}, got {value!r}.")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is out of range: allowed {lo} to {hi}.")


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed: use one of {', '.join(allowed)}.")


def _check_name(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}.")
    if any(ord(c) < 32 for c in value):
        raise ValueError(f"{name} contains control characters: {value!r}.")


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
