"""Why not this card? (retrieval/why.py): whole-corpus ranks checked against the branches themselves, the stage
that lost a card, and the suggested single change applied through Settings' own environment variable."""

from __future__ import annotations

import json

import pytest

from retrieval.parents import best_per_parent
from retrieval.settings import Settings
from retrieval.why import explain, find_card

# A shallow configuration (10 cards, each branch 10 sub-chunks deep) leaves cards that would make the final cards
# outside every list: the turns are the shipped labeled set's q002, q003, q004 and q008.
SHALLOW = dict(top_k=10, candidate_multiplier=1)
OUTSIDE = [
    ("what does E-07 mean on a GS-60 meter", "device-bc7-err4"),
    ("what do I do when my PP-200 shows A-15", "missed-dose-basal-insulin"),
    ("BC-7 says Err-2", "storage-insulin-es"),
    ("do I need an LC-42", "travel-carry-on"),
]


def _final(result) -> set[str]:
    return {h.parent_id for h in result.final}


@pytest.fixture(scope="module")
def shallow(shipped_settings):
    return shipped_settings.replace(**SHALLOW)


@pytest.mark.parametrize("turn,card", OUTSIDE)
def test_the_suggested_change_brings_a_card_from_outside_every_list(shipped, shallow, turn, card):
    before = shipped.retrieve(turn, shallow)
    listed = {h.parent_id for h in (*before.bm25.hits, *before.dense.hits, *before.fused)}
    if card in listed:
        pytest.fail(f"{card} is in a list for {turn!r}: the case no longer tests a card outside every list")
    why = explain(shipped, turn, card, shallow)
    assert why.lost_at == "depth" and "never reached fusion" in why.verdict
    assert why.bm25["chunk_rank"] is None or why.bm25["chunk_rank"] > shallow.candidate_depth
    assert why.dense["chunk_rank"] > shallow.candidate_depth
    assert why.cross_encoder["score"] is not None and why.fused["rank"] is not None
    sug = why.suggestion
    assert sug is not None, why.verdict
    # Applied the way a person would: the environment variable it names, read by Settings itself.
    env = {"TOP_K": "10", "CANDIDATE_MULTIPLIER": "1", sug["setting"]: str(sug["value"])}
    applied = Settings.from_env(
        env, chroma_path=shallow.chroma_path, bm25_timeout_ms=60_000, dense_timeout_ms=60_000, rerank_timeout_ms=60_000
    )
    assert card in _final(shipped.retrieve(turn, applied))


def test_whole_corpus_ranks_agree_with_the_branches_searched_to_the_end(shipped, shipped_settings):
    turn, card = "what does E-07 mean on a GS-60 meter", "device-bc7-err4"
    why = explain(shipped, turn, card, shipped_settings, search=False)
    everything = len(shipped.chunks)
    bm25 = [h.parent_id for h in best_per_parent(shipped.bm25_index("snowball").search(turn, everything))]
    assert why.bm25["rank"] == bm25.index(card) + 1
    qvec = shipped.embed_query(turn).value
    dense = best_per_parent(shipped.dense.search(qvec, everything))
    assert why.dense["rank"] == [h.parent_id for h in dense].index(card) + 1
    assert why.dense["cosine"] == pytest.approx(shipped.dense.similarity(qvec, why.dense["chunk_id"]), abs=1e-5)
    # Its terms: 'mean' is in the card, the device codes are not; each with BM25's idf of the term.
    terms = {t["term"]: t for t in why.bm25["terms"]}
    assert terms["mean"]["in_card"] and not terms["gs"]["in_card"]
    assert terms["gs"]["idf"] == pytest.approx(shipped.bm25_index("snowball").idf("gs"), abs=1e-4)


def test_a_final_card_is_lost_nowhere_and_a_threshold_cut_names_the_threshold(shipped, shipped_settings):
    turn = "what does E-07 mean on a GS-60 meter"
    top = shipped.retrieve(turn, shipped_settings).final[0].parent_id
    why = explain(shipped, turn, top, shipped_settings)
    assert why.lost_at is None and why.suggestion is None and why.tried == 0
    strict = shipped_settings.replace(min_similarity=0.99, refusal_rule="cosine")
    why = explain(shipped, turn, top, strict)
    assert why.lost_at == "threshold"
    assert why.suggestion["setting"] == "MIN_SIMILARITY" and why.suggestion["value"] <= why.dense["cosine"]
    assert top in _final(shipped.retrieve(turn, strict.replace(min_similarity=why.suggestion["value"])))


def test_cards_are_found_by_id_or_title_words_and_ambiguity_lists_them(shipped):
    assert find_card(shipped, "device-bc7-err4") == "device-bc7-err4"
    assert find_card(shipped, "DEVICE-BC7-ERR4") == "device-bc7-err4"
    with pytest.raises(ValueError, match=r"4 cards match 'levothyroxine'.*drug-levothyroxine-88"):
        find_card(shipped, "levothyroxine")
    with pytest.raises(ValueError, match="no card has the id"):
        find_card(shipped, "zzz-no-such-card")
    with pytest.raises(ValueError, match="turn is empty"):
        explain(shipped, "   ", "device-bc7-err4")


def test_cli_why_json(shipped_settings, monkeypatch, capsys):
    from retrieval.cli import main

    monkeypatch.setenv("CHROMA_PATH", shipped_settings.chroma_path)
    monkeypatch.setenv("CANDIDATE_MULTIPLIER", "1")
    assert main(["why", "what does E-07 mean on a GS-60 meter", "device-bc7-err4", "--top-k", "10", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["card_id"] == "device-bc7-err4" and data["lost_at"] == "depth"
    assert {"rank", "score"} <= set(data["bm25"]) and {"rank", "cosine"} <= set(data["dense"])
    assert "rank" in data["fused"] and "score" in data["cross_encoder"]
    assert data["suggestion"]["setting"] == "CANDIDATE_MULTIPLIER"
    assert main(["why", "GS-60", "levothyroxine"]) == 2  # ambiguous: a clear error, no traceback
    assert "cards match" in capsys.readouterr().err


def test_a_search_out_of_time_says_so_and_keeps_what_it_found(shipped, shipped_settings):
    turn, card = "how do I store insulin", "drug-metformin-500"  # no single change brings it in (README)
    why = explain(shipped, turn, card, shipped_settings, budget_s=0.0)
    assert why.suggestion is None and why.search_stopped == 0.0 and why.tried <= 1
    assert "stopped at its 0 s budget after 0 tries" in why.verdict
