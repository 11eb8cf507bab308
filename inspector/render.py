"""RetrievalResult -> HTML for the inspector: four columns, the level badge, the explain and context panels.

Every string that comes from the corpus, the turn or an error message is escaped with ``html.escape`` before it
reaches HTML. Nothing here scores, fuses or ranks: it only lays out what the pipeline returned.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from functools import lru_cache
from typing import Literal

from retrieval.context import Context
from retrieval.rounding import round_half_up
from retrieval.tokenize import analyze, detect_language, spans
from retrieval.types import BranchResult, Chunk, FinalHit, FusedHit, RetrievalResult

Stage = Literal["bm25", "dense", "rrf", "reranked"]

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
STAGE_TITLES = {
    "bm25": "BM25 (lexical)",
    "dense": "Dense (embeddings)",
    "rrf": "RRF fused",
    "reranked": "Reranked → final",
}
LEVEL_WORDS = {
    "full": "Full hybrid: BM25 + dense, fused with RRF, reranked by the cross-encoder",
    "rrf_only": "RRF only: both branches fused, no reranking",
    "dense_only": "Dense only: the legacy path, no BM25",
    "bm25_only": "BM25 only: the dense branch is unavailable",
    "no_match": "No match: the assistant refuses",
}
SNIPPET_CHARS = 160
COMMON_SHARE = 0.10  # a query term in more than this share of sub-chunks is highlighted faintly (low IDF)


def esc(value: object) -> str:
    """``html.escape`` for any value (quotes included)."""
    return html.escape(str(value), quote=True)


def fmt5(x: float) -> str:
    """``x`` rounded half up to 5 decimals, as the RRF class writes it (0.032522... -> '0.03252')."""
    return round_half_up(x, 5)


def plural(n: int, word: str) -> str:
    """``1 hit``, ``0 hits``, ``3 hits``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _num(x: float) -> str:
    return f"{x:g}"


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


@lru_cache(maxsize=65536)
def _term(token: str, tokenizer: str, lang: str) -> str | None:
    if tokenizer == "plain":
        return token
    out = analyze(token, tokenizer, lang)
    return out[0] if out else None


def _merged(found: list[tuple[int, int, bool]]) -> list[tuple[int, int, bool]]:
    """Overlapping matches as one: CJK bigrams overlap ("冷蔵" and "蔵庫" in "冷蔵庫" are one mark over three
    characters, not two marks repeating "蔵"). Common only if every match in it is."""
    out: list[tuple[int, int, bool]] = []
    for a, b, is_common in found:
        if out and a < out[-1][1]:
            pa, pb, pc = out[-1]
            out[-1] = (pa, max(pb, b), pc and is_common)
        else:
            out.append((a, b, is_common))
    return out


