import pytest

from retrieval.weighting import LEXICAL_BOOST, choose_weights, turn_features


@pytest.mark.parametrize(("turn", "features"), [
    ("GlucoSense GS-40 error E-07", ("code",)),
    ("PP-200 alarm A-15", ("code",)),
    ("missed my Glucavex 500 mg", ("unit",)),
    ("10 units of insulin", ("unit",)),
    ('what does "drop symbol" mean', ("quote",)),
    ("my sugar meter keeps beeping and shows a weird message after I changed the strips", ("long",)),
    ("how do I store insulin", ()),
])
def test_features(turn, features):
    assert turn_features(turn) == features


def test_lexical_turn_leans_to_bm25():
    w = choose_weights("GS-40 E-07", 1.0, 1.5, "auto")
    assert (w.bm25, w.dense) == (1.0 * LEXICAL_BOOST, 1.5)
    assert "code" in w.reason


def test_off_keeps_the_configured_weights():
    w = choose_weights("GS-40 E-07", 1.0, 1.5, "off")
    assert (w.bm25, w.dense, w.features) == (1.0, 1.5, ())
