"""Notes a turn shows above its badge about the corpus it ran on (the message area): today, that the corpus's
refusal calibration is still running, which makes turns slower (its retrievals share the two cores) and leaves the
thresholds of before in force until it ends."""

from __future__ import annotations

from inspector import render
from retrieval.corpus_retrievers import running_calibration


def calibration_note(corpus: str | None) -> str:
    """An info message when the refusal calibration of ``corpus`` is still running in this process, else ""."""
    job = running_calibration(corpus)
    if job is None:
        return ""
    return render.render_message(
        f"The refusal calibration of {job.name} is still running ({job.done}/{job.total or '?'} turns): turns "
        "take longer until it ends, and the refusal thresholds of before it apply meanwhile (Data tab: ↻ Refusal "
        "report).",
        "info",
    )
