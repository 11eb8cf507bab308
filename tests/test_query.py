"""A turn is normalised before both branches: NFKC (fullwidth and compatibility forms folded) and invisible format
characters dropped (zero-width, bidi controls, BOM), so what a user cannot see cannot change the results
(issue 13, defect 11). The level badge says so when the searched turn differs from what was typed."""

from __future__ import annotations

import pytest

from inspector import badge
from retrieval.query import QueryError, clean_query, normalised_from

ZERO_WIDTH = "GS\u200b-40 E\u2060-09"
FULLWIDTH = "ＧＳ－４０ Ｅ－０９"


@pytest.mark.parametrize(
    ("typed", "searched"),
    [
        (ZERO_WIDTH, "GS-40 E-09"),
        (FULLWIDTH, "GS-40 E-09"),
        ("\ufeffGS-40\u200e \u200fE-09\u00ad", "GS-40 E-09"),  # BOM, LRM/RLM, soft hyphen
        ("\u202eGS-40 E-09\u202c \u2066x\u2069", "GS-40 E-09 x"),  # bidi embeddings and isolates
        ("\u200c\u200d insulin \u180e pen", "insulin pen"),
        ("dose of 5 ㎎", "dose of 5 mg"),
        ("  plain\tturn \n", "plain turn"),
    ],
)
def test_turns_are_normalised(typed, searched):
    assert clean_query(typed) == searched


def test_an_ascii_turn_is_cleaned_as_any_other():
    """ASCII turns take a path without a loop per character: the same characters go as in the Unicode rule."""
    import unicodedata

    from retrieval.query import without_controls, without_format

    every = "".join(map(chr, range(128)))
    by_category = "".join(" " if unicodedata.category(ch) in {"Cc", "Cs"} else ch for ch in every)
    assert without_controls(every) == by_category and without_format(every) == every
    assert clean_query("a\x00b\x1fc\x7fd e") == "a b c d e"


def test_a_turn_of_only_invisible_characters_is_empty():
    with pytest.raises(QueryError, match="empty"):
        clean_query("\u200b\u2060\ufeff")


def test_the_typed_turn_is_kept_only_when_normalising_changed_more_than_spaces():
    assert normalised_from(ZERO_WIDTH, clean_query(ZERO_WIDTH)) == ZERO_WIDTH
    assert normalised_from(FULLWIDTH, clean_query(FULLWIDTH)) == FULLWIDTH
    assert normalised_from("  GS-40   E-09 ", "GS-40 E-09") == ""
    assert normalised_from(["not", "text"], "x") == ""


def test_invisible_characters_find_the_same_card(shipped, shipped_settings):
    plain = shipped.retrieve("GS-40 E-09", shipped_settings)
    hidden = shipped.retrieve(ZERO_WIDTH, shipped_settings)
    assert plain.final[0].parent_id == "device-gs40-e09"
    assert [h.parent_id for h in hidden.final] == [h.parent_id for h in plain.final]
    assert hidden.query == "GS-40 E-09" and hidden.typed_query == ZERO_WIDTH and plain.typed_query == ""


def test_fullwidth_turn_gets_the_same_bm25_hits(shipped, shipped_settings):
    plain = shipped.retrieve("GS-40 E-09", shipped_settings)
    wide = shipped.retrieve(FULLWIDTH, shipped_settings)
    assert wide.bm25.hits and [h.chunk_id for h in wide.bm25.hits] == [h.chunk_id for h in plain.bm25.hits]
    assert wide.final[0].parent_id == "device-gs40-e09"


def test_badge_shows_the_searched_turn_and_marks_what_was_removed(shipped, shipped_settings):
    html = badge.render_status(shipped.retrieve("<b>GS\u200b-40</b> E-09", shipped_settings))
    assert "Turn searched:</b> &lt;b&gt;GS-40&lt;/b&gt; E-09" in html
    assert "normalised from what was typed" in html and "U+200B" in html
    assert "<b>GS" not in html  # the typed turn is escaped too
    plain = badge.render_status(shipped.retrieve("GS-40 E-09", shipped_settings))
    assert "normalised from" not in plain
