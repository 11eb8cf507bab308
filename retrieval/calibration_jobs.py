"""Refusal calibration jobs: ``retrieval.calibration.calibrate`` over a corpus in the background, one at a time in a
process (a queue of one), started by indexing itself, the CLI (``python -m retrieval calibrate``), or from the page
by the session that owns the corpus (``retrieval.corpora.Registry.may_calibrate``)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.calibration_store import Calibration

log = logging.getLogger(__name__)
_LOCK = threading.Lock()


def calibrate_on_index(settings: Settings) -> bool:
    """``REFUSAL_CALIBRATE_ON_INDEX``; the process environment can switch it off even for Settings built in code
    (the test suite does: each upload would run a few hundred turns in the background)."""
    off = os.environ.get("REFUSAL_CALIBRATE_ON_INDEX", "").strip().lower() in {"false", "0", "no", "off"}
    return settings.refusal_calibrate_on_index and not off


# One calibration runs at a time in this process (each runs a few hundred turns through the pipeline): the others
# wait their turn ("queued"), so seven corpora calibrating at once cannot slow every session's turns.
_CALIBRATION_SLOT = threading.Semaphore(1)


class CalibrationJob:
    """One run of ``retrieval.calibration.calibrate`` over a corpus, in the background, once the queue of one lets it
    (``_CALIBRATION_SLOT``); stored when done (the shipped cards: reported only, they keep the defaults tuned on their
    dev sets). Started only by indexing itself, the CLI, or from the page by the session that owns the corpus."""

    def __init__(self, key: tuple, data: Any, settings: Settings, open_retriever: Callable[[], Any]) -> None:
        """``data``: the corpus (``retrieval.corpora.CorpusData``); ``settings``: the ones it is searched with
        (``corpora.settings_for``); ``open_retriever``: its process-wide retriever (``corpora.retriever_for``)."""
        self.key, self.data, self.settings, self.open_retriever = key, data, settings, open_retriever
        self.name = data.entry.name
        self.done, self.total = 0, 0
        self.status, self.error = "queued", ""  # queued, running, done, failed, cancelled
        self.result: Calibration | None = None
        self.started = time.monotonic()
        self.cancel = threading.Event()  # a queued job set so never runs (its corpus deleted, a test)
        self._thread = threading.Thread(target=self._run, name=f"calibrate-{self.name}", daemon=True)

    @property
    def active(self) -> bool:
        return self.status in ("queued", "running")

    def _progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def _run(self) -> None:
        while not _CALIBRATION_SLOT.acquire(timeout=0.25):
            if self.cancel.is_set():
                self.status = "cancelled"
                return
        try:
            if self.cancel.is_set():
                self.status = "cancelled"
                return
            self.status, self.started = "running", time.monotonic()
            self._calibrate()
        finally:
            _CALIBRATION_SLOT.release()

    def _calibrate(self) -> None:
        from retrieval import calibration

        try:
            retriever, s = self.open_retriever(), self.settings
            result = calibration.calibrate(
                retriever, self.data.queries, self.data.cards, s, name=self.name, progress=self._progress
            )
            if self.data.key is not None:
                calibration.save(s, self.data.chunks, result)
                retriever.calibration = result
            self.result, self.status = result, "done"
        except Exception as exc:  # shown in the Data tab and the CLI; the log keeps the traceback
            log.exception("calibrating %s failed", self.name)
            self.status, self.error = "failed", f"{type(exc).__name__}: {exc}"

    def wait(self, timeout: float | None = None) -> CalibrationJob:
        self._thread.join(timeout)
        return self


_CALIBRATIONS: dict[tuple, CalibrationJob] = {}


def start(data: Any, settings: Settings, open_retriever: Callable[[], Any]) -> CalibrationJob:
    """Calibrate the corpus's refusal thresholds in the background, one corpus at a time (a queued or running job
    for it is joined): ``retrieval.corpora.start_calibration`` passes the corpus's own settings and retriever."""
    from retrieval.retriever_cache import retriever_key

    key = retriever_key(settings, data.key)
    with _LOCK:
        job = _CALIBRATIONS.get(key)
        if job is not None and job.active:
            return job
        job = _CALIBRATIONS[key] = CalibrationJob(key, data, settings, open_retriever)
        job._thread.start()
        return job


def running(name: str) -> CalibrationJob | None:
    """The calibration of this process running now on the corpus called ``name`` (None: none is)."""
    with _LOCK:
        return next((j for j in _CALIBRATIONS.values() if j.name == name and j.status == "running"), None)


def state(data: Any, settings: Settings) -> tuple[Any, CalibrationJob | None]:
    """(the calibration in force for this corpus or None, the latest calibration job of this process or None);
    ``settings``: the corpus's own (``retrieval.corpora.settings_for``)."""
    from retrieval import calibration
    from retrieval.retriever_cache import retriever_key

    with _LOCK:
        job = _CALIBRATIONS.get(retriever_key(settings, data.key))
    if data.key is None:
        return None, job
    return calibration.load(settings, data.chunks), job
