"""CSV and TSV: a header naming the id, title and text columns (common aliases accepted), read strictly."""

from __future__ import annotations

import csv
import io
import re

from retrieval.formats.common import Limits, Loaded, LoadError, _Cards, _Collector, _whole_text

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
    assert text is not None  # out.check() raised otherwise
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
        places = [i + 1 for i, h in enumerate(header) if h.strip().lower() == col]
        if len(places) > 1:
            raise LoadError(
                [
                    f"{name}:1: column {col!r} appears twice in the header (columns "
                    f"{', '.join(map(str, places[:-1]))} and {places[-1]}): rename or remove one."
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

        values = {col: _cell(row, columns.get(col)) for col in ("id", "title", "text")}
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
            _cell(row, columns.get("lang")),
            _cell(row, columns.get("topic")) or "general",
        )
    if not cards.cards and not out.problems:
        out.add(f"{name}: no rows found under the header.")
    out.check()
    return Loaded(kind.lower(), tuple(cards.cards))


def _cell(row: list[str], i: int | None) -> str:
    """The stripped cell at column ``i`` of ``row``; empty when the column is absent or the row is short."""
    return row[i].strip() if i is not None and i < len(row) else ""
