"""How the refusal rule writes its numbers and names: the sentences of ``retrieval.refusal``'s tests and gates."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.tokenize import SCRIPT_NAMES


def _num(x: float, decimals: int = 2) -> str:
    """``-3.0``, ``-7.23``, ``-2.75``: two decimals, trailing zeros dropped down to one."""
    text = f"{x:.{decimals}f}"
    while text.endswith("0") and len(text.split(".")[1]) > 1:
        text = text[:-1]
    return text


def _compare(value: float, threshold: float, passed: bool, decimals: int = 2) -> str:
    """``value >= threshold`` or ``value < threshold``, with enough decimals that the printed numbers agree."""
    limit = _num(threshold, max(decimals, 4))  # the threshold as set (-3.25, not -3.2), at least one decimal
    for more in range(decimals, decimals + 5):
        shown = _num(value, more)
        if (float(shown) >= threshold) == passed and (shown != limit or value == threshold):
            break
    return f"{shown} {'>=' if passed else '<'} {limit}"


def _quote(words: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(f"'{w}'" for w in words[:limit])
    return shown + (f" and {len(words) - limit} more" if len(words) > limit else "")


_LANGUAGE_NAMES = {
    "en": "English",
    "es": "Spanish",
    "pt": "Portuguese",
    "ja": "Japanese",
    "zh": "Chinese",
    "ko": "Korean",
}


def _language_name(code: str) -> str:
    """``Spanish`` for ``es``; ``Cyrillic`` for the script ``cyrl`` (whose language the script does not tell)."""
    return _LANGUAGE_NAMES.get(code) or SCRIPT_NAMES.get(code, code)
