"""The account of one card through one turn: the ``WhyNot`` record "Why not…?" returns, its verdict in words (the
stage that lost the card and the change that brings it in) and its text form for the CLI."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from retrieval.settings import Settings

# The stages that can lose a card, in the order a turn passes them (``WhyNot.lost_at``).
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


def _rank_words(info: dict[str, Any], name: str) -> str:
    if info.get("rank") is None:
        return f"{name} does not match it" if name == "BM25" else f"{name} has no vector for it"
    return f"{name} rank {info['rank']} (sub-chunk {info['chunk_rank']})"


def with_verdict(why: WhyNot, s: Settings) -> WhyNot:
    """The verdict in words: the first stage that lost the card and why, then the change that brings it in."""
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
