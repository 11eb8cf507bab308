"""Judgments in files and on the command line: a BEIR folder's ``queries.jsonl`` + ``qrels/test.tsv``, or TREC qrels
(``qid 0 docid grade``); both import back to the same judgments. ``python -m retrieval judgments ...`` is run by the
machine's owner, so it changes a corpus's labels (``retrieval.judgments.LABEL``) of any corpus, the shipped one too.

An import streams: the qrels file is read twice, line by line (first every line is checked, and nothing is written
if one is wrong; then the judgments are written ``STREAM_ROWS`` at a time, each write touching at most 4,096
records), so only the queries file's turn texts and one batch are held whole.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.corpus import CorpusError, _json_lines, _tsv_rows
from retrieval.judgments import (
    CLI,
    LABEL,
    Judgment,
    JudgmentStore,
    _clean_turn,
    check_grade,
    corpus_identity,
)
from retrieval.settings import Settings

if TYPE_CHECKING:
    from retrieval.corpus_entries import CorpusData

STREAM_ROWS = 50_000  # qrels rows per write of an import (each write reads and rewrites at most 4,096 records)


def export_beir(judgments: Iterable[Judgment], folder: str | Path, split: str = "test") -> list[Path]:
    """Write ``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv`` (with its header) into ``folder``."""
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    queries, qrels = folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"
    seen: set[str] = set()
    with queries.open("w", encoding="utf-8") as qf, qrels.open("w", encoding="utf-8") as rf:
        rf.write("query-id\tcorpus-id\tscore\n")
        for j in judgments:
            if j.qid not in seen:
                seen.add(j.qid)
                qf.write(json.dumps({"_id": j.qid, "text": j.turn}, ensure_ascii=False) + "\n")
            rf.write(f"{j.qid}\t{j.card_id}\t{j.grade}\n")
    return [queries, qrels]


def export_trec(judgments: Iterable[Judgment], path: str | Path) -> Path:
    """TREC qrels: ``qid 0 docid grade`` per line (the turn texts go with ``export_beir``'s queries.jsonl)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for j in judgments:
            out.write(f"{j.qid} 0 {j.card_id} {j.grade}\n")
    return path


def read_queries(path: str | Path) -> dict[str, str]:
    """A BEIR ``queries.jsonl``: query id -> text."""
    path = Path(path)
    out: dict[str, str] = {}
    for lineno, obj in _json_lines(path):
        qid, text = obj.get("_id"), obj.get("text")
        if not isinstance(qid, str) or not isinstance(text, str) or not text.strip():
            raise CorpusError(f"{path}:{lineno}: a query needs string fields '_id' and 'text'.")
        out[qid] = text
    return out


def iter_qrels(path: str | Path) -> Iterator[tuple[int, str, str, int]]:
    """``(line, query id, card id, grade)`` of a BEIR qrels TSV (header optional) or TREC qrels file, line by line."""
    path = Path(path)
    for lineno, row in _tsv_rows(path):
        fields = row if len(row) >= 3 else (row[0].split() if row else [])
        if not fields or (lineno == 1 and not fields[-1].strip().lstrip("-").isdigit()):
            continue  # blank line or header
        if len(fields) not in (3, 4):
            raise CorpusError(
                f"{path}:{lineno}: expected 'query-id corpus-id score' (BEIR TSV) or 'qid 0 docid "
                f"grade' (TREC), got {len(fields)} columns."
            )
        try:
            grade = check_grade(fields[-1].strip())
        except ValueError as exc:
            raise CorpusError(f"{path}:{lineno}: {exc}") from None
        yield lineno, fields[0].strip(), fields[-2].strip(), grade


def read_qrels(path: str | Path) -> list[tuple[str, str, int]]:
    """``(query id, card id, grade)`` rows of a BEIR qrels TSV (header optional) or TREC qrels file."""
    return [(q, c, g) for _, q, c, g in iter_qrels(path)]


def _check_qrels(qrels: Path, queries: Path, texts: dict[str, str], corpus: str, cards: set[str] | None) -> int:
    """Every line of ``qrels`` checked (query known and a valid turn, card known); the number of rows."""
    missing: dict[str, int] = {}
    unknown: dict[str, int] = {}
    checked: set[str] = set()
    rows = 0
    for lineno, q, c, _ in iter_qrels(qrels):
        rows += 1
        if q not in texts:
            missing.setdefault(q, lineno)
        elif q not in checked:
            try:
                _clean_turn(texts[q])
            except ValueError as exc:
                raise CorpusError(f"{queries}: query {q!r}: {exc}") from None
            checked.add(q)
        if cards is not None and c not in cards:
            unknown.setdefault(c, lineno)
    if missing:
        first = min(missing, key=missing.__getitem__)
        raise CorpusError(
            f"{qrels}: {len(missing)} query ids are not in {queries} (e.g. {first!r}, line {missing[first]})."
        )
    if unknown:
        first = min(unknown, key=unknown.__getitem__)
        raise CorpusError(
            f"{qrels}: {len(unknown)} card ids are not in corpus {corpus!r} (e.g. {first!r}, line {unknown[first]})."
        )
    return rows


def import_files(
    store: JudgmentStore,
    corpus: str,
    qrels: str | Path,
    queries: str | Path,
    cards: Iterable[str] | None = None,
    fingerprint: str = "",
    *,
    name: str | None = None,
) -> int:
    """Record the judgments of a qrels file (BEIR TSV or TREC) whose turn texts are in a BEIR ``queries.jsonl`` as
    labels of the corpus identity ``corpus`` (``name``: what messages call it). Returns how many were recorded.

    Raises:
        CorpusError: a malformed file, a qrels row naming a query the queries file lacks, or (with ``cards``) a card
            the corpus does not hold; the message names the file and line or the ids. Nothing is written then.
    """
    qrels, queries = Path(qrels), Path(queries)
    texts = read_queries(queries)
    known = set(cards) if cards is not None else None
    total = _check_qrels(qrels, queries, texts, name or corpus, known)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    batch: list[tuple] = []
    for _, q, c, g in iter_qrels(qrels):
        batch.append((corpus, texts[q], c, g, fingerprint, when))
        if len(batch) >= STREAM_ROWS:
            store.put_many(batch, by=CLI, scope=LABEL)
            batch = []
    if batch:
        store.put_many(batch, by=CLI, scope=LABEL)
    return total


# ------------------------------------------------------------------------------------------------ command line
def register(sub: argparse._SubParsersAction) -> None:
    """``python -m retrieval judgments list|set|remove|undo|export|import --corpus NAME``."""
    p = sub.add_parser(
        "judgments",
        help="graded relevance judgments (0-3): the labels of a corpus, kept in the Chroma store",
        description="List, set, remove, undo, export (BEIR folder or TREC qrels) and import the label judgments "
        "of a corpus; `eval --corpus NAME`, the Evaluation tab, A vs B and Tune merge them with the corpus's own "
        "labeled turns. The page's visitors' own marks are never listed or merged here.",
    )
    p.add_argument("action", choices=("list", "set", "remove", "undo", "export", "import"))
    p.add_argument("--corpus", default="shipped", help="the corpus name (default: shipped)")
    p.add_argument("--turn", help="set/remove/undo: the turn")
    p.add_argument("--card", help="set/remove: the card id")
    p.add_argument("--grade", help="set: 0 (not relevant) to 3 (perfectly relevant)")
    p.add_argument("--beir", metavar="DIR", help="export/import: a BEIR folder (queries.jsonl + qrels/test.tsv)")
    p.add_argument("--trec", metavar="FILE", help="export: TREC qrels; import: TREC qrels (with --queries)")
    p.add_argument("--queries", metavar="FILE", help="import --trec: the BEIR queries.jsonl holding the turn texts")
    p.add_argument("--json", action="store_true", help="list: print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.corpora import Registry

    settings = Settings.from_env()
    data = Registry(settings).open(args.corpus)
    name, ident = data.entry.name, corpus_identity(data)
    store = JudgmentStore(settings)
    if args.action in ("set", "remove", "undo"):
        return _change(args, store, data, name, ident)
    if args.action == "list":
        if args.json:
            print(json.dumps([{**j.to_dict(), "name": name} for j in store.all(ident)], ensure_ascii=False))
        else:
            for j in store.iter_all(ident):
                print(f"{j.made_at}  {j.grade}  {j.card_id}  {j.turn}")
    elif args.action == "export":
        if not (args.beir or args.trec):
            raise ValueError("judgments export needs --beir DIR and/or --trec FILE.")
        written = [export_beir(store.iter_all(ident), args.beir)[1]] if args.beir else []
        written += [export_trec(store.iter_all(ident), args.trec)] if args.trec else []
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    else:
        if args.beir:
            qrels, queries = Path(args.beir) / "qrels" / "test.tsv", Path(args.beir) / "queries.jsonl"
        elif args.trec and args.queries:
            qrels, queries = Path(args.trec), Path(args.queries)
        else:
            raise ValueError("judgments import needs --beir DIR, or --trec FILE with --queries FILE.")
        made = import_files(store, ident, qrels, queries, {c.id for c in data.cards}, data.entry.fingerprint, name=name)
        print(f"imported {made} judgments into {name}", file=sys.stderr)
    return 0


def _change(args: argparse.Namespace, store: JudgmentStore, data: CorpusData, name: str, ident: str) -> int:
    if not args.turn:
        raise ValueError(f"judgments {args.action} needs --turn.")
    if args.action == "undo":
        card = store.undo(ident, args.turn, by=CLI, scope=LABEL)
        print(f"undid the command line's latest change to {card}" if card else "nothing to undo", file=sys.stderr)
        return 0
    if not args.card:
        raise ValueError(f"judgments {args.action} needs --turn and --card.")
    if args.action == "remove":
        store.remove(ident, args.turn, args.card)
        return 0
    if args.grade is None:
        raise ValueError("judgments set needs --turn, --card and --grade.")
    if args.card not in {c.id for c in data.cards}:
        raise ValueError(f"corpus {name!r} has no card {args.card[:80]!r}.")
    j = store.put(ident, args.turn, args.card, args.grade, fingerprint=data.entry.fingerprint)
    print(json.dumps({**j.to_dict(), "name": name}, ensure_ascii=False))
    return 0
