"""Every Settings field's knob, keyed by field name in field order: its environment variable, type, range or
choices, the page's label and step, and what it does; ``Settings.knobs()`` and the reference pages read it."""

from __future__ import annotations

from typing import Any

from retrieval.knobs import Knob

# Descriptions that several fields share.
_WEIGHTS = "per-branch weights for weighted fusion."
_STORE = "the embedded store folder, or a Chroma server."
_BUDGET = "per-stage latency budgets."
_FAULT = "fault injection for demos and tests."
_MARGINS = (
    "added to MIN_SIMILARITY: the cosine that rescues a low cross-encoder score (with a word of the turn in "
    "the top card), and the cosine a turn needs when the cross-encoder did not run (``rrf_only``, "
    "``dense_only``). Relative, so they follow each embedding model's cosine scale."
)
_THRESHOLD = "``RefusalThresholds``' fields of those names."
_CALIBRATION = (
    "use a corpus's calibrated thresholds when it has them (not the shipped cards); calibrate a corpus in the"
    " background once indexed (``retrieval.calibration``)."
)
_CORPORA_PER = (
    "how many corpora uploaded or attached from the page one browser session, and one client address, may keep."
)


def _knob(env: str, kind: str, **facts: Any) -> dict[str, Any]:
    return dict(env=env, kind=kind, **facts)


