"""A .zip: of a BEIR folder, or of .txt/.md files (one card per file), checked from its directory before a
single byte is unpacked."""

from __future__ import annotations

import posixpath
import re
import stat
import unicodedata
import zipfile
from pathlib import Path, PurePosixPath

from retrieval.formats.common import TEXT_SUFFIXES, Limits, Loaded, LoadError, _Cards, _Collector, _utf8, _whole_text
from retrieval.formats.jsonl import _load_beir_files


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
    if match is None or not rows or not all(_FRONT_ROW.match(row) for row in rows):  # opens with a rule (---)
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
