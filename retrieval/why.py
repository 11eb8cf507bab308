"""Why not this card? One card through every stage of one turn, at the current settings.

For a turn and a card (any card of the corpus, also one no stage returned), ``explain`` reports:

- BM25: the card's rank over the whole corpus (card rank, 1-based, its best sub-chunk standing for it), its score,
  the sub-chunk rank the branch depth is compared with, and the turn's terms it contains and lacks, with their idf;
- dense: its best sub-chunk's cosine and its exact rank over every stored vector (not only the branch's depth);
- fusion: its fused card rank and score at this ``rrf_k`` and these weights, as if each branch's depth had reached
  it (the branch lists cut just deep enough to hold it);
- the cross-encoder: its logit against the turn (one pair, from the process-wide pair cache or scored once) and
  where that would place it among the candidates the reranker scored;
- dedup, top_k, the similarity threshold and the refusal rule, each passed or failed with its value.

Then the first stage that lost it, in words, and the smallest single change of one control that brings it into the
final cards: each control's values are tried in ladder steps away from the current value (``LADDERS``), running the
pipeline itself, whose per-turn cache keeps the branch lists and pair scores; the first step count at which some
control succeeds wins (ties go to the control listed first), then a numeric control is refined between the last
value that failed and the one that worked. "No single change does" comes with the closest try.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.fusion import fuse_branches
from retrieval.parents import best_per_parent, cosine_cut_skipped
from retrieval.query import QueryError, clean_query
from retrieval.settings import MAX_CANDIDATE_DEPTH, Settings, env_name
from retrieval.tokenize import analyze, tokenize
from retrieval.types import BranchResult, Hit, RetrievalResult

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever

# The controls a suggestion may change, in tie-break order, with the values tried (one ladder step each).
LADDERS: dict[str, tuple[Any, ...]] = {
    "candidate_multiplier": (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50),
    "reranker_max_input": (0, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200),
    "rrf_k": (1, 2, 5, 10, 20, 30, 40, 60, 80, 100, 150, 200, 300, 500, 1000),
    "bm25_weight": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0),
    "dense_weight": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0),
    "min_similarity": tuple(round(x / 100, 2) for x in range(-100, 101, 5)),
    "rerank_weight": (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0),
    "bm25_tokenizer": ("snowball", "plain"),
    "fusion": ("rrf", "convex"),
    "rerank_mode": ("rrf", "replace"),
}
MAX_TRIES = 400  # pipeline runs a suggestion may take at most (each from the per-turn cache where it can)
STAGES = ("depth", "fusion", "rerank", "threshold", "refusal")


@dataclass(frozen=True)
class WhyNot:
    """Where one card stands at every stage of one turn, the stage that lost it and the change that brings it in.

    ``lost_at`` is None when the card is among the final cards, else one of ``STAGES``: ``depth`` (neither branch
    list reached it), ``fusion`` (fused beyond top_k and not lifted by the reranker), ``rerank`` (fused within
    top_k, pushed out by the reranker), ``threshold`` (its cosine is below MIN_SIMILARITY), ``refusal`` (the
    whole turn was refused). ``suggestion`` is ``{"setting": ENV_VAR, "value": v, ...}`` or None, with
    ``closest`` saying how near the best single change came.
    """

    turn: str
    card_id: str
    title: str
    settings: dict[str, Any]
    level: str
    final: tuple[str, ...]
    bm25: dict[str, Any]
    dense: dict[str, Any]
    fused: dict[str, Any]
    cross_encoder: dict[str, Any]
    stages: tuple[dict[str, Any], ...]
    lost_at: str | None
    verdict: str
    suggestion: dict[str, Any] | None = None
    closest: dict[str, Any] | None = None
    tried: int = 0
    search_stopped: float | None = None  # the time budget (s) the search for a change ran out of, if it did
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------------ finding
def cards_of(retriever: HybridRetriever) -> dict[str, str]:
    """Card id -> title, in corpus order."""
    out: dict[str, str] = {}
    for chunk in retriever.chunks:
        out.setdefault(chunk.parent_id, chunk.title)
    return out


def find_card(retriever: HybridRetriever, wanted: str) -> str:
    """The card called ``wanted``: its id (exact, then ignoring case), or the one card whose title holds every word
    of ``wanted``.

    Raises:
        ValueError: nothing matches, or several cards do (the message lists them, so one can be picked by id).
    """
    text = str(wanted or "").strip()
    if not text:
        raise ValueError("name a card: give its id or words of its title.")
    cards = cards_of(retriever)
    if text in cards:
        return text
    folded = [cid for cid in cards if cid.lower() == text.lower()]
    if len(folded) == 1:
        return folded[0]
    words = set(tokenize(text))
    matches = [cid for cid, title in cards.items() if words and words <= set(tokenize(title)) | set(tokenize(cid))]
    if len(matches) == 1:
        return matches[0]
    shown = text[:80]
    if not matches:
        raise ValueError(
            f"no card has the id {shown!r} or every word of it in its title; give a card id or other "
            f"words of its title ({len(cards):,} cards in this corpus)."
        )
    listed = "; ".join(f"{cid} ({cards[cid][:60]})" for cid in matches[:10])
    more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
    raise ValueError(f"{len(matches)} cards match {shown!r}: {listed}{more}. Give one of these ids, or more words.")


# ------------------------------------------------------------------------------------------------ whole corpus
def _order(retriever: HybridRetriever, scores: np.ndarray, positive_only: bool) -> list[int]:
    """Chunk positions best first, as a branch ranks them: score descending, ties by chunk id."""
    idx = np.flatnonzero(scores > 0) if positive_only else np.arange(len(scores))
    ids = [retriever.chunks[i].chunk_id for i in idx.tolist()]
    order = sorted(range(len(ids)), key=lambda j: (-float(scores[idx[j]]), ids[j]))
    return [int(idx[j]) for j in order]


def _hits(retriever: HybridRetriever, order: Sequence[int], scores: np.ndarray, n: int) -> tuple[Hit, ...]:
    chunks = retriever.chunks
    return tuple(
        Hit(chunks[i].chunk_id, chunks[i].parent_id, r, float(scores[i])) for r, i in enumerate(order[:n], start=1)
    )


def _standing(retriever: HybridRetriever, order: Sequence[int], scores: np.ndarray, card_id: str) -> dict[str, Any]:
    """The card's rank (card level) and its best sub-chunk's rank and score in a whole-corpus order."""
    seen: set[str] = set()
    for chunk_rank, i in enumerate(order, start=1):
        parent = retriever.chunks[i].parent_id
        if parent not in seen:
            seen.add(parent)
            if parent == card_id:
                return {
                    "rank": len(seen),
                    "chunk_rank": chunk_rank,
                    "chunk_id": retriever.chunks[i].chunk_id,
                    "score": round(float(scores[i]), 6),
                    "ranked_cards": len({retriever.chunks[j].parent_id for j in order}),
                }
    return {
        "rank": None,
        "chunk_rank": None,
        "chunk_id": None,
        "score": 0.0,
        "ranked_cards": len({retriever.chunks[j].parent_id for j in order}),
    }


def _bm25(retriever: HybridRetriever, query: str, card_id: str, s: Settings, result: RetrievalResult):
    index = retriever.bm25_index(s.bm25_tokenizer)
    terms = list(dict.fromkeys(index.query_terms(query)))
    scores = index.scores(terms) if not index.empty else np.zeros(len(retriever.chunks))
    order = _order(retriever, scores, positive_only=True)
    info = _standing(retriever, order, scores, card_id)
    held: set[str] = set()
    for chunk in retriever.chunks:
        if chunk.parent_id == card_id:
            held.update(analyze(chunk.indexed_text, s.bm25_tokenizer, chunk.lang))
    info["terms"] = [
        {"term": t, "idf": None if index.idf(t) is None else round(index.idf(t), 4), "in_card": t in held}
        for t in terms
    ]
    info["contains"] = [t["term"] for t in info["terms"] if t["in_card"]]
    info["lacks"] = [t["term"] for t in info["terms"] if not t["in_card"]]
    info.update(
        tokenizer=s.bm25_tokenizer,
        status=result.bm25.status,
        reason=result.bm25.reason,
        in_list=any(h.parent_id == card_id for h in result.bm25.hits),
    )
    return info, order, scores


def dense_scores(embeddings: np.ndarray, query_vector) -> np.ndarray:
    """Cosine of every sub-chunk with the query (rows are unit length), computed in the vectors' own dtype: the
    matrix is read as it is, never copied (a float64 copy per question was 60 MB at 20,000 sub-chunks); only the
    n scores are widened to float64."""
    q = np.asarray(query_vector, dtype=embeddings.dtype)
    return (embeddings @ q).astype(np.float64)


def _dense(retriever: HybridRetriever, query: str, card_id: str, result: RetrievalResult):
    store = retriever.dense
    if store is None or retriever.embedder is None:
        info = {
            "rank": None,
            "chunk_rank": None,
            "chunk_id": None,
            "cosine": None,
            "status": result.dense.status,
            "reason": result.dense.reason or retriever.dense_error,
            "in_list": False,
        }
        return info, [], np.zeros(len(retriever.chunks))
    qvec = retriever.embed_query(query).value
    scores = dense_scores(store.embeddings, qvec)
    order = _order(retriever, scores, positive_only=False)
    info = _standing(retriever, order, scores, card_id)
    info["cosine"] = info.pop("score") if info["rank"] is not None else None
    info.update(
        status=result.dense.status,
        reason=result.dense.reason,
        in_list=any(h.parent_id == card_id for h in result.dense.hits),
    )
    return info, order, scores


# ------------------------------------------------------------------------------------------------ the turn
def candidates(result: RetrievalResult) -> list:
    """What the final cut runs over: the reranked head, then the fused tail, best sub-chunk per card."""
    return best_per_parent([*result.reranked, *result.fused[len(result.reranked) :]])


def card_position(result: RetrievalResult, card_id: str) -> int | None:
    """The card's 1-based position among the candidates after parent dedup (None: not a candidate)."""
    return next((p for p, h in enumerate(candidates(result), start=1) if h.parent_id == card_id), None)