_FACTS: dict[str, dict[str, Any]] = {
    "hybrid_enabled": _knob(
        "RETRIEVAL_HYBRID_ENABLED",
        "bool",
        label="Hybrid on (off = legacy dense only)",
        doc="false restores the legacy dense-only path (ADR-0022 F/H).",
    ),
    "rrf_k": _knob(
        "RRF_K", "int", lo=1, hi=1000, label="RRF k: Σ w/(k+rank)", step=1, doc="the Reciprocal Rank Fusion constant."
    ),
    "bm25_weight": _knob("BM25_WEIGHT", "float", lo=0.0, hi=10.0, label="BM25 weight", step=0.1, doc=_WEIGHTS),
    "dense_weight": _knob("DENSE_WEIGHT", "float", lo=0.0, hi=10.0, label="Dense weight", step=0.1, doc=_WEIGHTS),
    "reranker_model": _knob(
        "RERANKER_MODEL", "name", doc="the bundled ONNX model or any sentence-transformers CrossEncoder."
    ),
    "reranker_max_input": _knob(
        "RERANKER_MAX_INPUT",
        "int",
        lo=0,
        hi=200,
        label="Rerank max input (0=off)",
        step=1,
        doc="how many fused candidates the cross-encoder scores (0 = off).",
    ),
    "embedding_model": _knob(
        "EMBEDDING_MODEL",
        "name",
        label="Embedding model (sets its own min similarity)",
        doc="a bundled model or any sentence-transformers model.",
    ),
    "top_k": _knob(
        "TOP_K", "int", lo=1, hi=1000, label="top_k (cards)", step=1, doc="cards returned after parent dedup."
    ),
    "candidate_multiplier": _knob(
        "CANDIDATE_MULTIPLIER",
        "int",
        lo=1,
        hi=50,
        label="Branch depth (× top_k)",
        step=1,
        doc="each branch returns ``top_k * multiplier`` sub-chunks.",
    ),
    "min_similarity": _knob(
        "MIN_SIMILARITY",
        "float",
        lo=-1.0,
        hi=1.0,
        label="Min similarity (cos)",
        step=0.01,
        doc=(
            "query-chunk cosine below which a final candidate is cut; unset, it defaults per embedding model "
            "(``DEFAULT_MIN_SIMILARITY``), since their cosine scales differ."
        ),
    ),
    "chroma_path": _knob("CHROMA_PATH", "name", doc=_STORE),
    "chroma_host": _knob("CHROMA_HOST", "optional_name", doc=_STORE),
    "chroma_port": _knob("CHROMA_PORT", "int", lo=1, hi=65_535, doc=_STORE),
    "corpus_path": _knob("CORPUS_PATH", "name", doc="the cards JSONL file."),
    "bm25_timeout_ms": _knob("BM25_TIMEOUT_MS", "int", lo=1, hi=600_000, doc=_BUDGET),
    "dense_timeout_ms": _knob("DENSE_TIMEOUT_MS", "int", lo=1, hi=600_000, doc=_BUDGET),
    "rerank_timeout_ms": _knob("RERANK_TIMEOUT_MS", "int", lo=1, hi=600_000, doc=_BUDGET),
    "simulate_reranker_failure": _knob(
        "SIMULATE_RERANKER_FAILURE", "bool", label="Simulate a reranker load failure", doc=_FAULT
    ),
    "simulate_empty_bm25": _knob("SIMULATE_EMPTY_BM25", "bool", label="Simulate an empty BM25 index", doc=_FAULT),
    "bm25_tokenizer": _knob(
        "BM25_TOKENIZER",
        "choice",
        choices=("snowball", "plain"),
        label="BM25 tokens (snowball = stemmed per language)",
        doc=(
            "``plain`` (lowercase + punctuation) or ``snowball`` (stop words and Snowball stemming per language: en, "
            "es, pt)."
        ),
    ),
    "fusion": _knob(
        "FUSION",
        "choice",
        choices=("rrf", "convex"),
        label="Fusion (rrf = ranks; convex = min-max scores)",
        doc=(
            "``rrf`` (weighted Reciprocal Rank Fusion) or ``convex`` (weighted sum of min-max normalised branch "
            "scores)."
        ),
    ),
    "query_weighting": _knob(
        "QUERY_WEIGHTING",
        "choice",
        choices=("auto", "off", "adaptive"),
        label="Query-aware weights (codes/units; adaptive: + branch evidence)",
        doc=(
            "``auto`` shifts the branch weights per turn (codes, digits, units, quotes and rare terms lean to BM25; "
            "long plain-language turns lean to dense); ``off`` keeps them; ``adaptive`` is ``auto`` then moved by "
            "what the branch lists say (``retrieval.weighting``)."
        ),
    ),
    "rerank_mode": _knob(
        "RERANK_MODE",
        "choice",
        choices=("rrf", "replace"),
        label="Rerank (rrf = blend with fused order; replace)",
        doc=(
            "``replace`` (the cross-encoder's order replaces the fused order of the head it scored) or ``rrf`` (its "
            "ranking is fused with the fused ranking, weight ``RERANK_WEIGHT``)."
        ),
    ),
    "rerank_weight": _knob(
        "RERANK_WEIGHT", "float", lo=0.0, hi=10.0, label="Cross-encoder weight in the blend", step=0.1
    ),
    "context_token_budget": _knob(
        "CONTEXT_TOKEN_BUDGET",
        "int",
        lo=1,
        hi=1_000_000,
        label="Context token budget",
        step=50,
        doc=(
            "approximate tokens of final cards handed to the language model (see ``retrieval.context``); cards that "
            "do not fit are dropped and listed."
        ),
    ),
    "refusal_rule": _knob(
        "REFUSAL_RULE",
        "choice",
        choices=("evidence", "cosine"),
        doc=(
            "``evidence`` refuses a turn by ``retrieval.refusal``'s tests (words known to the cards, unknown codes, "
            "the best cross-encoder score, the cosine, the branches' agreement), each reported on the result; "
            "``cosine`` refuses only when no card reaches MIN_SIMILARITY (the rule before)."
        ),
    ),
    "refusal_min_cross_encoder": _knob(
        "REFUSAL_MIN_CROSS_ENCODER",
        "float",
        lo=-50.0,
        hi=50.0,
        doc=(
            "the best cross-encoder logit that answers a turn (tuned for the bundled ms-marco-MiniLM-L-12-v2; another"
            " reranker has its own scale)."
        ),
    ),
    "refusal_rescue_margin": _knob("REFUSAL_RESCUE_MARGIN", "float", lo=-2.0, hi=2.0, doc=_MARGINS),
    "refusal_fallback_margin": _knob("REFUSAL_FALLBACK_MARGIN", "float", lo=-2.0, hi=2.0, doc=_MARGINS),
    "refusal_unknown_codes": _knob(
        "REFUSAL_UNKNOWN_CODES",
        "bool",
        doc=(
            "true refuses a turn naming an unknown member of a code family the cards use (GS-90 when they know GS-40,"
            " GS-60). Set false for open text such as abstracts, where a gene name (NF2) may be absent from the very "
            "abstract that answers."
        ),
    ),
    "refusal_min_cross_encoder_foreign": _knob(
        "REFUSAL_MIN_CROSS_ENCODER_FOREIGN", "float", lo=-50, hi=50, doc=_THRESHOLD
    ),
    "refusal_max_unexplained_words": _knob("REFUSAL_MAX_UNEXPLAINED_WORDS", "int", lo=0, hi=99, doc=_THRESHOLD),
    "refusal_min_cross_encoder_unexplained": _knob(
        "REFUSAL_MIN_CROSS_ENCODER_UNEXPLAINED", "float", lo=-50, hi=50, doc=_THRESHOLD
    ),
    "refusal_min_multilingual_cosine": _knob("REFUSAL_MIN_MULTILINGUAL_COSINE", "float", lo=-1, hi=1, doc=_THRESHOLD),
    "refusal_max_ood_margin": _knob("REFUSAL_MAX_OOD_MARGIN", "float", lo=-2, hi=1, doc=_THRESHOLD),
    "refusal_min_multilingual_z": _knob("REFUSAL_MIN_MULTILINGUAL_Z", "float", lo=-99, hi=20, doc=_THRESHOLD),
    "refusal_model": _knob(
        "REFUSAL_MODEL",
        "optional_name",
        doc=(
            "a local folder holding a sentence-transformers ``CrossEncoder`` that judges whether a card answers a "
            "turn (an NLI model, a multilingual reranker); when set, its best score over the top_k cards must reach "
            "``REFUSAL_MIN_ANSWERABILITY`` (``retrieval.answerability``). Unset: none."
        ),
    ),
    "refusal_min_answerability": _knob("REFUSAL_MIN_ANSWERABILITY", "float", lo=-100, hi=100, doc=_THRESHOLD),
    "refusal_calibration": _knob("REFUSAL_CALIBRATION", "bool", doc=_CALIBRATION),
    "refusal_calibrate_on_index": _knob("REFUSAL_CALIBRATE_ON_INDEX", "bool", doc=_CALIBRATION),
    "data_dir": _knob(
        "DATA_DIR", "name", doc="the git-ignored folder for uploaded corpora and their registry (``data/``)."
    ),
    "data_root": _knob(
        "DATA_ROOT", "name", doc="where BEIR-layout folders are offered as corpora (default ``../shared/eval``)."
    ),
    "trusted_proxies": _knob(
        "TRUSTED_PROXIES",
        "optional_name",
        doc=(
            "the comma-separated addresses (or networks) of the reverse proxies whose ``X-Forwarded-For`` names the "
            "client; unset, no proxy is trusted and the client is the address the connection came from (the per-"
            "address bounds key on it)."
        ),
    ),
    "corpora_per_session": _knob("CORPORA_PER_SESSION", "int", lo=1, hi=10_000, doc=_CORPORA_PER),
    "corpora_per_address": _knob("CORPORA_PER_ADDRESS", "int", lo=1, hi=10_000, doc=_CORPORA_PER),
    "upload_idle_hours": _knob(
        "UPLOAD_IDLE_HOURS",
        "float",
        lo=0.0,
        hi=876000.0,
        doc=(
            "a corpus uploaded or attached from the page that no one opened for this long is deleted when a new "
            "upload needs its place (0 = whenever one does)."
        ),
    ),
    "max_request_kb": _knob(
        "MAX_REQUEST_KB",
        "int",
        lo=16,
        hi=1_000_000,
        doc="the largest request body the server reads (the upload route excepted: MAX_UPLOAD_MB bounds it).",
    ),
    "session_idle_s": _knob(
        "SESSION_IDLE_S",
        "float",
        lo=1.0,
        hi=604800.0,
        doc=(
            "the state of a session with no open page (no heartbeat, no result stream) and no request for this long "
            "is dropped."
        ),
    ),
    "listener_grace_s": _knob(
        "LISTENER_GRACE_S",
        "float",
        lo=0.5,
        hi=3600.0,
        doc="a heavy job whose session has no open page or result stream for this long stops.",
    ),
    "attach_from_page": _knob(
        "ATTACH_FROM_PAGE",
        "choice",
        choices=("embedded", "always", "never"),
        doc=(
            "who may attach a collection made elsewhere from the page: ``embedded`` (only when the store is this "
            "app's own folder, CHROMA_PATH; on a shared Chroma server, the command line only), ``always``, or "
            "``never``."
        ),
    ),
}

SETTING_KNOBS: dict[str, Knob] = {name: Knob(name=name, **facts) for name, facts in _FACTS.items()}
