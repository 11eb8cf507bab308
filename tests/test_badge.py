"""The level badge (inspector.badge): the controls it carries, the pending state, the refusal in plain words, the
timings of a streamed turn, and its chips. Hand-made results (tests/test_render.py's), no model."""

from __future__ import annotations

import dataclasses
import html
import json
import re

from inspector import badge
from retrieval.refusal import RefusalDecision
from retrieval.refusal_tests import RefusalTest
from tests.test_render import INJECTION, make_result


def controls_of(status: str) -> dict:
    found = re.search(r'data-controls="([^"]*)"', status)
    assert found, status[:300]
    return json.loads(html.unescape(found.group(1)))


def test_the_badge_carries_the_controls_its_result_was_computed_with():
    result = make_result(k=17)
    result = dataclasses.replace(result, settings={**result.settings, "hybrid_enabled": True, "not_a_control": 1})
    shown = controls_of(badge.render_status(result))
    assert shown["rrf_k"] == 17 and shown["hybrid_enabled"] is True and "not_a_control" not in shown
    assert controls_of(badge.render_pending_status(result, 8))["rrf_k"] == 17


def test_a_pending_turn_is_neutral_and_laid_out_as_the_final_badge():
    result = make_result(path="rrf_only")
    pending = badge.render_pending_status(result, 12, frozenset({"gs", "error"}))
    done = dataclasses.replace(result, hybrid_path="full", reason="full hybrid: both branches, reranked")
    final = badge.render_status(done, frozenset({"gs", "error"}))
    assert '<span class="badge">reranking…</span>' in pending and "rrf_only" not in pending
    assert "level-pending" in pending and "12" in pending
    # the same rows as the final badge (turn and reason, chips, timings, legend): the columns do not move
    for part in ('class="turn-why"', 'class="reason"', 'class="chips"', 'class="timings"', 'class="legend"'):
        assert part in pending and part in final, part
    # its timings agree with the chips: the branches' own times, rerank and total still running
    assert "BM25 0.5 · dense 10.0 · rerank … · total … ms" in pending
    assert "reranker scoring…" in pending


def test_a_first_streamed_run_reports_the_time_its_branches_took():
    first = make_result()
    first = dataclasses.replace(
        first,
        bm25=dataclasses.replace(first.bm25, ms=0.5),
        dense=dataclasses.replace(first.dense, ms=12.5),
        timings_ms={"bm25": 0.5, "embed_query": 10.0, "chroma_query": 2.5, "fusion": 0.3, "total": 14.0},
    )
    final = dataclasses.replace(
        make_result(),
        timings_ms={"bm25": 0.0, "embed_query": 0.0, "chroma_query": 0.0, "rerank": 300.0, "total": 301.0},
    )
    carried = badge.carry_timings(final, first)
    assert carried.bm25.ms == 0.5 and carried.dense.ms == 12.5
    assert carried.timings_ms["embed_query"] == 10.0 and carried.timings_ms["total"] == 301.0 + 13.0
    assert "BM25 0.5 · dense 12.5" in badge.render_status(carried)
    # the first step ran at a shallower depth (no reranker head): its list may be shorter, its time is the turn's
    shorter = dataclasses.replace(first, bm25=dataclasses.replace(first.bm25, hits=first.bm25.hits[:1]))
    assert badge.carry_timings(final, shorter).bm25.ms == 0.5
    # a branch the first step read from the cache too (an earlier turn ran it) stays "cached"
    cached = dataclasses.replace(first, bm25=dataclasses.replace(first.bm25, ms=0.0))
    assert badge.carry_timings(final, cached).bm25.ms == 0.0


def _decision(refused: bool, tests: tuple[RefusalTest, ...]) -> RefusalDecision:
    return RefusalDecision(
        refused=refused,
        rule="evidence",
        tests=tests,
        unavailable=("cross-encoder: reranker load failure",),
        reason="the best cross-encoder score 2.1 is below 3.0",
    )


def test_a_refusal_says_what_it_means_in_plain_words_first_and_its_evidence_collapsed():
    tests = (
        RefusalTest("cross-encoder", 2.1, 3.0, False, f"best cross-encoder score 2.1 < 3.0 {INJECTION}"),
        RefusalTest("known words", 0, 0, True, "0 of the turn's 3 words occur in the cards ()"),
    )
    result = dataclasses.replace(make_result(path="no_match"), refusal=_decision(True, tests))
    status = badge.render_status(result)
    plain = status.index(badge.REFUSAL_PLAIN)
    evidence = status.index('<details class="refusal-evidence refused"')
    assert plain < evidence  # the sentence first, then the numbers
    assert re.search(r'<details class="refusal-evidence refused">', status)  # collapsed: no "open"
    assert INJECTION not in status and html.escape(INJECTION) in status
    # never self-contradictory: a test whose minimum is 0 checks nothing and does not get a ✓
    assert "✓ 0 of the turn" not in status and "()" not in status
    assert "not checked" in status
    answered = dataclasses.replace(make_result(), refusal=_decision(False, tests[:1]))
    assert badge.REFUSAL_PLAIN not in badge.render_status(answered)


def test_a_branch_reason_on_the_badge_wraps_instead_of_being_cut():
    result = make_result(bm25_status="disabled", path="dense_only")
    result = dataclasses.replace(
        result, bm25=dataclasses.replace(result.bm25, reason="hybrid disabled (RETRIEVAL_HYBRID_ENABLED=false)")
    )
    chip = re.search(r'<span class="chip ([^"]+)">BM25 disabled: ([^<]+)</span>', badge.render_status(result))
    assert chip and "wrap" in chip.group(1).split() and chip.group(2).endswith("ENABLED=false)")
    from pathlib import Path

    css = (Path(badge.__file__).with_name("style.css")).read_text(encoding="utf-8")
    assert re.search(r"\.chip\.wrap \{[^}]*white-space: normal", css)
