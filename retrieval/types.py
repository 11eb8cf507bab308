"""Frozen dataclasses that flow through the pipeline. A stage returns new objects, never mutates its input."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from retrieval.refusal import RefusalDecision

HybridPath = Literal["full", "rrf_only", "dense_only", "bm25_only", "no_match"]
HYBRID_PATHS: tuple[str, ...] = ("full", "rrf_only", "dense_only", "bm25_only", "no_match")

BranchStatus = Literal["ok", "empty", "disabled", "failed", "timeout", "skipped"]


@dataclass(frozen=True)
class Card:
    """A parent card from the corpus."""

    id: str
    title: str
    lang: str
    topic: str
    text: str


@dataclass(frozen=True)
class Chunk:
    """A sub-chunk of a card: the unit both branches index and fusion identifies (``<card_id>#<n>``)."""

    chunk_id: str
    parent_id: str
    title: str
    lang: str
    text: str

    @property
    def indexed_text(self) -> str:
        """What BM25 and the embedder see: the card title, then the chunk text."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Hit:
    """One ranked sub-chunk from a branch, in that branch's own score units (BM25 score, cosine)."""

    chunk_id: str
    parent_id: str
    rank: int
    score: float


@dataclass(frozen=True)
class BranchResult:
    """A branch's ranked list plus whether it ran, and why not."""

    name: str
    hits: tuple[Hit, ...] = ()
    status: BranchStatus = "ok"
    reason: str = ""
    ms: float = 0.0

    @property
    def usable(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class FusedHit:
    """A fused candidate with the ranks and weighted contributions that produced its score."""

    chunk_id: str
    parent_id: str
    rank: int
    score: float
    branch_ranks: dict[str, int | None] = field(default_factory=dict)
    contributions: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RerankedHit:
    """A candidate after the cross-encoder: its logit and where fusion had placed it."""

    chunk_id: str
    parent_id: str
    rank: int
    score: float
    fused_rank: int
    blend_score: float | None = None


@dataclass(frozen=True)
class FinalHit:
    """A card-level result after parent dedup: kept, or cut (with why) but still shown by the inspector."""

    chunk_id: str
    parent_id: str
    rank: int
    score: float
    similarity: float | None
    kept: bool = True
    cut_reason: str = ""


@dataclass(frozen=True)
class RetrievalResult:
    """Everything one turn produced: every intermediate list, the level and why, and per-stage timings."""

    query: str
    hybrid_path: HybridPath
    reason: str
    bm25: BranchResult
    dense: BranchResult
    fused: tuple[FusedHit, ...]
    reranked: tuple[RerankedHit, ...]
    final: tuple[FinalHit, ...]
    cut: tuple[FinalHit, ...]
    consensus: tuple[str, ...]
    timings_ms: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    reranker_status: str = ""
    weights: dict[str, float] = field(default_factory=dict)
    weight_reason: str = ""
    refusal: RefusalDecision | None = None  # REFUSAL_RULE=evidence: the decision, every test with its numbers
    weight_evidence: dict[str, Any] = field(default_factory=dict)  # QUERY_WEIGHTING=adaptive: the signals
    typed_query: str = ""  # the turn as typed, when normalising it (retrieval.query) changed more than spaces

    @property
    def refused(self) -> bool:
        return self.hybrid_path == "no_match"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the CLI's ``--json`` and the inspector's export)."""
        data = asdict(self)
        data["bm25"] = [asdict(h) for h in self.bm25.hits]
        data["dense"] = [asdict(h) for h in self.dense.hits]
        data["branches"] = {
            b.name: {"status": b.status, "reason": b.reason, "ms": b.ms} for b in (self.bm25, self.dense)
        }
        return data
