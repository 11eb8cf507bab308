"""What every corpus format shares: the limits, the problems collected and raised together, the loaded
result, and the readers of lines, JSON records and fields that name the file, the line and the field."""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.corpus import MAX_LINE_BYTES, CorpusError, LabeledQuery, id_problem, json_line, not_utf8
from retrieval.tokenize import detect_language
from retrieval.types import Card

MAX_PROBLEMS_SHOWN = 20
FORMATS = ("cards-jsonl", "beir", "csv", "tsv", "zip-text")
TEXT_SUFFIXES = (".txt", ".md", ".markdown")


@dataclass(frozen=True)
class Limits:
    """What an upload may hold. Each is an environment variable (``Limits.from_env``) with a sane default."""

    max_upload_mb: float = 50.0  # MAX_UPLOAD_MB: the uploaded file itself
    max_cards: int = 100_000  # MAX_CARDS
    max_card_chars: int = 100_000  # MAX_CARD_CHARS: one card's text
    max_zip_entries: int = 10_000  # MAX_ZIP_ENTRIES
    max_unpacked_mb: float = 200.0  # MAX_UNPACKED_MB: a zip's declared total unpacked size
    max_corpora: int = 50  # MAX_CORPORA: corpora uploaded or indexed here (each keeps a file and a Chroma collection)
    # What the web server's upload route may keep before a corpus adopts (copies) an upload (inspector.uploads):
    upload_client_mb: float = 100.0  # UPLOAD_CLIENT_MB: one client (address) at a time
    upload_total_mb: float = 500.0  # UPLOAD_TOTAL_MB: all clients together
    upload_unused_s: float = 600.0  # UPLOAD_UNUSED_S: an upload no corpus adopted is deleted after this long

    ENV = {
        "max_upload_mb": "MAX_UPLOAD_MB",
        "max_cards": "MAX_CARDS",
        "max_card_chars": "MAX_CARD_CHARS",
        "max_zip_entries": "MAX_ZIP_ENTRIES",
        "max_unpacked_mb": "MAX_UNPACKED_MB",
        "max_corpora": "MAX_CORPORA",
        "upload_client_mb": "UPLOAD_CLIENT_MB",
        "upload_total_mb": "UPLOAD_TOTAL_MB",
        "upload_unused_s": "UPLOAD_UNUSED_S",
    }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, var in cls.ENV.items():
            raw = (env.get(var) or "").strip()
            if not raw:
                continue
            kind = type(getattr(cls, name))
            try:
                value = kind(raw)
            except ValueError:
                raise ValueError(f"{var}={raw!r} is not a number: give a positive {kind.__name__}.") from None
            if value <= 0:
                raise ValueError(f"{var}={raw!r} must be positive.")
            values[name] = value
        return cls(**values)

    def describe(self) -> str:
        return (
            f"upload at most {self.max_upload_mb:g} MB (MAX_UPLOAD_MB), {self.max_cards:,} cards (MAX_CARDS), "
            f"{self.max_card_chars:,} characters per card (MAX_CARD_CHARS); a zip at most "
            f"{self.max_zip_entries:,} entries (MAX_ZIP_ENTRIES) and {self.max_unpacked_mb:g} MB unpacked "
            f"(MAX_UNPACKED_MB); at most {self.max_corpora:,} corpora kept (MAX_CORPORA)"
        )


class LoadError(CorpusError):
    """A file that cannot be loaded; ``problems`` holds every problem found (the message shows the first 20)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:MAX_PROBLEMS_SHOWN]
        more = len(self.problems) - len(shown)
        head = f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''} found; nothing was indexed"
        tail = [f"... and {more} more (first {MAX_PROBLEMS_SHOWN} shown)"] if more else []
        super().__init__("\n".join([head + ":", *shown, *tail]))


@dataclass(frozen=True)
class Loaded:
    """What a file held: its cards, its labeled turns (maybe none) and the format it was read as."""

    format: str
    cards: tuple[Card, ...]
    queries: tuple[LabeledQuery, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


class _Collector:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, message: str) -> None:
        self.problems.append(message)

    def check(self) -> None:
        if self.problems:
            raise LoadError(self.problems)


def _read_file(path: Path, limits: Limits) -> bytes:
    size = path.stat().st_size
    if size > limits.max_upload_mb * 1_000_000:
        raise LoadError(
            [f"{path.name}: the file is {size / 1e6:.1f} MB; the limit is {limits.max_upload_mb:g} MB (MAX_UPLOAD_MB)."]
        )
    return _utf8(path.read_bytes())


def _utf8(data: bytes) -> bytes:
    """``data`` in UTF-8: a file starting with a UTF-16 byte-order mark (Excel's "Unicode Text", Notepad's
    "Unicode") is UTF-16 without doubt and is transcoded; anything else is left for the UTF-8 checks to judge."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            return data
    return data


Reader = tuple[Callable[[str], bytes | None], Callable[[str], list[str]]]
"""How a BEIR loader reads a file beside ``corpus.jsonl`` (None if absent) and lists the ``.tsv`` files of a folder."""


def _sibling_reader(folder: Path) -> Reader:
    def read(rel: str) -> bytes | None:
        target = folder / rel
        return _utf8(target.read_bytes()) if target.is_file() else None

    def listing(prefix: str) -> list[str]:
        sub = folder / prefix
        return sorted(f"{prefix}/{p.name}" for p in sub.glob("*.tsv")) if sub.is_dir() else []

    return read, listing