def _fusion(
    retriever: HybridRetriever,
    result: RetrievalResult,
    card_id: str,
    s: Settings,
    whole: dict[str, tuple[list[int], np.ndarray, dict]],
) -> dict[str, Any]:
    """The card in the fused list: the real one if the branches reached it, else the branch lists cut just deep
    enough to hold it (``as_if_depth``) fused at this k and these weights."""
    reached = [h for h in best_per_parent(result.fused)]
    for rank, h in enumerate(reached, start=1):
        if h.parent_id == card_id:
            return {
                "rank": rank,
                "score": round(h.score, 6),
                "chunk_id": h.chunk_id,
                "reached": True,
                "as_if_depth": None,
                "branch_ranks": dict(h.branch_ranks),
                "contributions": {k: round(v, 6) for k, v in h.contributions.items()},
            }
    depth = s.candidate_depth
    lists, deepest = [], depth
    for branch in (result.bm25, result.dense):
        order, scores, info = whole[branch.name]
        if not branch.usable or not order:
            continue
        need = max(depth, info.get("chunk_rank") or 0)
        deepest = max(deepest, need)
        lists.append(BranchResult(branch.name, _hits(retriever, order, scores, need)))
    weights = result.weights or {"bm25": s.bm25_weight, "dense": s.dense_weight}
    fused = fuse_branches(lists, weights, retriever.parent_of, fusion=s.fusion, k=s.rrf_k) if lists else []
    for rank, h in enumerate(best_per_parent(fused), start=1):
        if h.parent_id == card_id:
            return {
                "rank": rank,
                "score": round(h.score, 6),
                "chunk_id": h.chunk_id,
                "reached": False,
                "as_if_depth": deepest,
                "branch_ranks": dict(h.branch_ranks),
                "contributions": {k: round(v, 6) for k, v in h.contributions.items()},
            }
    return {
        "rank": None,
        "score": None,
        "chunk_id": None,
        "reached": False,
        "as_if_depth": deepest,
        "branch_ranks": {},
        "contributions": {},
    }


