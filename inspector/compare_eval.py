"""The Evaluation tab's A vs B: two configurations over the labeled turns of a corpus (the session's by default:
the shipped set or any registry corpus with labeled turns, optionally a seeded sample of N with every category),
the metric table, the paired
randomization test (``retrieval.evaluation.compare``, as ``eval --compare`` does) and the turns B fixed and
broke, sortable by the change in nDCG@10. Each turn links to the inspector in compare mode with the same A and B
and the same corpus (a share link: opening it restores both configurations and runs the turn).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gradio as gr

from inspector import handlers, jobs, state
from inspector.html_text import esc
from retrieval.compare import PRESETS, preset_values
from retrieval.corpus_entries import SHIPPED
from retrieval.evaluation.compare import METRIC, fixed_and_broken
from retrieval.evaluation.labeled import describe, labeled_entries
from retrieval.evaluation.prepare import parse_set
from retrieval.evaluation.turn_runs import CONFIGS
from retrieval.settings import CONTROLS

log = logging.getLogger(__name__)

SORTS = {"most broken first": "delta", "most fixed first": "-delta"}
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def side_controls(preset: str | None, overrides: str, a: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A configuration's control values: a preset (from the defaults, or for B's one-change presets from A),
    then ``KEY=VALUE,...`` overrides. Raises ``ValueError`` naming what was wrong."""
    if overrides is not None and not isinstance(overrides, str):
        raise ValueError("overrides are text: KEY=VALUE pairs separated by commas, e.g. rrf_k=60,dense_weight=1.")
    defaults = handlers.default_controls()
    values = preset_values(preset, a if a is not None else defaults, defaults) if preset else dict(defaults)
    pairs = [p.strip() for p in (overrides or "").split(",") if p.strip()]
    for name, value in parse_set(pairs).items():
        if name not in CONTROLS:
            raise ValueError(f"{name} is not one of the page's controls ({', '.join(CONTROLS)}).")
        values[name] = handlers.KNOBS[name].coerce(value)
    return values


def limit_value(limit: float | None) -> int:
    """An "at most N turns" box's value as a whole number (empty or 0: all turns)."""
    if limit is None or limit == "":
        return 0
    try:
        value = float(limit)
    except (TypeError, ValueError):
        value = -1.0  # not a number: the message below
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"'at most N turns' must be a number, 0 (all turns) or more, got {str(limit)[:40]}.")
    return int(round(value))


def sampled(turns: int, total: int, report: Mapping[str, Any]) -> str:
    """A capped run's turns in words: a seeded sample with every category, not the first N."""
    return (
        f"a sample of {turns} of its {total} labeled turns, every category represented (seed "
        f"{report.get('sample_seed', 0)}: the same turns every run; 'at most N turns' 0 scores all)"
    )


def corpus_choices() -> list[tuple[str, str]]:
    """The corpora with labeled turns, shipped first, as (label, registry name) pairs."""
    try:
        entries = labeled_entries(handlers.base_settings())
    except (OSError, ValueError) as exc:  # an unreadable data root must not take the tab down
        log.warning("cannot list the corpora with labeled turns: %s", exc)
        entries = []
    pairs = [(f"{e.name} ({describe(e)})", e.name) for e in entries if e.kind != SHIPPED]
    return [(f"{SHIPPED} (the shipped labeled set)", SHIPPED), *pairs]


def follow_corpus(corpus: str | None, current: str | None) -> Any:
    """Callback: the session's corpus changed. Rescan; preselect it if it has labeled turns, else keep the choice."""
    choices = corpus_choices()
    names = {v for _, v in choices}
    wanted = handlers.page_text(corpus) or SHIPPED
    return gr.update(choices=choices, value=wanted if wanted in names else current if current in names else SHIPPED)


def run_ab(
    a_preset: str | None,
    a_overrides: str,
    b_preset: str | None,
    b_overrides: str,
    corpus: str | None = None,
    limit: float | None = 0,
    progress: Any = None,
    cancel: Any = None,
) -> dict[str, Any]:
    """Both configurations over a corpus's labeled turns (at most ``limit``, every category), in this process (the
    retriever's cache is shared); B on an index of its own embedding model (indexed first if needed)."""
    from retrieval.evaluation.corpus_eval import compare_corpus

    a = side_controls(a_preset, a_overrides)
    b = side_controls(b_preset, b_overrides, a)
    sa, sb = handlers.build_settings(a), handlers.build_settings(b)
    report = compare_corpus(corpus or SHIPPED, sa, sb, limit=limit_value(limit), progress=progress, cancel=cancel)
    report.update(controls={"a": a, "b": b})
    return report


