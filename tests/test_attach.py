"""Open a collection made elsewhere (issue 22.3): a separate process creates a Chroma collection with plain chromadb
and a bundled embedder's vectors; `index --attach` opens it (BM25 from its documents), a turn on it answers at level
full, and a collection whose vectors came from another model, or have another size, is refused naming the mismatch.
The attached collection is never written."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.make_collection import vectors_for


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("attach")
    env = {
        **os.environ,
        "CHROMA_PATH": str(root / "chroma"),
        "DATA_DIR": str(root / "data"),
        "DATA_ROOT": str(root / "none"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "BM25_TIMEOUT_MS": "120000",
        "DENSE_TIMEOUT_MS": "120000",
        "RERANK_TIMEOUT_MS": "120000",
    }

    def run(*args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)

    models = {"faq": "bge-small-en-v1.5", "faq-minilm": "all-MiniLM-L6-v2", "faq-8d": "random8"}
    vectors = root / "vectors.json"  # made here: the Data tab test loads all-MiniLM-L6-v2 in this process anyway
    vectors.write_text(json.dumps({name: vectors_for(model) for name, model in models.items()}))
    made = run("-m", "tests.make_collection", env["CHROMA_PATH"], str(vectors))
    assert made.returncode == 0 and made.stdout.split() == ["6", "6", "6"], made.stderr
    return run, env


def in_process(env: dict, *args: str) -> subprocess.CompletedProcess:
    """``python -m retrieval ARGS`` answered by this process (``retrieval.cli.main``: the same parser, handlers and
    exit codes) with ``env``'s settings. For a command whose output is all a test reads: each process of its own
    costs ~2 s of imports and a model load. The attach keeps its own, so the turn here finds what another process
    registered."""
    from retrieval.cli import main
    from retrieval.evaluation.cli import register

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for name, value in env.items():
            if os.environ.get(name) != value:
                patch.setenv(name, value)
        code = main(list(args), registrars=(register,))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def _snapshot(path: str, name: str):
    import chromadb
    from chromadb.config import Settings

    col = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False)).get_collection(name)
    got = col.get(include=["documents", "embeddings", "metadatas"])
    return got["ids"], got["documents"], [list(map(float, e)) for e in got["embeddings"]], got["metadatas"]


def test_attach_answers_at_level_full_and_never_writes_the_collection(store):
    run, env = store
    before = _snapshot(env["CHROMA_PATH"], "faq")
    out = run("-m", "retrieval", "index", "--attach", "faq")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["name"] == "faq" and info["sub_chunks"] == 6 and info["format"] == "chroma-collection"
    out = in_process(env, "query", "my meter says E-07", "--corpus", "faq", "--json")  # attached by another process
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["hybrid_path"] == "full", result["reason"]
    assert result["final"][0]["parent_id"] == "faq-3"
    assert result["bm25"][0]["chunk_id"] == "faq-3"  # BM25 built from the collection's documents
    assert _snapshot(env["CHROMA_PATH"], "faq") == before
    listed = in_process(env, "index")
    assert "faq (attached, chroma-collection, 6 sub-chunks)" in listed.stdout
    gone = in_process(env, "index", "--delete", "faq")
    assert "its collection faq was made elsewhere and is kept" in gone.stdout
    assert _snapshot(env["CHROMA_PATH"], "faq") == before


def test_another_models_vectors_are_refused_naming_the_mismatch(store):
    _, env = store
    out = in_process(env, "index", "--attach", "faq-minilm")
    assert out.returncode == 2
    assert "collection 'faq-minilm' cannot be searched with bge-small-en-v1.5" in out.stderr
    assert (
        "is not bge-small-en-v1.5's embedding of its text (cosine" in out.stderr and "--embedding-model" in out.stderr
    )
    out = in_process(env, "index", "--attach", "faq-8d")
    assert out.returncode == 2 and "its vectors have 8 dimensions but bge-small-en-v1.5 makes 384" in out.stderr
    out = in_process(env, "index", "--attach", "nope")
    assert out.returncode == 2 and "no collection named 'nope'" in out.stderr and "faq-minilm" in out.stderr
    assert "faq-minilm" not in in_process(env, "index").stdout  # nothing was registered


def test_the_data_tab_attaches_a_collection_of_the_store(store):
    """The same from the page: the Data tab lists the store's own-made collections, attaches one (the session may
    forget it again) and refuses one of another model with the mismatch in its message."""
    from inspector import data_adding, data_tab, handlers
    from retrieval.corpora import Registry
    from retrieval.index_jobs import job_for
    from retrieval.settings import Settings
    from tests.conftest import MINI_CARDS, PATIENT

    _, env = store
    s = Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=env["CHROMA_PATH"],
        data_dir=env["DATA_DIR"],
        data_root=env["DATA_ROOT"],
        min_similarity=0.3,
        **PATIENT,
    )
    handlers.use_base_settings(s)
    try:
        assert {"faq", "faq-minilm", "faq-8d"} <= set(data_adding.attachable_choices())
        refused = data_adding.attach_collection("faq-minilm", "bge-small-en-v1.5", "", None, None)
        assert "cannot be searched with bge-small-en-v1.5" in refused[0] and refused[2] is None
        out = data_adding.attach_collection("faq-minilm", "all-MiniLM-L6-v2", "", None, None)
        assert "its vectors match all-MiniLM-L6-v2" in out[0], out[0]
        job = job_for(Registry(s).open("faq-minilm"), s)
        assert job is not None and job.wait(600)["status"] == "done"
        turn = handlers.execute("pack needles when flying", {}, "faq-minilm")
        assert turn.result.hybrid_path == "full" and turn.result.final[0].parent_id == "faq-4"
        assert not any(
            n.startswith(("corpus--", "chunks-")) or n == "judgments" for n in data_adding.attachable_choices()
        )
        own = data_adding.attach_collection("corpus--faq-minilm", "all-MiniLM-L6-v2", "", None, None)
        assert "is one of this app&#x27;s own collections" in own[0]
        from retrieval import corpus_store, judgments

        assert judgments.COLLECTION in corpus_store.OWN_NAMES
        shown, _, _ = data_tab.delete("faq-minilm", None, "someone else")
        assert "from another browser session" in shown
        shown, _, _ = data_tab.delete("faq-minilm", None, out[-1])
        assert "was made elsewhere and is kept" in shown
    finally:
        handlers.use_base_settings(None)
