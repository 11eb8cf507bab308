import pytest

from retrieval.weighting import LEXICAL_BOOST, choose_weights, turn_features


@pytest.mark.parametrize(
    ("turn", "features"),
    [
        ("GlucoSense GS-40 error E-07", ("code",)),
        ("PP-200 alarm A-15", ("code",)),
        ("missed my Glucavex 500 mg", ("unit",)),
        ("10 units of insulin", ("unit",)),
        ('what does "drop symbol" mean', ("quote",)),
        ("my sugar meter keeps beeping and shows a weird message after I changed the strips", ("long",)),
        ("how do I store insulin", ()),
        # CJK: about a word per two characters, not per bigram (13 bigrams of a 7-word question are not 12 words)
        ("インスリンは冷蔵庫で保管しますか", ()),
        ("血糖測定器の画面に変なメッセージが出て、試験紙を替えてもずっと鳴り続けます", ("long",)),
    ],
)
def test_features(turn, features):
    assert turn_features(turn) == features


def test_lexical_turn_leans_to_bm25():
    w = choose_weights("GS-40 E-07", 1.0, 1.5, "auto")
    assert (w.bm25, w.dense) == (1.0 * LEXICAL_BOOST, 1.5)
    assert "code" in w.reason


def test_off_keeps_the_configured_weights():
    w = choose_weights("GS-40 E-07", 1.0, 1.5, "off")
    assert (w.bm25, w.dense, w.features) == (1.0, 1.5, ())


# ------------------------------------------------------------------------- adaptive: branch evidence and the rule
from retrieval.bm25 import BM25Index  # noqa: E402
from retrieval.types import Chunk, Hit  # noqa: E402
from retrieval.weighting import (  # noqa: E402
    EVIDENCE_DOWN,
    LOW_COVERAGE,
    BranchEvidence,
    TurnWeights,
    adapt_weights,
    branch_evidence,
)

TEXTS = {
    "gs40": "GlucoSense GS-40 meter error E-07 means the strip was removed too early",
    "gs60": "GlucoSense GS-60 meter error E-09 means the meter is too cold",
    "insulin": "Keep unopened insulin pens in the refrigerator, not the freezer",
    "missed": "If you forget a dose of your tablet, take it with your next meal",
    "travel": "Carry your medicines in your hand luggage when you fly",
    "sharps": "Put used needles in a sharps container, never in the household bin",
}
CHUNKS = [Chunk(f"{p}#0", p, "", "en", t) for p, t in TEXTS.items()]


@pytest.fixture(scope="module")
def index():
    return BM25Index(CHUNKS, "snowball")


def hits(index, query, depth=10):
    return index.search(query, depth)


def dense_list(*parents, top=0.80, step=0.01):
    return tuple(Hit(f"{p}#0", p, r, top - step * (r - 1)) for r, p in enumerate(parents, 1))


def evidence(**kw):
    base = dict(
        terms=4, matched=4, coverage=0.4, bm25_gap=0.5, dense_gap=0.05, overlap=3, language="en", english_only=True
    )
    return BranchEvidence(**{**base, **kw})


def test_coverage_is_high_when_the_top_chunk_holds_the_rare_terms(index):
    q = "GS-40 error E-07 strip removed"
    ev = branch_evidence(q, hits(index, q), dense_list("gs40", "gs60", "insulin"), index, "bge-small-en-v1.5")
    assert ev.terms == ev.matched >= 4
    assert ev.coverage >= 2 * LOW_COVERAGE
    assert ev.language == "en" and ev.english_only


def test_coverage_is_low_when_the_turn_words_are_unknown_to_the_index(index):
    q = "acetaminophen overdose hepatotoxicity threshold meter"
    ev = branch_evidence(q, hits(index, q), dense_list("gs40", "gs60"), index, "bge-small-en-v1.5")
    assert ev.matched == 1 < ev.terms
    assert ev.coverage < LOW_COVERAGE


def test_no_bm25_hit_means_zero_coverage_and_no_overlap(index):
    q = "acetaminophen hepatotoxicity"
    ev = branch_evidence(q, (), dense_list("gs40", "gs60"), index, "bge-small-en-v1.5")
    assert (ev.coverage, ev.bm25_gap, ev.overlap, ev.matched) == (0.0, 0.0, 0, 0)


