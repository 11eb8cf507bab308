"""The Evaluation tab's charts: metric bars per configuration, one metric per query category, and a report's
sweeps. Names from a report file pass through ``plot_text`` before Plotly draws them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from inspector.evaluation_reports import METRIC_NAMES, ordered_configs
from inspector.figures import failsafe, message_figure, plot_text, white
from retrieval.evaluation.sweeps import sweep_figure

COLORS = {"bm25": "#3b82f6", "dense": "#f59e0b", "rrf": "#10b981", "full": "#8b5cf6"}


@failsafe("Metrics per configuration")
def metrics_figure(report: Mapping[str, Any], configs: Sequence[str]) -> go.Figure:
    """Grouped bars: each metric, one bar per configuration."""
    configs = ordered_configs(configs, report)
    if not configs:
        return message_figure("Pick at least one configuration.", "Metrics per configuration")
    fig = go.Figure()
    for c in configs:
        row = report["configs"][c]
        names = [m for m in METRIC_NAMES if row.get(m) is not None]
        fig.add_trace(
            go.Bar(
                x=names,
                y=[row[m] for m in names],
                name=c,
                marker_color=COLORS.get(c),
                text=[f"{row[m]:.3f}" for m in names],
                textposition="outside",
                hovertemplate=f"{c} %{{x}}: %{{y:.4f}}<extra></extra>",
            )
        )
    white(fig).update_layout(
        barmode="group",
        title=f"{plot_text(str(report['dataset']))}: parent-level metrics "
        f"({report['answerable_turns']} answerable turns)",
        yaxis=dict(range=[0, 1.08], title="score"),
        height=400,
    )
    return fig


@failsafe("nDCG@10 per category")
def category_figure(report: Mapping[str, Any], configs: Sequence[str], metric: str = "ndcg@10") -> go.Figure:
    """Grouped bars: ``metric`` per query category, one bar per configuration."""
    configs = ordered_configs(configs, report)
    cats = report.get("categories") or {}
    if not configs or not cats:
        return message_figure("No categories in this report.", f"{metric} per category")
    labels = [plot_text(f"{cat} ({row['turns']})") for cat, row in cats.items()]  # names from a report file
    fig = go.Figure()
    for c in configs:
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[row[c][metric] for row in cats.values()],
                name=c,
                marker_color=COLORS.get(c),
                hovertemplate=f"{c} %{{x}}: %{{y:.4f}}<extra></extra>",
            )
        )
    white(fig).update_layout(
        barmode="group",
        title=f"{metric} per query category (turns in brackets)",
        yaxis=dict(range=[0, 1.05], title=metric),
        height=380,
    )
    return fig


@failsafe("Sweep")
def sweep_choice_figure(report: Mapping[str, Any], param: str | None) -> go.Figure:
    """The chart of one of the report's sweeps, or a message saying how to get one."""
    sweeps = {s["param"]: s for s in report.get("sweeps", [])}
    if not sweeps:
        return message_figure(
            "No sweep in this report. Run e.g. `python -m retrieval eval --sweep rrf_k "
            "--sweep depth --sweep reranker_max_input --save-runs runs/shipped`.",
            "Sweeps",
        )
    return sweep_figure(sweeps.get(param or "") or next(iter(sweeps.values())))
