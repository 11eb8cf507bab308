"""How long an abandoned heavy job keeps the one heavy-job slot once its page goes away (issue 19, defect 4).

    .venv/bin/python scripts/heavy_job_cancel.py [--after 10] [--json]

Runs the Evaluation tab's A vs B (tuned defaults vs the ADR recipe over the shipped labeled set, 71 turns each
side) as a browser session would, in a thread with that session's request, on a fresh temporary Chroma store. After
``--after`` turns it does what Gradio does when the page closes (``inspector.jobs.end_session``, the ``unload``
handler) and measures how long the job takes to return. It prints that, the turns run, the seconds per turn, the
1-minute load average at the start, the CPU count and the date.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", type=int, default=10, help="turns to run before the page goes away")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import gradio as gr
    from gradio.context import LocalContext

    from inspector import compare_eval, handlers, jobs
    from retrieval.retriever_cache import get_retriever
    from retrieval.settings import Settings

    settings = Settings.from_env(
        {},
        chroma_path=tempfile.mkdtemp(prefix="heavy-job-"),
        bm25_timeout_ms=60_000,
        dense_timeout_ms=60_000,
        rerank_timeout_ms=60_000,
    )
    handlers.use_base_settings(settings)
    get_retriever(settings, progress=lambda done, total: None)  # the index is built before the clock starts
    ticks: list[float] = []
    out: list = []

    def session() -> None:
        LocalContext.request.set(gr.Request(session_hash="abandoned"))
        out.append(
            compare_eval.show_ab(
                "tuned defaults",
                "",
                "ADR recipe",
                "",
                "most broken first",
                None,
                0,
                lambda value, desc=None: ticks.append(time.monotonic()),
            )
        )

    load = os.getloadavg()[0]
    thread = threading.Thread(target=session, daemon=True)
    thread.start()
    while len(ticks) < args.after and thread.is_alive():
        time.sleep(0.01)
    gone = time.monotonic()
    jobs.end_session(gr.Request(session_hash="abandoned"))
    thread.join()
    result = {
        "stopped_after_s": round(time.monotonic() - gone, 2),
        "turns_run": len(ticks),
        "turns_in_all": 142,
        "s_per_turn": round((ticks[-1] - ticks[0]) / max(len(ticks) - 1, 1), 2),
        "cancelled": "Cancelled" in out[0][0],
        "load_1min": round(load, 1),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(
        json.dumps(result)
        if args.json
        else f"stopped {result['stopped_after_s']} s after the page went away; {result['turns_run']} of 142 turns run "
        f"at {result['s_per_turn']} s a turn (load {result['load_1min']}, {result['cpus']} CPUs, {result['date']})"
    )
    return 0 if result["cancelled"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
