"""Load a corpus a person brings: cards JSONL, a BEIR folder or ``corpus.jsonl``, CSV/TSV, or a .zip (a BEIR folder,
or .txt/.md files, one card per file).

Everything is validated before anything is indexed. Problems are collected (``MAX_PROBLEMS_SHOWN`` shown, with the
count), each naming the file, the line or row and the field. A zip is checked from its directory (entry count,
total unpacked size, paths that escape the folder, links) before a single byte is unpacked, and is read in memory:
uploaded files are data, never executed, and only ever written under the data folder by ``retrieval.corpora``.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from retrieval.corpus import MAX_LINE_BYTES, json_line, load_queries
from retrieval.formats.common import (
    FORMATS,
    MAX_PROBLEMS_SHOWN,
    TEXT_SUFFIXES,
    Limits,
    Loaded,
    LoadError,
    _read_file,
    _sibling_reader,
    _utf8,
)
from retrieval.formats.jsonl import _check_labels, _load_beir_files, parse_cards_jsonl
from retrieval.formats.table import parse_table
from retrieval.formats.ziptext import check_zip, load_zip

__all__ = [
    "FORMATS",
    "MAX_PROBLEMS_SHOWN",
    "TEXT_SUFFIXES",
    "Limits",
    "LoadError",
    "Loaded",
    "check_zip",
    "detect_format",
    "load_any",
    "load_zip",
    "parse_cards_jsonl",
    "parse_table",
]


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
