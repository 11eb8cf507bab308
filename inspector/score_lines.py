"""The arithmetic behind a row's score, in words: the RRF formula, the fused and final score lines, the rank-move
mark of a final card, and the evidence behind adaptive weights. Every value reaching HTML is escaped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.html_text import esc, fmt5, num
from retrieval.types import FinalHit, FusedHit, RetrievalResult


def rrf_formula(hit: FusedHit, k: int, weights: Mapping[str, float]) -> str:
    """The arithmetic of a fused score, e.g. ``1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252``."""
    terms, values = [], []
    for name in ("bm25", "dense"):
        rank = hit.branch_ranks.get(name)
        if rank is None:
            continue
        w = weights.get(name, 1.0)
        terms.append(f"{'1' if w == 1 else num(w)}/({k}+{rank})")
        values.append(fmt5(hit.contributions.get(name, 0.0)))
    if not terms:
        return fmt5(hit.score)
    middle = f" = {' + '.join(values)}" if len(values) > 1 else ""
    return f"{' + '.join(terms)}{middle} = {fmt5(hit.score)}"


def fused_score_html(hit: FusedHit, result: RetrievalResult) -> str:
    """A fused row's score line: its branch ranks and the fusion's arithmetic (RRF or convex)."""
    ranks = " · ".join(
        f"{'BM25' if n == 'bm25' else 'dense'} #{hit.branch_ranks[n]}"
        for n in ("bm25", "dense")
        if hit.branch_ranks.get(n) is not None
    )
    if result.settings.get("fusion", "rrf") == "convex":
        parts = " + ".join(
            f"{n} {fmt5(hit.contributions.get(n, 0.0))}"
            for n in ("bm25", "dense")
            if hit.branch_ranks.get(n) is not None
        )
        formula = f"convex: {parts} = {fmt5(hit.score)}"
    else:
        formula = rrf_formula(hit, int(result.settings.get("rrf_k", 60)), result.weights)
    return f'<span class="ranks">{esc(ranks)}</span><code class="formula">{esc(formula)}</code>'


def final_score_html(hit: FinalHit, result: RetrievalResult) -> str:
    """A final card's score line: cross-encoder score (and blend) or fused score, fused rank, cosine."""
    reranked = {h.chunk_id: h for h in result.reranked}
    fused_rank = {h.chunk_id: h.rank for h in result.fused}
    parts = []
    if hit.chunk_id in reranked:
        rh = reranked[hit.chunk_id]
        parts.append(f"cross-encoder {rh.score:.3f}")
        blend = getattr(rh, "blend_score", None)
        if blend is not None:
            parts.append(f"blend {fmt5(blend)}")
    else:
        parts.append(f"RRF {fmt5(hit.score)}")
    if hit.chunk_id in fused_rank:
        parts.append(f"fused #{fused_rank[hit.chunk_id]}")
    if hit.similarity is not None:
        parts.append(f"cos {hit.similarity:.3f}")
    return esc(" · ".join(parts))


def move_mark(before: int | None, after: int) -> str:
    """The rank change from the fused list to the final cards, as a mark that reads from the back of a room:
    ``▲3`` (moved up three places), ``▼1``, ``=`` (kept its place)."""
    if before is None:
        return ""
    if before > after:
        text, kind, words = f"▲{before - after}", "up", f"up from fused #{before}"
    elif before < after:
        text, kind, words = f"▼{after - before}", "down", f"down from fused #{before}"
    else:
        text, kind, words = "=", "same", f"fused #{before} too"
    return f'<span class="move {kind}" title="{esc(words)}">{esc(text)}</span>'


def weight_evidence_text(ev: Mapping[str, Any]) -> str:
    """The branch evidence behind adaptive weights, one line: the numbers the rule read
    (``RetrievalResult.weight_evidence``)."""
    parts = [
        f"BM25 coverage {float(ev.get('coverage', 0.0)):.0%}",
        f"{ev.get('matched', 0)}/{ev.get('terms', 0)} turn terms in the index",
        f"BM25 top-10 drop {float(ev.get('bm25_gap', 0.0)):.0%}",
        f"dense top-10 gap {float(ev.get('dense_gap', 0.0)):.3f}",
        f"top-10 overlap {ev.get('overlap', 0)}/10",
        f"language {ev.get('language', '?')}" + (" (English-only embedder)" if ev.get("english_only") else ""),
    ]
    return "branch evidence: " + " · ".join(parts)
