"""bikes25's labeled turns through the real pipeline, with the defaults and with the corpus's own calibration.

    CHROMA_PATH=/tmp/b25 .venv/bin/python scripts/bikes25_refusals.py

Indexes ``tests/data/bikes25_cards.jsonl`` as the corpus ``bikes25`` in CHROMA_PATH (a scratch folder, never the
app's; an existing index is reused) without its labels, as an upload would be, calibrates it
(``retrieval.calibration``: synthetic answerable turns, the pool, generated near-topic turns), then runs its 12
hand-written near-topic turns and 49 labeled questions (``bikes25_queries.jsonl``, which calibration never sees)
through the pipeline with the defaults and with the stored calibration, and prints the refused counts at the level
each turn was answered at (``full`` unless a model failed), the thresholds' source, the near-topic turns answered,
the date and the load (docs/explanation/refusal.md, "A 25-card corpus's own calibration").
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for key, value in (
    ("HF_HUB_OFFLINE", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("REFUSAL_CALIBRATE_ON_INDEX", "false"),
):
    os.environ.setdefault(key, value)

from retrieval import calibration  # noqa: E402
from retrieval.corpora import Registry  # noqa: E402
from retrieval.corpus_retrievers import retriever_for  # noqa: E402
from retrieval.settings import Settings  # noqa: E402

CARDS = ROOT / "tests" / "data" / "bikes25_cards.jsonl"
QUERIES = ROOT / "tests" / "data" / "bikes25_queries.jsonl"


def counts(retriever: Any, settings: Settings) -> dict[str, object]:
    """Refused near-topic turns and labeled questions with ``settings`` (its REFUSAL_CALIBRATION says which)."""
    rows = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()]
    near = [r["text"] for r in rows if not r["relevant"]]
    asked = [r["text"] for r in rows if r["relevant"]]
    refused = {}
    for text in near + asked:
        result = retriever.retrieve(text, settings, prescore=False)
        refused[text] = result.refusal is not None and result.refusal.refused
        source = result.refusal.thresholds if result.refusal is not None else ""
    return {
        "thresholds": source,
        "near_topic_refused": f"{sum(refused[t] for t in near)}/{len(near)}",
        "questions_refused": f"{sum(refused[t] for t in asked)}/{len(asked)}",
        "near_topic_answered": [t for t in near if not refused[t]],
    }


def main() -> int:
    if not os.environ.get("CHROMA_PATH"):
        print("set CHROMA_PATH to a scratch folder", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    registry = Registry(settings)
    if not any(e.name == "bikes25" for e in registry.entries()):
        from retrieval.cli import main as cli

        cli(["index", str(CARDS), "--name", "bikes25"])
    started = time.perf_counter()
    data = registry.open("bikes25")
    retriever = retriever_for(data, settings)
    cal = calibration.calibrate(retriever, [], data.cards, settings, name="bikes25")
    calibration.save(settings, data.chunks, cal)
    retriever.calibration = cal  # what the page reads from the store
    print(calibration.describe(cal), f"\n(calibration {time.perf_counter() - started:.0f} s)")
    print("cross-encoder threshold:", cal.thresholds.min_cross_encoder)
    print("defaults:", json.dumps(counts(retriever, settings.replace(refusal_calibration=False))))
    print("calibrated:", json.dumps(counts(retriever, settings)))
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load", os.getloadavg())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