def _cross_encoder(
    retriever: HybridRetriever, query: str, card_id: str, chunk_id: str | None, result: RetrievalResult, s: Settings
) -> dict[str, Any]:
    """The card's logit (one pair, cached per turn) and where it would stand among the scored head."""
    from retrieval.rerank import load_error, load_reranker, score_pairs

    ran = bool(result.reranked)
    info: dict[str, Any] = {
        "score": None,
        "chunk_id": chunk_id,
        "ran": ran,
        "in_head": False,
        "would_place": None,
        "head": len(result.reranked),
        "reason": "",
    }
    if not ran:
        info["reason"] = result.reranker_status or "the reranker did not run on this turn"
    if chunk_id is None:
        info["reason"] = "no sub-chunk of the card matches the turn in any branch"
        return info
    mine = next((h for h in result.reranked if h.parent_id == card_id), None)
    if mine is not None:
        info.update(chunk_id=mine.chunk_id, in_head=True, score=round(mine.score, 4))
        logit = mine.score
    else:
        scorer = load_reranker(s.reranker_model)
        if scorer is None:
            info["reason"] = load_error(s.reranker_model) or "the reranker is unavailable"
            return info
        try:
            logit = score_pairs(scorer, query, [retriever.by_id[chunk_id].indexed_text])[0]
            if logit is None or not math.isfinite(logit):
                raise ValueError(f"no finite score ({logit!r})")
        except Exception as exc:  # a failing model is reported, never raised
            info["reason"] = f"scoring the pair failed ({type(exc).__name__}: {exc})"
            return info
        info["score"] = round(logit, 4)
    others = [h.score for h in best_per_parent(result.reranked) if h.parent_id != card_id]
    info["would_place"] = 1 + sum(x > logit for x in others)
    info["lowest_in_head"] = round(min(others), 4) if others else None
    return info


