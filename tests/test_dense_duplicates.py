"""A corpus whose sub-chunks repeat one text (the same notice in hundreds of cards). HNSW cannot hold many exact
duplicate vectors (their neighbour lists fill with each other and the graph splits), so the dense store keeps one
row per distinct text: it is reused at the next open (it used to be rebuilt at every start, its check finding the
index unable to reach its own vectors), a search reaches every card, and every sub-chunk of a text gets its score.
Real bundled embedder (each distinct text embedded once), real embedded Chroma."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

from retrieval.chroma_store import chroma_client, forget_client
from retrieval.corpus import load_cards, split_cards
from retrieval.dense_store import DenseStore
from retrieval.encoders import load_embedder
from retrieval.evaluation.replicas import MemoEmbedder
from retrieval.types import Chunk
from tests.conftest import SHIPPED_CARDS

NOTICES = 500  # copies of one text ahead of the distinct ones: a row per sub-chunk made HNSW miss some, every build
DISTINCT = 100
NOTICE = "This card is for information only; ask your care team before you change a treatment."


@pytest.fixture(scope="module")
def chunks() -> list[Chunk]:
    notices = [
        Chunk(chunk_id=f"notice-{i:03d}#0", parent_id=f"notice-{i:03d}", title="Notice", lang="en", text=NOTICE)
        for i in range(NOTICES)
    ]
    return notices + split_cards(load_cards(SHIPPED_CARDS))[:DISTINCT]


@pytest.fixture(scope="module")
def embedder():
    return MemoEmbedder(load_embedder("bge-small-en-v1.5"))


def quiet(done, total):
    return None


def reopen(path: str, chunks, embedder) -> DenseStore:
    """A new client on the same folder, as the next start of the app opens it."""
    forget_client(path)
    return DenseStore(chunks, embedder, chroma_client(path=path), progress=quiet)


@pytest.fixture(scope="module")
def store(chunks, embedder, tmp_path_factory) -> tuple[str, DenseStore]:
    path = str(tmp_path_factory.mktemp("dupes") / "chroma")
    built = DenseStore(chunks, embedder, chroma_client(path=path), progress=quiet)
    assert built.built
    return path, built


def test_a_corpus_of_repeated_texts_is_reused_at_the_next_open(store, chunks, embedder, caplog):
    path, built = store
    with caplog.at_level(logging.WARNING, logger="retrieval.dense_build"):
        second = reopen(path, chunks, embedder)
        rows = second.collection.count()
        third = reopen(path, chunks, embedder)
    assert not [r.message for r in caplog.records if "rebuilding" in r.message]
    assert not second.built and not third.built
    assert rows == DISTINCT + 1  # one row per distinct text
    assert np.array_equal(second.embeddings, third.embeddings)
    assert np.allclose(second.embeddings, built.embeddings, rtol=0, atol=1e-6)
    assert second.embeddings.shape == (len(chunks), embedder.dim)


def test_every_sub_chunk_of_a_text_gets_its_score_in_id_order(store, chunks, embedder):
    built = reopen(store[0], chunks, embedder)
    # Each distinct sub-chunk's own vector finds it first (a row per sub-chunk left some unreachable).
    for i in range(NOTICES, len(chunks), 7):
        assert built.search(built.embeddings[i], 1)[0].chunk_id == chunks[i].chunk_id
    hits = built.search(embedder.embed_query(NOTICE), 12)
    assert [h.chunk_id for h in hits] == [f"notice-{i:03d}#0" for i in range(12)]
    assert len({h.score for h in hits}) == 1 and hits[0].score > 0.9
    assert [h.rank for h in hits] == list(range(1, 13))
    deep = built.search(embedder.embed_query("GlucoSense GS-40 error E-07"), NOTICES + 10)
    assert len(deep) == NOTICES + 10 and len({h.chunk_id for h in deep}) == NOTICES + 10
    assert deep[0].parent_id == "device-gs40-e07"


def test_a_wrong_vector_in_a_deduplicated_collection_is_still_rebuilt(store, chunks, embedder, tmp_path, caplog):
    path, _ = store
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    col = chroma_client(path=copy).get_collection(store[1].collection_name)
    got = col.get(include=["embeddings"])
    col.update(ids=got["ids"], embeddings=np.roll(np.asarray(got["embeddings"]), 1, axis=0))
    with caplog.at_level(logging.WARNING, logger="retrieval.dense_build"):
        again = reopen(copy, chunks, embedder)
    assert again.built
    assert any("is not its text's embedding" in r.message and "rebuilding it" in r.message for r in caplog.records)


def test_a_collection_with_a_row_per_sub_chunk_is_rebuilt_once(chunks, embedder, tmp_path, caplog):
    """A store written before texts were stored once (every notice a row) is rebuilt, then reused."""
    path = str(tmp_path / "chroma")
    old = DenseStore(chunks[NOTICES - 20 :], embedder, chroma_client(path=path), progress=quiet)
    rows = chunks[NOTICES - 20 :]
    old.collection.upsert(ids=[c.chunk_id for c in rows], embeddings=old.embeddings, documents=[c.text for c in rows])
    assert old.collection.count() == len(rows)
    with caplog.at_level(logging.WARNING, logger="retrieval.dense_build"):
        rebuilt = reopen(path, rows, embedder)
        reused = reopen(path, rows, embedder)
    assert rebuilt.built and not reused.built and reused.collection.count() == DISTINCT + 1
    assert sum("rebuilding it" in r.message for r in caplog.records) == 1
