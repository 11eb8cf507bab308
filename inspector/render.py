"""RetrievalResult -> HTML for the inspector: the four columns, the explain and context panels, the colours and
terms they share. Rows and chips are ``inspector.hit_rows``'s, score lines ``inspector.score_lines``', the badge
``inspector.badge``'s.

Every string that comes from the corpus, the turn or an error message is escaped with ``html.escape`` (``esc``)
before it reaches HTML. Nothing here scores, fuses or ranks: it only lays out what the pipeline returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from inspector.hit_rows import STAGE_TITLES, Stage, branch_chip, column_head, empty_list, hit_row, top_k_of
from inspector.html_text import esc, fmt5, num  # esc also as ``render.esc``: how the page's modules escape
from inspector.score_lines import final_score_html, fused_score_html, move_mark, rrf_formula, weight_evidence_text
from retrieval.context import Context
from retrieval.tokenize import analyze, detect_language
from retrieval.types import Chunk, RetrievalResult

# Okabe-Ito plus four darker hues: distinct for colour-blind viewers and still saturated on a projector.
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#D55E00",
    "#56B4E9",
    "#7A4FA0",
    "#8C6D1F",
    "#C0392B",
    "#1B7F79",
    "#5D6D7E",
    "#A0522D",
)
NEUTRAL = "#B0B6BE"
BRANCH_COLORS = {"bm25": "#D55E00", "dense": "#0072B2"}
LEVEL_WORDS = {
    "full": "Full hybrid: BM25 + dense, fused with RRF, reranked by the cross-encoder",
    "rrf_only": "RRF only: both branches fused, no reranking",
    "dense_only": "Dense only: the legacy path, no BM25",
    "bm25_only": "BM25 only: the dense branch is unavailable",
    "no_match": "No match: the assistant refuses",
}
COMMON_SHARE = 0.10  # a query term in more than this share of sub-chunks is highlighted faintly (low IDF)


# --------------------------------------------------------------------------------------------- colours, terms
def doc_colors(result: RetrievalResult, limit: int = len(PALETTE)) -> dict[str, str]:
    """``parent_id -> colour``, the same in every column and chart: the final cards first, then the rest in
    fused order, then branch-only ids; after ``limit`` documents everything is ``NEUTRAL``."""
    order: list[str] = []
    for group in (result.final, result.cut, result.reranked, result.fused, result.bm25.hits, result.dense.hits):
        for hit in group:
            if hit.parent_id not in order:
                order.append(hit.parent_id)
    return {pid: PALETTE[i] if i < limit else NEUTRAL for i, pid in enumerate(order)}


def query_terms(query: str, tokenizer: str = "plain") -> frozenset[str]:
    """The terms BM25 looks up for ``query`` (same analysis as the index), for highlighting."""
    lang = detect_language(query) if tokenizer != "plain" else "en"
    return frozenset(analyze(query, tokenizer, lang))


# ------------------------------------------------------------------------------------------------- columns
def render_branch(
    result: RetrievalResult,
    stage: Literal["bm25", "dense"],
    chunks: Mapping[str, Chunk],
    colors: Mapping[str, str],
    terms: frozenset[str],
    common: frozenset[str] = frozenset(),
) -> str:
    """One branch column: its ranked sub-chunks in its own units, or why it did not run."""
    branch = result.bm25 if stage == "bm25" else result.dense
    chip, chip_class = branch_chip(branch)
    tokenizer = str(result.settings.get("bm25_tokenizer", "plain"))
    consensus = set(result.consensus)
    body: list[str] = []
    if branch.status != "ok":
        body.append(
            f'<div class="dropped"><b>{esc(STAGE_TITLES[stage])} {esc(branch.status)}</b>'
            f"<div>{esc(branch.reason or 'no reason given')}</div></div>"
        )
    elif not branch.hits:
        body.append(empty_list(f"0 hits: {branch.reason}" if branch.reason else "0 hits"))
    top_k = top_k_of(result)
    for h in branch.hits:
        unit = f"BM25 {h.score:.2f}" if stage == "bm25" else f"cosine {h.score:.3f}"
        body.append(
            hit_row(
                rank=str(h.rank),
                chunk=chunks.get(h.chunk_id),
                chunk_id=h.chunk_id,
                parent_id=h.parent_id,
                color=colors.get(h.parent_id, NEUTRAL),
                score_html=esc(unit),
                terms=terms,
                tokenizer=tokenizer,
                consensus=h.chunk_id in consensus,
                common=common,
                extra=h.rank > top_k,
            )
        )
    head = column_head(stage, chip, chip_class)
    return f'<div class="col col-{stage}">{head}<div class="rows">{"".join(body)}</div></div>'


def render_fused(
    result: RetrievalResult,
    chunks: Mapping[str, Chunk],
    colors: Mapping[str, str],
    terms: frozenset[str],
    common: frozenset[str] = frozenset(),
) -> str:
    """The fused column: each candidate's branch ranks, contributions and the RRF arithmetic."""
    tokenizer = str(result.settings.get("bm25_tokenizer", "plain"))
    consensus = set(result.consensus)
    fusion = result.settings.get("fusion", "rrf")
    k = result.settings.get("rrf_k", 60)
    # only the branches that ran have a weight worth showing: with hybrid off it said "w_bm25=2" (and the note
    # "BM25 weight x2") over a list BM25 never joined
    ran = {n for n in ("bm25", "dense") if getattr(result, n).status == "ok"}
    w = {n: v for n, v in result.weights.items() if n in ran}
    weights = " · ".join(f"w_{n}={num(v)}" for n, v in w.items()) if w else ""
    chip = f"k={esc(k)} · {esc(weights)}" if fusion == "rrf" else f"convex · {esc(weights)}"
    top_k = top_k_of(result)
    body = [
        hit_row(
            rank=str(h.rank),
            chunk=chunks.get(h.chunk_id),
            chunk_id=h.chunk_id,
            parent_id=h.parent_id,
            color=colors.get(h.parent_id, NEUTRAL),
            score_html=fused_score_html(h, result),
            terms=terms,
            tokenizer=tokenizer,
            consensus=h.chunk_id in consensus,
            common=common,
            extra=h.rank > top_k,
        )
        for h in result.fused
    ]
    if not body:
        body.append(empty_list("nothing to fuse: no branch returned a list"))
    fused_two = len(ran) == 2  # the weights and their reason matter only where two lists are fused
    reason = getattr(result, "weight_reason", "") if fused_two else ""
    note = f'<div class="note">{esc(reason)}</div>' if reason else ""
    evidence = getattr(result, "weight_evidence", None) if fused_two else None
    if evidence:
        note += f'<div class="note evidence">{esc(weight_evidence_text(evidence))}</div>'
    return (
        f'<div class="col col-rrf">{column_head("rrf", chip, "ok" if result.fused else "bad")}{note}'
        f'<div class="rows">{"".join(body)}</div></div>'
    )


