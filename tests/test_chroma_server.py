"""A real Chroma server started by the test answers the same queries as the embedded store."""

import pytest

from retrieval.pipeline import HybridRetriever
from tests.chroma_server import ChromaServer

TURNS = ["GlucoSense GS-40 error E-07", "my insulin pen got warm in the car", "olvidé una dosis", "meter too cold"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = ChromaServer(tmp_path_factory.mktemp("chroma-server")).start()
    yield srv
    srv.stop()


def test_server_matches_embedded(mini, mini_settings, server):
    s = mini_settings.replace(chroma_host="127.0.0.1", chroma_port=server.port)
    remote = HybridRetriever(s, progress=lambda d, t: None)
    assert remote.dense is not None, remote.dense_error
    for turn in TURNS:
        a, b = mini.retrieve(turn), remote.retrieve(turn, s)
        assert b.hybrid_path == a.hybrid_path == "full"
        assert [h.chunk_id for h in b.dense.hits] == [h.chunk_id for h in a.dense.hits]
        assert [h.score for h in b.dense.hits] == pytest.approx([h.score for h in a.dense.hits], abs=1e-5)
        assert [h.parent_id for h in b.final] == [h.parent_id for h in a.final]


def test_restart_reuses_the_collection(mini_settings, server):
    s = mini_settings.replace(chroma_host="127.0.0.1", chroma_port=server.port)
    first = HybridRetriever(s, progress=lambda d, t: None)
    second = HybridRetriever(s, progress=lambda d, t: None)
    assert first.dense is not None and second.dense is not None
    assert not second.dense.built, "an unchanged corpus and model must not be re-embedded"
    assert second.dense.collection_name == first.dense.collection_name


def test_an_uploaded_corpus_lives_on_the_server_and_is_deleted_there(mini_settings, server, tmp_path):
    """With CHROMA_HOST set, a user's corpus is indexed into a collection on the Chroma server (nothing in
    CHROMA_PATH), answers turns from there, and deleting it in the registry drops that collection on the server."""
    import json

    from retrieval.chroma_store import chroma_client
    from retrieval.corpora import Registry
    from retrieval.corpus_retrievers import retriever_for
    from retrieval.index_jobs import start_index

    s = mini_settings.replace(
        chroma_host="127.0.0.1",
        chroma_port=server.port,
        chroma_path=str(tmp_path / "local"),
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "none"),
    )
    cards = tmp_path / "team.jsonl"
    cards.write_text(
        "".join(
            json.dumps(c) + "\n"
            for c in [
                {"id": "t-water", "title": "Water", "text": "Drink a full glass of water with every tablet."},
                {"id": "t-alarm", "title": "Alarm", "text": "Set a phone alarm for the evening dose."},
            ]
        ),
        encoding="utf-8",
    )
    registry = Registry(s)
    data, _ = registry.add(cards, copy=True)
    snap = start_index(data, s).wait(600)
    assert snap["status"] == "done", snap
    client = chroma_client(host="127.0.0.1", port=server.port)
    names = {c.name for c in client.list_collections()}
    retriever = retriever_for(data, s)
    assert retriever.dense.collection_name in names and retriever.dense.collection.count() == 2
    assert not (tmp_path / "local").exists()  # nothing was written to the embedded store's folder
    assert retriever.retrieve("glass of water", s).final[0].parent_id == "t-water"
    assert registry.delete(data.entry.name).endswith("(1 Chroma collection removed)")
    assert retriever.dense.collection_name not in {c.name for c in client.list_collections()}