def _stages(
    result: RetrievalResult, card_id: str, s: Settings, position: int | None, similarity: float | None
) -> list[dict[str, Any]]:
    """Dedup, top_k, the threshold and the refusal rule, each with passed and its value."""
    kept = card_id in {h.parent_id for h in result.final}
    out = [
        {
            "stage": "dedup",
            "passed": position is not None,
            "value": position,
            "note": (
                f"its best sub-chunk stands for it at card position {position}"
                if position is not None
                else "not a candidate: no sub-chunk of it reached the final cut"
            ),
        }
    ]
    if position is None:
        return out
    out.append(
        {
            "stage": "top_k",
            "passed": position <= s.top_k,
            "value": position,
            "note": f"card position {position} {'<=' if position <= s.top_k else '>'} top_k={s.top_k}",
        }
    )
    if similarity is None:
        out.append({"stage": "threshold", "passed": True, "value": None, "note": "skipped (no embeddings)"})
    elif cosine_cut_skipped(result.refusal, s):
        out.append(
            {
                "stage": "threshold",
                "passed": True,
                "value": round(similarity, 4),
                "note": f"cosine {similarity:.3f}: MIN_SIMILARITY not applied (the turn is in another language "
                "than most cards)",
            }
        )
    else:
        ok = similarity >= s.min_similarity
        out.append(
            {
                "stage": "threshold",
                "passed": ok,
                "value": round(similarity, 4),
                "note": f"cosine {similarity:.3f} {'>=' if ok else '<'} MIN_SIMILARITY {s.min_similarity:g}",
            }
        )
    refused = result.refusal is not None and result.refusal.refused
    out.append(
        {
            "stage": "refusal",
            "passed": not refused,
            "value": result.refusal.reason if result.refusal else "",
            "note": (
                f"the turn was refused: {result.refusal.reason}"
                if refused
                else "the turn was answered"
                if result.refusal
                else f"REFUSAL_RULE={s.refusal_rule}"
            ),
        }
    )
    out.append(
        {
            "stage": "final",
            "passed": kept,
            "value": position if kept else None,
            "note": "among the final cards" if kept else "not among the final cards",
        }
    )
    return out


def _lost_at(result: RetrievalResult, card_id: str, s: Settings, stages: list[dict[str, Any]]) -> str | None:
    if card_id in {h.parent_id for h in result.final}:
        return None
    by = {st["stage"]: st for st in stages}
    if not by["dedup"]["passed"]:
        return "depth"
    if not by["top_k"]["passed"]:
        fused_pos = next(
            (p for p, h in enumerate(best_per_parent(result.fused), start=1) if h.parent_id == card_id), None
        )
        return "rerank" if result.reranked and fused_pos is not None and fused_pos <= s.top_k else "fusion"
    if not by["threshold"]["passed"]:
        return "threshold"
    return "refusal"


