"""inspector.render: escaped HTML for the columns, badge, explain and context panels.

The result is built by hand from the class's worked example (BM25 [A, B, C, D], dense [C, A, E, B], k = 60), fused
with the real ``reciprocal_rank_fusion``; expected numbers are written as the class writes them.
"""

from __future__ import annotations

import dataclasses
import html
import re

import pytest

from inspector import badge, html_text, render
from inspector.term_marks import highlight
from retrieval.context import REFUSAL, build_context
from retrieval.fusion import reciprocal_rank_fusion, rrf_terms
from retrieval.types import BranchResult, Chunk, FinalHit, FusedHit, Hit, RerankedHit, RetrievalResult

INJECTION = "<img src=x onerror=alert(1)>"
TEXTS = {
    "a": "GlucoSense GS-40 error E-07 means the strip was used. " * 3,
    "b": "Keep insulin pens in the fridge.",
    "c": f"Card C text {INJECTION} and </div><script>alert(2)</script> end.",
    "d": "Error codes on the GS-60.",
    "e": "Nothing in common.",
}
CHUNKS = {
    f"{p}#0": Chunk(f"{p}#0", p, f"Title {p.upper()}" if p != "c" else f"Evil {INJECTION}", "en", t)
    for p, t in TEXTS.items()
}


def make_result(
    *,
    k: int = 60,
    weights: dict[str, float] | None = None,
    bm25_status: str = "ok",
    path: str = "full",
    query: str = "GS-40 error",
) -> RetrievalResult:
    weights = weights or {"bm25": 1.0, "dense": 1.0}
    bm25_ids = ["a#0", "b#0", "c#0", "d#0"] if bm25_status == "ok" else []
    dense_ids = ["c#0", "a#0", "e#0", "b#0"]
    bm25 = BranchResult(
        "bm25",
        tuple(Hit(c, c[0], r, 10.0 - r) for r, c in enumerate(bm25_ids, 1)),
        bm25_status,
        "" if bm25_status == "ok" else f"BM25 index is {bm25_status} (simulated) {INJECTION}",
    )
    dense = BranchResult("dense", tuple(Hit(c, c[0], r, 0.9 - r / 10) for r, c in enumerate(dense_ids, 1)))
    rankings = {n: ids for n, ids in (("bm25", bm25_ids), ("dense", dense_ids)) if ids}
    terms = rrf_terms(rankings, k=k, weights={n: weights[n] for n in rankings})
    fused = tuple(
        FusedHit(
            cid,
            cid[0],
            rank,
            score,
            {n: terms[cid].get(n, (None, 0.0))[0] for n in ("bm25", "dense")},
            {n: terms[cid].get(n, (None, 0.0))[1] for n in ("bm25", "dense")},
        )
        for rank, (cid, score) in enumerate(
            reciprocal_rank_fusion(rankings, k=k, weights=rankings and {n: weights[n] for n in rankings}), 1
        )
    )
    if path == "no_match":
        cut = tuple(
            FinalHit(f.chunk_id, f.parent_id, 0, f.score, 0.2, False, "similarity 0.200 < MIN_SIMILARITY 0.55")
            for f in fused[:2]
        )
        return RetrievalResult(
            query,
            "no_match",
            "no answer, the assistant refuses: no candidate passed the similarity threshold",
            bm25,
            dense,
            fused,
            (),
            (),
            cut,
            (),
            {"total": 3.0},
            {"rrf_k": k, "top_k": 3, "min_similarity": 0.55},
        )
    fused_rank = {f.chunk_id: f.rank for f in fused}
    scored = [
        (c, x) for c, x in [("c#0", 5.0), ("a#0", 4.0), ("b#0", 1.0), ("e#0", -2.0), ("d#0", -3.0)] if c in fused_rank
    ]
    reranked = tuple(RerankedHit(cid, cid[0], r, logit, fused_rank[cid]) for r, (cid, logit) in enumerate(scored, 1))
    final = (FinalHit("c#0", "c", 1, 5.0, 0.8), FinalHit("a#0", "a", 2, 4.0, 0.7), FinalHit("b#0", "b", 3, 1.0, 0.6))
    cut = (FinalHit("e#0", "e", 0, -2.0, 0.3, False, "beyond top_k=3"),)
    consensus = tuple(sorted(set(bm25_ids) & set(dense_ids)))
    return RetrievalResult(
        query,
        path,
        "BM25 + dense fused with RRF, then reranked by the cross-encoder",
        bm25,
        dense,
        fused,
        reranked,
        final,
        cut,
        consensus,
        {"bm25": 0.5, "embed_query": 10.0, "rerank": 30.0, "total": 45.0},
        {"rrf_k": k, "top_k": 3, "min_similarity": 0.55, "fusion": "rrf"},
        "ok",
        weights,
    )