def render_final(
    result: RetrievalResult,
    chunks: Mapping[str, Chunk],
    colors: Mapping[str, str],
    terms: frozenset[str],
    refusal: str = "",
    common: frozenset[str] = frozenset(),
) -> str:
    """The last column: kept cards after rerank, parent dedup, top_k and the threshold; cut ones greyed."""
    tokenizer = str(result.settings.get("bm25_tokenizer", "plain"))
    consensus = set(result.consensus)
    top_k = result.settings.get("top_k", "?")
    min_sim = result.settings.get("min_similarity", "?")
    chip = f"top_k={esc(top_k)} · min cos={esc(min_sim)}"
    body: list[str] = []
    if result.refused:
        body.append(f'<div class="refusal"><b>Refusal</b><div>{esc(refusal)}</div></div>')
    if result.reranked:
        head = f"cross-encoder scored {len(result.reranked)} fused candidates"
    elif result.hybrid_path in {"rrf_only", "dense_only"} or result.reranker_status:
        head = f"not reranked: {result.reranker_status or result.hybrid_path}; final order = fused order"
    else:
        head = ""
    fused_rank = {h.chunk_id: h.rank for h in result.fused}
    for h in result.final:
        body.append(
            hit_row(
                rank=str(h.rank),
                chunk=chunks.get(h.chunk_id),
                chunk_id=h.chunk_id,
                parent_id=h.parent_id,
                color=colors.get(h.parent_id, NEUTRAL),
                score_html=final_score_html(h, result),
                terms=terms,
                tokenizer=tokenizer,
                consensus=h.chunk_id in consensus,
                common=common,
                mark=move_mark(fused_rank.get(h.chunk_id), h.rank),
            )
        )
    for h in result.cut:
        body.append(
            hit_row(
                rank="–",
                chunk=chunks.get(h.chunk_id),
                chunk_id=h.chunk_id,
                parent_id=h.parent_id,
                color=colors.get(h.parent_id, NEUTRAL),
                score_html=final_score_html(h, result),
                terms=terms,
                tokenizer=tokenizer,
                consensus=h.chunk_id in consensus,
                cut=h.cut_reason,
                common=common,
            )
        )
    if not result.final and not result.cut and not result.refused:
        body.append(empty_list("no candidate"))
    if head:  # after the cards: the first card stays at the top of the column
        body.append(f'<div class="note">{esc(head)}</div>')
    if result.reranked:
        rows = "".join(
            f"<tr><td>{r.rank}</td><td>{esc(r.chunk_id)}</td><td>{r.score:.3f}</td><td>#{r.fused_rank}</td></tr>"
            for r in result.reranked
        )
        body.append(
            '<details class="scores"><summary>cross-encoder scores (sub-chunk level)</summary>'
            "<table><tr><th>#</th><th>sub-chunk</th><th>logit</th><th>fused</th></tr>"
            f"{rows}</table></details>"
        )
    return (
        f'<div class="col col-reranked">{column_head("reranked", chip, "bad" if result.refused else "ok")}'
        f'<div class="rows">{"".join(body)}</div></div>'
    )


