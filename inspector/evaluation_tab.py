"""The Evaluation tab: metric bars per configuration and per category, significance, refusals, the per-turn wins
and losses of the hybrid against the best single branch, and the sweeps.

The shipped labeled set and every registry corpus with labeled turns (uploaded, indexed before, BEIR folders under
the data root) run live (``retrieval.evaluation.corpus_eval``, the loader ``eval --corpus`` uses), optionally on
their first N turns; the session's corpus is preselected. Bigger sets can be shown from a ``report.json`` written by
``python -m retrieval eval --save-runs runs/<name>``, and the tab says which one it shows. ``build_evaluation_tab()``
creates its components inside the current Gradio context.
"""

from __future__ import annotations

import functools
import html
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from inspector import handlers, jobs, why_view
from inspector.compare_eval import build_compare_section, limit_value, sampled
from inspector.figures import failsafe, message_figure, plot_text
from retrieval.corpus_entries import SHIPPED
from retrieval.evaluation.labeled import describe, labeled_entries
from retrieval.evaluation.run_files import load_report
from retrieval.evaluation.sweeps import sweep_figure
from retrieval.evaluation.turn_runs import BRANCHES, CONFIGS
from retrieval.settings import PROJECT_ROOT

log = logging.getLogger(__name__)

LIVE_PREFIX = "live:"
LIVE = LIVE_PREFIX + SHIPPED
RUNS_DIR = PROJECT_ROOT / "runs"
METRIC_NAMES = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
COLORS = {"bm25": "#3b82f6", "dense": "#f59e0b", "rrf": "#10b981", "full": "#8b5cf6"}
CSS = """
.eval-tab table {border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0 12px}
.eval-tab th, .eval-tab td {border-bottom: 1px solid #e5e7eb; padding: 3px 9px; text-align: right; vertical-align: top}
.eval-tab th:first-child, .eval-tab td:first-child, .eval-tab td.text {text-align: left}
.eval-tab .fixed {color: #047857; font-weight: 600}
.eval-tab .broke {color: #b91c1c; font-weight: 600}
.eval-tab .note {color: #52606d}
"""

esc = html.escape


# ------------------------------------------------------------------------------------------------- sources
HYBRIDS = ("rrf", "full")  # the hybrid configurations whose wins and losses the tab lists


def corpus_sources() -> list[tuple[str, str]]:
    """A live entry for every registry corpus with labeled turns besides the shipped set (``live:<name>``)."""
    try:
        entries = labeled_entries(handlers.base_settings())
    except (OSError, ValueError) as exc:  # an unreadable data root must not take the tab down
        log.warning("cannot list the corpora with labeled turns: %s", exc)
        return []
    return [(f"{e.name}: live run ({describe(e)})", LIVE_PREFIX + e.name) for e in entries if e.kind != SHIPPED]