def _num(v: Any) -> str:
    return "&ndash;" if v is None else f"{v:.4f}" if isinstance(v, float) else esc(v)


def summary_html(report: Mapping[str, Any]) -> str:
    """The metric table of both configurations and the paired test, B vs A."""
    changed = ", ".join(f"{n} {v['a']} → {v['b']}" for n, v in report["changed"].items()) or "nothing"
    rows = "".join(
        f"<tr><td>{side.upper()} {esc(c)}</td>"
        + "".join(f"<td>{_num(report[side][c].get(m))}</td>" for m in METRICS)
        + "</tr>"
        for c in CONFIGS
        for side in ("a", "b")
    )
    sig = report.get("significance")
    test = (
        "<p>Not enough answerable turns for a paired test.</p>"
        if not sig
        else f"<p id='ab-significance'><b>B vs A</b> on {esc(sig['metric'])} of the full lists: difference "
        f"{sig['diff']:+.4f} (95% CI {sig['ci_low']:+.4f} to {sig['ci_high']:+.4f}), p = {sig['p_value']:.4f} "
        f"(paired randomization test, seed {esc(sig['seed'])}, {esc(sig['resamples'])} resamples); B fixed "
        f"{esc(sig['fixed'])} turns, broke {esc(sig['broke'])}, tied {esc(sig['ties'])}.</p>"
    )
    turns, total = len(report["turns"]), report.get("total_turns", len(report["turns"]))
    scored = f"{turns} labeled turns" if turns >= total else esc(sampled(turns, total, report))
    index = report.get("b_index")
    model = (
        f" B scored on its own index of {esc(index['embedding_model'])}"
        f"{' (indexed for this comparison)' if index.get('built') else ''}."
        if index
        else ""
    )
    return (
        f"<div class='eval-tab'><p id='ab-scope'>Corpus {esc(report['dataset'])}: {scored}, "
        f"{esc(report.get('wall_seconds', '?'))} s. B changes: {esc(changed)}.{model}</p>"
        f"<table><tr><th>configuration</th>{''.join(f'<th>{m}</th>' for m in METRICS)}</tr>{rows}</table>"
        f"{test}</div>"
    )


def turns_html(report: Mapping[str, Any], sort: str = "most broken first") -> str:
    """The turns whose nDCG@10 B changed, each linking to the inspector in compare mode with the same A and B."""
    rows = fixed_and_broken(report, SORTS.get(sort, "delta") if isinstance(sort, str) else "delta")
    if not rows:
        return "<div class='eval-tab'><p>B changes no turn's nDCG@10.</p></div>"
    defaults = handlers.default_controls()
    a, b = report["controls"]["a"], report["controls"]["b"]
    out = []
    for t in rows:
        page = state.PageState(query=t["text"], a=a, b=b, compare=True, corpus=report.get("corpus"))
        href = "./" + state.encode(page, defaults)
        kind = "fixed" if t["delta"] > 0 else "broke"
        out.append(
            f"<tr class='ab-turn {kind}' data-id='{esc(t['id'])}' data-delta='{esc(t['delta'])}'>"
            f"<td>{esc(t['id'])}</td><td class='text'><a href='{esc(href)}' target='_self' "
            f"class='ab-open'>{esc(t['text'])}</a></td><td>{_num(t[f'a_{METRIC}'])}</td>"
            f"<td>{_num(t[f'b_{METRIC}'])}</td><td class='{kind}'>{t['delta']:+.4f}</td></tr>"
        )
    return (
        "<div class='eval-tab'><p>Turns B fixed (nDCG@10 up) and broke (down); click a turn to open it in the "
        "inspector in compare mode with the same A and B.</p><table><tr><th>id</th><th>turn</th>"
        f"<th>A {METRIC}</th><th>B {METRIC}</th><th>B − A</th></tr>{''.join(out)}</table></div>"
    )


def show_ab(
    a_preset,
    a_overrides,
    b_preset,
    b_overrides,
    sort,
    corpus: str | None = None,
    limit: float | None = 0,
    progress: Any = gr.Progress(),
):
    """Callback: run A vs B, then the summary, the turn list and the report (kept for re-sorting, and in the browser
    so that the page shows it again after opening a turn and going Back). A heavy job (``inspector.jobs``)."""
    from retrieval.dense_build import IndexingCancelled

    try:
        with jobs.running() as flag:
            report = run_ab(
                a_preset, a_overrides, b_preset, b_overrides, corpus, limit, jobs.ticker(flag, progress), flag
            )
    except (jobs.JobCancelled, IndexingCancelled):
        return jobs.CANCELLED, "", None
    except (ValueError, OSError) as exc:
        msg = f"<div class='eval-tab'><p class='broke'>{esc(exc)}</p></div>"
        return msg, "", None
    except Exception as exc:  # the page must survive anything; the log keeps the traceback
        log.exception("A vs B failed")
        return (
            f"<div class='eval-tab'><p class='broke'>A vs B failed ({esc(type(exc).__name__)}: {esc(exc)}).</p></div>",
            "",
            None,
        )
    return summary_html(report), turns_html(report, sort), report


