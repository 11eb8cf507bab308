"""One frozen Settings dataclass, read from environment variables and validated.

Every field has a default that runs on a fresh machine with the bundled models. Invalid values raise
``ValueError`` naming the environment variable and the allowed range, so a typo never reaches a request.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Knob:
    """What Settings knows about one field, read from its metadata: the one source of truth for the environment
    variable, the validation, the CLI and the inspector's controls (type, range, choices, label)."""

    name: str
    env: str
    kind: str  # "bool", "int", "float", "choice", "name" (a non-empty string), "optional_name"
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    label: str = ""  # the inspector's label; "" = not a control of the page
    step: float | None = None

    def check(self, value: Any) -> None:
        """Raise ``ValueError`` naming the environment variable and the allowed values if ``value`` is invalid."""
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{self.env} must be true or false, got {value!r}.")
        elif self.kind == "int":
            _check_int(self.env, value, int(self.lo), int(self.hi))
        elif self.kind == "float":
            _check_float(self.env, value, self.lo, self.hi)
        elif self.kind == "choice":
            _check_choice(self.env, value, self.choices)
        elif self.kind == "name" or value is not None:
            _check_name(self.env, value)

    def parse(self, raw: str) -> Any:
        """A typed value from text (an environment variable, a ``--set`` pair, a URL parameter); ints and floats
        that do not parse are returned as text, so ``check`` names the allowed range."""
        raw = raw.strip()
        if self.kind == "bool":
            low = raw.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError(f"{self.env}={raw!r} is not a boolean: use true or false (also 1/0, yes/no, on/off).")
        converter = {"int": int, "float": float}.get(self.kind)
        if converter is not None:
            try:
                return converter(raw)
            except ValueError:
                return raw
        return raw

    def coerce(self, value: Any) -> Any:
        """A value from a widget or an API call, typed and checked: sliders send floats for whole numbers, and
        text is parsed as ``parse`` does. Raises ``ValueError`` with what was wrong and what is allowed."""
        if isinstance(value, str) and self.kind in {"bool", "int", "float"}:
            value = self.parse(value)
        if self.kind == "int" and isinstance(value, float) and math.isfinite(value) and value == int(value):
            value = int(value)
        elif self.kind == "int" and isinstance(value, float):
            raise ValueError(f"{self.env} must be a whole number from {self.lo:g} to {self.hi:g}, got {value!r}.")
        elif self.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        self.check(value)
        return value


def knob(
    default: Any,
    env: str,
    kind: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] = (),
    label: str = "",
    step: float | None = None,
) -> Any:
    """A Settings field whose metadata says how to read, validate and show it."""
    return field(
        default=default,
        metadata={"knob": dict(env=env, kind=kind, lo=lo, hi=hi, choices=choices, label=label, step=step)},
    )


