"""Shared fixtures: real bundled models, real Chroma, tiny corpora with hand-checkable expectations."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
MINI_CARDS = DATA / "mini_cards.jsonl"
SHIPPED_CARDS = ROOT / "corpus" / "cards.jsonl"

SPANS = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(SPANS))
trace.set_tracer_provider(_provider)


@pytest.fixture()
def spans() -> InMemorySpanExporter:
    SPANS.clear()
    return SPANS


@pytest.fixture(scope="session")
def chroma_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("chroma")


# Stage budgets for tests that check rankings, not budgets: a busy 2-core CI machine must not turn a slow
# cross-encoder into rrf_only (the fault tests set their own small budgets).
PATIENT = dict(bm25_timeout_ms=60_000, dense_timeout_ms=60_000, rerank_timeout_ms=60_000)


@pytest.fixture(scope="session")
def mini_settings(chroma_dir):
    from retrieval.settings import Settings

    return Settings(corpus_path=str(MINI_CARDS), chroma_path=str(chroma_dir / "mini"), min_similarity=0.3, **PATIENT)


@pytest.fixture(scope="session")
def mini(mini_settings):
    """A retriever over the 5-card corpus, with the real bundled models and an embedded Chroma."""
    from retrieval.pipeline import HybridRetriever

    return HybridRetriever(mini_settings, progress=lambda done, total: None)


@pytest.fixture(scope="session")
def shipped_settings(chroma_dir):
    from retrieval.settings import Settings

    return Settings.from_env({}, chroma_path=str(chroma_dir / "shipped"), **PATIENT)


@pytest.fixture(scope="session")
def shipped(shipped_settings):
    """A retriever over the shipped synthetic corpus (default settings, temporary Chroma)."""
    from retrieval.pipeline import HybridRetriever

    return HybridRetriever(shipped_settings, progress=lambda done, total: None)


@pytest.fixture()
def ui(mini_settings):
    """``inspector.handlers`` on the mini corpus (the base Settings a launched app reads from the environment)."""
    from inspector import handlers

    handlers.use_base_settings(mini_settings)
    yield handlers
    handlers.use_base_settings(None)


def control_values(**changes) -> list:
    """Every control's value in ``CONTROLS`` order, as the page sends them: the base defaults with ``changes``."""
    from inspector import handlers

    values = {**handlers.default_controls(), **changes}
    return [values[name] for name in handlers.CONTROLS]
