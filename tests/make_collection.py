"""Collections made elsewhere, for the attach tests: ``python -m tests.make_collection CHROMA_PATH VECTORS`` writes
``DOCS`` into a new Chroma collection per entry of the JSON file ``VECTORS`` (``{name: one vector per doc}``) with
plain chromadb, the way another tool would (default l2 space, documents + metadata). The caller makes the vectors
with ``vectors_for`` (a bundled embedder, or ``random8`` for 8-dimensional random vectors): the test process loads
those models anyway, and this process then costs no model load (all-MiniLM-L6-v2 loads torch: ~10 s of CPU)."""

from __future__ import annotations

import json
import sys

DOCS = {
    "faq-1": "Keep unopened insulin pens in the fridge, never in the freezer.",
    "faq-2": "A missed dose of the evening tablet can be taken up to four hours late.",
    "faq-3": "The glucose meter shows error E-07 when the test strip is inserted upside down.",
    "faq-4": "Pack spare needles and pen tips in hand luggage when you fly.",
    "faq-5": "Rotate injection sites around the belly to avoid lumps under the skin.",
    "faq-6": "Store test strips in their closed tube away from bathroom humidity.",
}


def vectors_for(model: str) -> list[list[float]]:
    """``DOCS`` embedded as documents by the bundled embedder ``model`` (``random8``: 8-d random vectors)."""
    import numpy as np

    if model == "random8":
        return np.random.default_rng(0).normal(size=(len(DOCS), 8)).astype(np.float32).tolist()
    from retrieval.encoders import load_embedder

    embedder = load_embedder(model)
    return [embedder.embed_document(t).tolist() for t in DOCS.values()]


def main(path: str, name: str, vectors: list[list[float]]) -> None:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    ids, texts = list(DOCS), list(DOCS.values())
    col = client.create_collection(name)
    col.add(ids=ids, documents=texts, embeddings=vectors, metadatas=[{"source": "faq"} for _ in ids])
    print(col.count())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.make_collection CHROMA_PATH VECTORS.json")
    with open(sys.argv[2], encoding="utf-8") as f:
        for name, vectors in json.load(f).items():
            main(sys.argv[1], name, vectors)
