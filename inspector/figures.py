"""RetrievalResult -> plotly figures: rank flow (bump chart), RRF contributions, k sensitivity.

Each public builder is wrapped by ``failsafe``: a builder that raises returns a figure that says what went wrong,
so one broken chart never takes the callback (or the other charts) down. The k-sensitivity chart re-fuses the
result's own branch lists with ``retrieval.fusion.reciprocal_rank_fusion`` (a pure function; no model runs).
"""

from __future__ import annotations

import functools
import logging
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from inspector.render import BRANCH_COLORS, NEUTRAL, doc_colors
from retrieval.fusion import reciprocal_rank_fusion
from retrieval.types import Chunk, RetrievalResult

log = logging.getLogger(__name__)

STAGES = ("BM25", "Dense", "RRF", "Reranked")
FONT = dict(family="ui-sans-serif, system-ui, sans-serif", size=13, color="#1f2933")
K_RANGE = range(1, 201)


def plot_text(value: object) -> str:
    """Escape text for a plotly label (title, legend name, tick label, hover text, annotation).

    Plotly draws a subset of HTML in labels (``<a href>``, ``<span style>``, ``<b>``, ``<br>`` ...) and decodes only
    ``&amp; &lt; &gt;``, a few named entities and numeric ones: ``&quot;`` would show literally. So escape ``&``,
    ``<`` and ``>``, nothing else. Never put user text in a ``hovertemplate`` itself (``%{...}`` is substituted):
    pass it through ``customdata``, the trace's ``meta`` or its name.
    """
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Tick values and labels for a log axis over [lo, hi]: 1, 2, 5 times each power of ten, written as plain
    numbers ("0.005", "0.01", ... "100"). Plotly's own ticks over a short log range label the minor ticks by
    their leading digit only ("5, 2, 0.1, 5, 2, 0.01")."""
    if not (lo > 0 and hi > 0):
        raise ValueError(f"a log axis needs positive bounds, got {lo!r} and {hi!r}")
    lo, hi = min(lo, hi), max(lo, hi)
    steps = [
        float(f"{mantissa}e{exponent}")  # exact decimals, not 2 * 0.1 ** 3
        for exponent in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
        for mantissa in (1, 2, 5)
    ]
    vals = [v for v in steps if lo <= v <= hi]
    if len(vals) < 2:  # a range narrower than one step: the steps on either side frame it
        vals = sorted({max(v for v in steps if v <= lo), *vals, min(v for v in steps if v >= hi)})
    return vals, [f"{v:g}" if v < 1e6 else f"{v:.0f}" for v in vals]


# The charts' template, validated by plotly when it registered it.
WHITE = pio.templates["plotly_white"]


def white(fig: go.Figure) -> go.Figure:
    """``fig`` on the plotly_white template, set as plotly sets its default template: without validating it again.
    Set by name (``update_layout(template="plotly_white")``) it was validated and deep-copied whole each time:
    8.6 ms of a chart's ~10, against 0.5 ms this way (the JSON is the same); a turn draws three charts."""
    layout = fig.layout
    validating, layout._validate = layout._validate, False
    try:
        layout.template = WHITE
    finally:
        layout._validate = validating
    return fig


def _layout(fig: go.Figure, title: str, height: int = 420) -> go.Figure:
    white(fig)
    fig.update_layout(
        title=dict(text=title, x=0.01, font=dict(size=16)),
        font=FONT,
        height=height,
        margin=dict(l=10, r=10, t=48, b=10),
        hoverlabel=dict(font_size=13),
    )
    return fig


def message_figure(text: str, title: str = "") -> go.Figure:
    """An empty chart that shows ``text`` (escaped, wrapped) in its middle."""
    fig = go.Figure()
    fig.add_annotation(
        text="<br>".join(plot_text(line) for line in textwrap.wrap(text, 70)) or " ",
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font=dict(size=14, color="#52606d"),
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, height=300)


def failsafe(title: str) -> Callable[[Callable[..., go.Figure]], Callable[..., go.Figure]]:
    """Decorator: on any exception the builder returns a message figure instead of raising."""

    def wrap(builder: Callable[..., go.Figure]) -> Callable[..., go.Figure]:
        @functools.wraps(builder)
        def safe(*args: Any, **kwargs: Any) -> go.Figure:
            try:
                return builder(*args, **kwargs)
            except Exception as exc:  # a chart must never break the page
                log.exception("chart %r failed", title)
                return message_figure(
                    f"This chart could not be drawn ({type(exc).__name__}: {exc}). The rest of the page is unaffected.",
                    title,
                )

        return safe

    return wrap