# ------------------------------------------------------------------------------------------------ the change
def _ladder(attr: str, s: Settings) -> list[Any]:
    """The values tried for ``attr``, ascending, with the current value in place (for ladder distances)."""
    current = getattr(s, attr)
    values = set(LADDERS[attr]) | {current}
    if attr == "candidate_multiplier":  # beyond MAX_CANDIDATE_DEPTH a larger multiplier changes nothing
        cap = math.ceil(MAX_CANDIDATE_DEPTH / s.top_k)
        values = {v for v in values if v <= cap} | ({cap} if cap <= 50 else set())
    if isinstance(current, str):
        return list(LADDERS[attr])
    return sorted(values)


def _try(
    retriever: HybridRetriever, query: str, card_id: str, s: Settings, attr: str, value: Any, tried: list[int]
) -> tuple[bool, int | None, Settings | None]:
    """Run the pipeline with one control changed: (the card is a final card, its candidate position, the settings)."""
    try:
        changed = s.replace(**{attr: value})
    except ValueError:  # e.g. both branch weights 0
        return False, None, None
    tried[0] += 1
    result = retriever.retrieve(query, changed)
    return card_id in {h.parent_id for h in result.final}, card_position(result, card_id), changed


def _refine(
    retriever: HybridRetriever,
    query: str,
    card_id: str,
    s: Settings,
    attr: str,
    failed: Any,
    works: Any,
    tried: list[int],
) -> Any:
    """The value nearest the one that failed, between it and the ladder value that works (0.01 for the
    threshold, whole numbers for integer controls; at most 50 tries)."""
    if isinstance(works, str) or isinstance(works, bool):
        return works
    if attr == "min_similarity":
        step = 0.01 if works > failed else -0.01
        between = [round(failed + step * n, 2) for n in range(1, int(round(abs(works - failed) / 0.01)))]
    elif isinstance(works, int):
        step = 1 if works > failed else -1
        between = list(range(failed + step, works, step))
    else:
        return works
    for value in between[:50]:
        if _try(retriever, query, card_id, s, attr, value, tried)[0]:
            return value
    return works


def suggest(
    retriever: HybridRetriever, query: str, card_id: str, s: Settings, budget_s: float | None = None
) -> tuple[dict | None, dict | None, int, bool]:
    """The smallest single change of one control that puts the card among the final cards, the closest try when
    none does, how many pipeline runs the search took, and whether it stopped at ``budget_s`` seconds before
    trying every value (then "none" only means none among those tried). See the module docstring for "smallest"."""
    tried = [0]
    deadline = None if budget_s is None else time.monotonic() + budget_s
    ladders = {attr: _ladder(attr, s) for attr in LADDERS}
    if s.fusion != "rrf" and s.rerank_mode != "rrf":
        ladders.pop("rrf_k")  # rrf_k acts on nothing then
    if s.rerank_mode != "rrf":
        ladders.pop("rerank_weight")
    if not s.hybrid_enabled:
        ladders = {a: v for a, v in ladders.items() if a in ("candidate_multiplier", "min_similarity")}
    closest: dict[str, Any] | None = None
    longest = max(len(v) for v in ladders.values())
    for step in range(1, longest):
        for attr, values in ladders.items():
            here = values.index(getattr(s, attr)) if getattr(s, attr) in values else 0
            for direction in (1, -1):
                j = here + direction * step
                if not 0 <= j < len(values) or tried[0] >= MAX_TRIES:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    return None, closest, tried[0], True
                ok, position, changed = _try(retriever, query, card_id, s, attr, values[j], tried)
                if ok:
                    previous = values[j - direction] if 0 <= j - direction < len(values) else getattr(s, attr)
                    value = _refine(retriever, query, card_id, s, attr, previous, values[j], tried)
                    return _change(attr, value, s, step), None, tried[0], False
                if position is not None and (closest is None or position < closest["card_position"]):
                    closest = {**_change(attr, values[j], s, step), "card_position": position}
    return None, closest, tried[0], False


def _change(attr: str, value: Any, s: Settings, steps: int) -> dict[str, Any]:
    return {"setting": env_name(attr), "attribute": attr, "value": value, "current": getattr(s, attr), "steps": steps}


