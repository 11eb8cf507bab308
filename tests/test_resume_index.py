"""Resumable indexing (issue 12): a build cancelled part-way keeps what it stored, and the next open embeds only the
missing sub-chunks, ending with exactly the vectors of an uninterrupted build. Real bundled embedder, real Chroma."""

from __future__ import annotations

import dataclasses
import logging
import threading

import numpy as np
import pytest

from retrieval.chroma_store import chroma_client
from retrieval.corpus import load_cards, split_cards
from retrieval.dense_build import IndexingCancelled
from retrieval.dense_store import DenseStore
from retrieval.encoders import load_embedder
from tests.conftest import SHIPPED_CARDS

N = 80  # cancelled after 48 (60%): three blocks of retrieval.dense_build._EMBED_BLOCK


class CancelAfter:
    """The real embedder; sets ``cancel`` once it has embedded ``n`` documents (like a user pressing Cancel)."""

    def __init__(self, inner, cancel: threading.Event, n: int) -> None:
        self.inner, self.cancel, self.n, self.calls = inner, cancel, n, 0
        self.name, self.dim = inner.name, inner.dim

    def embed_query(self, text):
        return self.inner.embed_query(text)

    def embed_document(self, text):
        self.calls += 1
        return self.inner.embed_document(text)

    def embed_documents(self, texts):
        self.calls += len(texts)
        if self.calls >= self.n:
            self.cancel.set()
        return self.inner.embed_documents(texts)


@pytest.fixture(scope="module")
def chunks():
    return split_cards(load_cards(SHIPPED_CARDS))[:N]


@pytest.fixture(scope="module")
def embedder():
    return load_embedder("bge-small-en-v1.5")


def stored(client, store: DenseStore) -> np.ndarray:
    col = client.get_collection(store.collection_name)
    ids = [c.chunk_id for c in store._chunks]
    got = col.get(ids=ids, include=["embeddings"])
    rows = dict(zip(got["ids"], got["embeddings"]))
    return np.stack([np.asarray(rows[i], dtype=np.float32) for i in ids])


def quiet(done, total):
    return None


def test_cancel_at_60_percent_then_resume_equals_an_uninterrupted_build(chunks, embedder, tmp_path, caplog):
    full_client = chroma_client(path=str(tmp_path / "full"))
    full = DenseStore(chunks, embedder, full_client, progress=quiet)
    assert full.built and full.resumed_from == 0

    client = chroma_client(path=str(tmp_path / "resumed"))
    cancel = threading.Event()
    cut = int(N * 0.6)
    with pytest.raises(IndexingCancelled, match=f"cancelled after {cut} of {N} sub-chunks"):
        DenseStore(chunks, CancelAfter(embedder, cancel, cut), client, progress=quiet, cancel=cancel)
    assert client.get_collection(full.collection_name).count() == cut  # what was embedded before the cancel is kept

    counting = CancelAfter(embedder, threading.Event(), 10**9)
    with caplog.at_level(logging.WARNING, logger="retrieval.dense_build"):
        resumed = DenseStore(chunks, counting, client, progress=quiet)
    assert resumed.built and resumed.resumed_from == cut
    assert any(f"resuming: embedding the {N - cut} missing" in r.message for r in caplog.records)
    # Only the missing sub-chunks were embedded (plus the verification sample of the kept ones).
    assert counting.calls <= N - cut + 8
    # The final vectors are what the store holds: exactly those of the uninterrupted build. (Chroma normalises
    # vectors for its cosine space, so a vector read back can differ from the embedder's in the last bit; the
    # in-memory copy of a build is the embedder's own, hence allclose there.)
    assert np.array_equal(stored(client, resumed), stored(full_client, full))
    assert np.allclose(resumed.embeddings, full.embeddings, rtol=0, atol=1e-6)

    reopened = DenseStore(chunks, embedder, client, progress=quiet)
    full_reopened = DenseStore(chunks, embedder, full_client, progress=quiet)
    assert not reopened.built and not full_reopened.built
    assert np.array_equal(reopened.embeddings, full_reopened.embeddings)


def test_partial_collection_with_a_wrong_vector_is_rebuilt_not_resumed(chunks, embedder, tmp_path, caplog):
    client = chroma_client(path=str(tmp_path / "store"))
    cancel = threading.Event()
    with pytest.raises(IndexingCancelled):
        DenseStore(chunks, CancelAfter(embedder, cancel, 20), client, progress=quiet, cancel=cancel)
    col = client.list_collections()[0]
    got = col.get(include=["embeddings"])
    col.update(ids=got["ids"], embeddings=np.roll(np.asarray(got["embeddings"]), 1, axis=0))
    with caplog.at_level(logging.WARNING, logger="retrieval.dense_build"):
        rebuilt = DenseStore(chunks, embedder, client, progress=quiet)
    assert rebuilt.built and rebuilt.resumed_from == 0
    assert any("is not its text's embedding" in r.message and "rebuilding it" in r.message for r in caplog.records)
    fresh_client = chroma_client(path=str(tmp_path / "fresh"))
    fresh = DenseStore(chunks, embedder, fresh_client, progress=quiet)
    assert np.array_equal(stored(client, rebuilt), stored(fresh_client, fresh))


def test_changed_corpus_does_not_resume_from_another_corpus_vectors(chunks, embedder, tmp_path):
    """The collection name is the fingerprint: a changed text gets its own collection, built from zero."""
    client = chroma_client(path=str(tmp_path / "store"))
    cancel = threading.Event()
    with pytest.raises(IndexingCancelled):
        DenseStore(chunks, CancelAfter(embedder, cancel, 20), client, progress=quiet, cancel=cancel)
    changed = list(chunks)
    changed[0] = dataclasses.replace(changed[0], text=changed[0].text + " Changed.")
    store = DenseStore(changed, embedder, client, progress=quiet)
    assert store.built and store.resumed_from == 0