def _label(chunks: Mapping[str, Chunk], chunk_id: str, width: int = 34) -> str:
    chunk = chunks.get(chunk_id)
    title = chunk.title if chunk else chunk_id
    return title if len(title) <= width else title[: width - 1] + "…"


def stage_ranks(result: RetrievalResult) -> dict[str, list[int | None]]:
    """``chunk_id -> [BM25 rank, dense rank, fused rank, reranked rank]`` (None where absent)."""
    maps = [
        {h.chunk_id: h.rank for h in hits}
        for hits in (result.bm25.hits, result.dense.hits, result.fused, result.reranked)
    ]
    ids: list[str] = []
    for hits in (result.fused, result.bm25.hits, result.dense.hits):
        for h in hits:
            if h.chunk_id not in ids:
                ids.append(h.chunk_id)
    return {cid: [m.get(cid) for m in maps] for cid in ids}


@failsafe("Rank flow")
def rank_flow(result: RetrievalResult, chunks: Mapping[str, Chunk], max_docs: int = 8) -> go.Figure:
    """Bump chart: each sub-chunk's rank at BM25 -> dense -> RRF -> reranked.

    Shown: the top ``max_docs`` fused, the top 5 reranked and the final cards' sub-chunks. Consensus lines are
    thick; sub-chunks that reach the final answer are opaque, the others faded.
    """
    title = "Rank flow"
    ranks = stage_ranks(result)
    if not ranks:
        return message_figure("Nothing ranked: " + (result.reason or "no candidate"), title)
    final = {h.chunk_id for h in result.final}
    shown = [h.chunk_id for h in result.fused[:max_docs]] or list(ranks)[:max_docs]
    for cid in [*(h.chunk_id for h in result.reranked[:5]), *(h.chunk_id for h in result.final)]:
        if cid not in shown and cid in ranks:
            shown.append(cid)
    colors = doc_colors(result)
    consensus = set(result.consensus)
    fig = go.Figure()
    deepest = 1
    for cid in sorted(shown, key=lambda c: (c in final, c in consensus)):  # answers drawn last, on top
        ys = ranks[cid]
        deepest = max([deepest, *[y for y in ys if y is not None]])
        both = cid in consensus
        parent = chunks[cid].parent_id if cid in chunks else cid.split("#")[0]
        fig.add_trace(
            go.Scatter(
                x=list(STAGES),
                y=ys,
                mode="lines+markers",
                connectgaps=True,
                name=plot_text(cid) + (" ★" if both else ""),
                line=dict(color=colors.get(parent, NEUTRAL), width=5 if both else 2.5),
                marker=dict(size=11 if both else 8, color=colors.get(parent, NEUTRAL)),
                opacity=1.0 if cid in final else 0.35,
                customdata=[[plot_text(cid), plot_text(_label(chunks, cid, 60))]] * len(STAGES),
                meta=dict(consensus=both, chunk_id=cid, final=cid in final),
                hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>%{x}: rank %{y}<extra></extra>",
            )
        )
    fig.update_yaxes(
        autorange=False, range=[deepest + 0.5, 0.5], title="rank (1 = best)", dtick=1 if deepest <= 25 else 5
    )
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=list(STAGES))
    if not result.reranked:
        fig.add_annotation(
            x="Reranked", y=1, yshift=14, text="no reranking", showarrow=False, font=dict(color="#b42318")
        )
    fig.update_layout(legend=dict(font=dict(size=11), itemsizing="constant", traceorder="reversed"))
    subtitle = "thick ★ = found by both · opaque = in the final answer"
    return _layout(fig, f"{title} <span style='font-size:12px'>({subtitle})</span>", height=460)


