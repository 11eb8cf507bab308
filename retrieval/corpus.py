"""Load and validate cards (shipped JSONL or a BEIR folder) and split them into sub-chunks with stable ids."""

from __future__ import annotations

import codecs
import csv
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.tokenize import has_cjk, word_count
from retrieval.types import Card, Chunk

CARD_FIELDS = ("id", "title", "lang", "topic", "text")
QUERY_CATEGORIES = ("lexical", "semantic", "mixed", "multilingual", "no_match")
MAX_CARD_CHARS = 100_000
# A line is read with this cap, so a file without newlines (or /dev/zero) is refused instead of filling memory.
# A card of MAX_CARD_CHARS characters written with \\uXXXX escapes (12 bytes for an emoji) takes at most 1.2 MB.
MAX_LINE_BYTES = 4_000_000
DEFAULT_CHUNK_WORDS = 60
MAX_TSV_FIELD = 131_072  # a qrels or queries TSV field (an id or a score), csv's default field limit
CHUNKER_VERSION = "sentences-v1"


class CorpusError(ValueError):
    """A corpus or query file is malformed. The message names the file, the line and the field."""


@dataclass(frozen=True)
class LabeledQuery:
    """A user turn with graded relevance per parent id (empty for an out-of-domain turn)."""

    id: str
    text: str
    lang: str = "en"
    category: str = "mixed"
    relevant: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Dataset:
    """Cards plus labeled turns: the shipped set or a BEIR split."""

    name: str
    cards: tuple[Card, ...]
    queries: tuple[LabeledQuery, ...]
    chunk_words: int | None = DEFAULT_CHUNK_WORDS


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes without the newline)``, each line read with the ``MAX_LINE_BYTES`` cap."""
    if path.is_dir():
        raise CorpusError(
            f"{path}: is a folder, not a file. Point CORPUS_PATH (or --beir) at the file itself, "
            "e.g. corpus/cards.jsonl."
        )
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise CorpusError(f"{path}: file not found. Check the path (CORPUS_PATH or --beir).") from None
    except OSError as exc:
        raise CorpusError(
            f"{path}: cannot be read ({exc.strerror or exc}). Check the path and its permissions "
            "(CORPUS_PATH or --beir)."
        ) from None
    with handle:
        lineno = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 2)  # room for the line's own \r\n
            if not raw:
                return
            lineno += 1
            raw = raw.rstrip(b"\r\n")
            if lineno == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)  # Excel and Notepad start a UTF-8 file with one
            if len(raw) > MAX_LINE_BYTES:
                raise CorpusError(
                    f"{path}:{lineno}: line is longer than {MAX_LINE_BYTES:,} bytes (MAX_LINE_BYTES in "
                    f"retrieval/corpus.py). A card holds at most {MAX_CARD_CHARS:,} characters: split long cards, "
                    "and check that the path is a text file with one record per line."
                )
            yield lineno, raw


SAVE_AS_UTF8 = (
    'Save it as UTF-8: in Excel, Save As > "CSV UTF-8 (Comma delimited)"; in Notepad or TextEdit, Save As '
    "with the encoding UTF-8."
)


def not_utf8(line: bytes, start: int) -> str:
    """Why ``line`` (one line of a file) is not UTF-8 from byte ``start`` on, naming the byte, what it would be in
    the encoding it was most likely saved in, and how to save the file as UTF-8. The caller adds file:line."""
    byte = line[start : start + 1]
    if b"\x00" in line:
        guess = "the file looks like UTF-16 without a byte-order mark"
    else:
        char = byte.decode("cp1252", errors="replace")
        guess = (
            f'{char!r} in Windows-1252/Latin-1, which Excel\'s "CSV (Comma delimited)" and older Windows tools write'
            if char != "\ufffd"
            else "the file was saved in an encoding other than UTF-8"
        )
    return f"not valid UTF-8 (byte 0x{byte.hex().upper()} at byte {start + 1} of the line: {guess}). {SAVE_AS_UTF8}"


def _decode(path: Path, lineno: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}:{lineno}: {not_utf8(raw, exc.start)}") from None


ID_SEPARATOR = "#"  # a sub-chunk id is <card id>#<n>: a card id must not hold it


def id_problem(card_id: str, field: str = "id") -> str | None:
    """Why ``card_id`` cannot be a card id (it holds the sub-chunk separator), or None. The caller adds file:line."""
    if ID_SEPARATOR in card_id:
        return (
            f"field {field!r}: id {card_id!r} contains {ID_SEPARATOR!r}, which separates a card id from its "
            f"sub-chunk number (<card id>{ID_SEPARATOR}<n>); rename the card without {ID_SEPARATOR!r}."
        )
    return None


def json_line(line: str | bytes) -> Any:
    """``json.loads`` of one line, whose failures are a ``ValueError`` saying what to fix (the caller adds the file
    and the line): a syntax error with its column, brackets nested too deeply for the parser (``RecursionError``
    otherwise), a number with too many digits."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno}).") from None
    except RecursionError:
        raise ValueError(
            "invalid JSON (brackets nested too deeply for the parser). A card is one flat JSON object."
        ) from None
    except ValueError as exc:  # e.g. Python's cap on the digits of an integer
        reason = (
            f"a number has more than {sys.get_int_max_str_digits()} digits; write it as a string"
            if "digits" in str(exc)
            else str(exc)
        )
        raise ValueError(f"invalid JSON ({reason}).") from None


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, raw in _raw_lines(path):
        line = _decode(path, lineno, raw)
        if not line.strip():
            continue
        try:
            obj = json_line(line)
        except ValueError as exc:
            raise CorpusError(f"{path}:{lineno}: {exc}") from None
        if not isinstance(obj, dict):
            raise CorpusError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}.")
        yield lineno, obj