def placeholder(stage: Stage, text: str = "Run a turn to fill this column.") -> str:
    """An empty column before the first run (or after a rejected turn)."""
    head = column_head(stage, "–", "idle")
    return f'<div class="col col-{stage}">{head}<div class="rows">{empty_list(text)}</div></div>'


# ------------------------------------------------------------------------ panels (the badge: inspector.badge)
def render_message(text: str, kind: Literal["error", "info"] = "error") -> str:
    """The message panel: a rejected turn or a settings error, in words (never a stack trace)."""
    if not text:
        return ""
    return f'<div class="message {kind}">{"⚠ " if kind == "error" else ""}{esc(text)}</div>'


def render_explain(result: RetrievalResult, chunk_id: str, chunks: Mapping[str, Chunk]) -> str:
    """One sub-chunk's rank and score in every stage, with the arithmetic."""
    if not chunk_id:
        return empty_list("Pick a document to explain.")
    chunk = chunks.get(chunk_id)
    parent = chunk.parent_id if chunk else chunk_id.split("#")[0]
    title = chunk.title if chunk else parent
    rows: list[tuple[str, str, str]] = []
    for branch, unit in ((result.bm25, "BM25 score"), (result.dense, "cosine")):
        label = "BM25" if branch.name == "bm25" else "Dense"
        hit = next((h for h in branch.hits if h.chunk_id == chunk_id), None)
        if branch.status != "ok":
            rows.append((label, "–", f"branch {branch.status}: {branch.reason}"))
        elif hit is None:
            rows.append((label, "–", f"not in its top {len(branch.hits)}: adds nothing to fusion"))
        else:
            value = f"{hit.score:.3f}" if branch.name == "dense" else f"{hit.score:.2f}"
            rows.append((label, f"#{hit.rank}", f"{unit} {value}"))
    fused = next((h for h in result.fused if h.chunk_id == chunk_id), None)
    if fused is None:
        rows.append(("RRF fused", "–", "not fused"))
    else:
        if result.settings.get("fusion", "rrf") == "convex":
            how = f"convex fusion: {fmt5(fused.score)}"
        else:
            formula = rrf_formula(fused, int(result.settings.get("rrf_k", 60)), result.weights)
            how = f"score = Σ w/(k + rank) = {formula}"
        rows.append(("RRF fused", f"#{fused.rank}", how))
    reranked = next((h for h in result.reranked if h.chunk_id == chunk_id), None)
    if reranked is not None:
        rows.append(
            (
                "Reranked",
                f"#{reranked.rank}",
                f"cross-encoder logit {reranked.score:.3f} (was fused #{reranked.fused_rank})",
            )
        )
    elif result.reranked:
        rows.append(("Reranked", "–", f"outside the {len(result.reranked)} candidates the cross-encoder scored"))
    else:
        rows.append(("Reranked", "–", f"no reranking ({result.reranker_status or result.hybrid_path})"))
    final = next((h for h in result.final if h.parent_id == parent), None)
    cut = next((h for h in result.cut if h.parent_id == parent), None)
    if final is not None:
        via = "" if final.chunk_id == chunk_id else f" via its better sub-chunk {final.chunk_id}"
        threshold = result.settings.get("min_similarity")
        sim = "" if final.similarity is None else f", cos {final.similarity:.3f} ≥ {threshold}"
        rows.append(("Final", f"#{final.rank}", f"card kept{via}{sim}"))
    elif cut is not None:
        via = "" if cut.chunk_id == chunk_id else f" (its best sub-chunk {cut.chunk_id})"
        rows.append(("Final", "cut", f"{cut.cut_reason}{via}"))
    else:
        rows.append(("Final", "–", "the card never reached the final list"))
    body = "".join(f"<tr><th>{esc(a)}</th><td class='r'>{esc(b)}</td><td>{esc(c)}</td></tr>" for a, b, c in rows)
    return (
        f'<div class="explain"><div class="explain-title">{esc(title)} <code>{esc(chunk_id)}</code></div>'
        f"<table>{body}</table></div>"
    )


