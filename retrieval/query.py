"""What a turn is before it reaches either branch: text, normalised, not empty, not too long."""

from __future__ import annotations

import unicodedata
from typing import Any

from retrieval.brand_names import generics_in, with_generics

MAX_QUERY_CHARS = 2000
# The ASCII control characters (category Cc: U+0000-U+001F and U+007F) -> spaces, for ``str.translate``. ASCII has
# no format (Cf) character and no surrogate: an ASCII turn, however long, is cleaned without a loop in Python (a
# 400 KB turn, refused as too long only once cleaned, took ~0.1 s per character loop).
_ASCII_CONTROLS = {code: " " for code in (*range(32), 127)}


class QueryError(ValueError):
    """A turn that cannot be searched as typed; the message says what to change."""


def without_format(text: str) -> str:
    """Drop invisible format characters (category Cf): zero-width spaces and joiners (U+200B-U+200D, U+2060),
    bidi marks, embeddings and isolates (U+200E/F, U+202A-E, U+2066-9), the BOM (U+FEFF), soft hyphens, tag
    characters. Nobody sees them, yet they split a code like GS-40 into other tokens."""
    if text.isascii():
        return text
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def without_controls(text: str) -> str:
    """Control characters and lone surrogates -> spaces (they are not text, and would not encode as UTF-8)."""
    if text.isascii():
        return text.translate(_ASCII_CONTROLS)
    return "".join(" " if unicodedata.category(ch) in {"Cc", "Cs"} else ch for ch in text)


def _folded(text: str) -> str:
    """``text`` NFKC-folded, without format characters, controls as spaces, whitespace collapsed: the turn
    ``clean_query`` bounds and gives generics to, and the one the badge's note reads the brands from."""
    return " ".join(without_controls(without_format(unicodedata.normalize("NFKC", text))).split())


def clean_query(text: Any) -> str:
    """Normalise a turn or raise ``QueryError``: NFKC (fullwidth and compatibility forms folded, e.g.
    ＧＳ－４０ -> GS-40, ㎎ -> mg), invisible format characters dropped, control characters -> spaces, whitespace
    collapsed; a medicine's brand name gets its generic name beside it (``brand_names``: "motrin" -> "motrin
    (ibuprofen)"). Both branches search this text."""
    if not isinstance(text, str):
        raise QueryError(f"The turn must be text, got {type(text).__name__}.")
    text = _folded(text)
    if not text:
        raise QueryError("The turn is empty: type a question about the active corpus (the examples show some).")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"The turn is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
            "Shorten it to the question you want answered."
        )
    return with_generics(text)


def normalised_from(typed: Any, searched: str) -> str:
    """The turn as typed if normalising it changed more than spaces (the badge shows it), else ``""``."""
    if not isinstance(typed, str) or " ".join(typed.split()) == searched:
        return ""
    # Lone surrogates are not text and would not encode as UTF-8 (the result is JSON): shown as U+FFFD.
    return "".join("\ufffd" if unicodedata.category(ch) == "Cs" else ch for ch in typed[: MAX_QUERY_CHARS * 2])


def reveal_invisible(text: str) -> str:
    """``text`` with each format or control character shown as ``⟨U+XXXX⟩``, so a reader sees where they were."""
    return "".join(
        f"⟨U+{ord(ch):04X}⟩" if unicodedata.category(ch) in {"Cf", "Cc", "Cs"} and ch != " " else ch for ch in text
    )


def normalisation_note(typed: str) -> str:
    """What normalising ``typed`` changed, in words (for the badge)."""
    hidden = sorted({ch for ch in typed if unicodedata.category(ch) in {"Cf", "Cc", "Cs"} and not ch.isspace()})
    parts = []
    if hidden:
        count = sum(1 for ch in typed if ch in hidden)
        names = ", ".join(f"U+{ord(ch):04X}" for ch in hidden[:6]) + (" ..." if len(hidden) > 6 else "")
        parts.append(f"{count} invisible or control character{'s' if count != 1 else ''} removed ({names})")
    if unicodedata.normalize("NFKC", without_format(typed)) != without_format(typed):
        parts.append("fullwidth or compatibility forms folded (NFKC)")
    brands = generics_in(_folded(typed))  # as clean_query found them (a fullwidth brand too)
    if brands:
        named = ", ".join(f"{brand} → {generic}" for brand, generic in brands[:4])
        parts.append(f"brand name{'s' if len(brands) != 1 else ''} given the generic ({named})")
    return "; ".join(parts) or "spacing changed"