def resort(report: Mapping[str, Any] | None, sort: str) -> str:
    return turns_html(report, sort) if report else ""


def restore(kept: Mapping[str, Any] | None, sort: str) -> tuple[Any, Any, Any]:
    """Page load: the last A vs B this browser ran (kept in its local storage), so that Back from a turn opened from
    the table shows the table again; nothing when there is none or it no longer renders."""
    if not kept:
        return gr.skip(), gr.skip(), gr.skip()
    try:
        return summary_html(kept), turns_html(kept, sort), dict(kept)
    except Exception:  # an old or damaged copy: start empty
        log.warning("the A vs B kept in the browser does not render; ignored")
        return gr.skip(), gr.skip(), gr.skip()


def browser_copy() -> gr.BrowserState:
    """Where the browser keeps its last A vs B (local storage), for ``restore``. Build it outside the tabs: a
    component in a tab not shown at page load is not mounted yet, so the load event would read nothing."""
    return gr.BrowserState(None, storage_key="inspector-ab-report")


def build_compare_section(corpus: gr.Textbox | None = None, kept: gr.BrowserState | None = None) -> None:
    """The A vs B block of the Evaluation tab, in the current Gradio context. ``corpus`` is the session's active
    corpus box (the Data tab sets it): its corpus is preselected when it has labeled turns. ``kept`` is the
    browser's copy of its last A vs B (``browser_copy``, built outside the tabs)."""
    gr.Markdown(
        "### A vs B over every labeled turn\nA and B each start from a preset (the tuned defaults when "
        "empty); `KEY=VALUE,...` overrides any control, e.g. `rrf_k=60,dense_weight=1`. B's one-change "
        "presets (no reranker, hybrid off, k=60) apply to A. Same as `python -m retrieval eval --compare` "
        "(with `--corpus NAME` for a corpus of the Data tab)."
    )
    with gr.Row():
        which = gr.Dropdown(
            corpus_choices(), value=SHIPPED, label="Corpus (its labeled turns)", elem_id="ab-corpus", scale=3
        )
        limit = gr.Number(0, precision=0, minimum=0, label="At most N turns (0 = all)", elem_id="ab-limit", scale=1)
    presets = list(PRESETS)
    with gr.Row():
        a_preset = gr.Dropdown(presets, value="tuned defaults", label="A preset", elem_id="ab-a-preset")
        a_over = gr.Textbox("", label="A overrides (KEY=VALUE,...)", elem_id="ab-a-overrides")
        b_preset = gr.Dropdown(presets, value="ADR recipe", label="B preset", elem_id="ab-b-preset")
        b_over = gr.Textbox("", label="B overrides (KEY=VALUE,...)", elem_id="ab-b-overrides")
    with gr.Row():
        run = gr.Button("Compare A and B", variant="primary", elem_id="ab-run")
        stop = gr.Button("Cancel", elem_id="ab-cancel", scale=0, min_width=120)
        sort = gr.Radio(
            list(SORTS), value="most broken first", label="Sort turns by the change in nDCG@10", elem_id="ab-sort"
        )
    summary = gr.HTML(elem_id="ab-summary")
    turns = gr.HTML(elem_id="ab-turns")
    report = gr.State(None)
    kept = kept if kept is not None else browser_copy()  # this browser's last A vs B (see restore)
    # preprocess=False: show_ab checks every value itself (a malformed number gets its message, not Gradio's error)
    compared = run.click(
        show_ab,
        [a_preset, a_over, b_preset, b_over, sort, which, limit],
        [summary, turns, report],
        api_visibility="private",
        preprocess=False,
        **jobs.HEAVY,
    )
    compared.success(lambda r: r if r else gr.skip(), report, kept, api_visibility="private")
    stop.click(jobs.cancel, None, summary, cancels=[compared], concurrency_limit=None, api_visibility="private")
    root = gr.context.Context.root_block
    if root is not None:
        root.load(restore, [kept, sort], [summary, turns, report], api_visibility="private")
    if corpus is not None:
        corpus.change(follow_corpus, [corpus, which], which, api_visibility="private")
    sort.input(resort, [report, sort], turns, api_visibility="private")
