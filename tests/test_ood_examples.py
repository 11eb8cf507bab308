"""The out-of-domain examples' embeddings are kept in the cache folder: a cold start's first turn reads them
instead of embedding 228 texts; a kept file that another model wrote is rebuilt, an unwritable folder costs time."""

from __future__ import annotations

import numpy as np

from retrieval import ood_examples
from retrieval.encoders import load_embedder


def test_the_examples_are_kept_reused_and_rebuilt_when_not_this_models(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_GRAPH_CACHE", str(tmp_path))
    embedder = load_embedder("bge-small-en-v1.5")
    texts = ["how do I bake sourdough bread", "who won the 1998 world cup", "asdf qwer zxcv"]
    built = ood_examples._embedded(embedder, texts)
    (kept,) = tmp_path.glob("ood-examples-*.npy")
    assert np.array_equal(np.load(kept), built) and built.shape == (3, embedder.dim)
    calls = []
    monkeypatch.setattr(embedder, "embed_query", lambda t, real=embedder.embed_query: calls.append(t) or real(t))
    assert np.array_equal(ood_examples._embedded(embedder, texts), built) and calls == [texts[0]]  # one check
    np.save(kept, np.roll(built, 1, axis=0))  # the same name, other vectors (another model's): rebuilt
    assert np.array_equal(ood_examples._embedded(embedder, texts), built)
    assert np.array_equal(np.load(kept), built)


def test_an_unwritable_cache_folder_only_costs_time(tmp_path, monkeypatch):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    monkeypatch.setenv("RETRIEVAL_GRAPH_CACHE", str(blocked))
    embedder = load_embedder("bge-small-en-v1.5")
    assert ood_examples._embedded(embedder, ["one text"]).shape == (1, embedder.dim)
