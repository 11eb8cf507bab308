"""Collections made elsewhere, for the attach tests: ``python -m tests.make_collection CHROMA_PATH NAME MODEL
[NAME MODEL ...]`` embeds ``DOCS`` with a bundled embedder (MODEL; or ``random8`` for 8-dimensional random vectors)
into a new Chroma collection with plain chromadb, the way another tool would (default l2 space, documents +
metadata); one process makes them all (each start of a process that imports chromadb and a model costs seconds of
the suite)."""

from __future__ import annotations

import sys

DOCS = {
    "faq-1": "Keep unopened insulin pens in the fridge, never in the freezer.",
    "faq-2": "A missed dose of the evening tablet can be taken up to four hours late.",
    "faq-3": "The glucose meter shows error E-07 when the test strip is inserted upside down.",
    "faq-4": "Pack spare needles and pen tips in hand luggage when you fly.",
    "faq-5": "Rotate injection sites around the belly to avoid lumps under the skin.",
    "faq-6": "Store test strips in their closed tube away from bathroom humidity.",
}


def main(path: str, name: str, model: str) -> None:
    import chromadb
    import numpy as np
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    ids, texts = list(DOCS), list(DOCS.values())
    if model == "random8":
        vectors = np.random.default_rng(0).normal(size=(len(texts), 8)).astype(np.float32).tolist()
    else:
        from retrieval.encoders import load_embedder

        embedder = load_embedder(model)
        vectors = [embedder.embed_document(t).tolist() for t in texts]
    col = client.create_collection(name)
    col.add(ids=ids, documents=texts, embeddings=vectors, metadatas=[{"source": "faq"} for _ in ids])
    print(col.count())


if __name__ == "__main__":
    pairs = sys.argv[2:]
    if not pairs or len(pairs) % 2:
        sys.exit("usage: python -m tests.make_collection CHROMA_PATH NAME MODEL [NAME MODEL ...]")
    for i in range(0, len(pairs), 2):
        main(sys.argv[1], pairs[i], pairs[i + 1])
