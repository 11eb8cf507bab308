"""What `index --attach` and the Attach picker accept (retrieval/attach_vectors.py, retrieval/attach.py):
a collection with a non-finite vector, or a non-unit one where the model's vectors are unit length, is refused
naming the row (comparisons written so that NaN fails); the app's own collections (the refusal calibrations too)
are never offered or attached. And Why not…?'s exact dense scores never copy the vectors (retrieval/why_ranks.py).
Real Chroma, the real bundled embedder."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from retrieval.settings import Settings
from tests.make_collection import DOCS

MODEL = "bge-small-en-v1.5"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A store holding the FAQ embedded with the bundled model three ways: as made, one vector of 1e30s (Chroma
    stores it as NaN), one vector scaled by 2."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    from retrieval.encoders import load_embedder

    path = tmp_path_factory.mktemp("attach-vectors") / "chroma"
    client = chromadb.PersistentClient(path=str(path), settings=ChromaSettings(anonymized_telemetry=False))
    embedder = load_embedder(MODEL)
    ids, texts = list(DOCS), list(DOCS.values())
    good = np.stack([embedder.embed_document(t) for t in texts]).astype(np.float32)
    huge, scaled = good.copy(), good.copy()
    huge[5] = 1e30  # a cosine collection keeps this row as NaN (it normalises 1e30 / inf)
    scaled[4] *= 2.0
    for name, vectors in (("faq-good", good), ("faq-huge", huge), ("faq-scaled", scaled)):
        space = {"hnsw:space": "cosine"} if name == "faq-huge" else None
        client.create_collection(name, metadata=space).add(ids=ids, documents=texts, embeddings=vectors.tolist())
    client.get_or_create_collection("refusal-calibrations").upsert(ids=["x"], embeddings=[[1.0]], documents=["{}"])
    return Settings.from_env({}, chroma_path=str(path), data_dir=str(path.parent / "data"), embedding_model=MODEL)


def test_a_non_finite_vector_is_refused_naming_it(made):
    from retrieval.corpora import attach

    with pytest.raises(ValueError, match=r"1 of its 6 vectors hold NaN or an infinity \(e.g. that of 'faq-6'"):
        attach(made, "faq-huge")


def test_a_vector_not_of_unit_length_is_refused_where_the_model_s_are(made):
    from retrieval.corpora import attach

    with pytest.raises(ValueError, match=r"1 of its 6 vectors are not of unit length \(e.g. that of 'faq-5', length 2"):
        attach(made, "faq-scaled")
    data, new = attach(made, "faq-good")  # the same rows as made: accepted
    assert new and data.entry.chunks == 6


def test_the_app_s_own_collections_are_never_offered_or_attached(made):
    from retrieval.attach import attachable
    from retrieval.calibration import COLLECTION
    from retrieval.corpora import attach

    offered = attachable(made)
    assert COLLECTION not in offered and "faq-good" in offered
    with pytest.raises(ValueError, match="one of this app's own collections"):
        attach(made, COLLECTION)


def test_why_not_s_dense_scores_never_copy_the_vectors():
    from retrieval.why_ranks import dense_scores

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(20_000, 384)).astype(np.float32)  # 30.7 MB; a float64 copy would be 61 MB
    query = rng.normal(size=384).astype(np.float32)
    tracemalloc.start()
    try:
        scores = dense_scores(vectors, query)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"{peak:,} bytes allocated for 20,000 scores"
    assert scores.dtype == np.float64 and scores.shape == (20_000,)
    assert np.allclose(scores, vectors.astype(np.float64) @ query.astype(np.float64), rtol=1e-4, atol=1e-4)
