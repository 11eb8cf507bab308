"""What a turn is before it reaches either branch: text, normalised, not empty, not too long."""

from __future__ import annotations

import unicodedata
from typing import Any

MAX_QUERY_CHARS = 2000


class QueryError(ValueError):
    """A turn that cannot be searched as typed; the message says what to change."""


def without_controls(text: str) -> str:
    """Control characters and lone surrogates -> spaces (they are not text, and would not encode as UTF-8)."""
    return "".join(" " if unicodedata.category(ch) in {"Cc", "Cs"} else ch for ch in text)


def clean_query(text: Any) -> str:
    """Normalise a turn (NFC, control characters -> spaces, whitespace collapsed) or raise ``QueryError``."""
    if not isinstance(text, str):
        raise QueryError(f"The turn must be text, got {type(text).__name__}.")
    text = unicodedata.normalize("NFC", text)
    text = " ".join(without_controls(text).split())
    if not text:
        raise QueryError("The turn is empty: type a question, e.g. 'What does GlucoSense GS-40 error E-07 mean?'.")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"The turn is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
                         "Shorten it to the question you want answered.")
    return text
