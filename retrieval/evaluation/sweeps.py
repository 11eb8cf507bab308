"""Sweeps: the metrics per configuration for each value of one parameter (``eval --sweep PARAM[=V1,V2,...]``),
as a table with ASCII bars and as a plotly chart (the Evaluation tab draws it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrieval.evaluation.prepare import parse_set
from retrieval.evaluation.report_text import cell, text_table
from retrieval.evaluation.scoring import aggregate
from retrieval.evaluation.turn_runs import CONFIGS, DEFAULT_DEPTH, Progress, eval_settings, run_turns
from retrieval.settings import Settings

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from retrieval.corpus import Dataset
    from retrieval.pipeline import HybridRetriever

DEFAULT_SWEEPS: dict[str, tuple[int, ...]] = {
    "rrf_k": (1, 2, 5, 10, 20, 60, 100, 200),
    "depth": (10, 20, 50, 100, 200),
    "reranker_max_input": (0, 5, 10, 20, 50),
}


def sweep(
    dataset: Dataset,
    retriever: HybridRetriever,
    settings: Settings,
    param: str,
    values: Sequence[Any],
    configs: Sequence[str] = CONFIGS,
    *,
    depth: int = DEFAULT_DEPTH,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Metrics per configuration for each value of one parameter: ``depth`` (sub-chunks per branch) or any
    Settings field (``rrf_k``, ``reranker_max_input``, ``bm25_weight``, ...). Lists only; no latency."""
    names = {f.name for f in dataclasses.fields(Settings)}
    if param != "depth" and param not in names:
        raise ValueError(f"cannot sweep {param!r}: use depth or a setting ({', '.join(sorted(names))}).")
    if not values:
        raise ValueError(f"sweep {param}: give at least one value.")
    rows = []
    for value in values:
        if param == "depth":
            run_depth, s = int(value), settings
        else:
            run_depth, s = depth, settings.replace(**{param: value})
        runs = run_turns(
            dataset,
            retriever,
            s,
            configs=configs,
            depth=run_depth,
            refusals=False,
            progress=progress,
            label=f"sweep {param}={value}",
        )
        deep = eval_settings(s, run_depth)
        metrics = aggregate(runs, configs, deep_enough=deep.top_k >= 100 and deep.candidate_depth >= 100)
        rows.append(
            {
                "value": value,
                **metrics,
                "reranker_missing_turns": sum(not r.reranked for r in runs) if "full" in configs else 0,
            }
        )
    return {"param": param, "values": list(values), "rows": rows}


def sweep_figure(result: Mapping[str, Any], metric: str = "ndcg@10") -> go.Figure:
    """A plotly line chart of ``metric`` per configuration over the swept values."""
    import plotly.graph_objects as go

    fig = go.Figure()
    configs = [c for c in CONFIGS if c in result["rows"][0]]
    x = [str(v) for v in result["values"]]
    for c in configs:
        fig.add_trace(go.Scatter(x=x, y=[row[c][metric] for row in result["rows"]], mode="lines+markers", name=c))
    fig.update_layout(
        title=f"{metric} vs {result['param']}",
        xaxis_title=result["param"],
        yaxis_title=metric,
        xaxis_type="category",
        template="plotly_white",
        height=380,
    )
    return fig


def format_sweep(result: Mapping[str, Any], metric: str = "ndcg@10", width: int = 40) -> str:
    """A table plus an ASCII bar chart of ``metric`` per configuration over the swept values."""
    configs = [c for c in CONFIGS if c in result["rows"][0]]
    lines = [f"sweep {result['param']}: {metric} (recall@100 in brackets)"]
    lines += text_table(
        [result["param"], *configs],
        [
            [row["value"], *(f"{cell(row[c][metric])} [{cell(row[c]['recall@100'])}]" for c in configs)]
            for row in result["rows"]
        ],
    )
    shown = [c for c in ("rrf", "full") if c in configs] or configs[:1]
    values = [row[c][metric] for row in result["rows"] for c in shown if row[c][metric] is not None]
    if values:
        hi, lo = max(values), min(values)
        lo = max(0.0, lo - 0.25 * (hi - lo)) if hi > lo else 0.0  # zoom in: the differences are what matter
        lines.append(f"  bars from {lo:.3f} (empty) to {hi:.3f} (full)")
        for c in shown:
            lines.append(f"  {c}:")
            for row in result["rows"]:
                v = row[c][metric]
                bar = "" if v is None or hi == lo else "#" * max(1, round(width * (v - lo) / (hi - lo)))
                lines.append(f"    {str(row['value']):>6} {bar:<{width}} {cell(v)}")
    return "\n".join(lines)


def parse_sweep(spec: str) -> tuple[str, list[Any]]:
    """``"rrf_k=1,2,5"`` -> ``("rrf_k", [1, 2, 5])``; a bare name takes its default values."""
    name, sep, raw = spec.partition("=")
    name = name.strip()
    if not sep:
        if name not in DEFAULT_SWEEPS:
            raise ValueError(
                f"--sweep {name}: give values, e.g. --sweep {name}=0.5,1,2 "
                f"(defaults exist for {', '.join(DEFAULT_SWEEPS)})."
            )
        return name, list(DEFAULT_SWEEPS[name])
    values = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        if name == "depth":
            try:
                values.append(int(item))
            except ValueError:
                raise ValueError(f"--sweep depth: {item!r} is not a whole number.") from None
        else:
            values.append(parse_set([f"{name}={item}"])[name])
    if not values:
        raise ValueError(f"--sweep {name}: no values after '='.")
    return name, values