def list_sources(runs_dir: Path | None = None, corpora: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """Dropdown choices: the live shipped set, the live ``corpora`` (``corpus_sources()``), then every cached
    ``<runs_dir>/*/report.json`` (default runs/)."""
    runs_dir = Path(runs_dir) if runs_dir is not None else RUNS_DIR
    choices = [("Shipped labeled set (live run in this process)", LIVE), *corpora]
    if runs_dir.is_dir():
        for path in sorted(runs_dir.glob("*/report.json")):
            try:
                report = load_report(path)
            except ValueError as exc:
                log.warning("skipping %s: %s", path, exc)
                continue
            when = report.get("written_at", "unknown time")
            choices.append((f"{report['dataset']}: cached file {path.parent.name}/report.json ({when})", str(path)))
    return choices


def _known(configs: Any) -> list[str]:
    """The configurations a page value names (a client may send anything: what is not one is left out)."""
    return [c for c in configs if c in CONFIGS] if isinstance(configs, (list, tuple)) else []


def _ordered(configs: Sequence[str], report: Mapping[str, Any]) -> list[str]:
    return [c for c in CONFIGS if c in configs and c in report["configs"]]


# ------------------------------------------------------------------------------------------------- figures
@failsafe("Metrics per configuration")
def metrics_figure(report: Mapping[str, Any], configs: Sequence[str]) -> go.Figure:
    """Grouped bars: each metric, one bar per configuration."""
    configs = _ordered(configs, report)
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
    fig.update_layout(
        barmode="group",
        title=f"{plot_text(str(report['dataset']))}: parent-level metrics "
        f"({report['answerable_turns']} answerable turns)",
        yaxis=dict(range=[0, 1.08], title="score"),
        template="plotly_white",
        height=400,
    )
    return fig


@failsafe("nDCG@10 per category")
def category_figure(report: Mapping[str, Any], configs: Sequence[str], metric: str = "ndcg@10") -> go.Figure:
    """Grouped bars: ``metric`` per query category, one bar per configuration."""
    configs = _ordered(configs, report)
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
    fig.update_layout(
        barmode="group",
        title=f"{metric} per query category (turns in brackets)",
        yaxis=dict(range=[0, 1.05], title=metric),
        template="plotly_white",
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


# ---------------------------------------------------------------------------------------------------- html
def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "&ndash;"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.{digits}f}"
    return esc(str(v))


def summary_html(report: Mapping[str, Any], source_note: str, configs: Sequence[str]) -> str:
    """What is shown (live or cached, when, how), the metrics table, verdict, significance and refusals."""
    configs = _ordered(configs, report)
    cols = [*METRIC_NAMES, "ms_per_turn"]
    head = "".join(f"<th>{esc(m)}</th>" for m in cols)
    rows = "".join(
        "<tr><td><b>"
        + esc(c)
        + "</b></td>"
        + "".join(f"<td>{_num(report['configs'][c].get(m))}</td>" for m in cols)
        + "</tr>"
        for c in configs
    )
    configured = (report.get("settings") or {}).get("configured") or {}
    shown = ", ".join(f"{k}={v}" for k, v in configured.items() if k not in ("embedding_model", "reranker_model"))
    parts = [
        f"<div class='eval-tab'><p class='note'>{esc(source_note)}</p>",
        *([f"<p class='note'>{esc(report['note'])}</p>"] if report.get("note") else []),
        *([f"<p class='note'>Configured settings: {esc(shown)}.</p>"] if shown else []),
        f"<table id='eval-table'><caption>{esc(str(report['dataset']))}: "
        f"{_num(report.get('answerable_turns'))} answerable turns</caption>"
        f"<thead><tr><th>config</th>{head}</tr></thead><tbody>{rows}</tbody></table>",
    ]
    for c, v in (report.get("verdict") or {}).items():
        if c not in configs:
            continue
        beats = ", ".join(
            f"{esc(k.removeprefix('beats_'))}: {'yes' if ok else '<b>no</b>'}"
            for k, ok in v.items()
            if k.startswith("beats_") and k != "beats_each_branch"
        )
        parts.append(
            f"<p><b>{esc(c)}</b> beats each branch alone on nDCG@10: "
            f"{'yes' if v.get('beats_each_branch') else '<b>no</b>'} ({beats}); significant vs the best "
            f"branch: {'yes' if v.get('significant_vs_best_branch') else 'no'}.</p>"
        )
    sig = report.get("significance")
    if sig:
        srows = "".join(
            f"<tr><td>{esc(c)}</td><td>{_num(t['diff'])}</td><td>[{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]</td>"
            f"<td>{_num(t['p_value'])}</td><td>{_num(t['p_holm'])}</td><td>{t['wins']}/{t['losses']}/{t['ties']}</td>"
            f"<td>{'yes' if t['significant'] else 'no'}</td></tr>"
            for c, t in sig["tests"].items()
            if c in configs
        )
        parts.append(
            f"<p>Against the best single branch (<b>{esc(sig['baseline'])}</b>) on {esc(sig['metric'])}: "
            f"{esc(sig['method'])}; seed {sig['seed']}, {sig['resamples']} resamples.</p>"
            f"<table><thead><tr><th>config</th><th>diff</th><th>95% CI</th><th>p</th><th>p (Holm)</th>"
            f"<th>win/loss/tie</th><th>significant</th></tr></thead><tbody>{srows}</tbody></table>"
        )
    ref = report.get("refusal")
    if ref and ref.get("refusal_rate"):
        rrows = "".join(
            f"<tr><td>{esc(c)}</td><td>{_num(ref['refusal_rate'][c])}</td>"
            f"<td>{_num(ref['false_refusal_rate'][c])}</td></tr>"
            for c in ref["refusal_rate"]
        )
        source = (
            f" by the evidence rule (thresholds: {esc(ref['thresholds'])})"
            if ref.get("refusal_rule") == "evidence" and ref.get("thresholds")
            else ""
        )
        parts.append(
            f"<p>Refusals{source} at MIN_SIMILARITY={ref['min_similarity']:g}, top_k={ref['top_k']} "
            f"({ref['no_match_turns']} no_match turns, {ref['answerable_turns']} answerable):</p>"
            f"<table><thead><tr><th>config</th><th>refusal rate (no_match)</th>"
            f"<th>false refusals (answerable)</th></tr></thead><tbody>{rrows}</tbody></table>"
            f"<p class='note'>{esc(ref.get('note', ''))}</p>"
        )
    notes = report.get("notes") or {}
    if notes.get("latency"):
        parts.append(f"<p class='note'>Latency: {esc(notes['latency'])}.</p>")
    if report.get("cached_turns"):
        parts.append(
            f"<p class='note'>{report['cached_turns']} turns were already cached in this process: their "
            f"latency is not a cold call.</p>"
        )
    levels = report.get("configured_levels") or {}
    if set(levels) - {"full", "no_match"}:
        parts.append(
            "<p class='note'>Levels of the configured calls: "
            + esc(", ".join(f"{k}={v}" for k, v in levels.items()))
            + " (a turn below full lost a stage, e.g. the reranker's time budget).</p>"
        )
    if report.get("reranker_missing_turns"):
        parts.append(f"<p class='broke'>The reranker did not run on {report['reranker_missing_turns']} turns.</p>")
    parts.append("</div>")
    return "".join(parts)


def wins_losses(
    report: Mapping[str, Any], hybrid: str, baseline: str, metric: str = "ndcg@10"
) -> dict[str, list[dict[str, Any]]]:
    """Turns the hybrid fixed (better than the baseline branch) and broke (worse), biggest change first."""
    fixed, broke = [], []
    for turn in report.get("per_turn", []):
        scores = turn.get(metric)
        if not scores or hybrid not in scores or baseline not in scores:
            continue
        delta = scores[hybrid] - scores[baseline]
        row = {**turn, "delta": delta}
        if delta > 1e-12:
            fixed.append(row)
        elif delta < -1e-12:
            broke.append(row)
    fixed.sort(key=lambda r: (-r["delta"], r["id"]))
    broke.sort(key=lambda r: (r["delta"], r["id"]))
    return {"fixed": fixed, "broke": broke}


def best_branch(report: Mapping[str, Any]) -> str | None:
    """The baseline of the report's significance test, else the branch with the higher nDCG@10."""
    sig = report.get("significance")
    if sig:
        return sig["baseline"]
    present = [b for b in BRANCHES if b in report["configs"]]
    return max(present, key=lambda b: report["configs"][b]["ndcg@10"] or 0.0) if present else None


def wins_losses_html(report: Mapping[str, Any], hybrid: str, limit: int = 25) -> str:
    """Two tables: the turns ``hybrid`` fixed and the turns it broke, against the best single branch."""
    baseline = best_branch(report)
    if baseline is None or hybrid not in report["configs"]:
        return "<div class='eval-tab'><p>Needs a branch (bm25 or dense) and the chosen hybrid in the report.</p></div>"
    wl = wins_losses(report, hybrid, baseline)
    other = [b for b in BRANCHES if b in report["configs"] and b != baseline]

    def table(rows: list[dict[str, Any]], cls: str) -> str:
        if not rows:
            return "<p class='note'>none</p>"
        body = []
        for r in rows[:limit]:
            s = r["ndcg@10"]
            tops = "; ".join(f"{esc(c)}: {esc(', '.join(r['top3'].get(c, [])))}" for c in (baseline, hybrid))
            body.append(
                f"<tr><td>{esc(r['id'])}</td><td>{esc(r['category'])}</td><td class='text'>{esc(r.get('text', '(text not stored: third-party set)'))}"
                f"</td><td class='text'>{esc(', '.join(f'{k}:{v}' for k, v in r['relevant'].items()))}</td>"
                f"<td>{s[baseline]:.3f}</td>"
                + "".join(f"<td>{s[b]:.3f}</td>" for b in other)
                + f"<td>{s[hybrid]:.3f}</td><td class='{cls}'>{r['delta']:+.3f}</td>"
                f"<td class='text note'>{tops}</td></tr>"
            )
        more = f"<p class='note'>and {len(rows) - limit} more</p>" if len(rows) > limit else ""
        head = (
            "<tr><th>turn</th><th>category</th><th>text</th><th>relevant</th>"
            f"<th>{esc(baseline)}</th>"
            + "".join(f"<th>{esc(b)}</th>" for b in other)
            + f"<th>{esc(hybrid)}</th><th>&Delta;</th><th>top 3</th></tr>"
        )
        return f"<table><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>{more}"

    return (
        f"<div class='eval-tab'><p>Per-turn nDCG@10 of <b>{esc(hybrid)}</b> against the best single branch "
        f"(<b>{esc(baseline)}</b>): {len(wl['fixed'])} turns fixed, {len(wl['broke'])} broken.</p>"
        f"<h4 class='fixed'>Fixed by {esc(hybrid)}</h4>{table(wl['fixed'], 'fixed')}"
        f"<h4 class='broke'>Broken by {esc(hybrid)}</h4>{table(wl['broke'], 'broke')}</div>"
    )


def error_html(message: str) -> str:
    return f"<div class='eval-tab'><p class='broke'>{esc(message)}</p></div>"


# ------------------------------------------------------------------------------------------------ handlers
def live_note(report: Mapping[str, Any]) -> str:
    """What a live run scored, in words: which corpus, when, how many of its labeled turns, how long."""
    name = report.get("corpus") or SHIPPED
    what = "the shipped labeled set" if name == SHIPPED else f"corpus {name}"
    total, turns = report.get("total_turns", report["turns"]), report["turns"]
    scored = f"all {turns} labeled turns scored" if turns >= total else sampled(turns, total, report) + " scored"
    return (
        f"Shown: a live run of {what} in this process at {report.get('written_at', '?')}: {scored} "
        f"({report.get('wall_seconds', '?')} s), with the configured settings."
    )


def load_source(
    source: str,
    configs: Sequence[str],
    progress: Callable[[int, int, str], None] | None = None,
    limit: int | None = None,
) -> tuple[dict[str, Any], str]:
    """The report for a dropdown value (a live corpus, at most ``limit`` turns, or a cached file) and a sentence
    saying honestly what it is."""
    if source.startswith(LIVE_PREFIX):
        from retrieval.evaluation.corpus_eval import evaluate_corpus

        report = evaluate_corpus(
            source.removeprefix(LIVE_PREFIX),
            handlers.base_settings(),
            configs or list(CONFIGS),
            limit=limit,
            progress=progress,
        )
        return report, live_note(report)
    path = Path(source)
    report = load_report(path)
    try:
        shown = path.resolve().relative_to(PROJECT_ROOT)
    except ValueError:
        shown = path
    return report, (
        f"Shown: the cached file {shown}, written {report.get('written_at', 'at an unknown time')} by "
        f"`{report.get('command', 'python -m retrieval eval')}` ({report.get('wall_seconds', '?')} s). "
        f"Not re-run here; run that command again to refresh it."
    )


def _failed(msg: str) -> tuple:
    return (
        error_html(msg),
        message_figure(msg),
        message_figure(msg),
        error_html(msg),
        gr.update(choices=[], value=None),
        message_figure(msg),
        None,
    )


def show(
    source: str,
    configs: Sequence[str],
    hybrid: str,
    limit: float | None = 0,
    progress: Any = gr.Progress(),
    *,
    runs_dir: Path | None = None,
):
    """Callback: everything the tab shows for one source, plus the report (and what it is) for the session. A heavy
    job (``inspector.jobs``): Cancel, or the page going away, stops it after the turn it is on.

    ``source`` is a live corpus (``live:NAME``, a registry name) or one of the cached reports the Dataset menu lists
    (``list_sources(runs_dir)``): any other path a client sends is refused unread."""
    source = source or LIVE
    if not isinstance(source, str) or not (
        source.startswith(LIVE_PREFIX) or source in {v for _, v in list_sources(runs_dir)}
    ):
        return _failed(
            f"{str(source)[:80]!r} is not a dataset of this page: pick one in the Dataset menu (a live "
            "corpus, or a cached runs/*/report.json it lists)."
        )
    if hybrid not in HYBRIDS:
        return _failed(f"'Wins and losses of' is one of {', '.join(HYBRIDS)}; got {str(hybrid)[:40]!r}.")
    configs = _known(configs)
    try:
        with jobs.running() as flag:
            report, note = load_source(
                source, configs or list(CONFIGS), jobs.ticker(flag, progress), limit_value(limit)
            )
    except jobs.JobCancelled:
        return _failed("Cancelled: nothing was scored. Press Show again to run it.")
    except (ValueError, OSError) as exc:
        return _failed(str(exc))
    except Exception as exc:  # the page must survive anything; the log keeps the traceback
        log.exception("evaluation of %s failed", source)
        return _failed(f"The evaluation failed ({type(exc).__name__}: {exc}).")
    sweeps = [s["param"] for s in report.get("sweeps", [])]
    return (
        summary_html(report, note, configs),
        metrics_figure(report, configs),
        category_figure(report, configs),
        wins_losses_html(report, hybrid),
        gr.update(choices=sweeps, value=sweeps[0] if sweeps else None),
        sweep_choice_figure(report, sweeps[0] if sweeps else None),
        {"report": report, "note": note},
    )


def redraw(state: Mapping[str, Any] | None, configs: Sequence[str]):
    """Callback: other configurations picked; redraw from the session's report without re-running."""
    if not state:
        msg = "Press Show first."
        return error_html(msg), message_figure(msg), message_figure(msg)
    report = state["report"]
    configs = _known(configs)
    return (
        summary_html(report, state["note"], configs),
        metrics_figure(report, configs),
        category_figure(report, configs),
    )


def redraw_wins(state: Mapping[str, Any] | None, hybrid: str) -> str:
    if not state:
        return error_html("Press Show first.")
    return wins_losses_html(state["report"], hybrid)


def redraw_sweep(state: Mapping[str, Any] | None, param: str | None) -> go.Figure:
    if not state:
        return message_figure("Press Show first.")
    return sweep_choice_figure(state["report"], param)


def refresh_sources(runs_dir: Path | None = None) -> Any:
    choices = list_sources(runs_dir, corpus_sources())
    return gr.update(choices=choices, value=choices[-1][1])


def follow_corpus(corpus: str | None, current: str | None, runs_dir: Path | None = None) -> Any:
    """Callback: the session's corpus changed. Rescan the choices; preselect that corpus if it has labeled turns,
    else keep the current choice (the shipped set if that is gone)."""
    choices = list_sources(runs_dir, corpus_sources())
    values = {v for _, v in choices}
    wanted = LIVE_PREFIX + (handlers.page_text(corpus) or SHIPPED)
    value = wanted if wanted in values else current if current in values else LIVE
    return gr.update(choices=choices, value=value)


# -------------------------------------------------------------------------------------------------- layout
def build_evaluation_tab(
    runs_dir: Path | None = None, corpus: gr.Textbox | None = None, ab_kept: gr.BrowserState | None = None
) -> None:
    """Create the Evaluation tab's components inside the current Gradio context and wire them.

    Args:
        runs_dir: where cached reports live (``<runs_dir>/*/report.json``); default ``runs/`` in the project.
        corpus: the session's active corpus (the hidden box the Data tab sets), or None.
        ab_kept: the browser's copy of its last A vs B (``compare_eval.browser_copy``, built outside the tabs).
    """
    gr.HTML(f"<style>{CSS}</style>")
    gr.Markdown(
        "### Evaluation: does the hybrid beat each branch alone?\n"
        "Parent-level nDCG@10, Recall@10/100 and MRR@10 of `bm25`, `dense`, `rrf` and `full` (rrf + cross-encoder). "
        "The shipped set and every corpus with labeled turns (Data tab) run live, the session's corpus preselected "
        "(the shipped set takes about a minute the first time; SciFact's 300 turns take minutes: cap the turns, and "
        "a capped run samples every category, seeded); one heavy job (Show or A vs B) runs at a time in the whole "
        "app, the others wait in line, and Cancel stops yours; "
        "large sets can also be shown from a file written by `python -m retrieval eval --beir PATH --save-runs "
        "runs/NAME`."
    )
    choices = list_sources(runs_dir, corpus_sources())
    with gr.Row():
        source = gr.Dropdown(choices, value=choices[0][1], label="Dataset", elem_id="eval-source", scale=3)
        limit = gr.Number(0, precision=0, minimum=0, label="At most N turns (0 = all)", elem_id="eval-limit", scale=1)
        refresh = gr.Button("Rescan corpora and runs/", elem_id="eval-refresh", scale=0)
    with gr.Row():
        configs = gr.CheckboxGroup(list(CONFIGS), value=list(CONFIGS), label="Configurations", elem_id="eval-configs")
        hybrid = gr.Radio(list(HYBRIDS), value="rrf", label="Wins and losses of", elem_id="eval-hybrid")
    with gr.Row():
        run = gr.Button("Show", variant="primary", elem_id="eval-run", scale=3)
        stop = gr.Button("Cancel", elem_id="eval-cancel", scale=1)
    summary = gr.HTML(elem_id="eval-summary")
    with gr.Row():
        metrics_plot = gr.Plot(label="metrics", elem_id="eval-metrics")
        category_plot = gr.Plot(label="per category", elem_id="eval-categories")
    wins = gr.HTML(elem_id="eval-wins")
    sweep_param = gr.Dropdown([], label="Sweep", elem_id="eval-sweep-param")
    sweep_plot = gr.Plot(label="sweep", elem_id="eval-sweep")
    state = gr.State(None)

    private: dict[str, Any] = dict(api_visibility="private")  # page events, not API endpoints (the API is run_turn)
    refresh.click(lambda: refresh_sources(runs_dir), None, source, **private)
    if corpus is not None:
        corpus.change(lambda name, current: follow_corpus(name, current, runs_dir), [corpus, source], source, **private)
    # one heavy job at a time in the whole app (a live evaluation or A vs B): both cores for minutes on a large corpus
    listed = functools.update_wrapper(functools.partial(show, runs_dir=runs_dir), show)  # this menu's reports
    shown = run.click(
        listed,
        [source, configs, hybrid, limit],  # show checks every value itself: no preprocess
        [summary, metrics_plot, category_plot, wins, sweep_param, sweep_plot, state],
        **jobs.HEAVY,
        preprocess=False,
        **private,
    )
    stop.click(jobs.cancel, None, summary, cancels=[shown], concurrency_limit=None, **private)
    configs.input(
        redraw, [state, configs], [summary, metrics_plot, category_plot], preprocess=False, **private
    )  # redraw keeps only known configurations itself
    hybrid.input(redraw_wins, [state, hybrid], wins, **private)
    sweep_param.input(redraw_sweep, [state, sweep_param], sweep_plot, **private)
    build_compare_section(corpus, ab_kept)  # A vs B over a corpus's labeled turns, each turn linking to compare mode
    why_view.build_tune(source)  # Tune / Apply (inspector/why_view.py)
