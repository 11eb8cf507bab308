"""The indexing jobs of this process: one per corpus, store and embedding model, building its retriever (BM25 and
the dense store) in the background with progress a page or the CLI can follow, cancellable and resumable."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from retrieval.calibration_jobs import calibrate_on_index
from retrieval.corpus_entries import CorpusData
from retrieval.corpus_retrievers import retriever_for, settings_for, start_calibration
from retrieval.settings import Settings

log = logging.getLogger(__name__)


class IndexJob:
    """One indexing job: builds the retriever (BM25 + the dense store) of one corpus for one store and model."""

    def __init__(self, key: tuple, data: CorpusData, settings: Settings) -> None:
        self.key = key
        self.name = data.entry.name
        self.data = data
        self.settings = settings
        self.total = len(data.chunks)
        self.done = 0
        self.first_done: int | None = None  # what the store already held (a resumed build starts there)
        self.started = time.monotonic()
        self.updated = self.started
        self.finished: float | None = None
        self.status = "running"  # running, done, cancelled, failed
        self.error = ""
        self.cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"index-{self.name}", daemon=True)

    @property
    def running(self) -> bool:
        return self.status == "running"

    def _progress(self, done: int, total: int) -> None:
        if self.first_done is None:  # the first call says where the build starts (what the store held)
            self.first_done = done
            self.started = time.monotonic()
        self.done, self.total, self.updated = done, total, time.monotonic()

    def _run(self) -> None:
        from retrieval.dense_build import IndexingCancelled

        try:
            retriever = retriever_for(self.data, self.settings, progress=self._progress, cancel=self.cancel)
            if retriever.dense is None:
                self.status, self.error = "failed", retriever.dense_error or "the dense store is unavailable"
            else:
                from retrieval import projection

                self.done = self.total
                # its map, in the background (loaded if kept), asked for before "done": a page that sees the job
                # done finds the map's status
                projection.request(retriever.dense, self.name)
                self.status = "done"
                if (
                    calibrate_on_index(self.settings)
                    and self.data.key is not None
                    and getattr(retriever, "calibration", None) is None
                ):
                    start_calibration(self.data, self.settings)
        except IndexingCancelled as exc:
            self.status, self.error = "cancelled", str(exc)
        except Exception as exc:  # shown in the page and the CLI; the log keeps the traceback
            log.exception("indexing %s failed", self.name)
            self.status, self.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self.finished = time.monotonic()

    def snapshot(self) -> dict[str, Any]:
        """What a progress bar shows: embedded / total, rate (sub-chunks/s), seconds left, status, error."""
        elapsed = max((self.finished or time.monotonic()) - self.started, 1e-9)
        fresh = self.done - (self.first_done or 0)
        rate = fresh / elapsed if fresh > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else None
        return {
            "name": self.name,
            "status": self.status,
            "done": self.done,
            "total": self.total,
            "fraction": (self.done / self.total) if self.total else 1.0,
            "rate": rate,
            "eta_s": left,
            "elapsed_s": elapsed,
            "error": self.error,
        }

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        self._thread.join(timeout)
        return self.snapshot()


_JOBS: dict[tuple, IndexJob] = {}
_JOBS_LOCK = threading.Lock()


def start_index(data: CorpusData, settings: Settings) -> IndexJob:
    """The indexing job for this corpus and store: a running one is joined (same progress), else a new one starts.
    A corpus whose retriever is already built gets a job that is done at once."""
    from retrieval.retriever_cache import retriever_key

    key = retriever_key(settings_for(data, settings), data.key)
    with _JOBS_LOCK:
        job = _JOBS.get(key)
        if job is not None and (job.running or job.status == "done"):
            return job
        job = IndexJob(key, data, settings)
        _JOBS[key] = job
        job._thread.start()
        return job


def job_for(data: CorpusData, settings: Settings) -> IndexJob | None:
    from retrieval.retriever_cache import retriever_key

    with _JOBS_LOCK:
        return _JOBS.get(retriever_key(settings_for(data, settings), data.key))


def job_for_entry(name: str) -> IndexJob | None:
    with _JOBS_LOCK:
        running = [j for j in _JOBS.values() if j.name == name and j.running]
        return running[0] if running else None


def forget_jobs(name: str) -> None:
    """Forget this process's jobs of the corpus ``name`` (it was deleted)."""
    with _JOBS_LOCK:
        for key in [k for k, j in _JOBS.items() if j.name == name]:
            _JOBS.pop(key)
