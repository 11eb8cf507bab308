"""The classroom exercises as escaped HTML: the question with its lists, the verdict, the hints, the reveal (every
term, five decimals) and the teacher's counts. Pure functions over ``retrieval.exercises`` values; every string that
reaches HTML is escaped (an exercise made from a turn carries a turn and card titles a user typed or uploaded)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from retrieval.exercises import Exercise, Reveal, Verdict, answer_format, documents

esc = html.escape
METHOD_TITLES = {"raw_sum": "Raw sum (the mistake)", "min_max": "Min-max, equal weights", "rrf": "RRF (ranks only)"}
CSS = """
.exercise {font-size: 15px; line-height: 1.45}
.exercise table {border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 6px 0 10px}
.exercise th, .exercise td {border: 1px solid #d1d5db; padding: 3px 9px; text-align: center}
.exercise th:first-child {text-align: left}
.exercise .labels td {text-align: left}
.exercise .rel {font-weight: 600; color: #047857}
.exercise .right {color: #047857; font-weight: 600}
.exercise .wrong {color: #b91c1c; font-weight: 600}
.exercise .unread {color: #92400e; font-weight: 600}
.exercise pre {white-space: pre-wrap; font-size: 14px; background: #f8fafc; padding: 8px; border-radius: 6px}
.exercise .source {color: #6b7280; font-size: 13px}
"""


def lists_table(ex: Exercise) -> str:
    """The exercise's lists side by side, rank by rank (with raw scores when it has them)."""
    lists = {n: [(d, None) for d in v] for n, v in ex.lists.items()} if not ex.scored else dict(ex.scored)
    depth = max(len(v) for v in lists.values())
    head = "".join(f"<th>{esc(n)}{_weight(ex, n)}</th>" for n in lists)
    rows = []
    for i in range(depth):
        cells = []
        for items in lists.values():
            if i < len(items):
                doc, score = items[i]
                shown = esc(doc) + (f" <small>({score:g})</small>" if score is not None else "")
                cells.append(f"<td class='{'rel' if doc in ex.relevant else ''}'>{shown}</td>")
            else:
                cells.append("<td></td>")
        rows.append(f"<tr><th>{i + 1}</th>{''.join(cells)}</tr>")
    return f"<table><thead><tr><th>rank</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _weight(ex: Exercise, name: str) -> str:
    w = ex.weights.get(name, 1.0)
    return f" <small>(w = {w:g})</small>" if ex.weights and w != 1 else ""


def labels_html(ex: Exercise) -> str:
    """What each id stands for (a card's title), and which the labels mark relevant."""
    if not ex.labels:
        return ""
    rows = "".join(
        f"<tr><td><b>{esc(d)}</b></td><td>{esc(ex.labels.get(d, ''))}</td>"
        f"<td>{'relevant (grade ' + str(ex.relevant[d]) + ')' if d in ex.relevant else ''}</td></tr>"
        for d in documents(ex)
    )
    return f"<table class='labels'><tbody>{rows}</tbody></table>"


def exercise_html(ex: Exercise, position: int = 0, total: int = 0) -> str:
    """The question, its lists and k, how to write the answer."""
    where = f"Exercise {position} of {total}: " if total else ""
    k = f"k = {ex.k}" if ex.method == "rrf" else "raw scores, each list in its own units"
    return (
        f"<div class='exercise'><h3>{esc(where + ex.title)}</h3><p>{esc(ex.question)}</p>"
        f"<p><small>{esc(k)}</small></p>{lists_table(ex)}{labels_html(ex)}"
        f"<p><b>Answer:</b> {esc(answer_format(ex))}</p>"
        f"<p class='source'>{esc(ex.source)}</p></div>"
    )


def verdict_html(verdict: Verdict) -> str:
    """Right or wrong, and what was right and what differs."""
    cls = "right" if verdict.correct else ("wrong" if verdict.understood else "unread")
    mark = "✓ " if verdict.correct else ("✗ " if verdict.understood else "")
    items = "".join(f"<li>{esc(d)}</li>" for d in verdict.details)
    return (
        f"<div class='exercise' data-correct='{str(verdict.correct).lower()}'><p class='{cls}'>{mark}"
        f"{esc(verdict.summary)}</p>{f'<ul>{items}</ul>' if items else ''}</div>"
    )


def hints_html(hints: Sequence[str], more: bool) -> str:
    if not hints:
        return ""
    items = "".join(f"<li>{esc(h)}</li>" for h in hints)
    tail = "" if more else "<p><small>No more hints.</small></p>"
    return f"<div class='exercise'><b>Hints</b><ol>{items}</ol>{tail}</div>"


def reveal_html(r: Reveal) -> str:
    """The answer, each document's terms and sum (five decimals, half up), the fused order and the lesson."""
    lines = "\n".join(row.line for row in r.rows)
    methods = ""
    if r.methods:
        cols = "".join(
            f"<td style='vertical-align:top'><b>{esc(METHOD_TITLES[m])}</b><br>"
            + "<br>".join(f"{i}. {esc(d)} ({s})" for i, (d, s) in enumerate(items, 1))
            + "</td>"
            for m, items in r.methods.items()
        )
        methods = f"<table><tbody><tr>{cols}</tr></tbody></table>"
    return (
        f"<div class='exercise'><p><b>Answer:</b> {esc(r.answer)}</p>{methods}"
        f"<pre>{esc(lines)}</pre><p><b>Fusion:</b> {esc(r.fusion_line)}</p><p>{esc(r.lesson)}</p></div>"
    )


def message_html(text: str, kind: str = "unread") -> str:
    return f"<div class='exercise'><p class='{esc(kind)}'>{esc(text)}</p></div>" if text else ""


def counts_html(counts: Mapping[str, tuple[int, int]], titles: Mapping[str, str]) -> str:
    """Per exercise of the class link: how many sessions answered and how many got it right (no names)."""
    rows = "".join(
        f"<tr><td style='text-align:left'>{esc(titles.get(ex_id, ex_id))}</td><td>{answered}</td><td>{right}</td></tr>"
        for ex_id, (answered, right) in counts.items()
    )
    return (
        "<div class='exercise' id='exercise-count-table'><table><thead><tr><th>exercise</th><th>answered</th>"
        f"<th>right before the reveal</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )


def links_html(student: str, teacher: str) -> str:
    return (
        "<div class='exercise'><p><b>Student link</b> (give it to the class):<br>"
        f"<a class='class-link' href='{esc(student, quote=True)}' target='_blank' rel='noopener'>{esc(student)}</a></p>"
        "<p><b>Teacher link</b> (keep it: it shows the counts for this class link):<br>"
        f"<a class='teacher-link' href='{esc(teacher, quote=True)}' target='_blank' rel='noopener'>{esc(teacher)}</a>"
        "</p></div>"
    )