# ------------------------------------------------------------------------------------------------ explain
def explain(
    retriever: HybridRetriever,
    turn: str,
    card: str,
    settings: Settings | None = None,
    *,
    search: bool = True,
    budget_s: float | None = None,
) -> WhyNot:
    """Where ``card`` (an id or words of its title) stands at every stage of ``turn`` at ``settings``.

    ``search`` also looks for the smallest single change that brings it in (several pipeline runs, each from the
    per-turn cache where it can), for at most ``budget_s`` seconds when given (the page gives it one). Raises
    ``ValueError`` for an empty or oversized turn, or a card that is not found or ambiguous (the message lists
    the candidates).
    """
    s = settings or retriever.settings
    try:
        query = clean_query(turn)
    except QueryError as exc:
        raise ValueError(str(exc)) from None
    card_id = find_card(retriever, card)
    result = retriever.retrieve(query, s)
    bm25, bm25_order, bm25_scores = _bm25(retriever, query, card_id, s, result)
    dense, dense_order, dense_scores = _dense(retriever, query, card_id, result)
    whole = {"bm25": (bm25_order, bm25_scores, bm25), "dense": (dense_order, dense_scores, dense)}
    fused = _fusion(retriever, result, card_id, s, whole)
    position = card_position(result, card_id)
    standing = next((h for h in candidates(result) if h.parent_id == card_id), None)
    chunk_id = standing.chunk_id if standing is not None else fused["chunk_id"]
    ce = _cross_encoder(retriever, query, card_id, chunk_id, result, s)
    similarity = None
    if retriever.dense is not None and chunk_id is not None:
        similarity = float(dense_scores[retriever.dense._row[chunk_id]])
    stages = _stages(result, card_id, s, position, similarity)
    lost = _lost_at(result, card_id, s, stages)
    suggestion, closest, tried, stopped = (None, None, 0, False)
    if lost is not None and search:
        suggestion, closest, tried, stopped = suggest(retriever, query, card_id, s, budget_s)
    why = WhyNot(
        turn=query,
        card_id=card_id,
        title=cards_of(retriever)[card_id],
        settings=_summary(s),
        level=result.hybrid_path,
        final=tuple(h.parent_id for h in result.final),
        bm25=bm25,
        dense=dense,
        fused=fused,
        cross_encoder=ce,
        stages=tuple(stages),
        lost_at=lost,
        verdict="",
        suggestion=suggestion,
        closest=closest,
        tried=tried,
        search_stopped=budget_s if stopped else None,
        notes=(
            "ranks are card ranks, 1-based, over the whole corpus (best sub-chunk per card); the "
            "branch depth counts sub-chunks",
        ),
    )
    return _with_verdict(why, s)


def _summary(s: Settings) -> dict[str, Any]:
    keep = (
        "top_k",
        "candidate_multiplier",
        "rrf_k",
        "bm25_weight",
        "dense_weight",
        "fusion",
        "query_weighting",
        "reranker_max_input",
        "rerank_mode",
        "rerank_weight",
        "min_similarity",
        "bm25_tokenizer",
        "refusal_rule",
    )
    return {**{k: getattr(s, k) for k in keep}, "candidate_depth": s.candidate_depth}


def _rank_words(info: dict[str, Any], name: str) -> str:
    if info.get("rank") is None:
        return f"{name} does not match it" if name == "BM25" else f"{name} has no vector for it"
    return f"{name} rank {info['rank']} (sub-chunk {info['chunk_rank']})"