@pytest.fixture()
def res() -> RetrievalResult:
    return make_result()


def columns(result: RetrievalResult) -> dict[str, str]:
    colors = render.doc_colors(result)
    terms = render.query_terms(result.query)
    return {
        "bm25": render.render_branch(result, "bm25", CHUNKS, colors, terms),
        "dense": render.render_branch(result, "dense", CHUNKS, colors, terms),
        "rrf": render.render_fused(result, CHUNKS, colors, terms),
        "reranked": render.render_final(result, CHUNKS, colors, terms, REFUSAL),
    }


def rows(html: str) -> list[tuple[str, str, str]]:
    """(class, chunk id, colour) of every row."""
    return re.findall(r'<div class="(hit[^"]*)" style="--doc:([^"]+)" data-chunk="([^"]+)"', html)


def test_fmt5_rounds_half_up_like_the_class():
    assert html_text.fmt5(1 / 61 + 1 / 62) == "0.03252"
    assert html_text.fmt5(1 / 63 + 1 / 61) == "0.03227"
    assert html_text.fmt5(1 / 64) == "0.01563"  # 0.015625: half up, not half to even
    assert html_text.fmt5(0.000025) == "0.00003"
    assert html_text.fmt5(0.000015) == "0.00002"


def test_fused_rows_show_both_branch_ranks_and_the_arithmetic(res):
    html = columns(res)["rrf"]
    assert "1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252" in html  # A
    assert "1/(60+3) + 1/(60+1) = 0.01587 + 0.01639 = 0.03227" in html  # C
    assert "1/(60+2) + 1/(60+4) = 0.01613 + 0.01563 = 0.03175" in html  # B
    assert "1/(60+4) = 0.01563" in html  # D, BM25 only
    assert "1/(60+3) = 0.01587" in html  # E, dense only
    assert "BM25 #1 · dense #2" in html
    assert [cid for _, _, cid in rows(html)] == ["a#0", "c#0", "b#0", "e#0", "d#0"]  # the class's fused order


def test_weighted_rrf_shows_the_weight_in_the_formula():
    html = columns(make_result(weights={"bm25": 0.5, "dense": 2.0}))["rrf"]
    assert "0.5/(60+1) + 2/(60+2)" in html
    assert "w_bm25=0.5 · w_dense=2" in html


def test_every_column_lists_its_stage_in_its_own_units(res):
    cols = columns(res)
    assert len(rows(cols["bm25"])) == 4 and "BM25 9.00" in cols["bm25"]
    assert len(rows(cols["dense"])) == 4 and "cosine 0.800" in cols["dense"]
    assert "cross-encoder 5.000 · fused #2 · cos 0.800" in cols["reranked"]


def test_consensus_rows_are_marked_and_a_document_keeps_its_colour_everywhere(res):
    cols = columns(res)
    colour_of: dict[str, str] = {}
    for column in cols.values():
        for cls, colour, cid in rows(column):
            assert colour_of.setdefault(cid, colour) == colour, f"{cid} changes colour between columns"
            assert ("consensus" in cls) == (cid in res.consensus)
    assert set(res.consensus) == {"a#0", "b#0", "c#0"}
    assert len(set(colour_of.values())) == len(colour_of)  # five documents, five colours
    assert "★ both" in cols["bm25"]


def test_cut_candidates_stay_visible_greyed_with_why(res):
    html = columns(res)["reranked"]
    assert [(cls, cid) for cls, _, cid in rows(html)] == [
        ("hit consensus", "c#0"),
        ("hit consensus", "a#0"),
        ("hit consensus", "b#0"),
        ("hit cut", "e#0"),
    ]
    assert "✂ beyond top_k=3" in html


def test_dropped_branch_shows_status_and_reason_not_an_empty_list():
    result = make_result(bm25_status="empty", path="dense_only")
    html = columns(result)["bm25"]
    assert rows(html) == []
    assert 'class="dropped"' in html and "empty" in html
    assert "BM25 index is empty (simulated)" in html
    assert "BM25 empty" in badge.render_status(result) or "BM25 index is empty" in badge.render_status(result)


