"""The Inspector's "Why not…?" box, the judgments a person makes from the page, and the Evaluation tab's Tune / Apply.

- Why not…?: any card of the session's corpus (by id or words of its title) through every stage of the current turn
  at A's controls (and B's, side by side, in compare mode): ``retrieval.why.explain``, rendered here.
- Judgments: a grade 0-3 for any card of the four columns or the box, for the current turn, kept in the Chroma
  store (``retrieval.judgments``): a label of the corpus when this session may change it, else the session's own
  mark (``inspector.judge_view``); Undo takes back the session's latest change.
- Tune: ``retrieval.evaluation.tune`` on the Evaluation tab's live corpus; Apply sets A's controls to the
  suggestion and B's to the defaults, turns compare mode on and re-runs the turn, so the share link carries it.

Every value that reaches HTML is escaped (``render.esc``). ``attach`` builds and wires the Inspector part inside the
tab; ``build_tune`` builds the Evaluation tab part; the function ``attach`` returns wires Apply once both exist.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import gradio as gr

from inspector import handlers, jobs, judge_view
from inspector.html_text import esc
from inspector.render import render_message
from inspector.turn_end import TurnEnd
from retrieval.corpus_entries import SHIPPED
from retrieval.judgments import GRADES, turn_key
from retrieval.query import QueryError
from retrieval.why import cards_of, explain
from retrieval.why_report import WhyNot

log = logging.getLogger(__name__)

CONTROLS = handlers.CONTROLS
SEARCH_BUDGET_S = 30.0  # the page's search for a single change stops here (a large corpus scores many new pairs)
CSS = """
.why-box table {border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0}
.why-box th, .why-box td {border-bottom: 1px solid #e5e7eb; padding: 2px 8px; text-align: left; vertical-align: top}
.why-box .pass {color: #047857; font-weight: 600} .why-box .fail {color: #b91c1c; font-weight: 600}
.why-box .verdict {font-weight: 600; margin: 4px 0 6px} .why-box .lacks {color: #b91c1c}
.why-box .has {color: #047857} .why-box .side {font-weight: 700; color: #334155}
"""
_TUNE_PARTS: weakref.WeakKeyDictionary[gr.Blocks, dict[str, Any]] = weakref.WeakKeyDictionary()


# ------------------------------------------------------------------------------------------------ rendering
def _cell(ok: bool | None) -> str:
    if ok is None:
        return "<td>–</td>"
    return f"<td class='{'pass' if ok else 'fail'}'>{'pass' if ok else 'FAIL'}</td>"


def _n(value: Any) -> str:
    """A value of the why-not table, escaped; a missing one (None) as a dash, never "None"."""
    return "–" if value is None else esc(value)


def _idf(value: Any) -> str:
    """``idf 1.23``, or ``not in the index`` for a word no card uses (it printed "idf None")."""
    return "not in the index" if value is None else f"idf {esc(value)}"


def _rank(value: Any) -> str:
    """``rank 3``, or ``not ranked`` for a card the list does not hold (it printed "rank None")."""
    return "not ranked" if value is None else f"rank {esc(value)}"


def render_why(why: WhyNot, side: str = "") -> str:
    """One card's stages as an escaped table, the verdict first."""
    b, d, f, ce = why.bm25, why.dense, why.fused, why.cross_encoder
    depth = why.settings["candidate_depth"]
    terms = (
        " ".join(
            f"<span class='{'has' if t['in_card'] else 'lacks'}'>{esc(t['term'])}"
            f"{'+' if t['in_card'] else '−'}</span><small> {_idf(t['idf'])}</small>"
            for t in b["terms"]
        )
        or "(no term)"
    )
    rows = [
        (
            "BM25",
            b["in_list"],
            f"{_rank(b['rank'])} (score {_n(b['score'])}; sub-chunk {_n(b['chunk_rank'])} vs depth {depth}); "
            f"terms: {terms}",
        ),
        (
            "dense",
            d["in_list"],
            f"{_rank(d['rank'])} (cosine {_n(d['cosine'])}; sub-chunk {_n(d['chunk_rank'])} vs depth {depth}, "
            "exact over every vector)",
        ),
        (
            "fusion",
            f["reached"],
            f"{_rank(f['rank'])} (score {_n(f['score'])})"
            + ("" if f["reached"] else f" as if the depth were {esc(f['as_if_depth'])}"),
        ),
        (
            "cross-encoder",
            ce["in_head"] if ce["ran"] else None,
            f"score {_n(ce['score'])}"
            + (
                f"; {'places' if ce['in_head'] else 'would place'} it #{esc(ce['would_place'])} of the scored head"
                if ce["would_place"]
                else ""
            )
            + (f" ({esc(ce['reason'])})" if ce["reason"] else ""),
        ),
        *((st["stage"], st["passed"], esc(st["note"])) for st in why.stages),
    ]
    head = f"<div class='side'>{esc(side)}</div>" if side else ""
    body = "".join(f"<tr><th>{esc(name)}</th>{_cell(ok)}<td>{text}</td></tr>" for name, ok, text in rows)
    return (
        f"<div class='why-box'>{head}<div class='verdict'>{esc(why.verdict)}</div>"
        f"<div>{esc(why.card_id)}: {esc(why.title)}</div><table>{body}</table></div>"
    )


def render_judged(rows: Mapping[str, int], when: Mapping[str, str], titles: Mapping[str, str]) -> str:
    if not rows:
        return render_message("No judgment for this turn yet: pick a card and a grade, then Save.", "info")
    items = "".join(
        f"<tr><td>{esc(titles.get(c, c))} ({esc(c)})</td><td>{esc(g)}</td><td>{esc(when.get(c, ''))}</td></tr>"
        for c, g in sorted(rows.items())
    )
    return f"<div class='why-box'><table><tr><th>card</th><th>grade</th><th>made (UTC)</th></tr>{items}</table></div>"


# ------------------------------------------------------------------------------------------------ callbacks
def _split(values: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    n = len(CONTROLS)
    return dict(zip(CONTROLS, values[:n])), dict(zip(CONTROLS, values[n : 2 * n]))


def why_not(query: str, card: str, corpus: str | None, compare_on: bool, *values: Any) -> tuple[str, str, Any]:
    """Callback: A's (and in compare mode B's) explanation of ``card`` for the turn, and the judge picker."""
    a, b = _split(values)
    try:
        out = []
        for side, controls in (("A", a), ("B", b)) if compare_on else (("", a),):
            turn = handlers.execute(query, controls, corpus)
            why = explain(turn.retriever, turn.query, card, turn.settings, budget_s=SEARCH_BUDGET_S)
            out.append(render_why(why, side))
        choices = _choices(turn.retriever, turn.result, extra=why.card_id)
        remember_pick(handlers.current_session(), turn.query, corpus, why.card_id)
        return out[0], out[1] if len(out) > 1 else "", gr.Dropdown(choices=choices, value=why.card_id)
    except (QueryError, ValueError) as exc:
        return render_message(str(exc)), "", gr.skip()
    except Exception as exc:  # the page must survive anything; the log keeps the traceback
        log.exception("why-not failed")
        return render_message(f"Could not explain this card ({type(exc).__name__}); see the server log."), "", gr.skip()


def _choices(
    retriever, result, extra: str | None = None, titles: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """The cards of the four columns (and ``extra``), as (title (id), id)."""
    titles = cards_of(retriever) if titles is None else titles
    seen: list[str] = [extra] if extra else []
    for hits in (result.bm25.hits, result.dense.hits, result.fused, result.reranked, result.final):
        for h in hits:
            if h.parent_id not in seen:
                seen.append(h.parent_id)
    return [(f"{titles.get(c, c)} ({c})", c) for c in seen]


def _corpus_name(corpus: str | None) -> str:
    return corpus or SHIPPED


# session -> (digest of the turn key, corpus, card id): the card a session last picked to judge with the Why not…?
# box. The judge picker is refilled after every turn, as the last event of the turn's chain; a person who asks "Why
# not X?" while that chain is still running (the charts come first) would otherwise see the refill wipe X out of the
# picker, and Save would then say "pick a card" (seen in CI on a slow machine). So the refill keeps the pick, and
# a refill also follows every Why not…?, so the last word on the picker is always a refill that saw the pick. One
# small entry per session, the oldest dropped past MAX_PICKS (an API client never closes its page).
_PICKS: OrderedDict[str, tuple[str, str, str]] = OrderedDict()
_PICKS_LOCK = threading.Lock()
MAX_PICKS = 4096
MAX_CARD_ID_CHARS = 512


def _turn_digest(query: str) -> str:
    return hashlib.sha256(turn_key(query).encode("utf-8", "replace")).hexdigest()


def remember_pick(session: str | None, query: str, corpus: str | None, card_id: str | None) -> None:
    """Note the card ``session`` picked to judge for ``query`` (no session, as in the CLI and tests: nothing kept)."""
    if not session:
        return
    keep = isinstance(card_id, str) and 0 < len(card_id) <= MAX_CARD_ID_CHARS
    entry = (_turn_digest(str(query or "")), _corpus_name(corpus), card_id) if keep and card_id else None
    with _PICKS_LOCK:
        _PICKS.pop(session, None)
        if entry is not None:
            _PICKS[session] = entry
            while len(_PICKS) > MAX_PICKS:
                _PICKS.popitem(last=False)


def pick_for(session: str | None, query: str, corpus: str | None) -> str | None:
    """The card ``session`` picked for this very turn (same words, same corpus), if any."""
    with _PICKS_LOCK:
        pick = _PICKS.get(session) if session else None
    return pick[2] if pick and pick[:2] == (_turn_digest(query), _corpus_name(corpus)) else None


def end_session(request: gr.Request | None = None) -> None:
    """The page closed (Gradio's ``unload``): forget its pick."""
    remember_pick(getattr(request, "session_hash", None) or handlers.current_session(), "", None, None)


def judged_view(query: str, corpus: str | None, *a_values: Any) -> tuple[Any, str]:
    """``judged_view_for`` a session without an owner token (it sees the turn's labels only)."""
    return judged_view_for(query, corpus, None, *a_values)


def judged_view_for(query: str, corpus: str | None, token: str | None, *a_values: Any) -> tuple[Any, str]:
    """After a turn: the judge picker's cards (the four columns, and the card this session already picked for this
    turn, which stays picked), this turn's labels and this session's own marks (``judge_view``)."""
    try:
        turn = handlers.execute(query, dict(zip(CONTROLS, a_values)), corpus)
    except (QueryError, ValueError):
        return gr.Dropdown(choices=[], value=None), ""
    titles = cards_of(turn.retriever)  # one pass over the corpus's sub-chunks, for the judgments and the picker
    judged = _judged(turn.query, corpus, titles, token)  # reads the store: can take a while on a busy machine
    pick = pick_for(handlers.current_session(), turn.query, corpus)  # so read last: a Why not…? answered meanwhile
    pick = pick if pick in titles else None  # a corpus replaced under the same name may not hold that card any more
    return gr.Dropdown(choices=_choices(turn.retriever, turn.result, extra=pick, titles=titles), value=pick), judged


def _judged(query: str, corpus: str | None, titles: Mapping[str, str], token: str | None = None) -> str:
    return judge_view.judged_html(query, corpus, titles, token)


def save_judgment(query: str, card: str | None, grade: Any, corpus: str | None, token: str | None = None) -> str:
    """Record a grade for (turn, card) (``judge_view.save``: a label if this session may change the corpus, else its
    own mark); the turn's judgments after it."""
    return judge_view.save(query, card, grade, corpus, token)[0]


# ------------------------------------------------------------------------------------------------ layout
def attach(
    query: Any,
    controls: dict[str, Any],
    panel: dict[str, Any],
    outputs: dict[str, Any],
    end: TurnEnd,
    corpus: Any,
    owner: Any = None,
):
    """Build the Why not…? box and the judgments below what is already in the tab, and wire them (``owner``: the
    session's owner token, a ``gr.State`` shared with the Data tab). Returns the function that wires the Evaluation
    tab's Apply (call it with the app once every tab exists)."""
    corpus_box = corpus if corpus is not None else gr.State("")
    owner = owner if owner is not None else gr.State(None)
    gr.HTML(f"<style>{CSS}</style>")
    with gr.Accordion(
        "Why not…? Any card of this corpus through every stage of this turn", open=True, elem_id="why-not"
    ):
        with gr.Row(equal_height=True):
            card = gr.Textbox(
                label="Card: its id or words of its title",
                elem_id="why-card",
                scale=5,
                placeholder="e.g. drug-metformin-500, or: metformin tablets",
            )
            ask = gr.Button("Why not?", elem_id="why-run", scale=1, min_width=110)
        with gr.Row(equal_height=False):
            a_html = gr.HTML("", elem_id="why-a")
            b_html = gr.HTML("", elem_id="why-b")
        with gr.Row(equal_height=True):
            judge = gr.Dropdown(
                [],
                value=None,
                label="Judge a card of this turn (the four columns, or the box's card)",
                elem_id="judge-card",
                scale=4,
            )
            grade = gr.Radio(
                [str(g) for g in GRADES],
                value=None,
                label="Grade (0 not relevant … 3 perfectly)",
                elem_id="judge-grade",
                scale=2,
            )
            save = gr.Button("Save judgment", elem_id="judge-save", scale=1, min_width=120)
            undo = gr.Button("Undo", elem_id="judge-undo", scale=0, min_width=80)
        judged = gr.HTML("", elem_id="judgments")
    a_list, b_list = list(controls.values()), list(panel["b"].values())
    private: dict[str, Any] = dict(api_visibility="private")
    why_inputs = [query, card, corpus_box, panel["compare_on"], *a_list, *b_list]
    # preprocess=False: why_not and judged_view type every control themselves (handlers.execute), so a malformed
    # slider value sent to these events gets a message instead of Gradio's processing error
    refill = dict(
        fn=judged_view_for,
        inputs=[query, corpus_box, owner, *a_list],
        outputs=[judge, judged],
        preprocess=False,
        **private,
    )
    for asked in (ask.click, card.submit):  # a refill follows each Why not…?: the last word on the picker is always
        asked(
            why_not,
            why_inputs,
            [a_html, b_html, judge],
            concurrency_id="turn",
            preprocess=False,  # a refill that
            **private,
        ).then(**refill)  # saw the box's pick, whenever the turn's own refill lands
    end.follow(judged_view_for, refill["inputs"], refill["outputs"])  # in the turn's own last event
    save.click(judge_view.save, [query, judge, grade, corpus_box, owner], [judged, owner], **private)
    undo.click(judge_view.undo, [query, corpus_box, owner], judged, **private)

    def wire_apply(app: gr.Blocks) -> None:
        parts = _TUNE_PARTS.get(app)
        if parts is None:
            return
        from inspector import compare_view

        turn_outputs = [outputs[name] for name in handlers.TurnView._fields]
        parts["apply"].click(
            apply_tune,
            parts["state"],
            [*a_list, *b_list, panel["compare_on"], panel["panel"], parts["message"]],
            **private,
        ).then(
            handlers.rerun_turn,
            [query, *a_list, outputs["explain_doc"], corpus_box],
            turn_outputs,
            preprocess=False,
            **private,
        ).then(**compare_view.refresh_event(panel, query, controls, outputs, corpus_box))

    return wire_apply


# ------------------------------------------------------------------------------------------------ tune
def build_tune(source: Any) -> None:
    """The Evaluation tab's Tune panel for the dataset chosen in ``source`` (a ``live:NAME`` entry)."""
    with gr.Accordion(
        "Tune the hybrid for this corpus (seeded split; held-out turns decide)", open=False, elem_id="tune"
    ):
        with gr.Row(equal_height=True):
            seed = gr.Number(0, precision=0, minimum=0, label="Seed", elem_id="tune-seed", scale=1)
            run = gr.Button("Tune", elem_id="tune-run", scale=1)
            apply = gr.Button("Apply: A = suggested, B = defaults", elem_id="tune-apply", scale=2)
        report = gr.HTML("", elem_id="tune-report")
        message = gr.HTML("", elem_id="tune-message")
    state = gr.State(None)
    run.click(
        run_tune,
        [source, seed],
        [report, state],
        api_visibility="private",
        preprocess=False,  # it checks
        **jobs.HEAVY,
    )  # one heavy job
    from gradio.context import Context

    if Context.root_block is not None:
        _TUNE_PARTS[Context.root_block] = {"apply": apply, "state": state, "message": message}


def run_tune(source: str | None, seed: Any, progress: Any = gr.Progress()) -> tuple[str, Any]:
    """Callback: tune on the chosen live corpus; the report and the suggestion (None: nothing to apply)."""
    from retrieval.evaluation.corpus_eval import open_labeled
    from retrieval.evaluation.tune import tune

    name = str(source or "")
    if not name.startswith("live:"):
        return render_message("Tune runs on a live corpus: pick a 'live run' entry in Dataset."), None
    try:
        seed_value = int(seed or 0)
    except (TypeError, ValueError, OverflowError):
        return render_message(f"Seed must be a whole number (0, 1, 2, …), got {str(seed)[:40]!r}."), None
    try:
        settings = handlers.base_settings()
        dataset, retriever, _ = open_labeled(name.removeprefix("live:"), settings)
        with jobs.running() as flag:  # a heavy job: stops after the turn it is on when its page goes away
            report = tune(dataset, retriever, settings, seed=seed_value, progress=jobs.ticker(flag, progress))
    except jobs.JobCancelled:
        return render_message("Tune stopped: its page went away or it was cancelled."), None
    except (ValueError, OSError) as exc:
        return render_message(str(exc)), None
    except Exception as exc:
        log.exception("tune failed")
        return render_message(f"Tune failed ({type(exc).__name__}); see the server log."), None
    return render_tune(report), report.get("suggestion")


def render_tune(report: Mapping[str, Any]) -> str:
    held = report.get("held_out")
    rows = ""
    if held:
        for name, value in held["means"].items():
            t = held["tests"].get(name)
            rows += (
                f"<tr><td>{esc(name)}</td><td>{value:.4f}</td><td>"
                + (f"{t['diff']:+.4f} (p = {t['p_value']:.3g})" if t else "")
                + "</td></tr>"
            )
        rows = (
            f"<table><tr><th>held out ({esc(report['split']['held_out'])} turns)</th><th>{esc(report['metric'])}"
            f"</th><th>suggested −</th></tr>{rows}</table>"
        )
    return f"<div class='why-box'><div class='verdict'>{esc(report['verdict'])}</div>{rows}</div>"


def apply_tune(suggestion: Mapping[str, Any] | None) -> list[Any]:
    """Callback: A's controls = the defaults with the suggestion, B's = the defaults, compare mode on."""
    n = 2 * len(CONTROLS) + 2
    if not suggestion:
        return [gr.skip()] * n + [render_message("Nothing to apply: Tune suggested no change.", "info")]
    defaults = handlers.default_controls()
    a = {**defaults, **{k: v for k, v in suggestion["settings"].items() if k in defaults}}
    return [
        *(a[c] for c in CONTROLS),
        *(defaults[c] for c in CONTROLS),
        True,
        gr.Column(visible=True),
        render_message(
            "Applied: configuration A holds the suggestion and B the defaults; compare mode is on in "
            "the Inspector, and its link carries both.",
            "info",
        ),
    ]
