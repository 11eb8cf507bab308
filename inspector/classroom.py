"""The RRF classroom tab: editable ranked lists and a k slider, every term of the sum, and why raw scores must
not be added. The arithmetic lives in ``retrieval.evaluation.lab`` (pure functions); this module only renders it.

``build_classroom_tab()`` creates its components inside the current Gradio context (a ``gr.Tab`` opened by the
caller). The render helpers are pure and tested on their own.
"""

from __future__ import annotations

import copy
import functools
import html
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from inspector.exercise_tab import build_exercise_panel
from inspector.figures import failsafe, log_ticks, message_figure, plot_text, white
from retrieval.evaluation.lab import (
    CLASS_EXAMPLE,
    CLASS_K,
    CONSENSUS_EXAMPLE,
    RAW_EXAMPLE,
    classroom,
    k_curve,
    parse_ranking,
    parse_scored,
    score_fusions,
)
from retrieval.rounding import round_half_up

log = logging.getLogger(__name__)

SLOTS = 3
CURVE_KS = (1, 10, 60, 200)
PRESETS: dict[str, list[tuple[str, list[str], float]]] = {
    "Class example: BM25 [A,B,C,D], dense [C,A,E,B]": [
        ("BM25", CLASS_EXAMPLE["BM25"], 1.0),
        ("Dense", CLASS_EXAMPLE["Dense"], 1.0),
    ],
    "Consensus: the winner is first in no list": [
        ("BM25", CONSENSUS_EXAMPLE["BM25"], 1.0),
        ("Dense", CONSENSUS_EXAMPLE["Dense"], 1.0),
    ],
    "Three lists (a third engine that only knows order)": [
        ("BM25", ["A", "B", "C", "D"], 1.0),
        ("Dense", ["C", "A", "E", "B"], 1.0),
        ("Vendor", ["E", "C", "F"], 1.0),
    ],
}
DEFAULT_PRESET = next(iter(PRESETS))
CLASS_NOTE = (
    "*A note on the class example:* the class text says A wins without being first in any ranking, but "
    "in the lists as printed A is first in BM25 (1/61 + 1/62). A wins by being near the top of both; C, "
    "first in dense, ends second. The *Consensus* preset shows a winner that is first nowhere."
)
LIST_COLORS = ("#3b82f6", "#f59e0b", "#10b981", "#8b5cf6", "#ef4444", "#6b7280")
CSS = """
.rrf-class table {border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0 10px}
.rrf-class th, .rrf-class td {border-bottom: 1px solid #e5e7eb; padding: 4px 10px; text-align: right}
.rrf-class th:first-child, .rrf-class td:first-child {text-align: left}
.rrf-class .absent {color: #9ca3af}
.rrf-class .err {color: #b91c1c; font-weight: 600}
.rrf-class .sum {font-weight: 600}
"""

esc = html.escape


