"""Two configurations, one turn: what each stage's list gained, lost and reordered, and which setting caused it.

Pure functions over ``RetrievalResult`` values (no model, no store): ``stage_ids`` names the rows of each stage
(sub-chunks for BM25, dense and the fused list, cards for the final list), ``diff_lists`` marks every row as
entered, left, moved up/down by n or the same, and ``summarize`` writes one paragraph saying what changed and
which differing setting explains B's first card, from the fused hit's branch ranks and contributions, the
turn's weights and the level. ``PRESETS`` are the named configurations the inspector offers for B.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.settings import ADR_RECIPE, Settings
from retrieval.types import RetrievalResult

STAGES: tuple[str, ...] = ("bm25", "dense", "rrf", "final")
STAGE_NAMES = {"bm25": "BM25", "dense": "dense", "rrf": "the fused list", "final": "the final cards"}

# Named configurations for B. "tuned defaults" and "ADR recipe" start from the page's defaults; the others change
# one thing on top of A (so "no reranker" means "A without its reranker").
PRESETS: dict[str, dict[str, Any]] = {
    "tuned defaults": {},
    "ADR recipe": dict(ADR_RECIPE),
    "no reranker": {"reranker_max_input": 0},
    "hybrid off": {"hybrid_enabled": False},
    "k=60": {"rrf_k": 60},
}
FROM_DEFAULTS = frozenset({"tuned defaults", "ADR recipe"})


def preset_values(name: str, a: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """B's control values for a preset: the defaults (or A's values) with the preset's changes.

    Raises:
        ValueError: unknown preset (the message lists the known ones).
    """
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown preset {str(name)[:80]!r}: choose one of {', '.join(PRESETS)}.")
    base = defaults if name in FROM_DEFAULTS else a
    return {**base, **{k: v for k, v in PRESETS[name].items() if k in base}}


def stage_ids(result: RetrievalResult, stage: str) -> list[str]:
    """The row ids of one stage, best first: sub-chunk ids for bm25, dense and rrf; card ids for final."""
    if stage == "bm25":
        return [h.chunk_id for h in result.bm25.hits]
    if stage == "dense":
        return [h.chunk_id for h in result.dense.hits]
    if stage == "rrf":
        return [h.chunk_id for h in result.fused]
    if stage == "final":
        return [h.parent_id for h in result.final]
    raise ValueError(f"unknown stage {stage!r}: choose one of {', '.join(STAGES)}.")


@dataclass(frozen=True)
class RowMark:
    """Where one id sits in A and in B (ranks from 1; None = absent)."""

    id: str
    a_rank: int | None
    b_rank: int | None

    @property
    def kind(self) -> str:
        """``entered`` (only in B), ``left`` (only in A), ``up`` / ``down`` (B ranks it higher / lower), ``same``."""
        if self.a_rank is None:
            return "entered"
        if self.b_rank is None:
            return "left"
        if self.b_rank < self.a_rank:
            return "up"
        return "down" if self.b_rank > self.a_rank else "same"

    @property
    def moved(self) -> int:
        """Places gained in B (negative = lost); 0 unless the id is in both lists."""
        return self.a_rank - self.b_rank if self.a_rank is not None and self.b_rank is not None else 0

    @property
    def label(self) -> str:
        """A short mark for a row: ``new``, ``left``, ``↑n``, ``↓n`` or ``=``."""
        return {"entered": "new", "left": "left", "up": f"↑{self.moved}", "down": f"↓{-self.moved}", "same": "="}[
            self.kind
        ]


@dataclass(frozen=True)
class ListDiff:
    """Two ranked lists compared row by row: one ``RowMark`` per id of either list."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    marks: dict[str, RowMark]

    def ids(self, kind: str) -> list[str]:
        """The ids of one kind (``entered``, ``left``, ``up``, ``down``, ``same``), in B's order (A's for left)."""
        order = self.a if kind == "left" else self.b
        return [i for i in order if self.marks[i].kind == kind]

    @property
    def unchanged(self) -> bool:
        return self.a == self.b

    def counts(self) -> dict[str, int]:
        return {kind: len(self.ids(kind)) for kind in ("entered", "left", "up", "down", "same")}


def diff_lists(a: Sequence[str], b: Sequence[str]) -> ListDiff:
    """Mark every id of ``a`` and ``b``: entered, left, moved up/down by n, or the same.

    Raises:
        ValueError: a list names an id twice (rows of one stage are unique).
    """
    for name, ids in (("A", a), ("B", b)):
        if len(set(ids)) != len(ids):
            raise ValueError(f"list {name} names an id twice: a stage's rows must be unique.")
    a_rank = {doc: i for i, doc in enumerate(a, start=1)}
    b_rank = {doc: i for i, doc in enumerate(b, start=1)}
    marks = {doc: RowMark(doc, a_rank.get(doc), b_rank.get(doc)) for doc in [*b, *(d for d in a if d not in b_rank)]}
    return ListDiff(tuple(a), tuple(b), marks)


def diff_results(a: RetrievalResult, b: RetrievalResult) -> dict[str, ListDiff]:
    """``diff_lists`` for every stage of two results of the same turn."""
    return {stage: diff_lists(stage_ids(a, stage), stage_ids(b, stage)) for stage in STAGES}