def test_everything_from_the_corpus_or_the_turn_is_escaped():
    result = make_result(bm25_status="failed", query=INJECTION)
    html = "".join(columns(result).values()) + badge.render_status(result) + render.render_message(INJECTION)
    html += render.render_explain(result, "c#0", CHUNKS)
    html += render.render_context(build_context(make_result(), CHUNKS, 1000))
    assert "<img" not in html and "<script" not in html and "</div><script>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_highlight_marks_exactly_the_tokens_bm25_matches():
    terms = render.query_terms("GS-40 error?")
    assert terms == {"gs", "40", "error"}
    out = highlight("GlucoSense GS-40: Error E-07 <b>", terms)
    assert out == "GlucoSense <mark>GS</mark>-<mark>40</mark>: <mark>Error</mark> E-07 &lt;b&gt;"


def test_highlight_follows_the_snowball_tokenizer_when_bm25_uses_it():
    terms = render.query_terms("missed doses", "snowball")
    out = highlight("If you miss a dose", terms, tokenizer="snowball", lang="en")
    assert out == "If you <mark>miss</mark> a <mark>dose</mark>"


def test_highlight_marks_cjk_bigrams_once_with_the_text_escaped():
    terms = render.query_terms("冷蔵庫は<必要>?")  # 冷蔵 蔵庫 庫は は必 必要
    out = highlight("インスリンは冷蔵庫で<保管>。必要なら", terms)
    # "冷蔵" and "蔵庫" overlap: one mark over 冷蔵庫, 蔵 not repeated; the lone "必要" run is its own mark
    assert out == "インスリンは<mark>冷蔵庫</mark>で&lt;保管&gt;。<mark>必要</mark>なら"
    assert re.sub(r"<[^>]+>", "", out) == "インスリンは冷蔵庫で&lt;保管&gt;。必要なら"
    # a mark is common only if every bigram in it is; the window (no spaces to cut at) never repeats a character
    assert highlight("冷蔵庫", terms, common=frozenset({"冷蔵"})) == "<mark>冷蔵庫</mark>"
    assert highlight("冷蔵庫", terms, common=frozenset({"冷蔵", "蔵庫"})) == '<mark class="common">冷蔵庫</mark>'
    text = "あ" * 300 + "冷蔵庫" + "い" * 300
    cut = highlight(text, terms, window=40)
    plain = re.sub(r"<[^>]+>", "", cut).strip("…")
    assert "<mark>冷蔵庫</mark>" in cut and plain in text and len(plain) == 40


def test_highlight_marks_whole_words_with_their_marks_in_either_normal_form():
    """A turn typed composed ("café") marks the card's decomposed "cafe\u0301" whole (the offsets are the card's
    own), and a Hindi word with its vowel signs; the marks are not split off the word or left outside the mark."""
    terms = render.query_terms("café दवा")
    out = highlight("Le cafe\u0301 <noir> et la दवा, pas दव.", terms)
    assert out == "Le <mark>cafe\u0301</mark> &lt;noir&gt; et la <mark>दवा</mark>, pas दव."
    assert highlight("Le café", render.query_terms("cafe\u0301")) == "Le <mark>café</mark>"


def test_snippet_window_starts_near_the_first_match():
    text = "filler " * 60 + "the GS-40 shows E-07 " + "tail " * 60
    out = highlight(text, render.query_terms("GS-40"), window=80)
    assert out.startswith("…") and out.endswith("…")
    assert "<mark>GS</mark>-<mark>40</mark>" in out
    assert len(re.sub(r"<[^>]+>", "", out)) <= 84


def test_status_badge_names_the_level_the_why_and_the_timings():
    html = badge.render_status(make_result(bm25_status="empty", path="dense_only"))
    assert 'class="status level-dense_only"' in html and ">dense_only<" in html
    assert "Dense only" in html
    assert "bm25 0.5 ms" in html and "total 45.0 ms" in html


def test_no_match_shows_the_refusal_and_keeps_cut_candidates(res):
    result = make_result(path="no_match")
    html = columns(result)["reranked"]
    assert REFUSAL.replace("'", "&#x27;") in html
    assert [cls for cls, _, _ in rows(html)] == ["hit cut", "hit cut"]
    assert "similarity 0.200 &lt; MIN_SIMILARITY 0.55" in html


