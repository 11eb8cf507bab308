"""Why not this card? ``explain`` takes one card (any card of the corpus, also one no stage returned) through every
stage of one turn at the current settings; ``find_card`` finds it by id or by words of its title.

Where each part lives: the card's whole-corpus branch ranks in ``why_ranks``; fusion, the cross-encoder, dedup,
top_k, the threshold and the refusal rule in ``why_stages``; the smallest single change that brings it in in
``why_change``; the ``WhyNot`` account and its verdict in words in ``why_report``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval.query import QueryError, clean_query
from retrieval.settings import Settings
from retrieval.tokenize import tokenize
from retrieval.why_change import suggest
from retrieval.why_ranks import bm25_standing, dense_standing
from retrieval.why_report import WhyNot, with_verdict
from retrieval.why_stages import candidates, card_position, cross_encoder_standing, cut_stages, fusion_standing, lost_at

if TYPE_CHECKING:
    from retrieval.pipeline import HybridRetriever


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
    whole = {
        "bm25": bm25_standing(retriever, query, card_id, s, result),
        "dense": dense_standing(retriever, query, card_id, result),
    }
    bm25, dense, dense_scores = whole["bm25"][0], whole["dense"][0], whole["dense"][2]
    fused = fusion_standing(retriever, result, card_id, s, whole)
    position = card_position(result, card_id)
    standing = next((h for h in candidates(result) if h.parent_id == card_id), None)
    chunk_id = standing.chunk_id if standing is not None else fused["chunk_id"]
    ce = cross_encoder_standing(retriever, query, card_id, chunk_id, result, s)
    similarity = None
    if retriever.dense is not None and chunk_id is not None:
        similarity = float(dense_scores[retriever.dense._row[chunk_id]])
    stages = cut_stages(result, card_id, s, position, similarity)
    lost = lost_at(result, card_id, s, stages)
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
    return with_verdict(why, s)


def _summary(s: Settings) -> dict[str, Any]:
    """The controls the account depends on, as they were for this turn."""
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
