"""Start and stop the real inspector (``python app.py``) in a subprocess on 127.0.0.1 for tests.

Shared by the browser tests and the load test: the app reads its Settings from the environment, so a test only
overrides the corpus, the Chroma location, the port and any extra variable it needs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "corpus" / "cards.jsonl"
MINI = Path(__file__).resolve().parent / "data" / "mini_cards.jsonl"
# Debian's Chromium, and the flags every headless run here uses (browser tests, make screenshots, the page bench):
# no sandbox as root, no GPU, and no connection anywhere but 127.0.0.1.
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


# Builds a store the way the app's warm-up does (index, then the map kept in the store), in a process of its own so
# that no process of the run holds it open when it is copied.
_BUILD_STORE = """
import os
from retrieval import projection
from retrieval.pipeline import HybridRetriever
from retrieval.settings import Settings

retriever = HybridRetriever(Settings.from_env(dict(os.environ)), progress=lambda done, total: None)
if retriever.dense is not None:
    job = projection.request(retriever.dense)
    job.wait()
    assert job.status == projection.READY, job.error
"""


def prebuilt_store(corpus: Path, cache_root: Path) -> Path:
    """A Chroma store holding ``corpus`` indexed with the default models and its map, built once under
    ``cache_root`` for every test process of the run (a file lock; pytest-xdist's workers share the run's temp
    root) and never opened again: an app given it as ``store`` starts on a copy, as after a restart, instead of
    embedding the corpus again (about 8 s of CPU per launch on the shipped cards). The tests of indexing itself
    start on an empty store."""
    target = cache_root / f"prebuilt-{corpus.stem}"
    done = cache_root / f"prebuilt-{corpus.stem}.done"
    with (cache_root / f"prebuilt-{corpus.stem}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            env = {**os.environ, "CORPUS_PATH": str(corpus), "CHROMA_PATH": str(target), "HF_HUB_OFFLINE": "1"}
            built = subprocess.run(
                [sys.executable, "-c", _BUILD_STORE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
            )
            if built.returncode != 0:
                raise RuntimeError(f"building the test store of {corpus.name} failed:\n{built.stderr[-3000:]}")
            done.touch()
    return target


def local_client(url: str, timeout: float | None = None, **kwargs: Any) -> Any:
    """A ``gradio_client.Client`` for an app of this run, on plain http at 127.0.0.1. httpx builds an SSL context
    for each request the client sends (one ``httpx.post``/``get``/``stream`` each) and loads the CA bundle into it:
    18 ms of CPU per request, some 15 CPU-seconds over the suite (py-spy, 2026-12-04). ``ssl_verify=False`` only
    skips loading the bundle: no TLS is ever spoken to these URLs. ``timeout``: seconds per request (the client's
    default is 20)."""
    from gradio_client import Client

    httpx_kwargs = {"timeout": timeout} if timeout is not None else None
    return Client(url, verbose=False, ssl_verify=False, httpx_kwargs=httpx_kwargs, **kwargs)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppServer:
    """``python app.py`` on a free port of 127.0.0.1; ``start()`` waits until the page answers."""

    def __init__(
        self, workdir: Path, corpus: Path, extra_env: dict[str, str] | None = None, store: Path | None = None
    ) -> None:
        """``store``: a store to start on a copy of (``prebuilt_store``); without it the app indexes ``corpus``."""
        self.workdir = workdir
        self.store = store
        self.corpus = corpus
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = workdir / "app.log"
        self.env = {
            **os.environ,
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(self.port),
            "CORPUS_PATH": str(corpus),
            "CHROMA_PATH": str(workdir / "chroma"),
            # its own Gradio cache: Gradio names an upload by its content, so two apps of one run uploading
            # the same file into a shared folder would delete it from under each other
            "GRADIO_TEMP_DIR": str(workdir / "gradio-cache"),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **(extra_env or {}),
        }
        self.proc: subprocess.Popen | None = None
        self._log = None

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the app's combined stdout/stderr."""
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def start(self, timeout: float = 300.0) -> AppServer:
        """Launch and wait for HTTP 200 on the page.

        Raises:
            RuntimeError: the app exited or did not answer within ``timeout`` seconds (the message has its log).
        """
        chroma = Path(self.env["CHROMA_PATH"])
        if self.store is not None and not chroma.exists():
            shutil.copytree(self.store, chroma)
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "app.py"], cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise RuntimeError(f"app.py exited with {code}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"app.py did not answer on {self.url} within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.5)

    @contextlib.contextmanager
    def running(self) -> Iterator[AppServer]:
        """Started for the ``with`` block and stopped after it, for a module fixture
        (``with AppServer(...).running() as app: yield app``); a start that fails fails the test with the app's log."""
        import pytest

        try:
            self.start()
        except RuntimeError as exc:
            pytest.fail(str(exc))
        try:
            yield self
        finally:
            self.stop()

    def stop(self) -> None:
        """Terminate the app (kill it if it does not exit within 15 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