def highlight(
    text: str,
    terms: frozenset[str],
    *,
    tokenizer: str = "plain",
    lang: str = "en",
    window: int | None = None,
    common: frozenset[str] = frozenset(),
) -> str:
    """Escaped ``text`` with every token BM25 would match wrapped in ``<mark>`` (overlapping CJK bigrams in one).

    Args:
        text: corpus text (not yet escaped).
        terms: ``query_terms(query, tokenizer)``.
        tokenizer / lang: how the index analysed this text (a chunk's own language for ``snowball``).
        window: if given, cut to about this many characters around the first match, with ellipses.
        common: terms found in many sub-chunks (low IDF): marked faintly, so the rare terms BM25 keys on stand out.
    """
    found = _merged(
        [
            (a, b, _term(tok, tokenizer, lang) in common)
            for a, b, tok in spans(text)
            if _term(tok, tokenizer, lang) in terms
        ]
    )
    rare = [f for f in found if not f[2]] or found
    start, end = 0, len(text)
    if window is not None and len(text) > window:
        first = rare[0][0] if rare else 0
        start = max(0, first - window // 4)
        if start:
            space = text.rfind(" ", 0, start)
            start = space + 1 if space >= 0 else start
        end = min(len(text), start + window)
        if end < len(text):
            space = text.rfind(" ", start, end)
            end = space if space > start else end
    out = ["…" if start > 0 else ""]
    pos = start
    for a, b, is_common in found:
        a, b = max(a, pos), min(b, end)  # a mark cut by the window keeps its visible part only
        if b <= a:
            continue
        out.append(esc(text[pos:a]))
        out.append(('<mark class="common">' if is_common else "<mark>") + f"{esc(text[a:b])}</mark>")
        pos = b
    out.append(esc(text[pos:end]))
    out.append("…" if end < len(text) else "")
    return "".join(out)


# ---------------------------------------------------------------------------------------------------- rows
def _row(
    *,
    rank: str,
    chunk: Chunk | None,
    chunk_id: str,
    parent_id: str,
    color: str,
    score_html: str,
    terms: frozenset[str],
    tokenizer: str,
    consensus: bool,
    cut: str = "",
    common: frozenset[str] = frozenset(),
    mark: str = "",
    extra: bool = False,
) -> str:
    title = chunk.title if chunk else parent_id
    lang = chunk.lang if chunk else "en"
    title_html = highlight(title, terms, tokenizer=tokenizer, lang=lang, common=common)
    snippet = (
        highlight(chunk.text, terms, tokenizer=tokenizer, lang=lang, window=SNIPPET_CHARS, common=common)
        if chunk
        else ""
    )
    classes = "hit" + (" consensus" if consensus else "") + (" cut" if cut else "") + (" extra" if extra else "")
    badge = '<span class="both" title="found by BM25 and dense">★ both</span>' if consensus else ""
    cut_html = f'<div class="why">✂ {esc(cut)}</div>' if cut else ""
    return (
        f'<div class="{classes}" style="--doc:{color}" data-chunk="{esc(chunk_id)}" '
        f'data-parent="{esc(parent_id)}">'
        f'<div class="hit-head"><span class="rank">{esc(rank)}</span>'
        f'<span class="title">{title_html}</span>{badge}{mark}</div>'
        f'<div class="hit-id">{esc(chunk_id)}</div>'
        f'<div class="snippet">{snippet}</div>'
        f'<div class="score">{score_html}</div>{cut_html}</div>'
    )


def _head(stage: Stage, chip: str, chip_class: str) -> str:
    return (
        f'<div class="col-head"><span class="col-title">{esc(STAGE_TITLES[stage])}</span>'
        f'<span class="chip {chip_class}">{chip}</span></div>'
    )


def _branch_chip(branch: BranchResult) -> tuple[str, str]:
    if branch.status == "ok":  # 0 ms: answered from the per-turn cache (a moved control, a streamed turn's end)
        return f"{plural(len(branch.hits), 'hit')} · {f'{branch.ms:.1f} ms' if branch.ms > 0 else 'cached'}", "ok"
    return esc(branch.status), "bad"


def rrf_formula(hit: FusedHit, k: int, weights: Mapping[str, float]) -> str:
    """The arithmetic of a fused score, e.g. ``1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252``."""
    terms, values = [], []
    for name in ("bm25", "dense"):
        rank = hit.branch_ranks.get(name)
        if rank is None:
            continue
        w = weights.get(name, 1.0)
        terms.append(f"{'1' if w == 1 else _num(w)}/({k}+{rank})")
        values.append(fmt5(hit.contributions.get(name, 0.0)))
    if not terms:
        return fmt5(hit.score)
    middle = f" = {' + '.join(values)}" if len(values) > 1 else ""
    return f"{' + '.join(terms)}{middle} = {fmt5(hit.score)}"


def _fused_score_html(hit: FusedHit, result: RetrievalResult) -> str:
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


def _top_k(result: RetrievalResult) -> int:
    try:
        return int(result.settings.get("top_k", 10**9))
    except (TypeError, ValueError):
        return 10**9


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


def _empty_list(message: str) -> str:
    return f'<div class="empty">{esc(message)}</div>'


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
    chip, chip_class = _branch_chip(branch)
    tokenizer = str(result.settings.get("bm25_tokenizer", "plain"))
    consensus = set(result.consensus)
    body: list[str] = []
    if branch.status != "ok":
        body.append(
            f'<div class="dropped"><b>{esc(STAGE_TITLES[stage])} {esc(branch.status)}</b>'
            f"<div>{esc(branch.reason or 'no reason given')}</div></div>"
        )
    elif not branch.hits:
        body.append(_empty_list(f"0 hits: {branch.reason}" if branch.reason else "0 hits"))
    top_k = _top_k(result)
    for h in branch.hits:
        unit = f"BM25 {h.score:.2f}" if stage == "bm25" else f"cosine {h.score:.3f}"
        body.append(
            _row(
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
    return f'<div class="col col-{stage}">{_head(stage, chip, chip_class)}<div class="rows">{"".join(body)}</div></div>'


def weight_evidence_text(ev: Mapping[str, object]) -> str:
    """The branch evidence behind adaptive weights, one line: the numbers the rule read."""
    parts = [
        f"BM25 coverage {float(ev.get('coverage', 0.0)):.0%}",
        f"{ev.get('matched', 0)}/{ev.get('terms', 0)} turn terms in the index",
        f"BM25 top-10 drop {float(ev.get('bm25_gap', 0.0)):.0%}",
        f"dense top-10 gap {float(ev.get('dense_gap', 0.0)):.3f}",
        f"top-10 overlap {ev.get('overlap', 0)}/10",
        f"language {ev.get('language', '?')}" + (" (English-only embedder)" if ev.get("english_only") else ""),
    ]
    return "branch evidence: " + " · ".join(parts)


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
    weights = " · ".join(f"w_{n}={_num(v)}" for n, v in w.items()) if w else ""
    chip = f"k={esc(k)} · {esc(weights)}" if fusion == "rrf" else f"convex · {esc(weights)}"
    top_k = _top_k(result)
    body = [
        _row(
            rank=str(h.rank),
            chunk=chunks.get(h.chunk_id),
            chunk_id=h.chunk_id,
            parent_id=h.parent_id,
            color=colors.get(h.parent_id, NEUTRAL),
            score_html=_fused_score_html(h, result),
            terms=terms,
            tokenizer=tokenizer,
            consensus=h.chunk_id in consensus,
            common=common,
            extra=h.rank > top_k,
        )
        for h in result.fused
    ]
    if not body:
        body.append(_empty_list("nothing to fuse: no branch returned a list"))
    fused_two = len(ran) == 2  # the weights and their reason matter only where two lists are fused
    reason = getattr(result, "weight_reason", "") if fused_two else ""
    note = f'<div class="note">{esc(reason)}</div>' if reason else ""
    evidence = getattr(result, "weight_evidence", None) if fused_two else None
    if evidence:
        note += f'<div class="note evidence">{esc(weight_evidence_text(evidence))}</div>'
    return (
        f'<div class="col col-rrf">{_head("rrf", chip, "ok" if result.fused else "bad")}{note}'
        f'<div class="rows">{"".join(body)}</div></div>'
    )


def _final_score_html(hit: FinalHit, result: RetrievalResult) -> str:
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
            _row(
                rank=str(h.rank),
                chunk=chunks.get(h.chunk_id),
                chunk_id=h.chunk_id,
                parent_id=h.parent_id,
                color=colors.get(h.parent_id, NEUTRAL),
                score_html=_final_score_html(h, result),
                terms=terms,
                tokenizer=tokenizer,
                consensus=h.chunk_id in consensus,
                common=common,
                mark=move_mark(fused_rank.get(h.chunk_id), h.rank),
            )
        )
    for h in result.cut:
        body.append(
            _row(
                rank="–",
                chunk=chunks.get(h.chunk_id),
                chunk_id=h.chunk_id,
                parent_id=h.parent_id,
                color=colors.get(h.parent_id, NEUTRAL),
                score_html=_final_score_html(h, result),
                terms=terms,
                tokenizer=tokenizer,
                consensus=h.chunk_id in consensus,
                cut=h.cut_reason,
                common=common,
            )
        )
    if not result.final and not result.cut and not result.refused:
        body.append(_empty_list("no candidate"))
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
        f'<div class="col col-reranked">{_head("reranked", chip, "bad" if result.refused else "ok")}'
        f'<div class="rows">{"".join(body)}</div></div>'
    )


def placeholder(stage: Stage, text: str = "Run a turn to fill this column.") -> str:
    """An empty column before the first run (or after a rejected turn)."""
    return f'<div class="col col-{stage}">{_head(stage, "–", "idle")}<div class="rows">{_empty_list(text)}</div></div>'


# ------------------------------------------------------------------------ panels (the badge: inspector.badge)
def render_message(text: str, kind: Literal["error", "info"] = "error") -> str:
    """The message panel: a rejected turn or a settings error, in words (never a stack trace)."""
    if not text:
        return ""
    return f'<div class="message {kind}">{"⚠ " if kind == "error" else ""}{esc(text)}</div>'


def render_explain(result: RetrievalResult, chunk_id: str, chunks: Mapping[str, Chunk]) -> str:
    """One sub-chunk's rank and score in every stage, with the arithmetic."""
    if not chunk_id:
        return _empty_list("Pick a document to explain.")
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
    return _empty_list("Run a turn, then pick a document to see its rank and score in every stage.")


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
