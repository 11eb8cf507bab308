"""The classroom's exercises below the page: checking an answer, the class's rounding (five decimals, half up), the
reveal's terms, the ready set, class-link sets, exercises made from real turns. Expected values are written as the
formula or as the class prints them."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

import pytest

from retrieval.exercise_set import HYBRID_LOSS_FILE, HYBRID_LOSS_TURN, MAX_SET, hybrid_loss, parse_set, ready
from retrieval.exercises import Exercise, check, exact_scores, expected_answer, hint, reveal, round5

READY = ready()


def ex(name: str) -> Exercise:
    return READY[name]


# ------------------------------------------------------------------------------------------------- rounding
def test_the_class_rounding_is_five_decimals_half_up_on_the_exact_value():
    assert round5(Fraction(1, 64)) == Decimal("0.01563")  # 0.015625: half up, not half even (0.01562)
    assert round5(Fraction(1, 61) + Fraction(1, 62)) == Decimal("0.03252")
    assert round5(Fraction(1, 63) + Fraction(1, 61)) == Decimal("0.03227")
    assert round5(Fraction(1, 320)) == Decimal("0.00313")  # 0.003125 exactly, not a float's neighbour
    assert round5(Fraction(-1, 64)) == Decimal("-0.01563")
    assert round5(0.5) == Decimal("0.50000")


def test_worked_example_reveal_prints_the_class_arithmetic():
    r = reveal(ex("worked-example"))
    assert r.answer == "A, C, B, E, D"
    assert r.fusion_line == "A (0.03252) > C (0.03227) > B (0.03175) > E (0.01587) > D (0.01563)"
    lines = [row.line for row in r.rows]
    assert lines == [
        "RRF(A) = 1/(60+1) + 1/(60+2) = 0.01639 + 0.01613 = 0.03252",
        "RRF(C) = 1/(60+3) + 1/(60+1) = 0.01587 + 0.01639 = 0.03227",
        "RRF(B) = 1/(60+2) + 1/(60+4) = 0.01613 + 0.01563 = 0.03175",
        "RRF(E) = 1/(60+3) = 0.01587   (only in Dense)",
        "RRF(D) = 1/(60+4) = 0.01563   (only in BM25)",
    ]
    s = exact_scores(ex("worked-example"))
    assert s["A"] == Fraction(1, 60 + 1) + Fraction(1, 60 + 2) and s["D"] == Fraction(1, 60 + 4)


# ------------------------------------------------------------------------------------------------- checking
@pytest.mark.parametrize("answer", ["A, C, B, E, D", "a c b e d", "A > C > B > E > D", " A;C;B;E;D "])
def test_the_right_order_is_right_however_it_is_written(answer):
    v = check(ex("worked-example"), answer)
    assert v.correct and v.summary == "Right: A, C, B, E, D."


def test_a_wrong_order_says_what_is_right_and_what_differs():
    v = check(ex("worked-example"), "A, B, C, E, D")
    assert not v.correct and v.understood and v.summary == "Not yet: 3 of 5 places are right."
    assert v.details[0] == "Right place: #1 A, #4 E, #5 D."
    assert "#2: you wrote B" in v.details[1] and "#3: you wrote C" in v.details[2]
    v = check(ex("worked-example"), "A, C, B")
    assert not v.correct and any(d.startswith("Missing: E, D") for d in v.details)
    v = check(ex("worked-example"), "A, A, C, B, E, D")
    assert not v.correct and any("more than once" in d for d in v.details)


@pytest.mark.parametrize("answer", ["", "   ", None, 42, "A, X, <script>", "x" * 500])
def test_an_unreadable_answer_is_not_checked_and_says_how_to_write_it(answer):
    v = check(ex("worked-example"), answer)
    assert not v.correct and not v.understood and v.summary


def test_a_score_is_compared_to_five_decimals_half_up():
    one = ex("one-branch-only")
    assert expected_answer(one) == "0.01563"
    assert check(one, "0.01563").correct and check(one, "0,01563").correct and check(one, ".015625").correct
    low = check(one, "0.01562")  # half even, or truncation: the classic slip
    assert not low.correct and "too low" in low.summary and "round half up" in low.details[0]
    short = check(one, "0.0156")
    assert not short.correct and "five decimals" in short.details[0]
    assert not check(one, "1/64").understood


def test_winner_rank_and_case():
    assert check(ex("k-small"), "z").correct and check(ex("k-large"), "A").correct
    v = check(ex("k-large"), "Z")
    assert not v.correct and v.summary == "Not Z: fusion puts it #2."
    assert not check(ex("k-small"), "Z, A").understood
    real = hybrid_loss()
    assert real is not None and real.kind == "rank"
    assert check(real, expected_answer(real)).correct and check(real, "#" + expected_answer(real)).correct
    assert "lower" in check(real, "1").summary and not check(real, "two").understood


def test_k_small_and_k_large_change_the_winner():
    small, large = ex("k-small"), ex("k-large")
    assert small.lists == large.lists and (small.k, large.k) == (1, 60)
    s, big = exact_scores(small), exact_scores(large)
    assert s["Z"] == Fraction(1, 1 + 1) + Fraction(1, 1 + 4) > s["A"] == Fraction(2, 1 + 2)
    assert big["A"] == Fraction(2, 60 + 2) > big["Z"] == Fraction(1, 60 + 1) + Fraction(1, 60 + 4)
    assert (expected_answer(small), expected_answer(large)) == ("Z", "A")


def test_a_tie_is_broken_by_id():
    t = ex("tie")
    s = exact_scores(t)
    assert s["M"] == s["K"] == Fraction(1, 61) + Fraction(1, 62) and s["C"] == s["D"] == Fraction(1, 63)
    assert expected_answer(t) == "K, M, C, D"  # K before M: ids ascending, not the BM25 order
    assert not check(t, "M, K, C, D").correct


def test_weighted_rrf_moves_c_above_a():
    w = ex("weighted")
    s = exact_scores(w)
    assert s["C"] == Fraction(1, 60 + 3) + Fraction(2, 60 + 1) and s["A"] == Fraction(1, 60 + 1) + Fraction(2, 60 + 2)
    assert expected_answer(w) == "C, A, B, E, D"
    assert reveal(w).rows[0].line == "RRF(C) = 1/(60+3) + 2/(60+1) = 0.01587 + 0.03279 = 0.04866"


def test_raw_sum_against_min_max_against_rrf():
    raw = ex("raw-vs-minmax-vs-rrf")
    assert expected_answer(raw) == "A, B, C, D, E"  # BM25's order: the larger scale decides
    methods = reveal(raw).methods
    assert [d for d, _ in methods["raw_sum"]] == ["A", "B", "C", "D", "E"]
    assert dict(methods["raw_sum"])["A"] == round5(Fraction("12.4") + Fraction("0.79"))
    assert [d for d, _ in methods["min_max"]] == ["A", "C", "E", "B", "D"]
    assert [d for d, _ in methods["rrf"]] == ["A", "C", "B", "E", "D"]
    assert check(raw, "A, B, C, D, E").correct and not check(raw, "A, C, B, E, D").correct


def test_hints_come_one_at_a_time_and_end():
    w = ex("worked-example")
    assert hint(w, 0) == w.hints[0] and hint(w, len(w.hints)) is None and hint(w, -1) is None
    for e in READY.values():
        assert e.hints and e.lesson and e.source, e.id
        for h in e.hints:  # a hint never gives the answer away
            assert expected_answer(e) not in h or e.kind in ("winner", "rank"), (e.id, h)


# ------------------------------------------------------------------------------------------ sets and validation
def test_ready_set_follows_the_class():
    assert list(READY)[:3] == ["worked-example", "one-branch-only", "k-small"]
    assert {"tie", "weighted", "raw-vs-minmax-vs-rrf", "hybrid-not-always"} <= set(READY)


def test_parse_set_reports_and_drops_what_it_cannot_open():
    ids, problems = parse_set("worked-example,tie,worked-example")
    assert ids == ["worked-example", "tie"] and problems == []
    ids, problems = parse_set("tie,<script>alert(1)</script>,nope")
    assert (
        ids == ["tie"] and len(problems) == 1 and "no exercise named '<script>alert(1)</script>', 'nope'" in problems[0]
    )
    ids, problems = parse_set(",".join(list(READY) * 3))
    assert len(ids) == min(len(READY), MAX_SET)
    assert parse_set(None) == ([], []) and parse_set("") == ([], [])


def test_exercise_round_trips_and_bad_definitions_say_what_to_fix():
    for e in READY.values():
        assert Exercise.from_dict(json.loads(json.dumps(e.to_dict()))) == e
    good = ex("worked-example").to_dict()
    for change, message in [
        ({"kind": "guess"}, "kind 'guess' is not one of"),
        ({"k": 0}, "k must be a positive whole number"),
        ({"lists": {"BM25": ["A", "A"]}}, "names an id twice"),
        ({"lists": {"BM25": ["<b>x</b>"]}}, "is not an id"),
        ({"weights": {"Other": 2}}, "weights are 0 to 10"),
        ({"kind": "score", "target": "Q"}, "needs a target that is in the lists"),
        ({"id": "bad id"}, "its id is letters"),
    ]:
        with pytest.raises(ValueError, match=message):
            Exercise.from_dict({**good, **change})
    with pytest.raises(ValueError, match="needs the field 'kind'"):
        Exercise.from_dict({k: v for k, v in good.items() if k != "kind"})


# ------------------------------------------------------------------------------------------- from real turns
def test_exercise_from_a_turn_uses_its_branch_lists_k_and_weights(mini, mini_settings):
    from retrieval.exercise_turns import card_lists, exercise_from_result
    from retrieval.parents import best_per_parent

    result = mini.retrieve("GS-40 E-09", mini_settings)
    titles = {c.parent_id: c.title for c in mini.chunks}
    e = exercise_from_result(result, titles.__getitem__)
    lists = card_lists(result)
    assert lists["BM25"] == [h.parent_id for h in best_per_parent(result.bm25.hits)][:5]
    letters = {e.lists[name][i]: card for name, cards in lists.items() for i, card in enumerate(cards)}
    assert all(e.labels[letter] == f"{titles[card]} ({card})" for letter, card in letters.items())
    assert (
        e.k == mini_settings.rrf_k
        and e.kind == "order"
        and e.weights == {{"bm25": "BM25", "dense": "Dense"}[n]: w for n, w in result.weights.items()}
    )
    assert check(e, expected_answer(e)).correct


def test_the_shipped_hybrid_loss_is_what_the_pipeline_gives(shipped, shipped_settings):
    """The real-turn exercise is not copied by hand: the pipeline, run now on the shipped labeled turn, gives the
    same lists, labels and answer, and fusion ranks the relevant card below its rank in one branch alone."""
    from retrieval.corpus import load_shipped
    from retrieval.exercise_turns import build_hybrid_loss, ex_branch_ranks, hybrid_losses

    dataset = load_shipped(shipped_settings.corpus_path)
    losses = hybrid_losses(dataset, shipped, shipped_settings, only=[HYBRID_LOSS_TURN])
    assert len(losses) == 1, "the shipped turn no longer shows the loss: run scripts/hybrid_loss_exercise.py"
    loss = losses[0]
    best = min(r for r in loss.branch_ranks.values() if r)
    assert loss.fused_rank > best
    rebuilt = build_hybrid_loss(dataset, shipped, shipped_settings, losses, HYBRID_LOSS_TURN)
    shipped_ex = Exercise.from_dict(json.loads(HYBRID_LOSS_FILE.read_text(encoding="utf-8")))
    assert rebuilt == shipped_ex
    assert (
        int(expected_answer(shipped_ex)) == loss.fused_rank > min(r for r in ex_branch_ranks(shipped_ex).values() if r)
    )
    assert shipped_ex.relevant == {shipped_ex.target: 2}
