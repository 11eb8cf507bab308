"""The level badge above the columns: the level in words, the turn searched, the branches' states and timings, the
refusal in plain words with its evidence below, and a streamed turn's pending state.

Split from ``inspector.render`` (the columns). Every string from a corpus, a turn or a message is escaped. The badge
carries the controls its result was computed with (``data-controls``), so a page, and a test, can tell whether what
it shows is what its controls say.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from inspector.hit_rows import column_head
from inspector.html_text import esc
from inspector.render import COMMON_SHARE, LEVEL_WORDS
from retrieval.query import normalisation_note, reveal_invisible
from retrieval.settings import CONTROLS
from retrieval.types import BranchResult, RetrievalResult

# The first words of a refusal, for anyone in the room: what it means, before any number.
REFUSAL_PLAIN = "The cards do not answer this question, so the assistant says so instead of guessing."
PENDING_WORDS = "reranking… the cross-encoder is reading the fused list's top {pairs} candidates"


def controls_attr(result: RetrievalResult) -> str:
    """`` data-controls="{...}"``: the controls (``CONTROLS``) the result was computed with, as JSON."""
    shown = {name: result.settings[name] for name in CONTROLS if name in result.settings}
    return f' data-controls="{esc(json.dumps(shown, sort_keys=True, default=str))}"'


def _chips(result: RetrievalResult, reranker: str | None = None) -> str:
    """The branches' and the reranker's states; ``reranker`` overrides the reranker's chip (a pending turn)."""
    chips = []
    for b in (result.bm25, result.dense):
        label = "BM25" if b.name == "bm25" else "Dense"
        ok = b.status == "ok"
        why = f": {b.reason}" if not ok and b.reason else ""
        # a reason is a sentence (it names the setting to change): it wraps rather than being cut ("…ENABLED=fals")
        kind = "ok" if ok else "bad wrap"
        chips.append(f'<span class="chip {kind}">{esc(label)} {esc("ok" if ok else b.status)}{esc(why)}</span>')
    if reranker is not None:
        chips.append(f'<span class="chip idle">reranker {esc(reranker)}</span>')
    else:
        rerank = "ok" if result.reranked else (result.reranker_status or "not run")
        chips.append(f'<span class="chip {"ok" if result.reranked else "bad"}">reranker {esc(rerank)}</span>')
    return "".join(chips)


# The badge's one-line timing summary: the stages a person compares (each stage's own time is in the tooltip).
TIMING_GROUPS = (
    ("BM25", ("bm25",)),
    ("dense", ("embed_query", "chroma_query", "dense")),
    ("fusion", ("fusion",)),
    ("rerank", ("rerank",)),
    ("total", ("total",)),
)


def timing_summary(timings: Mapping[str, float], pending: tuple[str, ...] = ()) -> str:
    """``BM25 0.4 · dense 31.2 · fusion 0.3 · rerank 290.1 · total 325.0 ms`` (stages that did not run left out);
    the groups in ``pending`` say ``…`` (still running: a streamed turn's rerank and total)."""
    parts = [
        f"{label} {'…' if label in pending else f'{sum(timings[k] for k in keys if k in timings):.1f}'}"
        for label, keys in TIMING_GROUPS
        if label in pending or any(k in timings for k in keys)
    ]
    return "timings: " + " · ".join(parts) + " ms" if parts else "timings: –"


def _timings(result: RetrievalResult, pending: tuple[str, ...] = ()) -> str:
    shown = {k: v for k, v in result.timings_ms.items() if not pending or k in {"bm25", "embed_query", "chroma_query"}}
    if pending and "fusion" in result.timings_ms:
        shown["fusion"] = result.timings_ms["fusion"]
    every = " · ".join(f"{k} {v:.1f} ms" for k, v in shown.items())
    return (
        f'<div class="timings"><span title="{esc(every)}">{esc(timing_summary(shown, pending))}</span> '
        f'<span class="hint">(≈0 ms = cached)</span></div>'
    )


