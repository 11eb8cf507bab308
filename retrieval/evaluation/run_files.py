"""An evaluation on disk: TREC run files and qrels any tool reads (``eval --save-runs DIR``), and the saved
``report.json`` the Evaluation tab shows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval.evaluation.turn_runs import TurnRun


def save_runs(
    folder: str | Path, runs: Sequence[TurnRun], report: Mapping[str, Any], configs: Sequence[str]
) -> list[Path]:
    """Write TREC run files (``<config>.trec``: qid Q0 docid rank score tag, score = list length - rank + 1,
    so any tool sorts them back into our order), the qrels (``qrels.trec``) and the report (``report.json``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for c in configs:
        path = folder / f"{c}.trec"
        with path.open("w", encoding="utf-8") as out:
            for r in runs:
                n = len(r.ranked[c])
                for rank, doc in enumerate(r.ranked[c], start=1):
                    out.write(f"{_trec_id(r.query.id)} Q0 {_trec_id(doc)} {rank} {n - rank + 1} {c}\n")
        written.append(path)
    qrels = folder / "qrels.trec"
    with qrels.open("w", encoding="utf-8") as out:
        for r in runs:
            for doc, grade in sorted(r.query.relevant.items()):
                out.write(f"{_trec_id(r.query.id)} 0 {_trec_id(doc)} {grade}\n")
    written.append(qrels)
    path = folder / "report.json"
    path.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    written.append(path)
    return written


def _trec_id(value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"id {value!r} cannot go into a TREC file: ids must be non-empty and have no whitespace.")
    return value


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a ``report.json`` written by ``--save-runs`` (the Evaluation tab's cached results)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(
            f"{path}: no such report. Write one with `python -m retrieval eval --save-runs DIR`."
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}). Re-run the eval to rewrite it.") from None
    if not isinstance(data, dict) or not {"dataset", "turns", "configs"} <= set(data):
        raise ValueError(f"{path}: not an eval report (needs dataset, turns, configs).")
    return data