def changed_settings(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, A's value, B's value)`` for every Settings knob whose value differs, in field order."""
    return [(name, a.get(name), b.get(name)) for name in Settings.knobs() if a.get(name) != b.get(name)]


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def summarize(a: RetrievalResult, b: RetrievalResult, titles: Mapping[str, str] | None = None) -> str:
    """One paragraph: the differing settings, the levels, why B's first card is first, what each stage changed."""
    titles = titles or {}
    name = lambda card: f"{titles[card]} ({card})" if card in titles else card  # noqa: E731
    changed = changed_settings(a.settings, b.settings)
    parts = [
        ("B differs from A in " + ", ".join(f"{n} {_fmt(x)} → {_fmt(y)}" for n, x, y in changed) + ".")
        if changed
        else "A and B have the same settings."
    ]
    if a.hybrid_path == b.hybrid_path:
        parts.append(f"Both run at level {a.hybrid_path}.")
    else:
        parts.append(f"A runs at level {a.hybrid_path}, B at level {b.hybrid_path} ({b.reason}).")
    parts.append(_first_card(a, b, {n for n, _, _ in changed}, name))
    diffs = diff_results(a, b)
    moves = [f"{STAGE_NAMES[stage]}: {list_change(d)}" for stage, d in diffs.items() if not d.unchanged]
    parts.append(
        ("Changes per stage: " + "; ".join(moves) + ".")
        if moves
        else "Every stage lists the same rows in the same order."
    )
    return " ".join(p for p in parts if p)


def list_change(d: ListDiff) -> str:
    """What B did to A's list, in words: cut it (the same order, shorter), extended it (A's list, then more), or
    changed it (entered, left, moved; with both lengths when they differ)."""
    na, nb = len(d.a), len(d.b)
    if nb < na and d.a[:nb] == d.b:
        return f"B keeps {nb} of A's {na}: the same order, cut at {nb}"
    if na < nb and d.b[:na] == d.a:
        return f"B lists A's {na} in the same order, then {nb - na} more"
    c = d.counts()
    sizes = f" (A lists {na}, B {nb})" if na != nb else ""
    return f"{c['entered']} entered, {c['left']} left, {c['up'] + c['down']} moved{sizes}"


def _first_card(a: RetrievalResult, b: RetrievalResult, changed: set[str], name: Callable[[str], str]) -> str:
    """Why B's first card is first, attributed to the settings that differ."""
    if not b.final:
        return "B returns no card." + (f" A ranks {name(a.final[0].parent_id)} first." if a.final else "")
    top = b.final[0]
    a_ids = [h.parent_id for h in a.final]
    if a_ids[:1] == [top.parent_id]:
        return f"Both rank {name(top.parent_id)} first."
    where = f"A ranks it #{a_ids.index(top.parent_id) + 1}" if top.parent_id in a_ids else "A does not return it"
    return f"B ranks {name(top.parent_id)} first ({where}): " + _cause(a, b, top.chunk_id, changed) + "."


def _cause(a: RetrievalResult, b: RetrievalResult, chunk_id: str, changed: set[str]) -> str:
    reranked = next((h for h in b.reranked if h.chunk_id == chunk_id), None)
    if reranked is not None and reranked.fused_rank != 1:
        why = f"the cross-encoder moved it from fused #{reranked.fused_rank} to the top"
        knobs = sorted(changed & {"rerank_mode", "rerank_weight", "reranker_max_input"})
        mode = b.settings.get("rerank_mode")
        return why + f" (rerank mode {mode} in B" + (f"; B changes {', '.join(knobs)})" if knobs else ")")
    fused = next((h for h in b.fused if h.chunk_id == chunk_id), None)
    if fused is None:
        return "it is B's best card after parent dedup"
    if not b.bm25.usable or not b.dense.usable:
        only = "dense" if b.dense.usable else "BM25"
        off = "hybrid is off" if "hybrid_enabled" in changed else f"only the {only} list ran"
        return f"{off} in B, so its order is {only}'s, where it is #{fused.branch_ranks.get(only.lower())}"
    lead = max(fused.contributions, key=lambda br: fused.contributions[br]) if fused.contributions else None
    if lead is None:
        return "it leads the fused list"
    rank = fused.branch_ranks.get(lead)
    weight = b.weights.get(lead, 0.0)
    label = "BM25" if lead == "bm25" else "dense"
    reasons: list[str] = [
        f"its {label} weight is {weight:g}, and it is {label}'s #{rank}"
        if rank
        else f"its {label} weight is {weight:g}"
    ]
    if changed & {"bm25_weight", "dense_weight", "query_weighting"} or a.weights != b.weights:
        reasons.append(_weights(a, b))
    if "rrf_k" in changed and b.settings.get("fusion") == "rrf":
        k, a_k = b.settings.get("rrf_k", 0), a.settings.get("rrf_k", 0)
        reasons.append(
            f"RRF k is {k} in B: "
            + (
                "a larger k flattens the gap between ranks, so appearing in both lists counts more than one #1"
                if k > a_k
                else "a smaller k widens the gap between ranks, so a list's #1 counts more"
            )
        )
    if "bm25_tokenizer" in changed and lead == "bm25":
        reasons.append(f"BM25 tokens are {b.settings.get('bm25_tokenizer')} in B")
    if "fusion" in changed:
        reasons.append(f"B fuses with {b.settings.get('fusion')}")
    return "; ".join(reasons)


def _weights(a: RetrievalResult, b: RetrievalResult) -> str:
    """Each side's branch weights for this turn, each with its own side's reason (its turn weighting)."""

    def w(r: RetrievalResult, branch: str) -> str:
        return f"{r.weights.get(branch, 0.0):g}"

    def why(r: RetrievalResult) -> str:
        return r.weight_reason or "the configured weights"

    return (
        f"A weighs BM25 {w(a, 'bm25')} and dense {w(a, 'dense')} ({why(a)}); "
        f"B weighs them {w(b, 'bm25')} and {w(b, 'dense')} ({why(b)})"
    )
