"""What the Data tab and a turn say about the corpus in use: its size in the picker (never "not loaded yet" for the
corpus a turn runs on), and that its refusal calibration is still running (turns took 5-8 s then, with no hint)."""

from __future__ import annotations

import re

from inspector import data_panels, turn_notes
from retrieval import calibration_jobs
from retrieval.calibration_jobs import CalibrationJob
from retrieval.corpora import Registry
from retrieval.corpus_entries import SHIPPED
from tests.conftest import control_values


def test_the_picker_gives_the_size_of_the_corpus_in_use(ui):
    labels = {name: label for label, name in data_panels.picker_choices()}
    assert "not loaded yet" not in labels[SHIPPED] and re.search(r"\d+ sub-chunks", labels[SHIPPED]), labels[SHIPPED]


def test_a_turn_run_while_its_corpus_calibrates_says_so(ui, mini_settings):
    text = "GlucoSense GS-40 error E-07 (calibration note unit)"
    assert turn_notes.calibration_note(None) == ""
    quiet = list(ui.stream_turn(text, *control_values()))
    assert all(step[0] in ("", ui.gr.skip()) or "calibration" not in step[0] for step in quiet)
    data = Registry(mini_settings).open(SHIPPED)
    job = CalibrationJob(("unit-test", SHIPPED), data, mini_settings, lambda: None)  # never started
    job.status, job.done, job.total = "running", 3, 40
    with calibration_jobs._LOCK:
        calibration_jobs._CALIBRATIONS[job.key] = job
    try:
        note = turn_notes.calibration_note(None)
        assert "refusal calibration of shipped is still running (3/40 turns)" in note and "take longer" in note
        steps = list(ui.stream_turn(text + " again", *control_values()))
        assert all(note == step[0] for step in steps), [step[0][:80] for step in steps]
        assert ui.run_turn(text, *control_values()).message == note
    finally:
        with calibration_jobs._LOCK:
            calibration_jobs._CALIBRATIONS.pop(job.key, None)
    assert turn_notes.calibration_note(SHIPPED) == ""