@dataclass(frozen=True)
class Settings:
    """Every knob of the pipeline. Build with ``Settings.from_env()`` or directly; both validate.

    Each field's metadata (``Settings.knobs()``) names its environment variable, its type, range or choices, and
    (for the inspector's controls) its label; the CLI, the UI and share links derive theirs from it.

    Attributes:
        hybrid_enabled: ``RETRIEVAL_HYBRID_ENABLED``; false restores the legacy dense-only path (ADR-0022 F/H).
        rrf_k: ``RRF_K``, the Reciprocal Rank Fusion constant.
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
            quotes and rare terms lean to BM25; long plain-language turns lean to dense); ``off`` keeps them;
            ``adaptive`` is ``auto`` then moved by what the branch lists say (``retrieval.weighting``).
        rerank_mode: ``RERANK_MODE``: ``replace`` (the cross-encoder's order replaces the fused order of the head it
            scored) or ``rrf`` (its ranking is fused with the fused ranking, weight ``RERANK_WEIGHT``).
        context_token_budget: ``CONTEXT_TOKEN_BUDGET``, approximate tokens of final cards handed to the language
            model (see ``retrieval.context``); cards that do not fit are dropped and listed.
        refusal_rule: ``REFUSAL_RULE``: ``evidence`` refuses a turn by ``retrieval.refusal``'s tests (words known to
            the cards, unknown codes, the best cross-encoder score, the cosine, the branches' agreement), each
            reported on the result; ``cosine`` refuses only when no card reaches MIN_SIMILARITY (the rule before).
        refusal_min_cross_encoder: ``REFUSAL_MIN_CROSS_ENCODER``, the best cross-encoder logit that answers a turn
            (tuned for the bundled ms-marco-MiniLM-L-12-v2; another reranker has its own scale).
        refusal_rescue_margin / refusal_fallback_margin: ``REFUSAL_RESCUE_MARGIN`` / ``REFUSAL_FALLBACK_MARGIN``,
            added to MIN_SIMILARITY: the cosine that rescues a low cross-encoder score (with a word of the turn in
            the top card), and the cosine a turn needs when the cross-encoder did not run (``rrf_only``,
            ``dense_only``). Relative, so they follow each embedding model's cosine scale.
        refusal_unknown_codes: ``REFUSAL_UNKNOWN_CODES``; true refuses a turn naming an unknown member of a code
            family the cards use (GS-90 when they know GS-40, GS-60). Set false for open text such as abstracts,
            where a gene name (NF2) may be absent from the very abstract that answers.
        refusal_min_cross_encoder_foreign, refusal_max_unexplained_words, refusal_min_cross_encoder_unexplained,
            refusal_min_multilingual_cosine, refusal_max_ood_margin, refusal_min_multilingual_z,
            refusal_min_answerability: ``RefusalThresholds``' fields of those names.
        refusal_model: ``REFUSAL_MODEL``, a local folder holding a sentence-transformers ``CrossEncoder`` that
            judges whether a card answers a turn (an NLI model, a multilingual reranker); when set, its best score
            over the top_k cards must reach ``REFUSAL_MIN_ANSWERABILITY`` (``retrieval.answerability``). Unset: none.
        refusal_calibration / refusal_calibrate_on_index: use a corpus's calibrated thresholds when it has them
            (not the shipped cards); calibrate a corpus in the background once indexed (``retrieval.calibration``).
        data_dir: ``DATA_DIR``, the git-ignored folder for uploaded corpora and their registry (``data/``).
        data_root: ``DATA_ROOT``, where BEIR-layout folders are offered as corpora (default ``../shared/eval``).
        trusted_proxies: ``TRUSTED_PROXIES``, the comma-separated addresses (or networks) of the reverse proxies
            whose ``X-Forwarded-For`` names the client; unset, no proxy is trusted and the client is the address the
            connection came from (the per-address bounds key on it).
        corpora_per_session / corpora_per_address: ``CORPORA_PER_SESSION`` / ``CORPORA_PER_ADDRESS``, how many
            corpora uploaded or attached from the page one browser session, and one client address, may keep.
        upload_idle_hours: ``UPLOAD_IDLE_HOURS``, a corpus uploaded or attached from the page that no one opened
            for this long is deleted when a new upload needs its place (0 = whenever one does).
        max_request_kb: ``MAX_REQUEST_KB``, the largest request body the server reads (the upload route excepted:
            MAX_UPLOAD_MB bounds it).
        session_idle_s: ``SESSION_IDLE_S``, the state of a session with no open page (no heartbeat, no result
            stream) and no request for this long is dropped.
        listener_grace_s: ``LISTENER_GRACE_S``, a heavy job whose session has no open page or result stream for this
            long stops.
        attach_from_page: ``ATTACH_FROM_PAGE``, who may attach a collection made elsewhere from the page:
            ``embedded`` (only when the store is this app's own folder, CHROMA_PATH; on a shared Chroma server,
            the command line only), ``always``, or ``never``.
    """

    hybrid_enabled: bool = knob(True, "RETRIEVAL_HYBRID_ENABLED", "bool", label="Hybrid on (off = legacy dense only)")
    rrf_k: int = knob(10, "RRF_K", "int", lo=1, hi=1000, label="RRF k: Σ w/(k+rank)", step=1)
    bm25_weight: float = knob(1.0, "BM25_WEIGHT", "float", lo=0.0, hi=10.0, label="BM25 weight", step=0.1)
    dense_weight: float = knob(2.0, "DENSE_WEIGHT", "float", lo=0.0, hi=10.0, label="Dense weight", step=0.1)
    reranker_model: str = knob(DEFAULT_RERANKER_MODEL, "RERANKER_MODEL", "name")
    # 10, not 20 (issue 20): half the cross-encoder's work per turn; nDCG@10 of `full` 0.8262 on the shipped set
    # and 0.7263 on SciFact test at 10, against 0.8286 and 0.7258 at 20, but 0.005-0.010 lower on the paraphrase and
    # cross-language files (README, Speed: the depth's price).
    reranker_max_input: int = knob(
        10, "RERANKER_MAX_INPUT", "int", lo=0, hi=200, label="Rerank max input (0=off)", step=1
    )
    embedding_model: str = knob(
        DEFAULT_EMBEDDING_MODEL, "EMBEDDING_MODEL", "name", label="Embedding model (sets its own min similarity)"
    )
    top_k: int = knob(5, "TOP_K", "int", lo=1, hi=1000, label="top_k (cards)", step=1)
    candidate_multiplier: int = knob(
        10, "CANDIDATE_MULTIPLIER", "int", lo=1, hi=50, label="Branch depth (× top_k)", step=1
    )
    min_similarity: float = knob(
        0.55, "MIN_SIMILARITY", "float", lo=-1.0, hi=1.0, label="Min similarity (cos)", step=0.01
    )
    chroma_path: str = knob(str(PROJECT_ROOT / ".chroma"), "CHROMA_PATH", "name")
    chroma_host: str | None = knob(None, "CHROMA_HOST", "optional_name")
    chroma_port: int = knob(8000, "CHROMA_PORT", "int", lo=1, hi=65535)
    corpus_path: str = knob(str(PROJECT_ROOT / "corpus" / "cards.jsonl"), "CORPUS_PATH", "name")
    bm25_timeout_ms: int = knob(1000, "BM25_TIMEOUT_MS", "int", lo=1, hi=600_000)
    dense_timeout_ms: int = knob(5000, "DENSE_TIMEOUT_MS", "int", lo=1, hi=600_000)
    rerank_timeout_ms: int = knob(5000, "RERANK_TIMEOUT_MS", "int", lo=1, hi=600_000)
    simulate_reranker_failure: bool = knob(
        False, "SIMULATE_RERANKER_FAILURE", "bool", label="Simulate a reranker load failure"
    )
    simulate_empty_bm25: bool = knob(False, "SIMULATE_EMPTY_BM25", "bool", label="Simulate an empty BM25 index")
    bm25_tokenizer: str = knob(
        "snowball",
        "BM25_TOKENIZER",
        "choice",
        choices=("snowball", "plain"),
        label="BM25 tokens (snowball = stemmed per language)",
    )
    fusion: str = knob(
        "rrf", "FUSION", "choice", choices=("rrf", "convex"), label="Fusion (rrf = ranks; convex = min-max scores)"
    )
    query_weighting: str = knob(
        "auto",
        "QUERY_WEIGHTING",
        "choice",
        choices=("auto", "off", "adaptive"),
        label="Query-aware weights (codes/units; adaptive: + branch evidence)",
    )
    rerank_mode: str = knob(
        "rrf",
        "RERANK_MODE",
        "choice",
        choices=("rrf", "replace"),
        label="Rerank (rrf = blend with fused order; replace)",
    )
    rerank_weight: float = knob(
        0.5, "RERANK_WEIGHT", "float", lo=0.0, hi=10.0, label="Cross-encoder weight in the blend", step=0.1
    )
    context_token_budget: int = knob(
        1000, "CONTEXT_TOKEN_BUDGET", "int", lo=1, hi=1_000_000, label="Context token budget", step=50
    )
    refusal_rule: str = knob("evidence", "REFUSAL_RULE", "choice", choices=("evidence", "cosine"))
    refusal_min_cross_encoder: float = knob(
        DEFAULT_MIN_CROSS_ENCODER, "REFUSAL_MIN_CROSS_ENCODER", "float", lo=-50.0, hi=50.0
    )
    refusal_rescue_margin: float = knob(DEFAULT_RESCUE_MARGIN, "REFUSAL_RESCUE_MARGIN", "float", lo=-2.0, hi=2.0)
    refusal_fallback_margin: float = knob(DEFAULT_FALLBACK_MARGIN, "REFUSAL_FALLBACK_MARGIN", "float", lo=-2.0, hi=2.0)
    refusal_unknown_codes: bool = knob(True, "REFUSAL_UNKNOWN_CODES", "bool")
    refusal_min_cross_encoder_foreign: float = knob(
        FOREIGN, "REFUSAL_MIN_CROSS_ENCODER_FOREIGN", "float", lo=-50, hi=50
    )
    refusal_max_unexplained_words: int = knob(UNEXPLAINED, "REFUSAL_MAX_UNEXPLAINED_WORDS", "int", lo=0, hi=99)
    refusal_min_cross_encoder_unexplained: float = knob(
        SURE, "REFUSAL_MIN_CROSS_ENCODER_UNEXPLAINED", "float", lo=-50, hi=50
    )
    refusal_min_multilingual_cosine: float = knob(MULTI, "REFUSAL_MIN_MULTILINGUAL_COSINE", "float", lo=-1, hi=1)
    refusal_max_ood_margin: float = knob(OOD_MARGIN, "REFUSAL_MAX_OOD_MARGIN", "float", lo=-2, hi=1)
    refusal_min_multilingual_z: float = knob(MULTI_Z, "REFUSAL_MIN_MULTILINGUAL_Z", "float", lo=-99, hi=20)
    refusal_model: str | None = knob(None, "REFUSAL_MODEL", "optional_name")
    refusal_min_answerability: float = knob(ANSWERABLE, "REFUSAL_MIN_ANSWERABILITY", "float", lo=-100, hi=100)
    refusal_calibration: bool = knob(True, "REFUSAL_CALIBRATION", "bool")
    refusal_calibrate_on_index: bool = knob(True, "REFUSAL_CALIBRATE_ON_INDEX", "bool")
    data_dir: str = knob(str(PROJECT_ROOT / "data"), "DATA_DIR", "name")
    data_root: str = knob(str((PROJECT_ROOT.parent / "shared" / "eval").resolve()), "DATA_ROOT", "name")
    # The server's bounds on what its visitors may use (docs/guides/deploying.md): not controls of the page.
    trusted_proxies: str | None = knob(None, "TRUSTED_PROXIES", "optional_name")
    corpora_per_session: int = knob(3, "CORPORA_PER_SESSION", "int", lo=1, hi=10_000)
    corpora_per_address: int = knob(10, "CORPORA_PER_ADDRESS", "int", lo=1, hi=10_000)
    upload_idle_hours: float = knob(168.0, "UPLOAD_IDLE_HOURS", "float", lo=0.0, hi=876_000.0)
    max_request_kb: int = knob(256, "MAX_REQUEST_KB", "int", lo=16, hi=1_000_000)
    session_idle_s: float = knob(600.0, "SESSION_IDLE_S", "float", lo=1.0, hi=604_800.0)
    listener_grace_s: float = knob(5.0, "LISTENER_GRACE_S", "float", lo=0.5, hi=3600.0)
    attach_from_page: str = knob("embedded", "ATTACH_FROM_PAGE", "choice", choices=("embedded", "always", "never"))

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


_KNOBS: dict[str, Knob] = {f.name: Knob(name=f.name, **f.metadata["knob"]) for f in dataclasses.fields(Settings)}
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


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, str):
        raise ValueError(f"{name}={value!r} is not a whole number: give an integer from {lo} to {hi}.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}.")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={_short(value)} is out of range: allowed {lo} to {hi}.")


def _short(value: int) -> str:
    """A whole number as a message shows it: 1e308 sent to a slider is "1e+308", not its 309 digits."""
    if abs(value) < 10**15:
        return str(value)
    try:
        return f"{float(value):.3g}"
    except OverflowError:
        return "a number of more than 300 digits"


def _check_float(name: str, value: Any, lo: float, hi: float) -> None:
    if isinstance(value, str):
        raise ValueError(f"{name}={value!r} is not a number: give a decimal from {lo} to {hi}.")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{name} must be a number from {lo} to {hi}, got {value!r}.")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is out of range: allowed {lo} to {hi}.")


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
