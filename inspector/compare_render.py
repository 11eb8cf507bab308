"""Compare mode's view as HTML: both levels, the summary in words, and per stage A and B side by side with a diff
mark on every row, relevance marks and each list's metrics. Everything reaching HTML is escaped (``esc``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inspector.html_text import esc
from retrieval.compare import STAGES, ListDiff, diff_results, summarize
from retrieval.evaluation.compare import stage_metrics
from retrieval.types import FusedHit, Hit, RetrievalResult

ROWS = 10  # rows shown per column (the diff is over the whole lists)
STAGE_TITLES = {"bm25": "BM25", "dense": "Dense", "rrf": "RRF fused", "final": "Final (reranked cards)"}
CSS = """
#compare-view .cmp-summary {font-size: 15px; line-height: 1.45; padding: 8px 12px; border-left: 4px solid #0b5cad;
  background: #f4f8fd; margin-bottom: 8px}
#compare-view .cmp-levels {display: flex; gap: 12px; margin: 6px 0}
#compare-view .cmp-level {border: 2px solid; border-radius: 8px; padding: 2px 8px}
#compare-view .cmp-level .badge {color: #fff; border-radius: 6px; padding: 1px 8px; font-weight: 700}
#compare-view .cmp-stage {margin: 10px 0}
#compare-view .cmp-pair {display: grid; grid-template-columns: 1fr 1fr; gap: 10px}
#compare-view .cmp-col {border: 1px solid #d0d7de; border-radius: 8px; padding: 6px}
#compare-view .cmp-head {font-weight: 700; margin-bottom: 4px}
#compare-view .cmp-metrics {font-weight: 400; color: #334155; font-variant-numeric: tabular-nums}
#compare-view .cmp-row {display: grid; grid-template-columns: 2.2em 4.2em 1.2em 1fr; gap: 4px; padding: 2px 0;
  border-bottom: 1px solid #eef1f4; font-size: 13px}
#compare-view .cmp-row .id, #compare-view .cmp-row .score {color: #64748b; font-size: 11px}
#compare-view .mark {font-weight: 700; text-align: center; border-radius: 4px}
#compare-view .mark-entered .mark {background: #dcfce7; color: #166534}
#compare-view .mark-left .mark {background: #fee2e2; color: #991b1b}
#compare-view .mark-up .mark {color: #166534} #compare-view .mark-down .mark {color: #b45309}
#compare-view .rel {color: #047857; font-weight: 800}
#compare-view .cmp-empty {color: #64748b; font-style: italic}
"""


# ---------------------------------------------------------------------------------------------- rendering
def _metrics_html(m: Mapping[str, Any] | None) -> str:
    if m is None:
        return ""
    first = f"#{m['first_relevant']}" if m["first_relevant"] else "none listed"
    return (
        f'<span class="cmp-metrics"> · nDCG@10 {m["ndcg@10"]:.3f} · Recall@10 {m["recall@10"]:.3f} · '
        f"first relevant {first}</span>"
    )


def _scores(result: RetrievalResult, stage: str) -> dict[str, float]:
    """Each row's score in its stage's own units (BM25, cosine, fused score, final score)."""
    lists: dict[str, Sequence[Hit | FusedHit]] = {
        "bm25": result.bm25.hits,
        "dense": result.dense.hits,
        "rrf": result.fused,
    }
    hits = lists.get(stage)
    if hits is None:
        return {h.parent_id: h.score for h in result.final}
    return {h.chunk_id: h.score for h in hits}


def _row(
    doc: str,
    rank: int,
    diff: ListDiff,
    side: str,
    titles: Mapping[str, str],
    relevant: set[str],
    score: float | None = None,
) -> str:
    mark = diff.marks[doc]
    if side == "b":
        kind, label = mark.kind, mark.label
    else:
        kind, label = ("left", "left") if mark.b_rank is None else (mark.kind, f"B #{mark.b_rank}")
    parent = doc.split("#")[0]
    rel = '<span class="rel" title="relevant">✓</span>' if parent in relevant else "<span></span>"
    return (
        f'<div class="cmp-row mark-{kind}" data-id="{esc(doc)}" data-kind="{kind}" '
        f'data-a-rank="{mark.a_rank or ""}" data-b-rank="{mark.b_rank or ""}">'
        f'<span class="rank">{rank}</span><span class="mark">{esc(label)}</span>{rel}'
        f'<span><span class="title">{esc(titles.get(parent, parent))}</span> '
        f'<span class="id">{esc(doc)}</span>'
        + (f' <span class="score">{score:.5g}</span>' if score is not None else "")
        + "</span></div>"
    )


def _column(
    stage: str,
    side: str,
    diff: ListDiff,
    titles: Mapping[str, str],
    relevant: set[str],
    metrics: Mapping[str, Any] | None,
    scores: Mapping[str, float],
) -> str:
    ids = diff.a if side == "a" else diff.b
    rows = "".join(
        _row(doc, i, diff, side, titles, relevant, scores.get(doc)) for i, doc in enumerate(ids[:ROWS], start=1)
    )
    more = f'<div class="cmp-empty">… {len(ids) - ROWS} more</div>' if len(ids) > ROWS else ""
    return (
        f'<div class="cmp-col" id="cmp-{stage}-{side}"><div class="cmp-head">{side.upper()} · '
        f"{STAGE_TITLES[stage]} ({len(ids)}){_metrics_html(metrics)}</div>"
        f"{rows or '<div class=cmp-empty>empty list</div>'}{more}</div>"
    )


def render_compare(
    a: RetrievalResult,
    b: RetrievalResult,
    titles: Mapping[str, str],
    qrels: Mapping[str, int],
    source: str = "the corpus's labels",
) -> str:
    """Both levels, the summary, and per stage A and B side by side with a diff mark on every row."""
    diffs = diff_results(a, b)
    relevant = {d for d, g in qrels.items() if g > 0}
    ma, mb = stage_metrics(a, qrels), stage_metrics(b, qrels)
    levels = "".join(
        f'<span class="cmp-level level-{esc(r.hybrid_path)}" id="cmp-level-{side}">{side.upper()}'
        f' <span class="badge">{esc(r.hybrid_path)}</span></span>'
        for side, r in (("a", a), ("b", b))
    )
    note = (
        f"relevant cards marked ✓ ({source}); metrics over each list deduped to cards"
        if relevant
        else "no relevance marks for this turn (not a labeled turn, nothing ticked): no metric shown"
    )
    stages = "".join(
        f'<div class="cmp-stage" data-stage="{stage}"><div class="cmp-pair">'
        f"{_column(stage, 'a', diffs[stage], titles, relevant, ma[stage], _scores(a, stage))}"
        f"{_column(stage, 'b', diffs[stage], titles, relevant, mb[stage], _scores(b, stage))}"
        "</div></div>"
        for stage in STAGES
    )
    return (
        f"<div class='cmp-levels'>{levels}</div>"
        f'<div class="cmp-summary" id="cmp-summary">{esc(summarize(a, b, titles))}</div>'
        f'<div class="cmp-note">{esc(note)}</div>{stages}'
    )


def compare_message(text: str) -> str:
    return f"<div class='cmp-empty'>{esc(text)}</div>"
