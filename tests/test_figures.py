"""inspector.figures: rank flow, RRF contributions and k sensitivity from hand-built results."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from inspector import figures, render
from retrieval.fusion import reciprocal_rank_fusion, rrf_terms
from retrieval.types import BranchResult, Chunk, FinalHit, FusedHit, Hit, RerankedHit, RetrievalResult


def chunks_for(ids: list[str]) -> dict[str, Chunk]:
    return {c: Chunk(c, c.split("#")[0], f"Title {c}", "en", "text") for c in ids}


def build(
    bm25_ids: list[str],
    dense_ids: list[str],
    k: int = 60,
    reranked_ids: list[str] | None = None,
    weights: dict[str, float] | None = None,
) -> RetrievalResult:
    """A result whose fused list is computed by the real fusion functions from the two branch lists."""
    weights = weights or {"bm25": 1.0, "dense": 1.0}
    bm25 = BranchResult(
        "bm25",
        tuple(Hit(c, c.split("#")[0], r, 10.0 / r) for r, c in enumerate(bm25_ids, 1)),
        "ok" if bm25_ids else "empty",
        "" if bm25_ids else "BM25 index is empty (simulated)",
    )
    dense = BranchResult("dense", tuple(Hit(c, c.split("#")[0], r, 1 - r / 100) for r, c in enumerate(dense_ids, 1)))
    rankings = {n: ids for n, ids in (("bm25", bm25_ids), ("dense", dense_ids)) if ids}
    w = {n: weights[n] for n in rankings}
    terms = rrf_terms(rankings, k=k, weights=w)
    fused = tuple(
        FusedHit(
            c,
            c.split("#")[0],
            r,
            s,
            {n: terms[c].get(n, (None, 0.0))[0] for n in ("bm25", "dense")},
            {n: terms[c].get(n, (None, 0.0))[1] for n in ("bm25", "dense")},
        )
        for r, (c, s) in enumerate(reciprocal_rank_fusion(rankings, k=k, weights=w), 1)
    )
    fused_rank = {f.chunk_id: f.rank for f in fused}
    reranked = tuple(
        RerankedHit(c, c.split("#")[0], r, 5.0 - r, fused_rank[c]) for r, c in enumerate(reranked_ids or [], 1)
    )
    final = tuple(FinalHit(f.chunk_id, f.parent_id, r, f.score, 0.7) for r, f in enumerate(fused[:3], 1))
    consensus = tuple(sorted(set(bm25_ids) & set(dense_ids)))
    return RetrievalResult(
        "q",
        "full" if reranked else "rrf_only",
        "",
        bm25,
        dense,
        fused,
        reranked,
        final,
        (),
        consensus,
        {},
        {"rrf_k": k, "fusion": "rrf"},
        "ok",
        weights,
    )


CLASS = dict(
    bm25_ids=["A#0", "B#0", "C#0", "D#0"],
    dense_ids=["C#0", "A#0", "E#0", "B#0"],
    reranked_ids=["C#0", "A#0", "B#0", "E#0", "D#0"],
)
CHUNKS = chunks_for(["A#0", "B#0", "C#0", "D#0", "E#0"])


def traces_by_chunk(fig: go.Figure) -> dict[str, go.Scatter]:
    return {t.meta["chunk_id"]: t for t in fig.data}


def test_rank_flow_draws_each_document_through_the_four_stages():
    result = build(**CLASS)
    fig = figures.rank_flow(result, CHUNKS)
    traces = traces_by_chunk(fig)
    assert list(fig.data[0].x) == ["BM25", "Dense", "RRF", "Reranked"]
    assert list(traces["A#0"].y) == [1, 2, 1, 2]
    assert list(traces["C#0"].y) == [3, 1, 2, 1]
    assert list(traces["E#0"].y) == [None, 3, 4, 4]  # not in BM25: the line starts at dense
    assert list(traces["D#0"].y) == [4, None, 5, 5]


def test_rank_flow_emphasises_consensus_and_uses_the_column_colours():
    result = build(**CLASS)
    traces = traces_by_chunk(figures.rank_flow(result, CHUNKS))
    colors = render.doc_colors(result)
    for cid, trace in traces.items():
        both = cid in result.consensus
        assert trace.line.width == (5 if both else 2.5)
        assert trace.line.color == colors[cid.split("#")[0]]
        assert trace.opacity == (1.0 if cid in {h.chunk_id for h in result.final} else 0.35)
    assert {c for c, t in traces.items() if t.line.width == 5} == {"A#0", "B#0", "C#0"}


def test_contributions_stack_to_the_fused_score():
    result = build(**CLASS)
    fig = figures.contributions(result, CHUNKS)
    bm25, dense = fig.data
    assert (bm25.name, dense.name) == ("BM25", "Dense")
    for i, hit in enumerate(result.fused):
        assert bm25.x[i] + dense.x[i] == pytest.approx(hit.score)
    assert bm25.x[0] == pytest.approx(1 / (60 + 1)) and dense.x[0] == pytest.approx(1 / (60 + 2))  # A
    assert bm25.y[0] == "#1 A#0 ★"


def test_k_sensitivity_shows_a_rank_swap_worked_out_by_hand():
    # P is 1st in BM25 only; Q is 4th in both. 1/(k+1) vs 2/(k+4): P leads for k < 2, tie at 2, Q leads after.
    bm25 = ["P#0", "x1#0", "x2#0", "Q#0"]
    dense = ["R#0", "y1#0", "y2#0", "Q#0"]
    result = build(bm25, dense, k=60)
    curves = figures.k_curves(result, [1, 3, 60, 200], top_n=10)
    assert curves["P#0"][0] < curves["Q#0"][0]  # k = 1: 1/2 > 2/5
    assert curves["Q#0"][1] < curves["P#0"][1]  # k = 3: 2/7 > 1/4
    assert curves["Q#0"][2] == 1  # k = 60: consensus wins
    assert [c for c, r in curves.items() if r[2] == 1] == ["Q#0"]


def test_k_sensitivity_agrees_with_the_fused_list_at_the_current_k():
    result = build(**CLASS, k=7)
    curves = figures.k_curves(result, range(1, 201), top_n=5)
    assert {cid: ranks[7 - 1] for cid, ranks in curves.items()} == {h.chunk_id: h.rank for h in result.fused}
    fig = figures.k_sensitivity(result, CHUNKS)
    assert len(fig.data) == 5 and list(fig.data[0].x) == list(range(1, 201))
    assert fig.layout.shapes[0].x0 == 7  # the current k is marked


def test_k_sensitivity_with_one_branch_says_k_cannot_change_the_order():
    result = build([], ["A#0", "B#0"])
    fig = figures.k_sensitivity(result, CHUNKS)
    assert any("one branch only" in a.text for a in fig.layout.annotations)
    assert all(list(t.y) == list(fig.data[i].y[:1]) * 200 for i, t in enumerate(fig.data))


def test_a_failing_chart_returns_a_message_figure_instead_of_raising():
    fig = figures.rank_flow(None, {})  # type: ignore[arg-type]
    assert isinstance(fig, go.Figure)
    assert "could not be drawn" in fig.layout.annotations[0].text
    assert "AttributeError" in fig.layout.annotations[0].text


def test_empty_results_draw_a_message_not_an_empty_axis():
    empty = RetrievalResult(
        "q", "no_match", "no candidate found", BranchResult("bm25"), BranchResult("dense"), (), (), (), (), (), {}
    )
    for builder in (figures.rank_flow, figures.contributions, figures.k_sensitivity):
        fig = builder(empty, {})
        assert len(fig.data) == 0 and "no candidate found" in fig.layout.annotations[0].text


def test_chart_labels_escape_ids_from_the_corpus():
    evil = "<b onmouseover=x>#0"
    result = build([evil, "A#0"], ["A#0"])
    fig = figures.rank_flow(result, chunks_for([evil, "A#0"]))
    names = [t.name for t in fig.data]
    assert all("<b" not in n for n in names) and any("&lt;b onmouseover=x&gt;#0" in n for n in names)


# Plotly renders a subset of HTML in every label it draws (titles, legend names, tick labels, hover text,
# annotations) and decodes only &amp; &lt; &gt; and numeric entities: &quot; would show literally.
LINK = '<a href="https://evil.example/">click</a>'
STYLED = '<span style="font-size:60px">big</span>'


def _all_text(fig: go.Figure) -> str:
    """Every string of the figure as the browser receives it (its JSON), one per line; of a trace's ``meta``, only
    its ``card``, which a hover template draws (``%{meta.card}``): the rest is data plotly never draws."""

    def walk(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for key, value in node.items():
                if key != "meta":
                    yield from walk(value)
                elif isinstance(value, dict) and "card" in value:
                    yield from walk(value["card"])
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    return "\n".join(walk(json.loads(fig.to_json())))


@pytest.mark.parametrize("builder", [figures.rank_flow, figures.contributions, figures.k_sensitivity])
def test_charts_escape_markup_and_keep_quotes_readable(builder):
    ids = [f"{LINK}#0", f"{STYLED}#0", "A#0"]
    chunks = chunks_for(ids)
    chunks["A#0"] = Chunk("A#0", "A", 'Say "stop" & it\'s <done>', "en", "text")
    text = _all_text(builder(build(ids, ["A#0", ids[0]]), chunks))
    assert "<a " not in text and '<span style="font-size:60px' not in text, "user markup reached a chart label"
    assert '&lt;a href="https://evil.example/"&gt;click&lt;/a&gt;' in text
    assert '&lt;span style="font-size:60px"&gt;big&lt;/span&gt;' in text
    assert "&quot;" not in text and "&#x27;" not in text, "quotes escaped for HTML show literally in plotly"
    if builder is not figures.contributions:  # the hover text carries the card title
        assert 'Say "stop" &amp; it\'s &lt;done&gt;' in text


def test_message_figure_keeps_quotes_readable_and_escapes_markup():
    fig = figures.message_figure(f'BM25 failed: "index" missing {LINK}')
    text = fig.layout.annotations[0].text
    assert '"index"' in text and "&quot;" not in text
    assert "<a " not in text and "&lt;a href=" in text


def test_plot_text_escapes_only_what_plotly_decodes():
    assert figures.plot_text("<b>\"x\" & 'y'</b>") == "&lt;b&gt;\"x\" &amp; 'y'&lt;/b&gt;"


def test_evaluation_charts_escape_names_from_a_report_file():
    """A report file is data: its dataset and category names reach plotly as text, not markup (issue 13, 12)."""
    from inspector.evaluation_figures import category_figure, metrics_figure

    row = {"ndcg@10": 0.5, "recall@10": 0.5, "recall@100": 0.5, "mrr@10": 0.5}
    report = {
        "dataset": '<a href="https://evil.example/">x</a>',
        "answerable_turns": 1,
        "configs": {"rrf": row},
        "categories": {"<b>cat</b>": {"turns": 1, "rrf": row}},
    }
    metrics = metrics_figure(report, ["rrf"])
    assert "<a href" not in metrics.layout.title.text and "&lt;a href" in metrics.layout.title.text
    cats = category_figure(report, ["rrf"])
    assert list(cats.data[0].x) == ["&lt;b&gt;cat&lt;/b&gt; (1)"]


def test_log_ticks_are_plain_numbers_in_one_two_five_steps():
    vals, text = figures.log_ticks(0.0045, 0.5)
    assert text == ["0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5"]
    assert vals == [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    assert figures.log_ticks(1, 150)[1] == ["1", "2", "5", "10", "20", "50", "100"]
    assert figures.log_ticks(0.0046, 0.0049)[1] == ["0.002", "0.005"]  # no step inside: the two around it
    assert figures.log_ticks(0.0046, 0.0051)[1] == ["0.002", "0.005", "0.01"]
    with pytest.raises(ValueError, match="positive"):
        figures.log_ticks(0, 1)


def test_every_chart_is_on_the_white_template_as_if_set_by_name():
    """``figures.white`` sets plotly_white without validating it again: the figure is the one setting it by name
    gives, and a chart keeps validating what it is given after it."""
    by_name = go.Figure().update_layout(template="plotly_white")
    assert figures.white(go.Figure()).to_plotly_json() == by_name.to_plotly_json()
    result = build(**CLASS)
    for fig in figures.all_figures(result, CHUNKS):
        assert fig.layout.template == by_name.layout.template
        with pytest.raises(ValueError):
            fig.update_layout(height="tall")
