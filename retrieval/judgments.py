"""Graded relevance judgments (0-3, as in BEIR qrels) made in the page or the CLI, kept per corpus in the Chroma
store itself, so they survive a restart and every process sharing the store (``CHROMA_PATH``, or the server at
``CHROMA_HOST``) sees the same set.

One small collection, ``judgments``, holds every corpus's records: one record per (corpus, turn, card), keyed by a
hash of the three (the turn compared without case or extra spaces, as a typed turn is matched to a labeled one), with
the grade, when it was made (UTC) and the corpus fingerprint at that time as metadata. Chroma needs a vector per
record: each carries the constant ``[1.0]``; nothing ever searches it.

How judgments meet a corpus's own labeled turns (``merge``): a judged turn whose text matches a labeled turn adds
its cards to that turn's labels and overrides the grade of a card both name (the judgment is the newer word); a
judged turn no labeled turn matches becomes a new labeled turn (category ``judged``) when at least one of its grades
is above 0; judgments of cards the corpus no longer holds are left out.

Exports: a BEIR folder's ``queries.jsonl`` + ``qrels/test.tsv``, or TREC qrels (``qid 0 docid grade``); both
import back to the same judgments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from retrieval.corpus import CorpusError, LabeledQuery, _json_lines, _tsv_rows
from retrieval.query import QueryError, clean_query
from retrieval.settings import Settings

log = logging.getLogger(__name__)

COLLECTION = "judgments"
GRADES = (0, 1, 2, 3)
JUDGED = "judged"  # the category of a labeled turn that only judgments made
_BATCH = 1000


def turn_key(text: str) -> str:
    """A turn's text with case and runs of white space ignored (``retrieval.corpora.turn_key``'s rule)."""
    return " ".join(str(text).lower().split())


def query_id(turn: str) -> str:
    """A stable id for a judged turn: ``j-`` and 12 hex digits of its ``turn_key``."""
    return "j-" + hashlib.sha256(turn_key(turn).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Judgment:
    """One graded judgment: how relevant ``card_id`` is to ``turn`` in ``corpus`` (0 not relevant .. 3 perfect)."""

    corpus: str
    turn: str
    card_id: str
    grade: int
    made_at: str
    fingerprint: str = ""

    @property
    def qid(self) -> str:
        return query_id(self.turn)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "qid": self.qid}


def check_grade(grade: Any) -> int:
    """A grade 0-3 from an int or its digit (a widget may send "2" or 2.0). Raises ``ValueError`` saying so."""
    if isinstance(grade, str) and grade.strip().isdigit():
        grade = int(grade.strip())
    if isinstance(grade, float) and grade.is_integer():
        grade = int(grade)
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
        raise ValueError(f"a grade must be 0, 1, 2 or 3 (0 not relevant, 3 perfectly relevant), got {grade!r}.")
    return grade


def check_card_id(card_id: Any) -> str:
    if not isinstance(card_id, str) or not card_id.strip():
        raise ValueError("a judgment needs a card id.")
    card_id = card_id.strip()
    if any(ch.isspace() for ch in card_id) or len(card_id) > 500:
        raise ValueError(f"card id {card_id[:80]!r} cannot be judged: ids have no spaces and at most 500 characters.")
    return card_id


def _check_corpus(corpus: Any) -> str:
    if not isinstance(corpus, str) or not corpus.strip() or len(corpus) > 200:
        raise ValueError("judgments belong to a corpus: give its name (e.g. shipped).")
    return corpus.strip()


def _record_id(corpus: str, turn: str, card_id: str) -> str:
    return hashlib.sha256("\x00".join((corpus, turn_key(turn), card_id)).encode()).hexdigest()[:32]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class JudgmentStore:
    """The judgments in the Chroma store the dense branch uses (``CHROMA_HOST`` if set, else ``CHROMA_PATH``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._collection = None

    @property
    def collection(self):
        if self._collection is None:
            from retrieval.dense import chroma_client

            s = self.settings
            client = (
                chroma_client(host=s.chroma_host, port=s.chroma_port)
                if s.chroma_host
                else chroma_client(path=s.chroma_path)
            )
            self._collection = client.get_or_create_collection(COLLECTION, metadata={"purpose": "relevance judgments"})
        return self._collection

    def put(
        self, corpus: str, turn: str, card_id: str, grade: Any, *, fingerprint: str = "", made_at: str | None = None
    ) -> Judgment:
        """Record (or replace) one judgment. Raises ``ValueError`` for a bad corpus, turn, card id or grade."""
        return self.put_many([(corpus, turn, card_id, grade, fingerprint, made_at)])[0]

    def put_many(self, rows: Iterable[tuple]) -> list[Judgment]:
        """Record many ``(corpus, turn, card_id, grade[, fingerprint[, made_at]])`` at once (validated first)."""
        made: list[Judgment] = []
        for row in rows:
            corpus, turn, card_id, grade, fp, when = (*row, "", None)[:6]
            try:
                text = clean_query(turn)
            except QueryError as exc:
                raise ValueError(f"the judged turn is not valid: {exc}") from None
            made.append(
                Judgment(
                    _check_corpus(corpus),
                    text,
                    check_card_id(card_id),
                    check_grade(grade),
                    when or _now(),
                    str(fp or ""),
                )
            )
        for lo in range(0, len(made), _BATCH):
            part = made[lo : lo + _BATCH]
            self.collection.upsert(
                ids=[_record_id(j.corpus, j.turn, j.card_id) for j in part],
                embeddings=[[1.0] for _ in part],
                documents=[j.turn for j in part],
                metadatas=[
                    {
                        "corpus": j.corpus,
                        "turn_key": turn_key(j.turn),
                        "card_id": j.card_id,
                        "grade": j.grade,
                        "made_at": j.made_at,
                        "fingerprint": j.fingerprint,
                    }
                    for j in part
                ],
            )
        return made

    def remove(self, corpus: str, turn: str, card_id: str) -> None:
        """Forget one judgment (nothing happens if there is none)."""
        self.collection.delete(ids=[_record_id(_check_corpus(corpus), turn, check_card_id(card_id))])

    def all(self, corpus: str) -> list[Judgment]:
        """Every judgment of ``corpus``, by turn then card."""
        got = self.collection.get(where={"corpus": _check_corpus(corpus)}, include=["metadatas", "documents"])
        out = [
            Judgment(m["corpus"], doc, m["card_id"], int(m["grade"]), m["made_at"], m.get("fingerprint", ""))
            for doc, m in zip(got["documents"], got["metadatas"])
        ]
        return sorted(out, key=lambda j: (turn_key(j.turn), j.card_id))

    def for_turn(self, corpus: str, turn: str) -> dict[str, int]:
        """Card id -> grade for one turn of ``corpus`` (matched without case or extra spaces)."""
        got = self.collection.get(
            where={"$and": [{"corpus": _check_corpus(corpus)}, {"turn_key": turn_key(turn)}]}, include=["metadatas"]
        )
        return {m["card_id"]: int(m["grade"]) for m in got["metadatas"]}

    def counts(self) -> dict[str, int]:
        """Corpus name -> how many judgments it has."""
        got = self.collection.get(include=["metadatas"])
        out: dict[str, int] = {}
        for m in got["metadatas"]:
            out[m["corpus"]] = out.get(m["corpus"], 0) + 1
        return out


def judged_turn(settings: Settings, corpus: str, turn: str) -> dict[str, int]:
    """``JudgmentStore.for_turn``, or {} when the store cannot be read (logged): labels still show without it."""
    try:
        return JudgmentStore(settings).for_turn(corpus, turn)
    except Exception as exc:
        log.warning("judgments of %s unavailable (%s: %s)", corpus, type(exc).__name__, exc)
        return {}


# ------------------------------------------------------------------------------------------------ merging
def merge(
    queries: Sequence[LabeledQuery], judgments: Sequence[Judgment], cards: Iterable[str] | None = None
) -> tuple[LabeledQuery, ...]:
    """A corpus's labeled turns with its judgments folded in (the rule in the module docstring). ``cards``, when
    given, are the corpus's card ids: judgments of other ids are left out."""
    known = set(cards) if cards is not None else None
    judged: dict[str, dict[str, int]] = {}
    text: dict[str, str] = {}
    for j in judgments:
        if known is not None and j.card_id not in known:
            continue
        key = turn_key(j.turn)
        judged.setdefault(key, {})[j.card_id] = j.grade
        text.setdefault(key, j.turn)
    out = []
    for q in queries:
        extra = judged.pop(turn_key(q.text), None)
        out.append(q if extra is None else LabeledQuery(q.id, q.text, q.lang, q.category, {**q.relevant, **extra}))
    for key, grades in judged.items():
        if any(g > 0 for g in grades.values()):
            out.append(LabeledQuery(query_id(text[key]), text[key], "en", JUDGED, grades))
    return tuple(out)


# ------------------------------------------------------------------------------------------------ files
def export_beir(judgments: Sequence[Judgment], folder: str | Path, split: str = "test") -> list[Path]:
    """Write ``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv`` (with its header) into ``folder``."""
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    queries = folder / "queries.jsonl"
    seen: dict[str, str] = {}
    for j in judgments:
        seen.setdefault(j.qid, j.turn)
    queries.write_text(
        "".join(json.dumps({"_id": qid, "text": t}, ensure_ascii=False) + "\n" for qid, t in seen.items()),
        encoding="utf-8",
    )
    qrels = folder / "qrels" / f"{split}.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{j.qid}\t{j.card_id}\t{j.grade}\n" for j in judgments),
        encoding="utf-8",
    )
    return [queries, qrels]


