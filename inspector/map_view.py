"""The map below the columns: every sub-chunk of the corpus a faint dot on a 2-D projection of the embeddings
(``retrieval.projection``), the turn a star, and the lists of the turn marked as the columns mark them (BM25's
hits, dense's, the consensus "both", the fused list, the final cards in their colours with their ranks).

A presenter steps through the stages with the buttons on the chart (BM25 -> dense -> fused -> reranked). Hovering
a point shows its card's title (escaped), its true cosine to the turn and its map position; clicking a point opens
it as the Why not…? card; hovering a card in the columns rings it on the map (``MAP_JS``, in the page's head).
Nothing here computes a place or a score: ``retrieval.turn_map`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from inspector.figures import FONT, failsafe, message_figure, plot_text
from inspector.render import BRANCH_COLORS, NEUTRAL, doc_colors
from retrieval import projection
from retrieval.turn_map import TurnMap, turn_map
from retrieval.types import Chunk, RetrievalResult

TITLE = "Map: where the turn lands"
PLACED = "Each turn places its cards on this map of the corpus."
HONESTY = (
    "A 2-D projection distorts distances: dots close on the map may be far apart in the embedding space. "
    "The tooltip gives each card's true cosine to the turn."
)
HEIGHT = 420  # a plot area of about 335 px under one header row (the title, the stage buttons)
GL_FROM = 1000  # a corpus of this many sub-chunks or more is drawn with WebGL (Scattergl)
HOVER_ALL_MAX = 20_000  # every faint dot carries its title up to this corpus size (past it only the marked ones)
SYNC_MAX = 5000  # a map of up to this many sub-chunks is waited for in the turn's event the first time
SYNC_WAIT_S = 10.0
TRACES = ("corpus", "turn", "BM25", "dense", "both", "fused", "final", "highlight")
# The stage buttons: which traces each step shows (the faint corpus, the turn and the highlight always).
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("All", ("BM25", "dense", "both", "final")),
    ("1 · BM25", ("BM25",)),
    ("2 · dense", ("BM25", "dense", "both")),
    ("3 · fused", ("fused",)),
    ("4 · reranked", ("final",)),
)
ALWAYS = ("corpus", "turn", "highlight")
HOVER = "%{text}<br>%{customdata[0]}<br>cosine to the turn %{customdata[2]} · map (%{x:.2f}, %{y:.2f})<extra></extra>"


def _visible(shown: tuple[str, ...]) -> list[bool]:
    return [name in shown or name in ALWAYS for name in TRACES]


def _cos(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _title(chunks: Mapping[str, Chunk], chunk_id: str) -> str:
    chunk = chunks.get(chunk_id)
    return plot_text(chunk.title or chunk.parent_id if chunk else chunk_id)


def _kind(tm: TurnMap) -> str:
    """Scattergl from ``GL_FROM`` sub-chunks, for every trace: WebGL draws on a canvas above the SVG layer, so SVG marks
    would hide under a WebGL cloud."""
    return "scattergl" if len(tm.chunk_ids) >= GL_FROM else "scatter"


def _marked(tm: TurnMap, name: str, chunks: Mapping[str, Chunk], marker: dict[str, Any], **extra: Any) -> dict:
    pts = tm.groups[name]
    return dict(
        type=_kind(tm),
        x=[p.x for p in pts],
        y=[p.y for p in pts],
        name=name,
        mode=extra.pop("mode", "markers"),
        marker=marker,
        text=[_title(chunks, p.chunk_id) for p in pts],
        customdata=[[plot_text(p.chunk_id), plot_text(p.parent_id), _cos(p.cosine), p.rank] for p in pts],
        hovertemplate=f"<b>{name} #%{{customdata[3]}}</b> " + HOVER,
        **extra,
    )


def _corpus_trace(tm: TurnMap, chunks: Mapping[str, Chunk]) -> dict:
    n = len(tm.chunk_ids)
    common = dict(
        type=_kind(tm),
        x=tm.coords[:, 0],
        y=tm.coords[:, 1],
        name="corpus",
        mode="markers",
        marker=dict(size=5 if n < GL_FROM else 3, color="#9aa5b1", opacity=0.45),
    )
    if n > HOVER_ALL_MAX:  # hover texts would weigh more than the points: only the marked points carry them
        return dict(**common, hoverinfo="skip")
    cos = tm.cosines if tm.cosines is not None else [None] * n
    # flat strings, no customdata: plotly's JSON walks every nested list (half the map's cost at 232 sub-chunks)
    return dict(
        **common,
        ids=list(tm.chunk_ids),
        text=[
            f"{_title(chunks, cid)}<br>{plot_text(cid)}<br>cosine to the turn {_cos(c)}"
            for cid, c in zip(tm.chunk_ids, cos)
        ],
        hovertemplate="%{text} · map (%{x:.2f}, %{y:.2f})<extra></extra>",
    )


def map_figure(tm: TurnMap, result: RetrievalResult, chunks: Mapping[str, Chunk]) -> go.Figure:
    """The map of one turn (traces named as ``TRACES``; the stage buttons switch which marks show)."""
    colors = doc_colors(result)
    final_colors = [colors.get(p.parent_id, NEUTRAL) for p in tm.groups["final"]]
    fused_sizes = [max(7, 22 - p.rank) for p in tm.groups["fused"]]
    turn = tm.turn
    traces = [
        _corpus_trace(tm, chunks),
        dict(
            type=_kind(tm),
            x=[turn[0]] if turn else [],
            y=[turn[1]] if turn else [],
            name="turn",
            mode="markers",
            marker=dict(symbol="star", size=24, color="#111827", line=dict(color="#ffffff", width=1.5)),
            text=[plot_text(result.query)],
            hovertemplate="<b>the turn</b>: %{text}<br>map (%{x:.2f}, %{y:.2f})<extra></extra>",
        ),
        _marked(
            tm, "BM25", chunks, dict(symbol="square-open", size=13, color=BRANCH_COLORS["bm25"], line=dict(width=2.5))
        ),
        _marked(
            tm, "dense", chunks, dict(symbol="circle-open", size=17, color=BRANCH_COLORS["dense"], line=dict(width=2.5))
        ),
        _marked(tm, "both", chunks, dict(symbol="star-open", size=22, color="#111827", line=dict(width=2))),
        _marked(
            tm,
            "fused",
            chunks,
            dict(size=fused_sizes, color=[colors.get(p.parent_id, NEUTRAL) for p in tm.groups["fused"]], opacity=0.85),
            visible=False,
        ),
        _marked(
            tm,
            "final",
            chunks,
            dict(size=15, color=final_colors, line=dict(color="#111827", width=1.5)),
            mode="markers+text",
            texttemplate="%{customdata[3]}",
            textposition="top center",
            textfont=dict(size=13, color="#111827"),
        ),
        dict(
            type=_kind(tm),
            x=[],
            y=[],
            name="highlight",
            mode="markers",
            marker=dict(symbol="circle-open", size=30, color="#E69F00", line=dict(width=4)),
            hoverinfo="skip",
            showlegend=False,
        ),
    ]
    ex = tm.explained
    axis = dict(showticklabels=False, zeroline=False, showgrid=True, gridcolor="#EBF0F8", linecolor="#c8ced6")
    layout = dict(
        title=dict(text=TITLE, x=0.01, y=0.985, yanchor="top", font=dict(size=16)),
        font=FONT,
        paper_bgcolor="#ffffff",
        plot_bgcolor="#ffffff",
        height=HEIGHT,
        margin=dict(l=10, r=10, t=40, b=10),  # one header row: the title at the left, the stage buttons at the right
        hoverlabel=dict(font_size=13),
        hovermode="closest",
        legend=dict(orientation="v", x=1.0, xanchor="left", y=1.0),
        dragmode="pan",
        uirevision="turn-map",
        xaxis=dict(axis, title=dict(text=f"map axis 1 ({ex[0]:.0%} of the variance)")),
        yaxis=dict(axis, title=dict(text=f"axis 2 ({ex[1]:.0%})")),
        updatemenus=[
            dict(
                type="buttons",
                direction="right",
                x=1.0,
                xanchor="right",
                y=1.0,
                yanchor="bottom",
                showactive=True,
                active=0,
                pad=dict(r=0, t=0, b=6),
                buttons=[
                    dict(label=label, method="restyle", args=[{"visible": _visible(shown)}]) for label, shown in STEPS
                ],
            )
        ],
    )
    # built from plain dicts without plotly's validation (~100 ms for these traces and a template): the turn's
    # second event has 50 ms for the map; tests/test_map.py checks what the figure holds
    fig = go.Figure(data=traces, layout=layout, _validate=False)
    return fig


def progress_text(snap: projection.MapStatus) -> str:
    """What the map's place says while its map is being made (plain text: ``message_figure`` escapes it)."""
    if snap.state == projection.FAILED:
        return f"The map could not be made ({snap.error}). The lists above are unaffected."
    if snap.state == projection.QUEUED:
        return "The map of this corpus waits for another corpus's map to finish. It appears with a later turn."
    share = f" ({snap.done:,} of {snap.total:,} sub-chunks, {snap.fraction:.0%})" if snap.total and snap.done else ""
    return f"The map of this corpus is being made: {snap.stage}{share}. It appears with the next turn."


