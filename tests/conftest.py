"""Shared fixtures: real bundled models, real Chroma, tiny corpora with hand-checkable expectations."""

from __future__ import annotations

import functools
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# ranx, the independent implementation the metric and fusion tests compare with, is numba code: compiling it cost
# 10-40 s of CPU in each test process (its typed dicts are compiled per process, not cached; 150 s of the suite on a
# loaded machine) for inputs of a few dozen ids. Run as plain Python, the same code gives its numbers at once.
# NUMBA_DISABLE_JIT=0 in the environment brings the JIT back.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")
# An indexed corpus calibrates its refusal thresholds in the background (a few hundred turns through the pipeline):
# not after every upload of the suite. tests/test_calibration.py runs one calibration on purpose.
os.environ.setdefault("REFUSAL_CALIBRATE_ON_INDEX", "false")

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
# The same for a launched app (its Settings come from the environment). The run's shared browser app had the
# defaults: on CI's slower machine a link's turn with 80 pairs went over the 5-s reranker budget (2026-12-04).
PATIENT_ENV = {name.upper(): str(ms) for name, ms in PATIENT.items()}


@pytest.fixture(scope="session")
def store_cache(tmp_path_factory) -> Path:
    """The run's folder shared by its test processes (pytest-xdist's workers each have a temp folder below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def prebuilt(corpus: Path, store_cache: Path, chroma: Path) -> Path:
    """``chroma``, a copy of the run's one store of ``corpus`` (``tests.app_server.prebuilt_store``): the session's
    retrievers and launched apps open an indexed store, as after a restart, instead of embedding the corpus again."""
    import shutil

    from tests.app_server import prebuilt_store

    if not chroma.exists():
        shutil.copytree(prebuilt_store(corpus, store_cache), chroma)
    return chroma


@pytest.fixture(scope="session")
def mini_settings(chroma_dir, store_cache):
    from retrieval.settings import Settings

    chroma = prebuilt(MINI_CARDS, store_cache, chroma_dir / "mini")
    return Settings(corpus_path=str(MINI_CARDS), chroma_path=str(chroma), min_similarity=0.3, **PATIENT)


@pytest.fixture(scope="session")
def mini(mini_settings):
    """A retriever over the 5-card corpus, with the real bundled models and an embedded Chroma."""
    from retrieval.pipeline import HybridRetriever

    return HybridRetriever(mini_settings, progress=lambda done, total: None)


@pytest.fixture(scope="session")
def shipped_settings(chroma_dir, store_cache):
    from retrieval.settings import Settings

    chroma = prebuilt(SHIPPED_CARDS, store_cache, chroma_dir / "shipped")
    return Settings.from_env({}, chroma_path=str(chroma), **PATIENT)


@pytest.fixture(scope="session")
def shipped(shipped_settings):
    """A retriever over the shipped synthetic corpus (default settings, temporary Chroma)."""
    from retrieval.pipeline import HybridRetriever

    return HybridRetriever(shipped_settings, progress=lambda done, total: None)


@pytest.fixture(scope="session")
def shipped_app(tmp_path_factory, store_cache):
    """``python app.py`` on the shipped corpus (the mini corpus if it is missing), default settings but patient
    stage budgets (``PATIENT_ENV``), a temporary Chroma: started once for the session and shared by the browser
    test files that need no app of their own (each test still opens its own browser context, so its own Gradio
    session). Starting the app indexes the corpus, so one start instead of one per file saves a model load and an
    indexing per file."""
    from tests.app_server import MINI, SHIPPED, AppServer, prebuilt_store

    corpus = SHIPPED if SHIPPED.exists() else MINI
    store = prebuilt_store(corpus, store_cache)
    with AppServer(tmp_path_factory.mktemp("e2e"), corpus, extra_env=PATIENT_ENV, store=store).running() as app:
        yield app


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


# ------------------------------------------------------------------------------------------------------ markers
# `make test-fast` (pytest -m "not browser and not load") leaves these out; `make test` runs everything.
BROWSER_FIXTURES = {"sync_playwright", "server", "browser", "page", "context"}


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "browser: drives a real headless Chromium (and usually a launched app)")
    config.addinivalue_line("markers", "load: many concurrent sessions against a launched app")


def pytest_collection_modifyitems(config, items) -> None:
    """Every test of a ``test_e2e_*`` file that uses its browser or app fixtures is a ``browser`` test, every test
    of ``test_load.py`` a ``load`` test (a browser test in another file carries ``@pytest.mark.browser`` itself)."""
    for item in items:
        name = item.path.name
        if name.startswith("test_e2e_") and BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
        elif name == "test_load.py":
            item.add_marker(pytest.mark.load)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the long files first (see below)
        items.sort(key=lambda item: not _long_file(item.path))


# ----------------------------------------------------------------------------------------------- test workers
# `make test` runs pytest-xdist with three workers (the Makefile says why). Each test file is one unit of work, run
# in order by one worker (a file's tests may build on each other: the Data tab's upload, then a turn on it); the
# units go to whichever worker is free. A worker starts the session's shared app (``shipped_app``, on a copy of the
# run's prebuilt store) when its first browser file asks for it, so each worker drives its own app, one page at a
# time. The files that launch an app, drive Chromium or run subprocesses are the long units: they are handed out
# first, so no long file starts last while the other workers sit idle. (xdist's own `--dist loadgroup` marks do not
# work with pytest 9: they rename a test's node id, which pytest 9 no longer reads from the attribute xdist sets.)
LONG_FILE_SIGNS = ("shipped_app", "from tests.test_e2e_browser import", "AppServer(", "mark.browser", "sys.executable")


@functools.cache
def _long_file(path: Path) -> bool:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return path.name != "conftest.py" and any(sign in text for sign in LONG_FILE_SIGNS)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: pytest without it (-p no:xdist) runs as before
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # units in the order above: the long files first
    return LoadFileScheduling(config, log)
