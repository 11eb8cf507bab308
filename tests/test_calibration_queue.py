"""Who starts a refusal calibration and how many run at once (retrieval/calibration_jobs.py,
inspector/data_tab.py ``recalibrate``): from the page only the session that uploaded the corpus (never the shipped
cards, never another session's upload), and one calibration at a time in a process: the others wait, queued, and a
queued one can be called off. Real Chroma, the real bundled models."""

from __future__ import annotations

import time

from retrieval import calibration_jobs
from retrieval.corpora import Registry
from retrieval.corpus_retrievers import calibration_state, start_calibration
from tests.test_corpus_owner import _upload, page  # noqa: F401  (the fixture)


def test_only_the_owner_re_runs_a_calibration_from_the_page(page, tmp_path):  # noqa: F811
    from inspector import data_refusal

    owner, _ = _upload(tmp_path, "notes", None)
    for name, token in (("shipped", owner), ("notes", "another session"), ("notes", None)):
        shown = data_refusal.recalibrate(name, token)
        assert "may re-run its refusal calibration" in shown or "only corpora uploaded" in shown, shown
        assert calibration_state(Registry(page).open(name), page)[1] is None  # nothing started
    calibration_jobs._CALIBRATION_SLOT.acquire()  # another corpus's calibration runs: the owner's waits its turn
    try:
        shown = data_refusal.recalibrate("notes", owner)
        job = calibration_state(Registry(page).open("notes"), page)[1]
        assert job is not None and job.status == "queued" and "Waiting: another corpus is being calibrated" in shown
        job.cancel.set()
    finally:
        calibration_jobs._CALIBRATION_SLOT.release()
    assert job.wait(30).status == "cancelled" and job.done == 0


def test_one_calibration_runs_at_a_time(page, tmp_path):  # noqa: F811
    _upload(tmp_path, "one", None)
    _upload(tmp_path, "two", None, rows=[{"id": "t1", "title": "Two", "text": "Keep the pens cool in summer."}])
    calibration_jobs._CALIBRATION_SLOT.acquire()
    try:
        jobs = [start_calibration(Registry(page).open(name), page) for name in ("one", "two")]
        time.sleep(1.0)
        assert [j.status for j in jobs] == ["queued", "queued"] and all(j.done == 0 for j in jobs)
        assert start_calibration(Registry(page).open("one"), page) is jobs[0]  # asked again: the queued one
        for job in jobs:
            job.cancel.set()
    finally:
        calibration_jobs._CALIBRATION_SLOT.release()
    assert [j.wait(30).status for j in jobs] == ["cancelled", "cancelled"]
