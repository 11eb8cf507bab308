"""The Data tab's refusal panel: the picked corpus's calibration (its thresholds and what they refuse), a new
calibration started, and the refusal text kept with the corpus."""

from __future__ import annotations

import logging

import gradio as gr

from inspector import render
from inspector.data_panels import get_registry, get_settings, message_html
from retrieval.corpus_entries import SHIPPED
from retrieval.corpus_retrievers import is_ready
from retrieval.formats import LoadError

log = logging.getLogger(__name__)


def calibration_html(name: str | None) -> str:
    """The picked corpus's refusal calibration: its thresholds and what it refuses on held-out turns, per level
    (or that it runs, failed, or is not calibrated yet). Everything escaped."""
    from retrieval.corpus_retrievers import calibration_state

    try:
        data = get_registry().open(name or SHIPPED)
        stored, job = calibration_state(data, get_settings())
    except Exception as exc:
        return f'<div class="calibration">Refusal calibration: unavailable ({render.esc(str(exc))}).</div>'
    parts = []
    if job is not None and job.status == "queued":
        parts.append("<p>Waiting: another corpus is being calibrated (one at a time; press ↻ to update).</p>")
    elif job is not None and job.status == "running":
        parts.append(f"<p>Calibrating: {job.done}/{job.total or '?'} turns run (press ↻ to update).</p>")
    elif job is not None and job.status == "failed":
        parts.append(f"<p>The last calibration failed: {render.esc(job.error)}</p>")
    shown = stored or (job.result if job is not None and job.status == "done" else None)
    if shown is None:
        parts.append(
            "<p>"
            + (
                "The shipped cards use the defaults tuned on their dev sets (README, Refusal)."
                if data.key is None
                else "Not calibrated yet: the default thresholds apply."
            )
            + "</p>"
        )
    else:
        r = shown.report
        rows = "".join(
            f"<tr><td>{render.esc(level)}</td><td>{_frac(row['ood_held'])}</td><td>{_frac(row['answerable_held'])}"
            f"</td><td>{_frac(row['ood_fit'])}</td><td>{_frac(row['answerable_fit'])}</td></tr>"
            for level, row in r["levels"].items()
        )
        th = shown.thresholds.to_dict()
        knobs = ", ".join(f"{render.esc(k)}={render.esc(v)}" for k, v in th.items() if k != "source")
        note = " (a report only: the shipped cards keep their defaults)" if data.key is None else ""
        parts.append(
            f"<p>{render.esc(shown.thresholds.source)}{note}: {r['turns']} turns "
            f"({render.esc(r['answerable_origin'])} answerable turns and the out-of-domain pool), "
            f"{r['seconds']} s.</p><table><thead><tr><th>level</th><th>out-of-domain refused (held out)</th>"
            f"<th>false refusals (held out)</th><th>out-of-domain refused (fit)</th><th>false refusals "
            f"(fit)</th></tr></thead><tbody>{rows}</tbody></table><p class='thresholds'>{knobs}</p>"
        )
    return '<div class="calibration"><b>Refusal calibration</b>' + "".join(parts) + "</div>"


def _frac(pair: list[int]) -> str:
    k, n = pair
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "–"


def recalibrate(name: str | None, token: str | None = None) -> str:
    """Start calibrating the picked corpus again (in the background, one corpus at a time): only for a corpus this
    session uploaded or attached (``Registry.may_calibrate``); the panel says so."""
    from retrieval.corpus_retrievers import start_calibration

    try:
        registry = get_registry()
        data = registry.load(registry.may_calibrate(name, token))
        if data.key is not None and not (is_ready(data, get_settings())):
            raise ValueError(f"{data.entry.name} is not open in this app yet: open it (and let it index) first.")
        start_calibration(data, get_settings())
    except (LoadError, ValueError) as exc:
        return message_html(str(exc)) + calibration_html(name)
    except Exception as exc:
        log.exception("calibrating %r failed to start", name)
        return message_html(f"Could not calibrate {name!r} ({type(exc).__name__}: {exc}).") + calibration_html(name)
    return calibration_html(name)


def refusal_of(name: str | None) -> str:
    """The refusal text kept with the picked corpus (the neutral default if none was set)."""
    try:
        return get_registry().get(name).refusal
    except Exception:
        return ""


def save_refusal(name: str | None, text: str | None, token: str | None = None) -> tuple:
    """Keep the refusal text with the picked corpus, if this session uploaded it: (message, the text now kept)."""
    try:
        if not name:
            raise ValueError("Pick a corpus first.")
        done = get_registry().set_refusal(name, text, token=token, page=True)
    except (ValueError, LoadError) as exc:
        return message_html(str(exc)), gr.skip()
    except Exception as exc:
        log.exception("setting the refusal text of %r failed", name)
        return message_html(f"Could not change {name!r} ({type(exc).__name__}: {exc})."), gr.skip()
    return message_html(done[:1].upper() + done[1:] + ".", "info"), refusal_of(name)
