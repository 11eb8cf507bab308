"""The Evaluation tab's HTML: the summary (what is shown, the metrics table, verdict, significance, refusals) and
the per-turn wins and losses of a hybrid against the best single branch. Every value from a report is escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from inspector.evaluation_reports import METRIC_NAMES, ordered_configs
from retrieval.evaluation.turn_runs import BRANCHES

CSS = """
.eval-tab table {border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0 12px}
.eval-tab th, .eval-tab td {border-bottom: 1px solid #e5e7eb; padding: 3px 9px; text-align: right; vertical-align: top}
.eval-tab th:first-child, .eval-tab td:first-child, .eval-tab td.text {text-align: left}
.eval-tab .fixed {color: #047857; font-weight: 600}
.eval-tab .broke {color: #b91c1c; font-weight: 600}
.eval-tab .note {color: #52606d}
"""

esc = html.escape


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "&ndash;"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 100 else f"{v:.{digits}f}"
    return esc(str(v))


def summary_html(report: Mapping[str, Any], source_note: str, configs: Sequence[str]) -> str:
    """What is shown (live or cached, when, how), the metrics table, verdict, significance and refusals."""
    configs = ordered_configs(configs, report)
    cols = [*METRIC_NAMES, "ms_per_turn"]
    head = "".join(f"<th>{esc(m)}</th>" for m in cols)
    rows = "".join(
        "<tr><td><b>"
        + esc(c)
        + "</b></td>"
        + "".join(f"<td>{_num(report['configs'][c].get(m))}</td>" for m in cols)
        + "</tr>"
        for c in configs
    )
    configured = (report.get("settings") or {}).get("configured") or {}
    shown = ", ".join(f"{k}={v}" for k, v in configured.items() if k not in ("embedding_model", "reranker_model"))
    parts = [
        f"<div class='eval-tab'><p class='note'>{esc(source_note)}</p>",
        *([f"<p class='note'>{esc(report['note'])}</p>"] if report.get("note") else []),
        *([f"<p class='note'>Configured settings: {esc(shown)}.</p>"] if shown else []),
        f"<table id='eval-table'><caption>{esc(str(report['dataset']))}: "
        f"{_num(report.get('answerable_turns'))} answerable turns</caption>"
        f"<thead><tr><th>config</th>{head}</tr></thead><tbody>{rows}</tbody></table>",
    ]
    for c, v in (report.get("verdict") or {}).items():
        if c not in configs:
            continue
        beats = ", ".join(
            f"{esc(k.removeprefix('beats_'))}: {'yes' if ok else '<b>no</b>'}"
            for k, ok in v.items()
            if k.startswith("beats_") and k != "beats_each_branch"
        )
        parts.append(
            f"<p><b>{esc(c)}</b> beats each branch alone on nDCG@10: "
            f"{'yes' if v.get('beats_each_branch') else '<b>no</b>'} ({beats}); significant vs the best "
            f"branch: {'yes' if v.get('significant_vs_best_branch') else 'no'}.</p>"
        )
    sig = report.get("significance")
    if sig:
        srows = "".join(
            f"<tr><td>{esc(c)}</td><td>{_num(t['diff'])}</td><td>[{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]</td>"
            f"<td>{_num(t['p_value'])}</td><td>{_num(t['p_holm'])}</td><td>{t['wins']}/{t['losses']}/{t['ties']}</td>"
            f"<td>{'yes' if t['significant'] else 'no'}</td></tr>"
            for c, t in sig["tests"].items()
            if c in configs
        )
        parts.append(
            f"<p>Against the best single branch (<b>{esc(sig['baseline'])}</b>) on {esc(sig['metric'])}: "
            f"{esc(sig['method'])}; seed {sig['seed']}, {sig['resamples']} resamples.</p>"
            f"<table><thead><tr><th>config</th><th>diff</th><th>95% CI</th><th>p</th><th>p (Holm)</th>"
            f"<th>win/loss/tie</th><th>significant</th></tr></thead><tbody>{srows}</tbody></table>"
        )
    ref = report.get("refusal")
    if ref and ref.get("refusal_rate"):
        rrows = "".join(
            f"<tr><td>{esc(c)}</td><td>{_num(ref['refusal_rate'][c])}</td>"
            f"<td>{_num(ref['false_refusal_rate'][c])}</td></tr>"
            for c in ref["refusal_rate"]
        )
        source = (
            f" by the evidence rule (thresholds: {esc(ref['thresholds'])})"
            if ref.get("refusal_rule") == "evidence" and ref.get("thresholds")
            else ""
        )
        parts.append(
            f"<p>Refusals{source} at MIN_SIMILARITY={ref['min_similarity']:g}, top_k={ref['top_k']} "
            f"({ref['no_match_turns']} no_match turns, {ref['answerable_turns']} answerable):</p>"
            f"<table><thead><tr><th>config</th><th>refusal rate (no_match)</th>"
            f"<th>false refusals (answerable)</th></tr></thead><tbody>{rrows}</tbody></table>"
            f"<p class='note'>{esc(ref.get('note', ''))}</p>"
        )
    notes = report.get("notes") or {}
    if notes.get("latency"):
        parts.append(f"<p class='note'>Latency: {esc(notes['latency'])}.</p>")
    if report.get("cached_turns"):
        parts.append(
            f"<p class='note'>{report['cached_turns']} turns were already cached in this process: their "
            f"latency is not a cold call.</p>"
        )
    levels = report.get("configured_levels") or {}
    if set(levels) - {"full", "no_match"}:
        parts.append(
            "<p class='note'>Levels of the configured calls: "
            + esc(", ".join(f"{k}={v}" for k, v in levels.items()))
            + " (a turn below full lost a stage, e.g. the reranker's time budget).</p>"
        )
    if report.get("reranker_missing_turns"):
        parts.append(f"<p class='broke'>The reranker did not run on {report['reranker_missing_turns']} turns.</p>")
    parts.append("</div>")
    return "".join(parts)


def wins_losses(
    report: Mapping[str, Any], hybrid: str, baseline: str, metric: str = "ndcg@10"
) -> dict[str, list[dict[str, Any]]]:
    """Turns the hybrid fixed (better than the baseline branch) and broke (worse), biggest change first."""
    fixed, broke = [], []
    for turn in report.get("per_turn", []):
        scores = turn.get(metric)
        if not scores or hybrid not in scores or baseline not in scores:
            continue
        delta = scores[hybrid] - scores[baseline]
        row = {**turn, "delta": delta}
        if delta > 1e-12:
            fixed.append(row)
        elif delta < -1e-12:
            broke.append(row)
    fixed.sort(key=lambda r: (-r["delta"], r["id"]))
    broke.sort(key=lambda r: (r["delta"], r["id"]))
    return {"fixed": fixed, "broke": broke}


def best_branch(report: Mapping[str, Any]) -> str | None:
    """The baseline of the report's significance test, else the branch with the higher nDCG@10."""
    sig = report.get("significance")
    if sig:
        return sig["baseline"]
    present = [b for b in BRANCHES if b in report["configs"]]
    return max(present, key=lambda b: report["configs"][b]["ndcg@10"] or 0.0) if present else None


def wins_losses_html(report: Mapping[str, Any], hybrid: str, limit: int = 25) -> str:
    """Two tables: the turns ``hybrid`` fixed and the turns it broke, against the best single branch."""
    baseline = best_branch(report)
    if baseline is None or hybrid not in report["configs"]:
        return "<div class='eval-tab'><p>Needs a branch (bm25 or dense) and the chosen hybrid in the report.</p></div>"
    wl = wins_losses(report, hybrid, baseline)
    other = [b for b in BRANCHES if b in report["configs"] and b != baseline]

    def table(rows: list[dict[str, Any]], cls: str) -> str:
        if not rows:
            return "<p class='note'>none</p>"
        body = []
        for r in rows[:limit]:
            s = r["ndcg@10"]
            tops = "; ".join(f"{esc(c)}: {esc(', '.join(r['top3'].get(c, [])))}" for c in (baseline, hybrid))
            body.append(
                f"<tr><td>{esc(r['id'])}</td><td>{esc(r['category'])}</td>"
                f"<td class='text'>{esc(r.get('text', '(text not stored: third-party set)'))}"
                f"</td><td class='text'>{esc(', '.join(f'{k}:{v}' for k, v in r['relevant'].items()))}</td>"
                f"<td>{s[baseline]:.3f}</td>"
                + "".join(f"<td>{s[b]:.3f}</td>" for b in other)
                + f"<td>{s[hybrid]:.3f}</td><td class='{cls}'>{r['delta']:+.3f}</td>"
                f"<td class='text note'>{tops}</td></tr>"
            )
        more = f"<p class='note'>and {len(rows) - limit} more</p>" if len(rows) > limit else ""
        head = (
            "<tr><th>turn</th><th>category</th><th>text</th><th>relevant</th>"
            f"<th>{esc(baseline)}</th>"
            + "".join(f"<th>{esc(b)}</th>" for b in other)
            + f"<th>{esc(hybrid)}</th><th>&Delta;</th><th>top 3</th></tr>"
        )
        return f"<table><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>{more}"

    return (
        f"<div class='eval-tab'><p>Per-turn nDCG@10 of <b>{esc(hybrid)}</b> against the best single branch "
        f"(<b>{esc(baseline)}</b>): {len(wl['fixed'])} turns fixed, {len(wl['broke'])} broken.</p>"
        f"<h4 class='fixed'>Fixed by {esc(hybrid)}</h4>{table(wl['fixed'], 'fixed')}"
        f"<h4 class='broke'>Broken by {esc(hybrid)}</h4>{table(wl['broke'], 'broke')}</div>"
    )


def error_html(message: str) -> str:
    return f"<div class='eval-tab'><p class='broke'>{esc(message)}</p></div>"