def _with_verdict(why: WhyNot, s: Settings) -> WhyNot:
    """The verdict in words: the first stage that lost the card and why, then the change that brings it in."""
    from dataclasses import replace

    depth = s.candidate_depth
    by = {st["stage"]: st for st in why.stages}
    lost = why.lost_at
    if lost is None:
        text = f"{why.card_id} is final card {by['final']['value']}: nothing lost it."
    elif lost == "depth":
        ranks = " and ".join(_rank_words(i, n) for i, n in ((why.bm25, "BM25"), (why.dense, "dense")))
        text = (
            f"{ranks}, both beyond the branch depth of {depth} sub-chunks (top_k {s.top_k} x multiplier "
            f"{s.candidate_multiplier}): it never reached fusion."
        )
        if why.fused["rank"] is not None:
            text += f" Had the depth reached it ({why.fused['as_if_depth']}), fusion would rank it {why.fused['rank']}."
    elif lost == "fusion":
        ranks = " and ".join(_rank_words(i, n) for i, n in ((why.bm25, "BM25"), (why.dense, "dense")))
        text = (
            f"{ranks}; fusion ranks it {why.fused['rank']} among the cards (RRF k={s.rrf_k}, {s.fusion}); it is at "
            f"card position {by['top_k']['value']} after "
            f"{'reranking' if why.cross_encoder['ran'] else 'fusion'}, beyond top_k={s.top_k}."
        )
        if why.cross_encoder["ran"] and not why.cross_encoder["in_head"]:
            text += f" It was not in the reranker's head of {s.reranker_max_input}."
    elif lost == "rerank":
        text = (
            f"fusion ranks it {why.fused['rank']} (within top_k={s.top_k}), but the cross-encoder's "
            f"{why.cross_encoder['score']} pushes it to card position {by['top_k']['value']}, beyond top_k."
        )
    elif lost == "threshold":
        text = f"it reaches the final cut at card position {by['top_k']['value']}, but its {by['threshold']['note']}."
    else:
        text = f"it would be a final card, but {by['refusal']['note']}."
    if lost is not None:
        sug, close = why.suggestion, why.closest
        if sug:
            text += f" Smallest single change: {sug['setting']}={sug['value']} (now {sug['current']}) brings it in."
        elif why.search_stopped is not None:
            text += f" The search for a single change stopped at its {why.search_stopped:g} s budget after {why.tried} "
            text += (
                f"tries; the closest so far is {close['setting']}={close['value']} (now {close['current']}), "
                f"card position {close['card_position']}."
                if close
                else "tries, none closer yet."
            )
        elif close:
            text += (
                f" No single change does; the closest is {close['setting']}={close['value']} (now "
                f"{close['current']}), card position {close['card_position']} with top_k={s.top_k}."
            )
        elif why.tried:
            text += " No single change of the controls tried brings it among the candidates."
    return replace(why, verdict=f"{why.card_id}: {text}")


def format_why(why: WhyNot) -> str:
    """A readable text account of a ``WhyNot`` (the CLI's output without ``--json``)."""
    b, d, f, ce = why.bm25, why.dense, why.fused, why.cross_encoder
    terms = (
        ", ".join(
            f"{t['term']}{'+' if t['in_card'] else '-'}(idf {t['idf'] if t['idf'] is not None else 'n/a'})"
            for t in b["terms"]
        )
        or "(none)"
    )
    lines = [
        f"turn:  {why.turn}",
        f"card:  {why.card_id}  ({why.title})",
        f"level: {why.level}; final cards: {', '.join(why.final) or '(none)'}",
        "",
        f"bm25    rank {b['rank']}  score {b['score']}  sub-chunk rank {b['chunk_rank']}  "
        f"({b['tokenizer']}; in the branch list: {'yes' if b['in_list'] else 'no'})",
        f"        turn terms (+ in the card, - lacking): {terms}",
        f"dense   rank {d['rank']}  cosine {d['cosine']}  sub-chunk rank {d['chunk_rank']}  "
        f"(exact over every vector; in the branch list: {'yes' if d['in_list'] else 'no'})",
        f"fused   rank {f['rank']}  score {f['score']}"
        + ("" if f["reached"] else f"  (as if each branch went {f['as_if_depth']} sub-chunks deep)"),
        f"cross-encoder  {ce['score']}  on {ce['chunk_id']}"
        + (
            f"  {'places' if ce['in_head'] else 'would place'} it #{ce['would_place']} of the "
            f"{ce['head'] + (not ce['in_head'])} scored"
            if ce["would_place"]
            else ""
        )
        + (f"  ({ce['reason']})" if ce["reason"] else ""),
        "",
    ]
    for st in why.stages:
        lines.append(f"{st['stage']:<10} {'pass' if st['passed'] else 'FAIL'}  {st['note']}")
    lines += ["", f"lost at: {why.lost_at or '(nowhere: it is a final card)'}", why.verdict]
    if why.tried:
        lines.append(f"({why.tried} single change{'s' if why.tried != 1 else ''} tried)")
    return "\n".join(lines)
