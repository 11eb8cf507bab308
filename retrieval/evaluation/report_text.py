"""An ``evaluate`` report as readable text: its tables (configurations, significance, categories, refusals) and
the aligned-column helpers the sweeps and A vs B tables share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def format_report(report: Mapping[str, Any]) -> str:
    """A readable text table of an ``evaluate`` report."""
    configs = list(report["configs"])
    metrics = ["ndcg@10", "recall@10", "recall@100", "mrr@10", "ms_per_turn"]
    lines = [
        f"dataset: {report['dataset']}   turns: {report['turns']} ({report['answerable_turns']} answerable)   "
        f"documents: {report['settings']['documents']}   chunks: {report['settings']['chunks']}",
        f"parent-level metrics; lists from {report['settings']['evaluation']['candidate_depth']} sub-chunks "
        f"per branch, top {report['settings']['evaluation']['top_k']} cards",
        "configured: " + ", ".join(f"{k}={v}" for k, v in report["settings"]["configured"].items()),
        "",
    ]
    lines += text_table(["config", *metrics], [[c, *(report["configs"][c].get(m) for m in metrics)] for c in configs])
    sig = report.get("significance")
    if sig:
        lines += [
            "",
            f"significance vs best single branch ({sig['baseline']}) on {sig['metric']}: "
            f"paired randomization, seed {sig['seed']}, {sig['resamples']} resamples, Holm-adjusted",
        ]
        rows = [
            [
                c,
                t["diff"],
                f"[{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]",
                t["p_value"],
                t["p_holm"],
                f"{t['wins']}/{t['losses']}/{t['ties']}",
                "yes" if t["significant"] else "no",
            ]
            for c, t in sig["tests"].items()
        ]
        lines += text_table(["config", "diff", "95% CI", "p", "p_holm", "win/loss/tie", "significant"], rows)
    for c, v in report.get("verdict", {}).items():
        beats = ", ".join(
            f"{k.removeprefix('beats_')}: {'yes' if ok else 'NO'}"
            for k, ok in v.items()
            if k.startswith("beats_") and k != "beats_each_branch"
        )
        lines.append(
            f"{c} beats each branch alone on ndcg@10? {'yes' if v['beats_each_branch'] else 'NO'} "
            f"({beats}); significant vs best branch: {'yes' if v['significant_vs_best_branch'] else 'no'}"
        )
    cats = report.get("categories") or {}
    if len(cats) > 1 or (cats and next(iter(cats)) != "beir"):
        lines += ["", "nDCG@10 by category"]
        lines += text_table(
            ["category", "turns", *configs],
            [[cat, row["turns"], *(row[c]["ndcg@10"] for c in configs)] for cat, row in cats.items()],
        )
    ref = report.get("refusal")
    if ref and ref["refusal_rate"]:
        rule = ref.get("refusal_rule", "cosine")
        source = f" (thresholds: {ref['thresholds']})" if rule == "evidence" and ref.get("thresholds") else ""
        lines += [
            "",
            f"refusals by REFUSAL_RULE={rule}{source} at MIN_SIMILARITY="
            f"{ref['min_similarity']:g}, top_k={ref['top_k']} "
            f"({ref['no_match_turns']} no_match turns, {ref['answerable_turns']} answerable)",
        ]
        lines += text_table(
            ["config", "refusal rate (no_match)", "false refusals (answerable)"],
            [[c, ref["refusal_rate"][c], ref["false_refusal_rate"][c]] for c in ref["refusal_rate"]],
        )
    levels = report.get("configured_levels") or {}
    if set(levels) - {"full", "no_match"}:
        lines.append(
            "levels of the configured calls: "
            + ", ".join(f"{k}={v}" for k, v in levels.items())
            + " (a turn below full lost a stage, e.g. the reranker's time budget)"
        )
    if report.get("reranker_missing_turns"):
        lines.append(
            f"warning: the reranker did not run on {report['reranker_missing_turns']} turns (full = fused order there)"
        )
    if report.get("cached_turns"):
        lines.append(f"warning: {report['cached_turns']} turns were already cached: their latency is not a cold call")
    lines += ["", f"latency: {report['notes']['latency']}"]
    return "\n".join(lines)


def cell(v: Any) -> str:
    """One table cell: ``-`` for a missing value, 4 decimals for a float below 100 (1 above), else ``str``."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.4f}"
    return str(v)


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Aligned columns: the header, a rule, then the rows (the first column left-aligned, the others right)."""
    cells = [[str(h) for h in header]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=False)))

    return [line(cells[0]), line(["-" * w for w in widths]), *(line(r) for r in cells[1:])]
