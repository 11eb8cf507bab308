"""The reports the Evaluation tab shows: its Dataset menu (the live shipped set, every registry corpus with labeled
turns, the cached ``runs/*/report.json``), loading one with a sentence saying honestly what it is, and which of a
report's configurations and metrics are shown."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inspector import handlers
from inspector.compare_eval import sampled
from retrieval.corpus_entries import SHIPPED
from retrieval.evaluation.labeled import describe, labeled_entries
from retrieval.evaluation.run_files import load_report
from retrieval.evaluation.turn_runs import CONFIGS
from retrieval.settings import PROJECT_ROOT

log = logging.getLogger(__name__)


LIVE_PREFIX = "live:"
LIVE = LIVE_PREFIX + SHIPPED
RUNS_DIR = PROJECT_ROOT / "runs"
METRIC_NAMES = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def corpus_sources() -> list[tuple[str, str]]:
    """A live entry for every registry corpus with labeled turns besides the shipped set (``live:<name>``)."""
    try:
        entries = labeled_entries(handlers.base_settings())
    except (OSError, ValueError) as exc:  # an unreadable data root must not take the tab down
        log.warning("cannot list the corpora with labeled turns: %s", exc)
        return []
    return [(f"{e.name}: live run ({describe(e)})", LIVE_PREFIX + e.name) for e in entries if e.kind != SHIPPED]


def list_sources(runs_dir: Path | None = None, corpora: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """Dropdown choices: the live shipped set, the live ``corpora`` (``corpus_sources()``), then every cached
    ``<runs_dir>/*/report.json`` (default runs/)."""
    runs_dir = Path(runs_dir) if runs_dir is not None else RUNS_DIR
    choices = [("Shipped labeled set (live run in this process)", LIVE), *corpora]
    if runs_dir.is_dir():
        for path in sorted(runs_dir.glob("*/report.json")):
            try:
                report = load_report(path)
            except ValueError as exc:
                log.warning("skipping %s: %s", path, exc)
                continue
            when = report.get("written_at", "unknown time")
            choices.append((f"{report['dataset']}: cached file {path.parent.name}/report.json ({when})", str(path)))
    return choices


def ordered_configs(configs: Sequence[str], report: Mapping[str, Any]) -> list[str]:
    """The picked ``configs`` the report holds, in the evaluator's order (``CONFIGS``)."""
    return [c for c in CONFIGS if c in configs and c in report["configs"]]


def live_note(report: Mapping[str, Any]) -> str:
    """What a live run scored, in words: which corpus, when, how many of its labeled turns, how long."""
    name = report.get("corpus") or SHIPPED
    what = "the shipped labeled set" if name == SHIPPED else f"corpus {name}"
    total, turns = report.get("total_turns", report["turns"]), report["turns"]
    scored = f"all {turns} labeled turns scored" if turns >= total else sampled(turns, total, report) + " scored"
    return (
        f"Shown: a live run of {what} in this process at {report.get('written_at', '?')}: {scored} "
        f"({report.get('wall_seconds', '?')} s), with the configured settings."
    )


def load_source(
    source: str,
    configs: Sequence[str],
    progress: Callable[[int, int, str], None] | None = None,
    limit: int | None = None,
) -> tuple[dict[str, Any], str]:
    """The report for a dropdown value (a live corpus, at most ``limit`` turns, or a cached file) and a sentence
    saying honestly what it is."""
    if source.startswith(LIVE_PREFIX):
        from retrieval.evaluation.corpus_eval import evaluate_corpus

        report = evaluate_corpus(
            source.removeprefix(LIVE_PREFIX),
            handlers.base_settings(),
            configs or list(CONFIGS),
            limit=limit,
            progress=progress,
        )
        return report, live_note(report)
    path = Path(source)
    report = load_report(path)
    try:
        shown = path.resolve().relative_to(PROJECT_ROOT)
    except ValueError:
        shown = path
    return report, (
        f"Shown: the cached file {shown}, written {report.get('written_at', 'at an unknown time')} by "
        f"`{report.get('command', 'python -m retrieval eval')}` ({report.get('wall_seconds', '?')} s). "
        f"Not re-run here; run that command again to refresh it."
    )