@failsafe(TITLE)
def for_turn(retriever: Any, result: RetrievalResult, corpus: str = "") -> go.Figure:
    """The map for an executed turn of ``corpus``, or a message: no dense store, or its map still being made (then
    started in the background; a small corpus's is waited for)."""
    store = retriever.dense
    if store is None:
        return message_figure("No map: the dense store is unavailable, and the map is made of its vectors.", TITLE)
    made = projection.ready(store)
    if made is None:
        job = projection.request(store, corpus)
        made = job.wait(SYNC_WAIT_S if len(store) <= SYNC_MAX else 0.0)
        if made is None:
            return message_figure(progress_text(job.snapshot()), TITLE)
    return map_figure(turn_map(retriever, result, made), result, retriever.by_id)


def idle_figure() -> go.Figure:
    return message_figure("Run a turn to place it on the map of the corpus.", TITLE)


# The page's hooks (added to the head by ``inspector.ui``): a click on a point asks Why not…? about its card; a card
# hovered in the columns is ringed on the map (the "highlight" trace), the ring cleared when the pointer leaves.
MAP_JS = """
<script>
(() => {
  const plot = () => document.querySelector('#turn-map .js-plotly-plot');
  const unescape = (s) => String(s).replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  const find = (div, cid) => {
    for (const t of (div.data || [])) {
      if (!['final', 'fused', 'BM25', 'dense'].includes(t.name) || !t.customdata) continue;
      const i = t.customdata.findIndex((c) => c && unescape(c[0]) === cid);
      if (i >= 0) return [t.x[i], t.y[i]];
    }
    return null;
  };
  const ring = (cid) => {
    const div = plot();
    if (!div || !window.Plotly || !div.data) return;
    const at = cid ? find(div, cid) : null;
    const k = div.data.findIndex((t) => t.name === 'highlight');
    if (k < 0) return;
    window.Plotly.restyle(div, {x: [at ? [at[0]] : []], y: [at ? [at[1]] : []]}, [k]);
  };
  const ask = (card) => {
    const box = document.querySelector('#why-card textarea, #why-card input');
    const go = document.querySelector('#why-run');
    if (!box || !go) return;
    box.value = card;
    box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(() => { go.click(); document.querySelector('#why-not')?.scrollIntoView({block: 'start'}); }, 50);
  };
  const hook = () => {
    const div = plot();
    if (div && !div.__mapHooked && div.on) {
      div.__mapHooked = true;
      div.on('plotly_click', (ev) => {
        const p = ev && ev.points && ev.points[0];
        if (p && p.customdata && p.customdata[1]) ask(unescape(p.customdata[1]));
        else if (p && p.id) ask(String(p.id).replace(/#[0-9]+$/, ''));  // a faint dot: its sub-chunk's card
      });
    }
  };
  setInterval(hook, 500);
  document.addEventListener('mouseover', (e) => {
    const hit = e.target.closest && e.target.closest('#columns .hit[data-chunk]');
    if (hit) ring(hit.dataset.chunk);
  });
  document.addEventListener('mouseout', (e) => {
    const hit = e.target.closest && e.target.closest('#columns .hit[data-chunk]');
    if (hit && !hit.contains(e.relatedTarget)) ring(null);
  });
})();
</script>
"""


def build_panel() -> Any:
    """The map's place in the page (below the columns, kept in presenter mode): the plot and the honesty line."""
    import gradio as gr

    with gr.Column(elem_id="map-area"):
        # Empty until the first turn, never a placeholder figure: one would load and run Plotly (~1 s of the
        # renderer's 3 s to open the page, measured with Chrome's profiler) before anything is asked
        plot = gr.Plot(None, label="Map", elem_id="turn-map", show_label=False)
        gr.HTML(f'<div class="map-note">{plot_text(PLACED + " " + HONESTY)}</div>', elem_id="map-note")
    return plot
