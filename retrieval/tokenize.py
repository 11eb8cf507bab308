"""BM25 tokenization: lowercase + punctuation stripping (ADR-0022). One function, used by BM25 and highlighting."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Lowercase ``text`` and split it on everything that is not a letter or digit (unicode-aware).

    >>> tokenize("GlucoSense GS-40: error E-07!")
    ['glucosense', 'gs', '40', 'error', 'e', '07']
    """
    return _WORD.findall(text.lower())


def spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of ``text``, for highlighting query terms in a snippet."""
    return [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
