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
