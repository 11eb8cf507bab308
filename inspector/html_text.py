"""Text bound for HTML: ``esc``, through which every string from a corpus, a turn or a message reaches the page, and
the number formats the columns share."""

from __future__ import annotations

import html

from retrieval.rounding import round_half_up


def esc(value: object) -> str:
    """``html.escape`` for any value (quotes included)."""
    return html.escape(str(value), quote=True)


def fmt5(x: float) -> str:
    """``x`` rounded half up to 5 decimals, as the RRF class writes it (0.032522... -> '0.03252')."""
    return round_half_up(x, 5)


def plural(n: int, word: str) -> str:
    """``1 hit``, ``0 hits``, ``3 hits``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def num(x: float) -> str:
    """A weight as written in a formula: ``2``, ``0.5`` (no trailing zeros)."""
    return f"{x:g}"
