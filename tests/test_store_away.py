"""An uploaded corpus on a Chroma server that goes away: frozen (SIGSTOP) or restarted in the middle of indexing.
A real ``chroma run`` and the real bundled models; the corpus goes through the registry as the Data tab adds it.

- Frozen: a turn on a corpus whose retriever is in memory answers ``bm25_only`` within seconds (the listing waits
  at most ``LIST_WAIT_S`` and then uses the last one; the opening is recorded in the background), instead of holding
  a turn slot for the HTTP client's 30 s and then saying the corpus was deleted; a corpus that cannot be listed
  says the store is unreachable.
- Restarted mid-build: the half-built corpus is not reported ready, a turn refuses it (never resuming the build
  inside the turn), and the Data tab's job resumes it from what the store kept.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from retrieval import corpus_store, dense_build
from retrieval.corpora import Registry
from retrieval.corpus_retrievers import collection_names, is_ready, retriever_for
from retrieval.corpus_turns import turn_corpus
from retrieval.formats import Limits
from retrieval.index_jobs import start_index
from retrieval.settings import Settings
from tests.chroma_server import ChromaServer
from tests.conftest import MINI_CARDS
from tests.test_faults import wait_stopped

TOPICS = ["pump", "sensor", "inhaler", "patch", "meter", "lancet", "strip", "pen", "cuff", "scale"]


@pytest.fixture()
def server(tmp_path):
    srv = ChromaServer(tmp_path / "server").start()
    yield srv
    if srv.proc and srv.proc.poll() is None:
        os.kill(srv.proc.pid, signal.SIGCONT)
    srv.stop()


def _settings(tmp_path, server, **more) -> Settings:
    return Settings(
        corpus_path=str(MINI_CARDS),
        chroma_host="127.0.0.1",
        chroma_port=server.port,
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "none"),
        min_similarity=0.3,
        refusal_calibrate_on_index=False,
        bm25_timeout_ms=60_000,
        rerank_timeout_ms=60_000,
        **more,
    )


def _corpus(tmp_path, name: str, cards: int) -> str:
    path = tmp_path / f"{name}.jsonl"
    rows = [
        {
            "id": f"{name}-{i}",
            "title": f"{TOPICS[i % 10].title()} note {i}",
            "text": f"Card {i} about the {TOPICS[i % 10]} model {i * 7 % 97}: check the {TOPICS[(i + 3) % 10]} "
            f"before use, replace it every {i % 12 + 1} weeks and write down reading {i}.",
        }
        for i in range(cards)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_a_frozen_store_does_not_stall_a_turn_on_an_uploaded_corpus(tmp_path, server):
    s = _settings(tmp_path, server, dense_timeout_ms=300)
    registry = Registry(s, Limits())
    data, _ = registry.add(_corpus(tmp_path, "notes", 6), "notes", copy=True, owner="token-a", address="10.0.0.1")
    assert start_index(data, s).wait(600)["status"] == "done"
    retriever, _ = turn_corpus("notes", s)
    assert retriever.retrieve("pump model check", s).hybrid_path == "full"
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        wait_stopped(server.proc.pid)
        started = time.monotonic()
        retriever, _ = turn_corpus("notes", s)  # listed from the last listing, loaded from memory
        result = retriever.retrieve("pump model check again", s)
        took = time.monotonic() - started
        with pytest.raises(ValueError) as unknown:
            turn_corpus("never-listed", s)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert result.hybrid_path == "bm25_only" and result.final, result.reason  # the documented degraded level
    assert took < corpus_store.LIST_WAIT_S + 5, f"a turn took {took:.1f} s on a frozen store"
    text = str(unknown.value)
    assert "unreachable" in text and "deleted" not in text.replace("Nothing was deleted", ""), text


def test_a_restart_mid_build_leaves_the_corpus_not_ready_and_only_the_job_resumes_it(tmp_path, server, monkeypatch):
    # The build adds its vectors to the store every _EMBED_BLOCK (16) sub-chunks instead of every 256, so the store
    # keeps what was embedded before the restart: with 256-row batches a 600-card corpus stopped at 20% had stored
    # nothing (a resume from 0, about 850 embeddings in all); here the first blocks of 160 cards are kept, and the
    # whole test embeds about 200.
    monkeypatch.setattr(dense_build, "_ADD_BATCH", dense_build._EMBED_BLOCK)
    s = _settings(tmp_path, server, dense_timeout_ms=60_000)
    registry = Registry(s, Limits())
    data, _ = registry.add(_corpus(tmp_path, "big", 160), "big", copy=True, owner="token-a", address="10.0.0.1")
    job = start_index(data, s)
    while job.running and job.snapshot()["fraction"] < 0.2:
        time.sleep(0.02)
    assert job.running, job.snapshot()  # still building: the server goes away at about 20%
    server.stop()
    assert job.wait(120)["status"] == "failed", job.snapshot()
    server.start()  # same port, same folder: the collection it kept is half-written
    assert not is_ready(data, s)  # not "active": a half-built corpus is never reported ready
    name = collection_names(data.chunks, [s.embedding_model])[0]  # its dense collection
    client = corpus_store.client_for(s)
    kept = client.get_collection(name).count()
    assert kept > 0  # a half-written collection, not an empty one
    with pytest.raises(ValueError, match="Data tab"):
        turn_corpus("big", s)  # a turn refuses it instead of resuming the build inside the turn
    half = retriever_for(data, s)  # the retriever the failed job left, as a turn that did not check would get it
    result = half.retrieve("pump model check", s)
    assert result.hybrid_path == "bm25_only" and "incomplete" in result.reason, result.reason
    time.sleep(1)
    assert client.get_collection(name).count() == kept  # nothing was embedded in a turn
    again = start_index(registry.open("big"), s)  # the Data tab's Open (or the CLI): resumes
    snap = again.wait(900)
    assert snap["status"] == "done" and (again.first_done or 0) == kept, snap  # from what the store kept
    retriever, _ = turn_corpus("big", s)
    assert retriever.retrieve("pump model check", s).hybrid_path == "full"
