"""A new retriever's cold start, overlapped: chromadb imported on a side thread while the cross-encoder loads
(``chroma_ahead``), and the refusal rule's vocabulary made on a side thread (``vocabulary_ahead``)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator

from retrieval.rerank import load_reranker
from retrieval.settings import Settings


@contextlib.contextmanager
def chroma_ahead(s: Settings) -> Iterator[None]:
    """Import chromadb on a side thread while this one loads the cross-encoder (once per process: here rather than
    in the first turn), then runs the block (the cards, BM25, the embedder, the store). The import is
    ~0.6 s of Python (most of a cold start's 1 s, issue 20) and the model sessions are native work that runs
    without the GIL, so the two overlap on two cores (README "Speed"). The dense branch imports chromadb itself
    when it opens the store: Python's import lock makes it wait for this import, never run it twice; the block's
    end waits for it too, whatever happened. onnxruntime and tokenizers are imported first, here, so the two
    threads never import the same module."""
    if "chromadb" in sys.modules:  # nothing to overlap: the cross-encoder loads in the first turn, as it did
        yield
        return
    import onnxruntime  # noqa: F401  (see the docstring)
    import tokenizers  # noqa: F401

    def warm() -> None:
        try:
            import chromadb  # noqa: F401
        except Exception:  # not installed or broken: the dense branch says so when it imports it
            pass

    thread = threading.Thread(target=warm, name="import-chromadb", daemon=True)
    thread.start()
    try:
        if s.hybrid_enabled and not s.simulate_reranker_failure:
            load_reranker(s.reranker_model)
        yield
    finally:
        thread.join()


def vocabulary_ahead(refusal_vocabulary: Callable[[], object]) -> None:
    """The refusal rule's vocabulary, made on a side thread while the first turn's models run (~25 ms of a cold
    start). Python only: a daemon thread still inside onnxruntime when the interpreter exits aborts the process
    ("terminate called without an active exception": seen when the out-of-domain examples' check embedding ran here
    and a one-turn ``eval`` exited)."""
    threading.Thread(target=refusal_vocabulary, name="refusal-vocabulary", daemon=True).start()