def test_explain_gives_every_stage_and_the_arithmetic(res):
    html = render.render_explain(res, "a#0", CHUNKS)
    text = re.sub(r"<[^>]+>", "|", html)
    assert "BM25||#1||BM25 score 9.00" in text
    assert "Dense||#2||cosine 0.700" in text
    assert "RRF fused||#1||score = Σ w/(k + rank) = 1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252" in text
    assert "Reranked||#2||cross-encoder logit 4.000 (was fused #1)" in text
    assert "Final||#2||card kept, cos 0.700 ≥ 0.55" in text
    cut = re.sub(r"<[^>]+>", "|", render.render_explain(res, "d#0", CHUNKS))
    assert "Dense||–||not in its top 4" in cut and "never reached the final list" in cut


def test_explain_choices_cover_every_listed_sub_chunk_in_fused_order(res):
    assert [cid for _, cid in render.explain_choices(res, CHUNKS)] == ["a#0", "c#0", "b#0", "e#0", "d#0"]
    assert render.explain_choices(res, CHUNKS)[0][0] == "#1 Title A (a#0)"


def test_context_panel_shows_budget_and_dropped_cards(res):
    ctx = build_context(res, CHUNKS, budget=40)
    html = render.render_context(ctx)
    assert "Dropped for the budget" in html
    assert "&lt;card id=&quot;c&quot;" in html  # the exact block text, escaped for HTML
    assert f"of {ctx.budget} tokens" in html


def test_common_query_terms_are_marked_faintly_and_the_window_starts_at_a_rare_one():
    terms = render.query_terms("a pill marked C2")
    text = "A weekly box is a good idea. " * 8 + "The pill marked C2 is digoxin."
    out = highlight(text, terms, common=frozenset({"a"}), window=60)
    assert out.startswith("…") and "<mark>C2</mark>" in out and "<mark>pill</mark>" in out
    full = highlight("a pill", terms, common=frozenset({"a"}))
    assert full == '<mark class="common">a</mark> <mark>pill</mark>'
    legend = badge.render_status(make_result(), terms, frozenset({"a"}))
    assert "<mark>rare</mark>: c2, marked, pill" in legend and "low IDF): a" in legend


def test_refusal_evidence_is_shown_escaped_with_the_failed_test(mini, mini_settings):
    """The badge carries the refusal rule's tests (issue 14): the failed one marked, every value escaped."""
    from inspector.badge import render_refusal, render_status

    result = mini.retrieve("<b>asdfghjkl</b> qwertyuiop", mini_settings)
    assert result.hybrid_path == "no_match" and result.refusal is not None and result.refusal.refused
    html_out = render_status(result)
    assert 'class="refusal-evidence refused"' in html_out and "<b>asdfghjkl" not in html_out and "&lt;b&gt;" in html_out
    failed = [t for t in result.refusal.tests if not t.passed]
    assert failed and html_out.count('class="fail"') == len(failed)
    answered = mini.retrieve("GlucoSense GS-40 error E-07", mini_settings)
    assert answered.refusal is not None and not answered.refusal.refused
    assert "<b>answered</b>" in render_refusal(answered) and 'class="note"' not in render_refusal(answered)
    near = render_refusal(mini.retrieve("GlucoSense GS-40 error E-07 on my printer", mini_settings))
    assert 'class="note"' in near and "1 word no card uses ('printer'): not judged" in html.unescape(near)
    assert render_refusal(mini.retrieve("GS-40 E-07", mini_settings.replace(refusal_rule="cosine"))) == ""


def test_one_hit_is_one_hit():
    result = make_result()
    one = dataclasses.replace(result, bm25=dataclasses.replace(result.bm25, hits=result.bm25.hits[:1]))
    assert "1 hit ·" in columns(one)["bm25"] and "1 hits" not in columns(one)["bm25"]
    assert "4 hits ·" in columns(result)["bm25"] and html_text.plural(0, "hit") == "0 hits"


def test_with_hybrid_off_the_fused_column_shows_no_bm25_weight():
    result = dataclasses.replace(
        make_result(bm25_status="disabled", path="dense_only", weights={"bm25": 2.0, "dense": 1.0}),
        weight_reason="exact tokens in the turn (gs-40): BM25 weight x2",
    )
    fused = columns(result)["rrf"]
    assert "w_bm25" not in fused and "BM25 weight x2" not in fused and "w_dense=1" in fused
    both = dataclasses.replace(make_result(weights={"bm25": 2.0, "dense": 1.0}), weight_reason="BM25 weight x2")
    assert "w_bm25=2" in columns(both)["rrf"] and "BM25 weight x2" in columns(both)["rrf"]