def _tsv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    for lineno, raw in _raw_lines(path):
        line = _decode(path, lineno, raw)
        try:
            row = next(csv.reader([line], delimiter="\t"), [])
        except csv.Error as exc:
            raise CorpusError(f"{path}:{lineno}: unreadable TSV line ({exc}).") from None
        longest = max((len(field) for field in row), default=0)
        if longest > MAX_TSV_FIELD:  # checked here: csv's own limit is process-wide and another loader may raise it
            raise CorpusError(
                f"{path}:{lineno}: a field is {longest:,} characters long; the limit is "
                f"{MAX_TSV_FIELD:,}. Check the file's tabs and quotes."
            )
        yield lineno, row


def _require_str(path: Path, lineno: int, obj: dict[str, Any], name: str, *, allow_empty: bool = False) -> str:
    if name not in obj:
        raise CorpusError(f"{path}:{lineno}: missing field {name!r}.")
    value = obj[name]
    if not isinstance(value, str):
        raise CorpusError(f"{path}:{lineno}: field {name!r} must be a string, got {type(value).__name__}.")
    if not allow_empty and not value.strip():
        raise CorpusError(f"{path}:{lineno}: field {name!r} is empty.")
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        raise CorpusError(
            f"{path}:{lineno}: field {name!r} holds a lone surrogate escape (e.g. \\ud800), "
            "which is not text; fix the escape."
        )
    return value


def load_cards(path: str | Path) -> list[Card]:
    """Read and validate a cards JSONL file (fields: id, title, lang, topic, text).

    Raises:
        CorpusError: bad JSON, a missing or empty field, a duplicate id, an oversized card, or no cards at all,
            with the file, line and field named.
    """
    path = Path(path)
    cards: list[Card] = []
    first_line: dict[str, int] = {}
    for lineno, obj in _json_lines(path):
        values = {name: _require_str(path, lineno, obj, name) for name in CARD_FIELDS}
        card_id = values["id"].strip()
        if problem := id_problem(card_id):
            raise CorpusError(f"{path}:{lineno}: {problem}")
        if card_id in first_line:
            raise CorpusError(
                f"{path}:{lineno}: field 'id': duplicate id {card_id!r} (first seen on line {first_line[card_id]})."
            )
        if len(values["text"]) > MAX_CARD_CHARS:
            raise CorpusError(
                f"{path}:{lineno}: field 'text' has {len(values['text']):,} characters; the limit is "
                f"{MAX_CARD_CHARS:,}. Split the card into smaller cards."
            )
        first_line[card_id] = lineno
        cards.append(
            Card(
                id=card_id,
                title=values["title"].strip(),
                lang=values["lang"].strip(),
                topic=values["topic"].strip(),
                text=values["text"].strip(),
            )
        )
    if not cards:
        raise CorpusError(f"{path}: no cards found. The file must hold one JSON card per line.")
    return cards