# ----------------------------------------------------------------------------------------------- renderers
def term_table_html(table: Mapping[str, Any]) -> str:
    """Document x list: rank and ``w/(k+rank)``, then the exact sum and the fused rank (rows in fused order)."""
    names = list(table["lists"])
    k = table["k"]
    head = "".join(f"<th>{esc(n)} rank</th><th>{esc(n)} term</th>" for n in names)
    rows = []
    for r in table["rows"]:
        cells = []
        for n in names:
            rank = r["ranks"][n]
            if rank is None:
                cells.append('<td class="absent">absent</td><td class="absent">0</td>')
            else:
                w = table["weights"][n]
                label = f"1/({k}+{rank})" if w == 1 else f"{w:g}/({k}+{rank})"
                cells.append(f"<td>{rank}</td><td title='{esc(label)}'>{round_half_up(r['terms'][n], 6)}</td>")
        rows.append(
            f"<tr><td>{r['rank']}. <b>{esc(r['doc'])}</b></td>{''.join(cells)}"
            f"<td>{esc(r['formula'])}</td><td class='sum'>{round_half_up(r['score'], 6)}</td></tr>"
        )
    weights = ", ".join(f"{esc(n)} w={table['weights'][n]:g}" for n in names)
    return (
        f"<div class='rrf-class'><p>RRF(d) = &Sigma; w<sub>r</sub> / (k + rank<sub>r</sub>(d)), k = {k}; "
        f"{weights}. Rows in fused order.</p><table><thead><tr><th>fused</th>{head}<th>sum of terms</th>"
        f"<th>RRF score</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def lessons_html(table: Mapping[str, Any]) -> str:
    """The lessons of ``retrieval.evaluation.lab.lessons`` as an escaped list."""
    items = "".join(f"<li>{esc(line)}</li>" for line in table["lessons"])
    order = " &gt; ".join(f"{esc(r['doc'])} ({round_half_up(r['score'])})" for r in table["rows"])
    return f"<div class='rrf-class'><p><b>Fused order:</b> {order}</p><ul>{items}</ul></div>"


def error_html(message: str) -> str:
    return f"<div class='rrf-class'><p class='err'>{esc(message)}</p></div>"


@failsafe("1/(k + rank) for a few k")
def k_curve_figure(current_k: int, ks: Sequence[int] = CURVE_KS, max_rank: int = 20) -> go.Figure:
    """``1/(k+rank)`` over ranks 1..max_rank for a few k values and the slider's k (bold).

    Every edit of the lists redraws this chart, which depends on k alone: each k's figure is built (and validated
    by plotly, ~30 ms, most of it the template) once per process, and each call gets its own copy of it (~4 ms)."""
    spec = _k_curve_spec(int(current_k), tuple(ks), max_rank)
    return go.Figure(copy.deepcopy(spec), _validate=False)  # validated when it was built


@functools.lru_cache(maxsize=256)
def _k_curve_spec(current_k: int, ks: tuple[int, ...], max_rank: int) -> dict[str, Any]:
    all_ks = sorted(set(ks) | {current_k})
    curves = k_curve(all_ks, max_rank)
    fig = go.Figure()
    ranks = list(range(1, max_rank + 1))
    for k in all_ks:
        bold = k == int(current_k)
        fig.add_trace(
            go.Scatter(
                x=ranks,
                y=curves[k],
                mode="lines+markers",
                name=f"k={k}" + (" (slider)" if bold else ""),
                line=dict(width=4 if bold else 1.5),
                marker=dict(size=6 if bold else 4),
                hovertemplate="rank %{x}: 1/(" + str(k) + "+%{x}) = %{y:.5f}<extra></extra>",
            )
        )
    # plotly never wraps a title: two short lines fit the chart's half of the tab at 1024 px (one line was cut)
    white(fig).update_layout(
        title="Credit of a rank: 1/(k + rank)<br><sup>small k: the top ranks dominate; large k: flatter</sup>",
        xaxis_title="rank in one list",
        yaxis_title="1/(k + rank)",
        yaxis_type="log",
        height=380,
        legend=dict(orientation="h", y=-0.25),
    )
    drawn = [y for curve in curves.values() for y in curve]
    tickvals, ticktext = log_ticks(min(drawn), max(drawn))
    fig.update_yaxes(tickmode="array", tickvals=tickvals, ticktext=ticktext)
    return fig.to_dict()


@failsafe("Where each fused score comes from")
def contributions_figure(table: Mapping[str, Any]) -> go.Figure:
    """Stacked bars: each document's RRF score split into its per-list terms, in fused order."""
    docs = [plot_text(r["doc"]) for r in table["rows"]]  # user text: plotly would draw its markup
    fig = go.Figure()
    for i, n in enumerate(table["lists"]):
        fig.add_trace(
            go.Bar(
                x=docs,
                y=[r["terms"][n] for r in table["rows"]],
                name=plot_text(n),
                marker_color=LIST_COLORS[i % len(LIST_COLORS)],
                hovertemplate="%{fullData.name}: %{y:.6f}<extra></extra>",
            )
        )
    white(fig).update_layout(
        barmode="stack",
        title=f"RRF score per document, split by list (k={table['k']})",
        xaxis_title="document (fused order)",
        yaxis_title="RRF score",
        height=360,
        xaxis_type="category",
    )
    return fig


def fusions_html(result: Mapping[str, Any], scored: Mapping[str, Sequence[tuple[str, float]]], k: int) -> str:
    """Raw sum vs min-max vs RRF, side by side, with each method's scores."""

    def column(title: str, items: Sequence[tuple[str, float]], note: str) -> str:
        rows = "".join(
            f"<tr><td>{i}. <b>{esc(d)}</b></td><td>{round_half_up(s)}</td></tr>" for i, (d, s) in enumerate(items, 1)
        )
        return (
            f"<div style='flex:1;min-width:200px'><h4>{esc(title)}</h4><table><tbody>{rows}</tbody></table>"
            f"<p>{esc(note)}</p></div>"
        )

    scales = "; ".join(f"{esc(n)} scores span {lo:g} to {hi:g}" for n, (lo, hi) in result["scales"].items())
    inputs = "".join(
        f"<li><b>{esc(n)}</b>: {esc(', '.join(f'{d}:{s:g}' for d, s in items))}</li>" for n, items in scored.items()
    )
    raw_note = (
        "The list with the larger scale decides: adding BM25 (unbounded) to a cosine (at most 1) is "
        "adding pears and apples."
    )
    mm_note = (
        "Each list scaled to [0, 1] over its own top-k, then averaged: the last item of a list gets 0, the "
        "same as being absent, and the result depends on each list's spread."
    )
    rrf_note = f"Only positions count (k={k}): immune to scale, outliers and calibration."
    return (
        f"<div class='rrf-class'><ul>{inputs}</ul><p>{scales}.</p><div style='display:flex;gap:16px;"
        f"flex-wrap:wrap'>{column('Raw sum (wrong)', result['raw_sum'], raw_note)}"
        f"{column('Min-max normalised, equal weights', result['min_max'], mm_note)}"
        f"{column('RRF (ranks only)', result['rrf'], rrf_note)}</div></div>"
    )


# ------------------------------------------------------------------------------------------------ handlers
def update_classroom(*values: Any) -> tuple[str, str, go.Figure, go.Figure]:
    """Callback: ``SLOTS`` x (name, ranking text, weight), then k -> term table, lessons, two figures."""
    *slots, k = values
    try:
        k = _whole_k(k)
        rankings: dict[str, list[str]] = {}
        weights: dict[str, float] = {}
        for i in range(SLOTS):
            name, text, weight = slots[3 * i : 3 * i + 3]
            if not isinstance(name or "", str) or not isinstance(text or "", str):
                raise ValueError(f"list {i + 1}: its name and its ranking are text (ids separated by commas).")
            name = (name or "").strip() or f"List {i + 1}"
            ranking = parse_ranking(text or "", name)
            if not ranking:
                continue
            if name in rankings:
                raise ValueError(f"two lists are named {name!r}: give each list its own name.")
            rankings[name] = ranking
            weights[name] = float(weight if weight is not None else 1.0)
        table = classroom(rankings, k, weights)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        return error_html(message), "", message_figure(message), k_curve_figure(CLASS_K)
    return term_table_html(table), lessons_html(table), contributions_figure(table), k_curve_figure(k)


def update_fusions(bm25_text: str, dense_text: str, k: float) -> str:
    """Callback: the two scored lists -> raw sum, min-max and RRF side by side."""
    try:
        if not isinstance(bm25_text or "", str) or not isinstance(dense_text or "", str):
            raise ValueError("the scored lists are text: id:score pairs separated by commas.")
        k = _whole_k(k)
        scored = {"BM25": parse_scored(bm25_text or "", "BM25"), "Dense": parse_scored(dense_text or "", "Dense")}
        scored = {n: v for n, v in scored.items() if v}
        return fusions_html(score_fusions(scored, k), scored, k)
    except (TypeError, ValueError) as exc:
        return error_html(str(exc))


def _whole_k(value: Any) -> int:
    """The k slider's value as a whole number (a client may send anything), or a ValueError saying what k takes."""
    try:
        k = float(value)
    except (TypeError, ValueError):
        k = math.nan
    if not math.isfinite(k):
        raise ValueError(f"k must be a number (the slider goes from 1 to 200), got {str(value)[:40]!r}.")
    return int(k)


def preset_values(preset: str) -> list[Any]:
    """The (name, ranking text, weight) of every slot for a preset; unused slots are emptied."""
    lists = (PRESETS.get(preset) if isinstance(preset, str) else None) or PRESETS[DEFAULT_PRESET]
    out: list[Any] = []
    for i in range(SLOTS):
        if i < len(lists):
            name, items, weight = lists[i]
            out += [name, ", ".join(items), weight]
        else:
            out += [f"List {i + 1}", "", 1.0]
    return out


def _scored_text(items: Sequence[tuple[str, float]]) -> str:
    return ", ".join(f"{d}:{s:g}" for d, s in items)


# -------------------------------------------------------------------------------------------------- layout
def build_classroom_tab() -> dict[str, Any]:
    """Create the classroom's components inside the current Gradio context and wire them: the exercises first
    (``inspector.exercise_tab``, whose components are returned for the page's links), then the free lists."""
    panel = build_exercise_panel()
    defaults = preset_values(DEFAULT_PRESET)
    first_table, first_lessons, first_contrib, first_curve = update_classroom(*defaults, CLASS_K)
    raw_bm25, raw_dense = _scored_text(RAW_EXAMPLE["BM25"]), _scored_text(RAW_EXAMPLE["Dense"])

    gr.HTML(f"<style>{CSS}</style>")
    gr.Markdown(
        "### RRF classroom: your own lists\n"
        "Edit the ranked lists (best first, ids separated by commas), move **k**, give a list more weight. "
        "RRF(d) = &Sigma; w / (k + rank): a document missing from a list adds nothing for it."
    )
    preset = gr.Dropdown(list(PRESETS), value=DEFAULT_PRESET, label="Start from", elem_id="rrf-preset")
    gr.Markdown(CLASS_NOTE)
    inputs: list[Any] = []
    with gr.Row():
        for i in range(SLOTS):
            with gr.Column(min_width=220):
                name = gr.Textbox(value=defaults[3 * i], label=f"List {i + 1} name", elem_id=f"rrf-name-{i}")
                ranking = gr.Textbox(
                    value=defaults[3 * i + 1],
                    label="ranked ids, best first",
                    placeholder="e.g. A, B, C (leave empty to skip)",
                    elem_id=f"rrf-list-{i}",
                )
                weight = gr.Slider(0, 3, value=defaults[3 * i + 2], step=0.1, label="weight", elem_id=f"rrf-weight-{i}")
                inputs += [name, ranking, weight]
    k = gr.Slider(1, 200, value=CLASS_K, step=1, label="k (RRF constant)", elem_id="class-rrf-k")
    table = gr.HTML(first_table, elem_id="rrf-terms")
    lessons = gr.HTML(first_lessons, elem_id="rrf-lessons")
    with gr.Row():
        contrib = gr.Plot(first_contrib, label="contributions", elem_id="rrf-contrib")
        curve = gr.Plot(first_curve, label="1/(k + rank)", elem_id="rrf-curve")
    outputs = [table, lessons, contrib, curve]
    # .change also fires when a preset rewrites the inputs; always_last keeps the last edit, never a stale one.
    # preprocess=False: both callbacks check every value themselves (a malformed slider value gets their message,
    # not Gradio's processing error)
    for component in [*inputs, k]:
        component.change(
            update_classroom,
            [*inputs, k],
            outputs,
            trigger_mode="always_last",
            show_progress="hidden",
            api_visibility="private",
            preprocess=False,
        )
    preset.input(preset_values, preset, inputs, api_visibility="private")

    gr.Markdown(
        "### Why not add the scores?\n"
        "The same two rankings with their raw scores: BM25 is unbounded, the cosine lives in [-1, 1]. "
        "Write `id:score`, best first."
    )
    with gr.Row():
        bm25_scores = gr.Textbox(value=raw_bm25, label="BM25 raw scores", elem_id="raw-bm25")
        dense_scores = gr.Textbox(value=raw_dense, label="Dense cosine similarities", elem_id="raw-dense")
    fusions = gr.HTML(update_fusions(raw_bm25, raw_dense, CLASS_K), elem_id="raw-fusions")
    for component in (bm25_scores, dense_scores, k):
        component.change(
            update_fusions,
            [bm25_scores, dense_scores, k],
            fusions,
            trigger_mode="always_last",
            show_progress="hidden",
            api_visibility="private",
            preprocess=False,
        )
    return panel