def test_gaps_and_overlap_from_hand_made_lists():
    bm25 = tuple(
        Hit(f"{p}#0", p, r, s)
        for r, (p, s) in enumerate([("a", 10.0), ("b", 8.0), ("c", 5.0), ("a", 4.0), ("d", 2.0)], 1)
    )
    dense = dense_list("c", "e", "b", "f", top=0.9, step=0.1)
    ev = branch_evidence("anything", bm25, dense)
    assert ev.bm25_gap == pytest.approx((10.0 - 2.0) / 10.0)  # fewer than 10 hits: the last one
    assert ev.dense_gap == pytest.approx(0.9 - 0.6)
    assert ev.overlap == 2  # b and c; the repeated card a counts once
    assert ev.coverage == 0.0 and ev.terms == 0  # no index: the turn's terms are unknown


def test_low_coverage_halves_bm25_and_says_why():
    base = TurnWeights(1.0, 2.0, (), "no lexical signal: configured weights")
    w = adapt_weights(base, evidence(coverage=0.12, matched=2, terms=5))
    assert (w.bm25, w.dense) == (1.0 * EVIDENCE_DOWN, 2.0)
    assert "low_coverage" in w.features
    assert "12%" in w.reason and f"< {LOW_COVERAGE:.0%}" in w.reason and "2/5" in w.reason
    assert w.reason.startswith(base.reason)


def test_neutral_evidence_keeps_the_weights_and_reports_the_numbers():
    mid = (LOW_COVERAGE + 1.0) / 2
    w = adapt_weights(TurnWeights(1.0, 2.0, (), "base"), evidence(coverage=mid, overlap=4))
    assert (w.bm25, w.dense) == (1.0, 2.0)
    assert "neutral" in w.reason and f"{mid:.0%}" in w.reason and "overlap 4" in w.reason


def test_language_and_high_coverage_are_reported_but_move_nothing():
    w = adapt_weights(TurnWeights(1.0, 2.0, (), "base"), evidence(coverage=1.0, language="es"))
    assert (w.bm25, w.dense, w.features) == (1.0, 2.0, ())
    assert w.evidence["language"] == "es" and w.evidence["coverage"] == 1.0


def test_adaptive_without_evidence_falls_back_to_auto_and_says_so():
    auto = choose_weights("GS-40 E-07", 1.0, 2.0, "auto")
    w = choose_weights("GS-40 E-07", 1.0, 2.0, "adaptive")
    assert (w.bm25, w.dense) == (auto.bm25, auto.dense)
    assert "no branch evidence" in w.reason


def test_adaptive_builds_on_auto():
    w = choose_weights("GS-40 E-07", 1.0, 2.0, "adaptive", evidence(coverage=0.1))
    assert w.bm25 == 1.0 * LEXICAL_BOOST * EVIDENCE_DOWN and "code" in w.reason and "10%" in w.reason


def test_the_pipeline_reports_adaptive_weights_and_their_evidence(mini, mini_settings):
    r = mini.retrieve("GlucoSense GS-40 error E-07", mini_settings.replace(query_weighting="adaptive"))
    assert r.weight_evidence["terms"] >= 4 and 0.0 <= r.weight_evidence["coverage"] <= 1.0
    assert "; then " in r.weight_reason
    rebuilt = adapt_weights(
        choose_weights(r.query, mini_settings.bm25_weight, mini_settings.dense_weight, "auto"),
        BranchEvidence(**r.weight_evidence),
    )
    assert r.weights == rebuilt.as_dict() and r.weight_reason == rebuilt.reason
    assert r.to_dict()["weight_evidence"] == r.weight_evidence
    auto = mini.retrieve("GlucoSense GS-40 error E-07", mini_settings.replace(query_weighting="auto"))
    assert auto.weight_evidence == {} and "then" not in auto.weight_reason


def test_adaptive_on_one_branch_keeps_auto_weights(mini, mini_settings):
    r = mini.retrieve(
        "GlucoSense GS-40 error E-07", mini_settings.replace(query_weighting="adaptive", simulate_empty_bm25=True)
    )
    assert r.hybrid_path == "dense_only" and r.weight_evidence == {}
    assert "no branch evidence" in r.weight_reason


def test_the_inspector_shows_the_weights_their_reason_and_the_evidence(mini, mini_settings):
    from inspector import html_text, render

    r = mini.retrieve("GlucoSense GS-40 error E-07", mini_settings.replace(query_weighting="adaptive"))
    html = render.render_fused(r, mini.by_id, render.doc_colors(r), frozenset())
    assert f"w_bm25={r.weights['bm25']:g}" in html
    assert html_text.esc(r.weight_reason) in html
    ev = r.weight_evidence
    assert f"BM25 coverage {ev['coverage']:.0%}" in html and f"{ev['matched']}/{ev['terms']} turn terms" in html
    assert f"top-10 overlap {ev['overlap']}/10" in html and "(English-only embedder)" in html
    assert "branch evidence" not in render.render_fused(
        mini.retrieve("GlucoSense GS-40 error E-07", mini_settings), mini.by_id, {}, frozenset()
    )