def load_queries(path: str | Path) -> list[LabeledQuery]:
    """Read labeled turns (fields: id, text, lang, category, relevant {card_id: grade})."""
    path = Path(path)
    out: list[LabeledQuery] = []
    seen: set[str] = set()
    for lineno, obj in _json_lines(path):
        qid = _require_str(path, lineno, obj, "id")
        text = _require_str(path, lineno, obj, "text")
        category = _require_str(path, lineno, obj, "category")
        if category not in QUERY_CATEGORIES:
            raise CorpusError(f"{path}:{lineno}: field 'category' is {category!r}; allowed {QUERY_CATEGORIES}.")
        relevant = obj.get("relevant")
        if not isinstance(relevant, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in relevant.items()
        ):
            raise CorpusError(f"{path}:{lineno}: field 'relevant' must map card ids to integer grades.")
        if qid in seen:
            raise CorpusError(f"{path}:{lineno}: field 'id': duplicate query id {qid!r}.")
        seen.add(qid)
        out.append(
            LabeledQuery(id=qid, text=text, lang=str(obj.get("lang", "en")), category=category, relevant=dict(relevant))
        )
    return out


def load_shipped(cards_path: str | Path, queries_path: str | Path | None = None) -> Dataset:
    """The shipped synthetic set: ``cards.jsonl`` and, beside it, ``queries.jsonl``."""
    cards_path = Path(cards_path)
    queries_path = Path(queries_path) if queries_path else cards_path.with_name("queries.jsonl")
    cards = load_cards(cards_path)
    queries = load_queries(queries_path)
    known = {c.id for c in cards}
    for q in queries:
        unknown = sorted(set(q.relevant) - known)
        if unknown:
            raise CorpusError(f"{queries_path}: query {q.id!r} labels unknown card ids {unknown}.")
    return Dataset(name="shipped", cards=tuple(cards), queries=tuple(queries))


def load_beir(folder: str | Path, split: str = "test") -> Dataset:
    """A BEIR-layout folder: ``corpus.jsonl`` (_id, title, text), ``queries.jsonl`` (_id, text) and
    ``qrels/<split>.tsv`` (query-id, corpus-id, score, with a header). Only queries with qrels are kept."""
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise CorpusError(f"{qrels_path}: file not found. Available splits: {available or 'none'}.")
    cards: list[Card] = []
    seen: set[str] = set()
    corpus_path = folder / "corpus.jsonl"
    for lineno, obj in _json_lines(corpus_path):
        doc_id = _require_str(corpus_path, lineno, obj, "_id")
        text = _require_str(corpus_path, lineno, obj, "text", allow_empty=True)
        title = obj.get("title") or ""
        if not isinstance(title, str):
            raise CorpusError(f"{corpus_path}:{lineno}: field 'title' must be a string.")
        if not (title.strip() or text.strip()):
            continue  # BEIR sets hold a few empty documents; they can never be retrieved
        if problem := id_problem(doc_id, "_id"):
            raise CorpusError(f"{corpus_path}:{lineno}: {problem}")
        if doc_id in seen:
            raise CorpusError(f"{corpus_path}:{lineno}: field '_id': duplicate id {doc_id!r}.")
        seen.add(doc_id)
        cards.append(Card(id=doc_id, title=title.strip(), lang="en", topic="beir", text=text.strip()))
    qrels: dict[str, dict[str, int]] = {}
    for lineno, row in _tsv_rows(qrels_path):
        if not row or (lineno == 1 and not row[-1].strip().lstrip("-").isdigit()):
            continue  # blank line or header
        if len(row) < 3:
            raise CorpusError(
                f"{qrels_path}:{lineno}: expected 3 tab-separated columns (query-id, corpus-id, score), got {len(row)}."
            )
        try:
            grade = int(row[-1])
        except ValueError:
            raise CorpusError(f"{qrels_path}:{lineno}: column 'score' must be an integer, got {row[-1]!r}.") from None
        if grade > 0:
            qrels.setdefault(row[0].strip(), {})[row[-2].strip()] = grade
    queries: list[LabeledQuery] = []
    queries_path = folder / "queries.jsonl"
    for lineno, obj in _json_lines(queries_path):
        qid = _require_str(queries_path, lineno, obj, "_id")
        if qid in qrels:
            queries.append(
                LabeledQuery(
                    id=qid, text=_require_str(queries_path, lineno, obj, "text"), category="beir", relevant=qrels[qid]
                )
            )
    if not queries:
        raise CorpusError(f"{queries_path}: no query has judgements in {qrels_path}.")
    return Dataset(name=f"{folder.name}-{split}", cards=tuple(cards), queries=tuple(queries), chunk_words=None)


