"""A printable worksheet of a set of exercises: one HTML page, A4 print CSS, the answer key after a page break.

The teacher downloads it from the classroom and prints it, or saves it as PDF, from the browser. Everything in it is
escaped; it loads nothing (no script, no font, no image), so it prints the same offline.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Sequence
from pathlib import Path

from inspector.exercise_view import labels_html, lists_table
from retrieval.exercises import Exercise, answer_format, reveal

esc = html.escape
# A4 is 210 mm wide; 18 mm margins leave 174 mm (about 657 CSS px) for the content.
PAGE_MARGIN_MM = 18
CSS = f"""
@page {{ size: A4; margin: {PAGE_MARGIN_MM}mm; }}
* {{ box-sizing: border-box; }}
html, body {{ margin: 0; padding: 0; }}
body {{ font: 11pt/1.4 Georgia, 'Times New Roman', serif; color: #111; max-width: 174mm; }}
h1 {{ font-size: 17pt; margin: 0 0 4mm; }}
h2 {{ font-size: 12.5pt; margin: 0 0 2mm; }}
p {{ margin: 1.5mm 0; overflow-wrap: anywhere; }}
section.exercise {{ break-inside: avoid; page-break-inside: avoid; margin: 0 0 6mm; padding-bottom: 3mm;
  border-bottom: 0.3mm solid #bbb; }}
table {{ border-collapse: collapse; margin: 2mm 0; max-width: 100%; table-layout: fixed; }}
th, td {{ border: 0.3mm solid #888; padding: 1mm 2.5mm; text-align: center; overflow-wrap: anywhere; }}
table.labels td {{ text-align: left; }}
.rel {{ font-weight: bold; }}
.blank {{ border-bottom: 0.3mm solid #444; height: 9mm; margin-top: 2mm; }}
small {{ color: #444; }}
section.key {{ break-before: page; page-break-before: always; }}
.key pre {{ white-space: pre-wrap; overflow-wrap: anywhere; font: 9.5pt/1.35 'DejaVu Sans Mono', monospace;
  margin: 1mm 0; }}
@media screen {{ body {{ margin: 10mm auto; }} }}
"""


def worksheet_html(exercises: Sequence[Exercise], title: str = "Rank fusion: exercises") -> str:
    """The whole page: the questions with space to answer, then (on a new page) the answer key with every term."""
    if not exercises:
        raise ValueError("a worksheet needs at least one exercise: pick some in the classroom first.")
    questions = "".join(_question(i, ex) for i, ex in enumerate(exercises, start=1))
    keys = "".join(_key(i, ex) for i, ex in enumerate(exercises, start=1))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{esc(title)}</h1><p>Name: ______________________ &nbsp; Date: ____________</p>"
        "<p><small>RRF(d) = Σ w / (k + rank): a document missing from a list adds nothing for it. Scores to five "
        "decimals, rounded half up.</small></p>"
        f"{questions}<section class='key'><h1>Answer key</h1>{keys}</section></body></html>"
    )


def _question(i: int, ex: Exercise) -> str:
    k = f"k = {ex.k}" if ex.method == "rrf" else "raw scores, each list in its own units"
    # the screen's tables carry classes the print CSS styles the same way (rel, labels)
    return (
        f"<section class='exercise'><h2>{i}. {esc(ex.title)}</h2><p>{esc(ex.question)}</p>"
        f"<p><small>{esc(k)}</small></p>{lists_table(ex)}{labels_html(ex)}"
        f"<p><small>Answer: {esc(answer_format(ex))}</small></p><div class='blank'></div></section>"
    )


def _key(i: int, ex: Exercise) -> str:
    r = reveal(ex)
    lines = "\n".join(row.line for row in r.rows)
    methods = "".join(
        f"<p><small>{esc(m)}: {esc(' > '.join(f'{d} ({s})' for d, s in items))}</small></p>"
        for m, items in r.methods.items()
    )
    return (
        f"<section class='exercise'><h2>{i}. {esc(ex.title)}</h2><p><b>Answer: {esc(r.answer)}</b></p>"
        f"{methods}<pre>{esc(lines)}</pre><p>Fusion: {esc(r.fusion_line)}</p><p>{esc(r.lesson)}</p></section>"
    )


def write_worksheet(exercises: Sequence[Exercise], folder: Path) -> Path:
    """The worksheet as ``worksheet-<hash>.html`` in ``folder`` (the session's own export folder)."""
    text = worksheet_html(exercises)
    path = folder / f"worksheet-{hashlib.sha256(text.encode()).hexdigest()[:12]}.html"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return path