@failsafe("RRF contributions")
def contributions(result: RetrievalResult, chunks: Mapping[str, Chunk], max_docs: int = 12) -> go.Figure:
    """Stacked horizontal bars: each fused candidate's score split into its BM25 and dense contributions."""
    title = "RRF contributions per branch"
    hits = list(result.fused[:max_docs])
    if not hits:
        return message_figure("No fused candidates: " + (result.reason or "nothing to fuse"), title)
    consensus = set(result.consensus)
    labels = [f"#{h.rank} {plot_text(h.chunk_id)}{' ★' if h.chunk_id in consensus else ''}" for h in hits]
    fig = go.Figure()
    for name, label in (("bm25", "BM25"), ("dense", "Dense")):
        values = [h.contributions.get(name, 0.0) for h in hits]
        ranks = [h.branch_ranks.get(name) for h in hits]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=values,
                name=label,
                orientation="h",
                marker_color=BRANCH_COLORS[name],
                customdata=[[plot_text(h.chunk_id), "–" if r is None else f"#{r}"] for h, r in zip(hits, ranks)],
                hovertemplate=f"%{{customdata[0]}}<br>{label} rank %{{customdata[1]}}: +%{{x:.5f}}<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack", legend=dict(orientation="h", x=1, xanchor="right", y=1.02, yanchor="bottom"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="fused score", tickformat=".3f")
    return _layout(fig, title, height=460)


def k_curves(result: RetrievalResult, ks: Sequence[int] = K_RANGE, top_n: int = 8) -> dict[str, list[int]]:
    """``chunk_id -> fused rank at each k`` for the current top ``top_n``, from the result's branch lists."""
    rankings = {b.name: [h.chunk_id for h in b.hits] for b in (result.bm25, result.dense) if b.usable and b.hits}
    weights = {n: result.weights.get(n, 1.0) for n in rankings}
    docs = [h.chunk_id for h in result.fused[:top_n]]
    curves: dict[str, list[int]] = {cid: [] for cid in docs}
    for k in ks:
        order = {cid: r for r, (cid, _) in enumerate(reciprocal_rank_fusion(rankings, k=k, weights=weights), start=1)}
        for cid in docs:
            curves[cid].append(order[cid])
    return curves


@failsafe("k sensitivity")
def k_sensitivity(result: RetrievalResult, chunks: Mapping[str, Chunk], top_n: int = 8) -> go.Figure:
    """Fused rank of today's top documents as the RRF constant k goes from 1 to 200."""
    title = "k sensitivity: fused rank for k = 1…200"
    if result.settings.get("fusion", "rrf") != "rrf":
        return message_figure("k only matters for RRF fusion (FUSION=rrf).", title)
    usable = [b for b in (result.bm25, result.dense) if b.usable and b.hits]
    if not usable or not result.fused:
        return message_figure("No branch list to fuse: " + (result.reason or "nothing ran"), title)
    curves = k_curves(result, K_RANGE, top_n)
    colors = doc_colors(result)
    consensus = set(result.consensus)
    fig = go.Figure()
    deepest = 1
    for cid, ys in reversed(list(curves.items())):
        deepest = max(deepest, *ys)
        parent = chunks[cid].parent_id if cid in chunks else cid.split("#")[0]
        both = cid in consensus
        fig.add_trace(
            go.Scatter(
                x=list(K_RANGE),
                y=ys,
                mode="lines",
                line_shape="hv",
                name=plot_text(cid) + (" ★" if both else ""),
                line=dict(color=colors.get(parent, NEUTRAL), width=4 if both else 2),
                # the line's card in its meta, once: 200 copies of its id and title per line (customdata) made this
                # chart's JSON 122 KB, all of it parsed and copied by the page at each turn
                meta=dict(
                    consensus=both, chunk_id=cid, card=f"{plot_text(cid)}<br>{plot_text(_label(chunks, cid, 60))}"
                ),
                hovertemplate="%{meta.card}<br>k=%{x}: rank %{y}<extra></extra>",
            )
        )
    k = int(result.settings.get("rrf_k", 60))
    fig.add_vline(
        x=k, line=dict(color="#1f2933", dash="dash", width=1.5), annotation_text=f"k={k}", annotation_position="top"
    )
    fig.update_yaxes(autorange=False, range=[deepest + 0.5, 0.5], title="fused rank", dtick=1 if deepest <= 25 else 5)
    fig.update_xaxes(title="k", range=[0, 201])
    if len(usable) == 1:
        fig.add_annotation(
            text="one branch only: k cannot change the order",
            x=0.5,
            y=0.02,
            xref="paper",
            yref="paper",
            showarrow=False,
            font=dict(color="#b42318"),
        )
    fig.update_layout(legend=dict(font=dict(size=11), traceorder="reversed"))
    return _layout(fig, title)


def all_figures(result: RetrievalResult, chunks: Mapping[str, Chunk]) -> tuple[go.Figure, go.Figure, go.Figure]:
    """The three charts for one turn (each failsafe)."""
    return rank_flow(result, chunks), contributions(result, chunks), k_sensitivity(result, chunks)