def render_status(
    result: RetrievalResult, terms: frozenset[str] = frozenset(), common: frozenset[str] = frozenset()
) -> str:
    """The level badge with its reason in words, branch states, per-stage timings and the highlight legend; a
    refusal says what it means in plain words first (``REFUSAL_PLAIN``), its evidence collapsed below."""
    level = result.hybrid_path
    plain = f'<div class="plain">{esc(REFUSAL_PLAIN)}</div>' if result.refused else ""
    return (
        f'<div class="status level-{esc(level)}"{controls_attr(result)}><div class="status-top">'
        f'<span class="badge">{esc(level)}</span>'
        f'<span class="level-words">{esc(LEVEL_WORDS.get(level, level))}</span></div>{plain}'
        f'<div class="turn-why"><div class="turn"><b>Turn searched:</b> {esc(result.query)}</div>'
        f"{_why(result.reason)}</div>{_typed(result)}{render_refusal(result)}"
        f'<div class="facts"><div class="chips">{_chips(result)}</div>'
        f"{_timings(result)}{_legend(terms, common)}</div></div>"
    )


def render_pending_status(
    result: RetrievalResult, pairs: int, terms: frozenset[str] = frozenset(), common: frozenset[str] = frozenset()
) -> str:
    """The badge while the cross-encoder works (a streamed turn's first step): a neutral ``reranking…`` state, not a
    level (the final level is not known yet), laid out as the final badge is (turn, reason line, refusal line,
    chips, timings, legend) so the columns do not move when it arrives; its timings are the chips' ones."""
    refusal = (
        '<details class="refusal-evidence pending"><summary>Refusal rule: decided once the reranker has scored'
        "</summary></details>"
        if getattr(result, "refusal", None) is not None
        else ""
    )
    return (
        f'<div class="status level-pending" data-step="fused"{controls_attr(result)}><div class="status-top">'
        f'<span class="badge">reranking…</span>'
        f'<span class="level-words">{esc(PENDING_WORDS.format(pairs=pairs))}</span></div>'
        f'<div class="turn-why"><div class="turn"><b>Turn searched:</b> {esc(result.query)}</div>'
        f'<div class="reason"><b>So far:</b> BM25 and dense fused with RRF; the level follows the scores</div></div>'
        f"{_typed(result)}{refusal}"
        f'<div class="facts"><div class="chips">{_chips(result, reranker="scoring…")}</div>'
        f"{_timings(result, pending=('rerank', 'total'))}{_legend(terms, common)}</div></div>"
    )


def pending_column(pairs: int) -> str:
    """The reranked column while the cross-encoder scores the fused head."""
    return (
        f'<div class="col col-reranked pending">{column_head("reranked", "scoring…", "idle")}'
        f'<div class="rows"><div class="empty scoring">scoring {pairs} pairs with the cross-encoder…</div>'
        f"</div></div>"
    )


def status_placeholder(text: str = "Type a turn and press Run.") -> str:
    """The badge area before a run, or when a turn was rejected."""
    return (
        f'<div class="status level-idle"><div class="status-top"><span class="badge">idle</span>'
        f'<span class="level-words">{esc(text)}</span></div></div>'
    )


# ------------------------------------------------------------------------------------------------ refusal
def _test_line(t: object, settings: Mapping[str, object]) -> str:
    """One test of the refusal rule: ✓ / ✗ and its sentence; a test whose threshold is 0 checks nothing, so it is
    shown as not checked (it read "✓ 0 of the turn's 3 words occur in the cards ()")."""
    sentence = str(getattr(t, "sentence", "")).replace(" ()", "")
    threshold, value = getattr(t, "threshold", None), getattr(t, "value", None)
    if getattr(t, "passed", False) and isinstance(threshold, (int, float)) and threshold <= 0 and not value:
        name = esc(getattr(t, "name", "test"))
        return f'<li class="off">– {name}: not checked (its minimum is 0); {esc(sentence)}</li>'
    passed = bool(getattr(t, "passed", False))
    mark = "✓" if passed else "✗"
    origin = _threshold_origin(str(getattr(t, "name", "")), settings)
    return f'<li class="{"pass" if passed else "fail"}">{mark} {esc(sentence)}{esc(origin)}</li>'


def render_refusal(result: RetrievalResult) -> str:
    """The refusal rule's evidence, collapsed: every test with its value and threshold (✗ the failed ones), the
    evidence unavailable at this level (e.g. no cross-encoder on rrf_only) and why, where the thresholds came from.
    Its summary line says the outcome in words; the numbers are one click away."""
    decision = getattr(result, "refusal", None)
    if decision is None:
        return ""
    rows = "".join(_test_line(t, result.settings) for t in decision.tests)
    missing = "".join(f'<li class="unavailable">– {esc(u)}</li>' for u in decision.unavailable)
    missing += "".join(f'<li class="note">· {esc(n)}</li>' for n in getattr(decision, "notes", ()))
    source = getattr(decision, "thresholds", "defaults")
    if source and source != "defaults":  # a corpus's own calibration chose the thresholds: say so
        missing += f'<li class="thresholds">thresholds {esc(source)}</li>'
    verdict = "refused" if decision.refused else "answered"
    title = "Why the assistant refuses (evidence)" if decision.refused else "Refusal rule"
    return (
        f'<details class="refusal-evidence {verdict}"><summary>{title} ({esc(decision.rule)}): <b>{verdict}</b>: '
        f"{esc(decision.reason)}</summary><ul>{rows}{missing}</ul></details>"
    )