def export_trec(judgments: Sequence[Judgment], path: str | Path) -> Path:
    """TREC qrels: ``qid 0 docid grade`` per line (the turn texts go with ``export_beir``'s queries.jsonl)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{j.qid} 0 {j.card_id} {j.grade}\n" for j in judgments), encoding="utf-8")
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


def read_qrels(path: str | Path) -> list[tuple[str, str, int]]:
    """``(query id, card id, grade)`` rows of a BEIR qrels TSV (header optional) or TREC qrels file."""
    path = Path(path)
    rows = []
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
        rows.append((fields[0].strip(), fields[-2].strip(), grade))
    return rows


def import_files(
    store: JudgmentStore,
    corpus: str,
    qrels: str | Path,
    queries: str | Path,
    cards: Iterable[str] | None = None,
    fingerprint: str = "",
) -> list[Judgment]:
    """Record the judgments of a qrels file (BEIR TSV or TREC) whose turn texts are in a BEIR ``queries.jsonl``.

    Raises:
        CorpusError: a malformed file, a qrels row naming a query the queries file lacks, or (with ``cards``) a card
            the corpus does not hold; the message names the file and line or the ids.
    """
    texts = read_queries(queries)
    rows = read_qrels(qrels)
    missing = sorted({q for q, _, _ in rows if q not in texts})
    if missing:
        raise CorpusError(f"{qrels}: {len(missing)} query ids are not in {queries} (e.g. {missing[0]!r}).")
    if cards is not None:
        known = set(cards)
        unknown = sorted({c for _, c, _ in rows if c not in known})
        if unknown:
            raise CorpusError(f"{qrels}: {len(unknown)} card ids are not in corpus {corpus!r} (e.g. {unknown[0]!r}).")
    return store.put_many([(corpus, texts[q], c, g, fingerprint) for q, c, g in rows])


# ------------------------------------------------------------------------------------------------ command line
def register(sub: argparse._SubParsersAction) -> None:
    """``python -m retrieval judgments list|set|remove|export|import --corpus NAME``."""
    p = sub.add_parser(
        "judgments",
        help="graded relevance judgments (0-3) kept per corpus in the Chroma store",
        description="List, set, remove, export (BEIR folder or TREC qrels) and import the judgments "
        "of a corpus; `eval --corpus NAME` and the Evaluation tab merge them with the "
        "corpus's own labeled turns.",
    )
    p.add_argument("action", choices=("list", "set", "remove", "export", "import"))
    p.add_argument("--corpus", default="shipped", help="the corpus name (default: shipped)")
    p.add_argument("--turn", help="set/remove: the turn")
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
    corpus, cards = data.entry.name, {c.id for c in data.cards}
    store = JudgmentStore(settings)
    if args.action == "set":
        if not (args.turn and args.card and args.grade is not None):
            raise ValueError("judgments set needs --turn, --card and --grade.")
        if args.card not in cards:
            raise ValueError(f"corpus {corpus!r} has no card {args.card[:80]!r}.")
        j = store.put(corpus, args.turn, args.card, args.grade, fingerprint=data.entry.fingerprint)
        print(json.dumps(j.to_dict(), ensure_ascii=False))
    elif args.action == "remove":
        if not (args.turn and args.card):
            raise ValueError("judgments remove needs --turn and --card.")
        store.remove(corpus, args.turn, args.card)
    elif args.action == "list":
        rows = store.all(corpus)
        if args.json:
            print(json.dumps([j.to_dict() for j in rows], ensure_ascii=False))
        for j in rows if not args.json else ():
            print(f"{j.made_at}  {j.grade}  {j.card_id}  {j.turn}")
    elif args.action == "export":
        if not (args.beir or args.trec):
            raise ValueError("judgments export needs --beir DIR and/or --trec FILE.")
        rows = store.all(corpus)
        written = (export_beir(rows, args.beir) if args.beir else []) + (
            [export_trec(rows, args.trec)] if args.trec else []
        )
        for path in written:
            print(f"wrote {path} ({len(rows)} judgments)", file=sys.stderr)
    else:
        if args.beir:
            qrels, queries = Path(args.beir) / "qrels" / "test.tsv", Path(args.beir) / "queries.jsonl"
        elif args.trec and args.queries:
            qrels, queries = Path(args.trec), Path(args.queries)
        else:
            raise ValueError("judgments import needs --beir DIR, or --trec FILE with --queries FILE.")
        made = import_files(store, corpus, qrels, queries, cards, data.entry.fingerprint)
        print(f"imported {len(made)} judgments into {corpus}", file=sys.stderr)
    return 0