def render_explain_placeholder() -> str:
    """The explain panel before a run."""
    return empty_list("Run a turn, then pick a document to see its rank and score in every stage.")


def explain_choices(result: RetrievalResult, chunks: Mapping[str, Chunk]) -> list[tuple[str, str]]:
    """``(label, chunk_id)`` for every sub-chunk any stage returned: fused order first, then branch-only ids."""
    seen: list[str] = []
    for group in (result.fused, result.bm25.hits, result.dense.hits):
        for h in group:
            if h.chunk_id not in seen:
                seen.append(h.chunk_id)
    fused_rank = {h.chunk_id: h.rank for h in result.fused}
    out = []
    for cid in seen:
        chunk = chunks.get(cid)
        title = chunk.title if chunk else cid
        prefix = f"#{fused_rank[cid]} " if cid in fused_rank else ""
        out.append((f"{prefix}{title} ({cid})", cid))
    return out


def render_context(ctx: Context) -> str:
    """The context block as the language model would receive it, the budget used, and what was dropped."""
    if ctx.refused:
        head = (
            f'<div class="ctx-head bad">Refusal ({esc(ctx.reason)}): the assistant answers with this text '
            f"and cites nothing.</div>"
        )
    else:
        head = (
            f'<div class="ctx-head">{len(ctx.cards)} card(s) · ≈{ctx.tokens} of {ctx.budget} tokens '
            f'<span class="hint">(tokens ≈ whitespace words × 1.3, tags included)</span></div>'
        )
    dropped = ""
    if ctx.dropped:
        items = "".join(
            f"<li>#{d.rank} {esc(d.title)} <code>{esc(d.card_id)}</code>: {esc(d.reason)}</li>" for d in ctx.dropped
        )
        dropped = f'<div class="ctx-dropped"><b>Dropped for the budget</b><ul>{items}</ul></div>'
    return f'<div class="context">{head}<pre class="ctx-text">{esc(ctx.text)}</pre>{dropped}</div>'