# The refusal rule's cosine tests compare against MIN_SIMILARITY plus a margin (retrieval.pipeline builds the
# thresholds): the badge says where a number such as 0.64 comes from, since the slider shows only MIN_SIMILARITY.
_MARGINS = {
    "cosine rescue": ("refusal_rescue_margin", "REFUSAL_RESCUE_MARGIN"),
    "cosine": ("refusal_fallback_margin", "REFUSAL_FALLBACK_MARGIN"),
}


def _threshold_origin(test: str, settings: Mapping[str, Any]) -> str:
    """`` (= MIN_SIMILARITY 0.55 + REFUSAL_RESCUE_MARGIN 0.09)`` for a cosine test of the refusal rule, else ""."""
    if test not in _MARGINS:
        return ""
    attr, env = _MARGINS[test]
    try:
        base, margin = float(settings["min_similarity"]), float(settings[attr])
    except (KeyError, TypeError, ValueError):
        return ""
    return f" (threshold = MIN_SIMILARITY {base:g} + {env} {margin:g})"


def _typed(result: RetrievalResult) -> str:
    """What was typed, when the searched turn differs from it (invisible characters shown as ⟨U+XXXX⟩)."""
    typed = getattr(result, "typed_query", "")
    if not typed:
        return ""
    return (
        f'<div class="turn typed">normalised from what was typed: <code>{esc(reveal_invisible(typed))}</code> '
        f"({esc(normalisation_note(typed))})</div>"
    )


def _legend(terms: frozenset[str], common: frozenset[str]) -> str:
    if not terms:
        return ""
    rare = sorted(terms - common)
    common_html = (
        f' · <mark class="common">common</mark> (in &gt; {COMMON_SHARE:.0%} of sub-chunks, low IDF): '
        f"{esc(', '.join(sorted(common)))}"
        if common
        else ""
    )
    return f'<div class="legend">BM25 query terms: <mark>rare</mark>: {esc(", ".join(rare)) or "–"}{common_html}</div>'


def _why(reason: str) -> str:
    # The pipeline's reason is "<level in words>: <why>, ..."; the badge already says the level, so show the why.
    _, sep, why = reason.partition(": ")
    return f'<div class="reason"><b>Why:</b> {esc(why)}</div>' if sep and why else ""


# ------------------------------------------------------------------------------------------ a streamed turn
BRANCH_TIMINGS = ("bm25", "embed_query", "chroma_query")


def carry_timings(final: RetrievalResult, first: RetrievalResult) -> RetrievalResult:
    """``final`` (a streamed turn's last step, whose branches came from the per-turn cache, 0 ms) with the branch
    times of ``first`` (its first step, which ran them): a first run never says "cached" with 0.0 ms. The total
    counts them too. A branch the first step also read from the cache (an earlier turn ran it) stays "cached"."""
    changes: dict[str, BranchResult] = {}
    timings = dict(final.timings_ms)
    for name in ("bm25", "dense"):
        done, ran = getattr(final, name), getattr(first, name)
        if done.status == ran.status == "ok" and done.ms <= 0 < ran.ms:
            changes[name] = dataclasses.replace(done, ms=ran.ms)
    carried = 0.0
    for key in BRANCH_TIMINGS:
        if ("bm25" in changes if key == "bm25" else "dense" in changes) and timings.get(key, 0.0) <= 0:
            carried += first.timings_ms.get(key, 0.0)
            timings[key] = first.timings_ms.get(key, 0.0)
    if not changes:
        return final
    if "total" in timings:
        timings["total"] = timings["total"] + carried
    out = dataclasses.replace(final, timings_ms=timings)
    if "bm25" in changes:
        out = dataclasses.replace(out, bm25=changes["bm25"])
    if "dense" in changes:
        out = dataclasses.replace(out, dense=changes["dense"])
    return out
