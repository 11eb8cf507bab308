"""Load a corpus a person brings: cards JSONL, a BEIR folder or ``corpus.jsonl``, CSV/TSV, or a .zip (a BEIR folder,
or .txt/.md files, one card per file).

Everything is validated before anything is indexed. Problems are collected (``MAX_PROBLEMS_SHOWN`` shown, with the
count), each naming the file, the line or row and the field. A zip is checked from its directory (entry count,
total unpacked size, paths that escape the folder, links) before a single byte is unpacked, and is read in memory:
uploaded files are data, never executed, and only ever written under the data folder by ``retrieval.corpora``.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import posixpath
import re
import stat
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from retrieval.corpus import MAX_LINE_BYTES, CorpusError, LabeledQuery, id_problem, json_line, load_queries, not_utf8
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
    def from_env(cls, env: dict[str, str] | None = None) -> Limits:
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


# ------------------------------------------------------------------------------------------------ dispatch
def detect_format(path: Path) -> str:
    """The format a path is read as, from its name (and, for a .jsonl, its first record)."""
    if path.is_dir():
        if (path / "corpus.jsonl").is_file():
            return "beir"
        raise LoadError(
            [
                f"{path.name}: a folder without corpus.jsonl or cards.jsonl; give a cards .jsonl (or a folder "
                "with cards.jsonl and queries.jsonl), a BEIR folder (corpus.jsonl, queries.jsonl, qrels/), a "
                ".csv/.tsv or a .zip."
            ]
        )
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".json", ".ndjson"}:
        return "beir" if _first_record_has(path, "_id") else "cards-jsonl"
    if suffix in {".csv", ".tsv"}:
        return suffix[1:]
    if suffix == ".zip":
        return "zip"
    table = (
        ' (a table saved as Excel\'s "Unicode Text" is a .txt of tab-separated columns: rename it to .tsv)'
        if suffix == ".txt"
        else ""
    )
    raise LoadError(
        [
            f"{path.name}: unsupported file type {suffix or '(no extension)'!r}; give a cards .jsonl, a BEIR "
            "corpus.jsonl, a .csv/.tsv with id,title,text columns, or a .zip of a BEIR folder or of "
            f".txt/.md files{table}."
        ]
    )


def load_any(path: str | Path, limits: Limits | None = None, display: str | None = None) -> Loaded:
    """Read and validate any supported corpus at ``path`` (``display`` is the name problems use, e.g. the
    uploaded file's own name).

    Raises:
        LoadError: every problem found, each naming the file, the line or row and the field.
    """
    path = Path(path)
    limits = limits or Limits.from_env()
    name = display or path.name
    if not path.exists():
        raise LoadError([f"{display or path}: file not found. Check the path."])
    if path.is_dir() and not (path / "corpus.jsonl").is_file() and (path / "cards.jsonl").is_file():
        path = path / "cards.jsonl"  # the project's own layout (corpus/, corpus/eval/*): cards + queries beside them
    if path.is_file():
        size = path.stat().st_size
        if size > limits.max_upload_mb * 1_000_000:
            raise LoadError(
                [
                    f"{name}: the file is {size / 1e6:.1f} MB; the limit is {limits.max_upload_mb:g} MB "
                    "(MAX_UPLOAD_MB). Split the corpus or raise the limit."
                ]
            )
        if size == 0:
            raise LoadError([f"{name}: the file is empty."])
    fmt = detect_format(path)
    if fmt == "beir":
        folder = path if path.is_dir() else path.parent
        corpus = path if path.is_file() else path / "corpus.jsonl"
        # An uploaded corpus.jsonl (``display`` given) stands alone: files that happen to sit beside it are not its.
        siblings = _sibling_reader(folder) if display is None or path.is_dir() else (lambda rel: None, lambda p: [])
        return _load_beir_files(
            _read_file(corpus, limits), name if path.is_file() else f"{name}/corpus.jsonl", siblings, limits
        )
    if fmt == "cards-jsonl":
        loaded = parse_cards_jsonl(_read_file(path, limits), name, limits)
        beside = path.with_name("queries.jsonl")
        if display is None and beside.is_file() and beside != path:
            queries = tuple(load_queries(beside))
            _check_labels(queries, loaded.cards, str(beside))
            return Loaded(loaded.format, loaded.cards, queries)
        return loaded
    if fmt in {"csv", "tsv"}:
        return parse_table(_read_file(path, limits), name, limits, delimiter="\t" if fmt == "tsv" else ",")
    return load_zip(path, limits, name)


def _first_record_has(path: Path, key: str) -> bool:
    """Whether the file's first record (its first JSON line, or the first item of one JSON array) has ``key``."""
    try:
        with path.open("rb") as handle:
            head = handle.read(MAX_LINE_BYTES)
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            head = _utf8(path.read_bytes())  # the size was checked before
        head = head.removeprefix(codecs.BOM_UTF8)
        if head.lstrip().startswith(b"["):
            doc = json_line(_utf8(path.read_bytes()).removeprefix(codecs.BOM_UTF8))
            return isinstance(doc, list) and bool(doc) and isinstance(doc[0], dict) and key in doc[0]
        for raw in head.split(b"\n")[:50]:
            if raw.strip():
                obj = json_line(raw)
                return isinstance(obj, dict) and key in obj
    except (OSError, ValueError):  # the full parse names the file and the line
        return False
    return False


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


def _sibling_reader(folder: Path):
    def read(rel: str) -> bytes | None:
        target = folder / rel
        return _utf8(target.read_bytes()) if target.is_file() else None

    def listing(prefix: str) -> list[str]:
        sub = folder / prefix
        return sorted(f"{prefix}/{p.name}" for p in sub.glob("*.tsv")) if sub.is_dir() else []

    return read, listing


# ------------------------------------------------------------------------------------------------ lines
def _lines(data: bytes, name: str, out: _Collector):
    """``(line number, text)`` of each line; a line that is not UTF-8 is a problem naming the line, the byte and
    how to save the file as UTF-8. A leading byte-order mark (Excel, Notepad) is not part of the first line."""
    for lineno, raw in enumerate(data.removeprefix(codecs.BOM_UTF8).split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            out.add(f"{name}:{lineno}: {not_utf8(raw, exc.start)}")


def _json_objects(data: bytes, name: str, out: _Collector):
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


def _json_array(data: bytes, name: str, out: _Collector):
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


def parse_cards_jsonl(data: bytes, name: str, limits: Limits) -> Loaded:
    """Cards JSONL, the shipped schema: ``id`` (a string or a whole number) and ``text`` required; ``title``
    (default empty, as in BEIR), ``lang`` (default: detected, en/es/pt) and ``topic`` (default ``general``)
    optional."""
    out = _Collector()
    cards = _Cards(limits, out)
    for where, obj in _json_objects(data, name, out):
        values = {
            "id": _id_field(obj, "id", where, out),
            "text": _text_field(obj, "text", where, out),
            "title": _text_field(obj, "title", where, out, required=False),
        }
        lang = _text_field(obj, "lang", where, out, required=False)
        topic = _text_field(obj, "topic", where, out, required=False, default="general")
        if None in values.values() or lang is None or topic is None:
            continue
        cards.add(where, values["id"], values["title"], values["text"], lang, topic)
    if not cards.cards and not out.problems:
        out.add(f"{name}: no cards found. The file must hold one JSON card per line (id, title, text).")
    out.check()
    return Loaded("cards-jsonl", tuple(cards.cards))


def _load_beir_files(corpus: bytes, name: str, reader, limits: Limits) -> Loaded:
    """A BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``), plus ``queries.jsonl`` and ``qrels/*.tsv`` if the
    reader finds them (the ``test`` split if present, else the first)."""
    read, listing = reader
    out = _Collector()
    cards = _Cards(limits, out)
    for where, obj in _json_objects(corpus, name, out):
        doc_id = _id_field(obj, "_id", where, out)
        text = _text_field(obj, "text", where, out, allow_empty=True)
        title = _text_field(obj, "title", where, out, required=False)
        if doc_id is None or text is None or title is None:
            continue
        if not (title or text):
            continue  # BEIR sets hold a few empty documents; they can never be retrieved
        cards.add(where, doc_id, title, text, "", "beir", id_field="_id")
    if not cards.cards and not out.problems:
        out.add(f"{name}: no documents found. corpus.jsonl holds one JSON object per line (_id, title, text).")
    out.check()
    queries: tuple[LabeledQuery, ...] = ()
    notes: list[str] = []
    splits = listing("qrels")
    raw_queries = read("queries.jsonl")
    if splits and raw_queries is not None:
        split = next((s for s in splits if s.endswith("/test.tsv")), splits[0])
        queries = _beir_queries(raw_queries, read(split) or b"", split, {c.id for c in cards.cards}, out, notes)
        notes.insert(0, f"labeled turns from queries.jsonl and {split}")
        out.check()
    return Loaded("beir", tuple(cards.cards), queries, tuple(notes))


def _beir_queries(
    raw_queries: bytes, raw_qrels: bytes, split: str, known: set[str], out: _Collector, notes: list[str]
) -> tuple[LabeledQuery, ...]:
    """The labeled turns; judgements naming a card or a query the set lacks are skipped and said in ``notes``."""
    qrels: dict[str, dict[str, int]] = {}
    unknown_cards: list[str] = []
    for lineno, line in _lines(raw_qrels, split, out):
        row = line.split("\t")
        if not line.strip() or (lineno == 1 and not row[-1].strip().lstrip("-").isdigit()):
            continue
        if len(row) < 3:
            out.add(f"{split}:{lineno}: expected 3 tab-separated columns (query-id, corpus-id, score), got {len(row)}.")
            continue
        try:
            grade = int(row[-1])
        except ValueError:
            out.add(f"{split}:{lineno}: column 'score' must be an integer, got {row[-1]!r}.")
            continue
        if grade > 0 and row[-2].strip() not in known:
            unknown_cards.append(row[-2].strip())
        elif grade > 0:
            qrels.setdefault(row[0].strip(), {})[row[-2].strip()] = grade
    queries: list[LabeledQuery] = []
    asked: set[str] = set()
    for where, obj in _json_objects(raw_queries, "queries.jsonl", out):
        qid = _id_field(obj, "_id", where, out)
        text = _text_field(obj, "text", where, out)
        asked.add(qid or "")
        if qid is not None and text is not None and qid in qrels:
            queries.append(LabeledQuery(id=qid, text=text, category="beir", relevant=qrels[qid]))
    unasked = sorted(set(qrels) - asked)
    if unknown_cards:
        one = len(unknown_cards) == 1
        notes.append(
            f"{len(unknown_cards)} judgement{'' if one else 's'} in {split} name{'s' if one else ''} a card "
            f"id not in corpus.jsonl (e.g. {unknown_cards[0]!r}): skipped"
        )
    if unasked:
        one = len(unasked) == 1
        notes.append(
            f"{len(unasked)} judged query id{'' if one else 's'} {'is' if one else 'are'} not in "
            f"queries.jsonl (e.g. {unasked[0]!r}): skipped"
        )
    return tuple(queries)


def _check_labels(queries: tuple[LabeledQuery, ...], cards: tuple[Card, ...], where: str) -> None:
    known = {c.id for c in cards}
    problems = [
        f"{where}: query {q.id!r} labels unknown card ids {sorted(set(q.relevant) - known)}."
        for q in queries
        if set(q.relevant) - known
    ]
    if problems:
        raise LoadError(problems)


# Header names people give the id and text columns; a header without id or text names the one it holds.
COLUMN_ALIASES = {
    "id": (
        "_id",
        "doc_id",
        "docid",
        "doc-id",
        "document_id",
        "pid",
        "qid",
        "key",
        "uid",
        "uuid",
        "identifier",
        "no",
        "number",
        "#",
    ),
    "text": (
        "content",
        "contents",
        "body",
        "passage",
        "document",
        "doc",
        "abstract",
        "answer",
        "description",
        "chunk",
        "paragraph",
        "article",
        "note",
        "notes",
        "question",
    ),
}
_DELIMITER_NAMES = {",": "a comma", ";": "a semicolon", "\t": "a tab"}


def _missing_columns(header: list[str], missing: list[str], name: str) -> LoadError:
    found = ", ".join(repr(h) for h in header[:10])
    names = [h.strip().lower() for h in header]
    renames = [
        next((f"{header[names.index(a)].strip()!r} to {col}" for a in COLUMN_ALIASES[col] if a in names), "")
        for col in missing
    ]
    rename = f" Rename {' and '.join(r for r in renames if r)} if those are the columns meant." if any(renames) else ""
    return LoadError(
        [
            f"{name}:1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} in the "
            f"header (found {found}). The first row must name the columns id and text "
            "(any case; title, lang and topic optional), separated by commas or semicolons (tabs in a "
            f".tsv).{rename}"
        ]
    )


def parse_table(data: bytes, name: str, limits: Limits, delimiter: str = ",") -> Loaded:
    """CSV or TSV with a header row holding ``id`` and ``text`` (any case; ``title``, ``lang``, ``topic``
    optional). Rows are numbered as lines of the file, the header being line 1. A .csv whose header holds more
    semicolons than commas is read with ``;`` (Excel writes them where the comma is the decimal mark); a first line
    ``sep=;`` (Excel's own hint) names the separator. Quotes are read strictly, and a row with more cells than the
    header names is refused: an unclosed quote or an unquoted comma must not swallow rows or cut a text short."""
    out = _Collector()
    text = _whole_text(data, name, out)
    out.check()  # (not UTF-8: the problem names the line)
    csv.field_size_limit(max(limits.max_card_chars * 4, 131072))
    first, _, rest = text.partition("\n")
    hint = re.fullmatch(r"\s*sep=(.)\s*", first)
    if hint:
        delimiter, first = hint.group(1), rest.partition("\n")[0]
    elif delimiter == "," and first.count(";") > first.count(","):
        delimiter = ";"
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    kind = "TSV" if delimiter == "\t" else "CSV"
    try:
        if hint:
            next(reader)
        header = next(reader, None)
    except csv.Error as exc:
        raise LoadError([f"{name}:1: unreadable {kind} header ({exc})."]) from None
    if not header:
        raise LoadError([f"{name}: empty file; the first row must name the columns id, title, text."])
    columns = {h.strip().lower(): i for i, h in enumerate(header)}
    for col in ("id", "title", "text", "lang", "topic"):
        where = [i + 1 for i, h in enumerate(header) if h.strip().lower() == col]
        if len(where) > 1:
            raise LoadError(
                [
                    f"{name}:1: column {col!r} appears twice in the header (columns "
                    f"{', '.join(map(str, where[:-1]))} and {where[-1]}): rename or remove one."
                ]
            )
    missing = [c for c in ("id", "text") if c not in columns]
    if missing:
        raise _missing_columns(header, missing, name)
    cards = _Cards(limits, out)
    sep = _DELIMITER_NAMES.get(delimiter, repr(delimiter))
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            read_to = f", reading on to line {reader.line_num}" if reader.line_num > start else ""
            out.add(
                f"{name}:{start}: unreadable {kind} row ({exc}{read_to}). A field that "
                "opens a double quote must close it right before the next separator or the end of the line; "
                'a double quote inside a field is written twice ("") with the whole field in quotes.'
            )
            break
        lineno = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        where = f"{name}:{lineno}"
        extra = [c for c in row[len(header) :] if c.strip()]
        if extra:
            out.add(
                f"{where}: the row has {len(row)} cells but the header names {len(header)} columns: "
                f"{extra[0].strip()[:40]!r} would be lost. A field holding {sep} must be in double quotes "
                f'("Oil it{delimiter} then wipe it."), or name the column in the header.'
            )
            continue

        def cell(col: str, default: str | None = None) -> str | None:
            i = columns.get(col)
            if i is None:
                return default
            return row[i].strip() if i < len(row) else ""

        values = {col: cell(col, "") for col in ("id", "title", "text")}
        empty = [col for col in ("id", "text") if not values[col]]
        for col in empty:
            out.add(f"{where}: column {col!r} is empty.")
        if empty:
            continue
        cards.add(
            where,
            values["id"],
            values["title"] or "",
            values["text"],
            cell("lang", "") or "",
            cell("topic", "general") or "general",
        )
    if not cards.cards and not out.problems:
        out.add(f"{name}: no rows found under the header.")
    out.check()
    return Loaded(kind.lower(), tuple(cards.cards))


# ------------------------------------------------------------------------------------------------ zip
def check_zip(zf: zipfile.ZipFile, name: str, limits: Limits) -> list[zipfile.ZipInfo]:
    """The zip's file entries, after checking its directory (nothing unpacked yet): entry count, declared
    unpacked size, paths that escape the folder, links. Raises ``LoadError`` naming the entry."""
    infos = zf.infolist()
    if len(infos) > limits.max_zip_entries:
        raise LoadError(
            [f"{name}: the zip has {len(infos):,} entries; the limit is {limits.max_zip_entries:,} (MAX_ZIP_ENTRIES)."]
        )
    total = sum(i.file_size for i in infos)
    if total > limits.max_unpacked_mb * 1_000_000:
        raise LoadError(
            [
                f"{name}: the zip would unpack to {total / 1e6:,.1f} MB; the limit is "
                f"{limits.max_unpacked_mb:g} MB (MAX_UNPACKED_MB). Nothing was unpacked."
            ]
        )
    problems = []
    for info in infos:
        path = info.filename.replace("\\", "/")
        normal = posixpath.normpath(path)
        if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or normal == ".." or normal.startswith("../"):
            problems.append(f"{name}: entry {info.filename!r} points outside the zip's folder; refused.")
        elif stat.S_ISLNK(info.external_attr >> 16):
            problems.append(f"{name}: entry {info.filename!r} is a symbolic link; links are refused.")
    if problems:
        raise LoadError(problems)
    return [i for i in infos if not i.is_dir()]


def _read_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, limits: Limits) -> bytes:
    """An entry's bytes, never more than it declared (a lying header is refused)."""
    cap = int(limits.max_unpacked_mb * 1_000_000)
    with zf.open(info) as handle:
        data = handle.read(min(info.file_size, cap) + 1)
    if len(data) > info.file_size:
        raise LoadError([f"{name}: entry {info.filename!r} unpacks to more than it declares; refused."])
    return _utf8(data)


def load_zip(path: Path, limits: Limits, name: str | None = None) -> Loaded:
    """A .zip of a BEIR folder (``corpus.jsonl`` at its root or in one folder), or of .txt/.md files: one card per
    file, its id the path without the extension, its title the first Markdown heading (else the file name)."""
    name = name or path.name
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise LoadError([f"{name}: not a readable zip file ({exc})."]) from None
    with zf:
        for info in zf.infolist():
            info.filename = _entry_name(info)
        entries = check_zip(zf, name, limits)
        visible = [i for i in entries if not _hidden(i.filename)]
        corpora = [
            i
            for i in visible
            if PurePosixPath(i.filename).name == "corpus.jsonl" and len(PurePosixPath(i.filename).parts) <= 2
        ]
        try:
            if corpora:
                root = str(PurePosixPath(corpora[0].filename).parent)
                root = "" if root == "." else root + "/"
                by_name = {i.filename: i for i in visible}

                def read(rel: str) -> bytes | None:
                    info = by_name.get(root + rel)
                    return _read_entry(zf, info, name, limits) if info else None

                def listing(prefix: str) -> list[str]:
                    return sorted(
                        f[len(root) :] for f in by_name if f.startswith(root + prefix + "/") and f.endswith(".tsv")
                    )

                return _load_beir_files(
                    _read_entry(zf, corpora[0], name, limits), f"{name}/{corpora[0].filename}", (read, listing), limits
                )
            return _zip_of_texts(zf, visible, name, limits)
        except zipfile.BadZipFile as exc:
            raise LoadError([f"{name}: damaged zip ({exc}); nothing was indexed."]) from None


def _hidden(filename: str) -> bool:
    parts = PurePosixPath(filename).parts
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


def _entry_name(info: zipfile.ZipInfo) -> str:
    """An entry's name as its maker wrote it, composed (NFC). macOS's Archive Utility writes names in UTF-8 without
    the flag that says so (Python then reads "Notes é.md" as "Notes Ã©.md" in cp437) and in decomposed form."""
    filename = info.filename
    if not info.flag_bits & 0x800:
        try:
            filename = filename.encode("cp437").decode("utf-8")
        except UnicodeError:  # a name really written in cp437 (old Windows tools)
            pass
    return unicodedata.normalize("NFC", filename)


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_ROW = re.compile(r"^(?:[\w-]+[ \t]*:|[ \t]|-[ \t])")  # key: value, an indented or a list line
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def _front_matter(body: str) -> tuple[str, str]:
    """A Markdown file's YAML front matter (Jekyll, Hugo, Obsidian: ``---`` lines around ``key: value``) split off:
    its ``title:`` (or "") and the text after it. The other keys are metadata, not the card's text."""
    match = _FRONT_MATTER.match(body.replace("\r\n", "\n"))
    rows = [row for row in match.group(1).splitlines() if row.strip()] if match else []
    if not rows or not all(_FRONT_ROW.match(row) for row in rows):  # a text that opens with a rule (---)
        return "", body
    title = _FRONT_TITLE.search(match.group(1))
    value = title.group(1).strip() if title else ""
    if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return value, body.replace("\r\n", "\n")[match.end() :].strip()


def _zip_of_texts(zf: zipfile.ZipFile, entries: list[zipfile.ZipInfo], name: str, limits: Limits) -> Loaded:
    out = _Collector()
    cards = _Cards(limits, out)
    skipped: list[str] = []
    for info in sorted(entries, key=lambda i: i.filename):
        rel = PurePosixPath(info.filename)
        if rel.suffix.lower() not in TEXT_SUFFIXES:
            skipped.append(info.filename)
            continue
        where = f"{name}/{info.filename}"
        text = _whole_text(_read_entry(zf, info, name, limits), where, out)
        if text is None:
            continue
        card_id = str(rel.with_suffix("")).replace("#", "_")
        title, body = rel.stem, text.strip()
        if rel.suffix.lower() != ".txt":
            front_title, body = _front_matter(body)
            title = front_title or title
            lines = [] if front_title else body.splitlines()
            for n, line in enumerate(lines):
                if not line.strip():
                    continue
                match = _HEADING.match(line)
                if match:
                    title = match.group(1).strip()
                    body = "\n".join(lines[n + 1 :]).strip()
                break
        body = re.sub(r"\s+", " ", body).strip()
        if not body:
            out.add(f"{where}: the file has no text besides its title.")
            continue
        cards.add(where, card_id, title, body)
    if not cards.cards and not out.problems:
        held = f" (it holds {', '.join(repr(f) for f in skipped[:3])}{', ...' if len(skipped) > 3 else ''})"
        out.add(
            f"{name}: no .txt or .md files{held if skipped else ''}, and no corpus.jsonl at its root or in one "
            "folder: a zip holds a BEIR folder or text files; a cards .jsonl or a .csv is uploaded as it is, "
            "not zipped."
        )
    out.check()
    notes = (f"{len(skipped)} entries that are not .txt/.md were skipped",) if skipped else ()
    return Loaded("zip-text", tuple(cards.cards), (), notes)