# A sentence ends at . ! ? and whitespace, or at 。！？ (Chinese and Japanese write no space after them).
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")
_LEGACY_SENTENCE = re.compile(r"(?<=[.!?])\s+")  # the chunker before CJK enders and long cuts (``legacy=True``)
# A "sentence" of more than LONG_SENTENCE x max_words words (a text without full stops, a pasted transcript, a
# Chinese paragraph) is cut into pieces of max_words words: the embedder and the cross-encoder read about 512 tokens
# of a sub-chunk, the rest of a longer one could only be found by BM25. No shipped, bundled or SciFact text has
# one (SciFact's longest sentence is 218 words), so their sub-chunks are what they were.
LONG_SENTENCE = 4


def _words(text: str) -> int:
    """Words of ``text`` for packing sentences: whitespace-separated, a CJK run about one per two characters."""
    return word_count(text) if has_cjk(text) else len(text.split())


def _join(parts: Sequence[str]) -> str:
    """Sentences joined by a space, none after 。！？ (Chinese and Japanese write none)."""
    return "".join(
        part if not i or parts[i - 1].endswith(("。", "！", "？")) else " " + part for i, part in enumerate(parts)
    )


def _pack(parts: Iterable[str], max_words: int, count: Callable[[str], int] = _words) -> list[str]:
    """``parts`` in order, joined into pieces of at most ``max_words`` words (a longer part stands alone)."""
    pieces: list[str] = []
    current: list[str] = []
    total = 0
    for part in parts:
        words = count(part)
        if current and total + words > max_words:
            pieces.append(_join(current))
            current, total = [], 0
        current.append(part)
        total += words
    return pieces + ([_join(current)] if current else [])


def _cut(sentence: str, max_words: int) -> list[str]:
    """``sentence`` as it is, or, past ``LONG_SENTENCE`` x ``max_words`` words, in pieces of ``max_words`` words (a
    CJK run without spaces in slices of ``2 * max_words`` characters)."""
    if _words(sentence) <= LONG_SENTENCE * max_words:
        return [sentence]
    step = 2 * max_words
    return _pack(
        [tok[i : i + step] for tok in sentence.split() for i in range(0, len(tok), step if has_cjk(tok) else len(tok))],
        max_words,
    )


def split_card(card: Card, max_words: int | None = DEFAULT_CHUNK_WORDS, *, legacy: bool = False) -> list[Chunk]:
    """Split a card into sub-chunks of whole sentences, at most ``max_words`` words each (a longer sentence
    stands alone, up to ``LONG_SENTENCE`` x ``max_words`` words; past that it is cut). ``max_words=None`` keeps the
    card whole. Ids are ``<card_id>#<n>``, n from 0: stable as long as the card text is. ``legacy``: the chunker
    before CJK sentence ends and long cuts (a stored corpus's fingerprint may have been made with it)."""
    if max_words is None:
        pieces = [card.text]
    elif legacy:  # (each legacy sentence but the last ends with . ! or ?: joined by a space, as it was)
        pieces = _pack(_LEGACY_SENTENCE.split(card.text), max_words, lambda t: len(t.split()))
    else:
        pieces = _pack(
            [piece for sentence in _SENTENCE.split(card.text) if sentence for piece in _cut(sentence, max_words)],
            max_words,
        )
    return [
        Chunk(chunk_id=f"{card.id}#{n}", parent_id=card.id, title=card.title, lang=card.lang, text=piece)
        for n, piece in enumerate(pieces)
    ]


def split_cards(
    cards: Iterable[Card], max_words: int | None = DEFAULT_CHUNK_WORDS, *, legacy: bool = False
) -> list[Chunk]:
    """Every card's sub-chunks, in corpus order."""
    return [chunk for card in cards for chunk in split_card(card, max_words, legacy=legacy)]


def fingerprint(chunks: Sequence[Chunk], *extra: str) -> str:
    """A short hash of the chunk ids and texts (plus ``extra``, e.g. the model name): a changed corpus or model
    gets a new dense collection, an unchanged one is reused."""
    digest = hashlib.sha256()
    for part in (CHUNKER_VERSION, *extra):
        digest.update(part.encode())
        digest.update(b"\x00")
    for chunk in chunks:
        for part in (chunk.chunk_id, chunk.title, chunk.text):
            digest.update(part.encode())
            digest.update(b"\x00")
    return digest.hexdigest()[:16]