# ------------------------------------------------------------------------------------------------ lines
def _lines(data: bytes, name: str, out: _Collector) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line; a line that is not UTF-8 is a problem naming the line, the byte and
    how to save the file as UTF-8. A leading byte-order mark (Excel, Notepad) is not part of the first line."""
    for lineno, raw in enumerate(data.removeprefix(codecs.BOM_UTF8).split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            out.add(f"{name}:{lineno}: {not_utf8(raw, exc.start)}")


def _json_objects(data: bytes, name: str, out: _Collector) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` of each record: one JSON object per line, or the items of one JSON array (a .json
    export), ``where`` naming the line (``cards.jsonl:7``) or the item (``cards.json item 7``)."""
    if data.removeprefix(codecs.BOM_UTF8).lstrip().startswith(b"["):
        yield from _json_array(data.removeprefix(codecs.BOM_UTF8), name, out)
        return
    for lineno, line in _lines(data, name, out):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            out.add(f"{name}:{lineno}: line is longer than {MAX_LINE_BYTES:,} characters.")
            continue
        try:
            obj = json_line(line)
        except ValueError as exc:
            out.add(f"{name}:{lineno}: {exc}")
            continue
        if not isinstance(obj, dict):
            out.add(f"{name}:{lineno}: expected a JSON object, got {type(obj).__name__}.")
            continue
        yield f"{name}:{lineno}", obj


def _whole_text(data: bytes, where: str, out: _Collector) -> str | None:
    """A whole file or zip entry as text (UTF-8, a byte-order mark dropped); None after a problem naming the line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        lineno, line, start = _line_of(data, exc.start)
        out.add(f"{where}:{lineno}: {not_utf8(line, start)}")
        return None


def _line_of(data: bytes, offset: int) -> tuple[int, bytes, int]:
    """The line number of byte ``offset`` of ``data``, that line's bytes and the offset within it."""
    begin = data.rfind(b"\n", 0, offset) + 1
    end = data.find(b"\n", offset)
    return data[:offset].count(b"\n") + 1, data[begin : len(data) if end < 0 else end], offset - begin


def _json_array(data: bytes, name: str, out: _Collector) -> Iterator[tuple[str, dict[str, Any]]]:
    text = _whole_text(data, name, out)
    if text is None:
        return
    try:
        doc = json_line(text)
    except ValueError as problem:
        where = f"{name}:{text[: len(text) - len(text.lstrip())].count(chr(10)) + 1}"  # the array's first line
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"{name}:{exc.lineno}"
        except (RecursionError, ValueError):
            pass
        out.add(f"{where}: {problem}")
        return
    for i, obj in enumerate(doc, start=1):
        if isinstance(obj, dict):
            yield f"{name} item {i}", obj
        else:
            out.add(f"{name} item {i}: expected a JSON object, got {type(obj).__name__}.")


def _text_field(
    obj: dict[str, Any],
    key: str,
    where: str,
    out: _Collector,
    *,
    required: bool = True,
    default: str = "",
    allow_empty: bool = False,
) -> str | None:
    if key not in obj or obj[key] is None:
        if required:
            out.add(
                f"{where}: field {key!r} is null; give it a string."
                if key in obj
                else f"{where}: missing field {key!r}."
            )
            return None
        return default
    value = obj[key]
    if not isinstance(value, str):
        out.add(f"{where}: field {key!r} must be a string, got {type(value).__name__}.")
        return None
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        out.add(f"{where}: field {key!r} holds a lone surrogate escape, which is not text.")
        return None
    if required and not allow_empty and not value.strip():
        out.add(f"{where}: field {key!r} is empty.")
        return None
    return value.strip() or default


def _id_field(obj: dict[str, Any], key: str, where: str, out: _Collector) -> str | None:
    """An id field: a string, or a whole number written without quotes (``"id": 7`` is the card ``"7"``)."""
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if value is not None and not isinstance(value, str):
        out.add(f"{where}: field {key!r} must be a string or a whole number, got {type(value).__name__}.")
        return None
    return _text_field(obj, key, where, out)


class _Cards:
    """Cards under construction: duplicate ids, card length and card count checked as they come."""

    def __init__(self, limits: Limits, out: _Collector) -> None:
        self.limits, self.out = limits, out
        self.cards: list[Card] = []
        self.first: dict[str, str] = {}
        self.too_many = False

    def add(
        self,
        where: str,
        card_id: str,
        title: str,
        text: str,
        lang: str = "",
        topic: str = "general",
        id_field: str = "id",
    ) -> None:
        """One card; without a ``lang``, the language its words are in (``detect_language``: en, es or pt), which
        BM25 stems it in."""
        if problem := id_problem(card_id, id_field):
            self.out.add(f"{where}: {problem}")
            return
        if card_id in self.first:
            self.out.add(
                f"{where}: field {id_field!r}: duplicate id {card_id!r} (first seen at {self.first[card_id]})."
            )
            return
        self.first[card_id] = where
        if len(text) > self.limits.max_card_chars:
            self.out.add(
                f"{where}: field 'text' has {len(text):,} characters; the limit is "
                f"{self.limits.max_card_chars:,} (MAX_CARD_CHARS). Split the card into smaller cards."
            )
            return
        if len(self.cards) >= self.limits.max_cards:
            if not self.too_many:
                self.out.add(
                    f"{where}: more than {self.limits.max_cards:,} cards (MAX_CARDS); split the corpus or "
                    "raise the limit."
                )
                self.too_many = True
            return
        lang = lang or detect_language(f"{title} {text[:2000]}")
        self.cards.append(Card(id=card_id, title=title, lang=lang, topic=topic or "general", text=text))
