"""The Evaluation tab: its components and their callbacks (Show, Cancel, redraws, following the session's corpus),
the A vs B section and Tune beneath.

The shipped labeled set and every registry corpus with labeled turns (uploaded, indexed before, BEIR folders under
the data root) run live (``retrieval.evaluation.corpus_eval``, the loader ``eval --corpus`` uses), optionally on
their first N turns; the session's corpus is preselected. Bigger sets can be shown from a ``report.json`` written by
``python -m retrieval eval --save-runs runs/<name>``, and the tab says which one it shows
(``inspector.evaluation_reports``); its charts are ``inspector.evaluation_figures``', its tables
``inspector.evaluation_tables``'. ``build_evaluation_tab()`` creates its components inside the current Gradio context.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from inspector import handlers, jobs, why_view
from inspector.compare_eval import build_compare_section, limit_value
from inspector.evaluation_figures import category_figure, metrics_figure, sweep_choice_figure
from inspector.evaluation_reports import LIVE, LIVE_PREFIX, corpus_sources, list_sources, load_source
from inspector.evaluation_tables import CSS, error_html, summary_html, wins_losses_html
from inspector.figures import message_figure
from retrieval.corpus_entries import SHIPPED
from retrieval.evaluation.turn_runs import CONFIGS

log = logging.getLogger(__name__)

HYBRIDS = ("rrf", "full")  # the hybrid configurations whose wins and losses the tab lists
_PROGRESS = gr.Progress()  # show's default: Gradio hands a parameter whose default is a Progress the event's tracker


def _known(configs: Any) -> list[str]:
    """The configurations a page value names (a client may send anything: what is not one is left out)."""
    return [c for c in configs if c in CONFIGS] if isinstance(configs, (list, tuple)) else []


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
    progress: Any = _PROGRESS,
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
