"""Graded relevance judgments (0-3, as in BEIR qrels) made in the page or the CLI, kept in the Chroma store itself,
so they survive a restart and every process sharing the store (``CHROMA_PATH``, or the server at ``CHROMA_HOST``)
sees the same set.

Who may change what others are scored on: a corpus's **labels** (the judgments ``eval``, the Evaluation tab, A vs B
and Tune merge into its labeled turns) are changed only by whoever may change the corpus: the command line (the
machine's owner) for any corpus, and from the page the session that uploaded or attached it. Nobody changes the
shipped set's labels from the page. Any other session's grades are its own **marks**: kept apart under its owner
token's hash, shown to that session only, never merged into anyone's evaluation. Every change records who made it
(``cli``, or the SHA-256 of the session's owner token: never a name) and can be undone by whoever made it.

Judgments bind to the corpus's identity, not its name (``corpus_identity``: its fingerprint and when it was added;
``shipped`` for the shipped cards): a corpus deleted and another uploaded under the same name inherits nothing, and
deleting a corpus deletes its judgments (``drop``).

One small collection, ``judgments``, holds one record per (corpus identity, scope, bucket): the scope is ``label`` or
``mark:<judge>``, the bucket is 3 hex digits of the hash of the turn (compared without case or extra spaces), so a
corpus has at most 4,096 records per scope however many judgments it holds, and a turn's judgments are read from
one record fetched by id (never by scanning a corpus's). A record's metadata ``data`` is JSON: per turn its text,
card id -> [grade, when (UTC), by, fingerprint], and its page sessions' last changes (for undo). Reading all of a
corpus's judgments goes ``PAGE`` records at a time (SQLite refuses more than 32,766 variables in one statement). A
page session's judgments are counted in a small tally record of its own (``MAX_MARKS``). Chroma needs a vector per
record: each carries the constant ``[1.0]``; nothing ever searches it. Two processes changing turns of the same
bucket at the same instant may lose one change (a write reads the bucket, changes it and writes it back; within a
process a lock orders them). Records of earlier versions (one per judgment, keyed by corpus name, with no scope)
are neither read nor counted: anyone could have made them.

How labels meet a corpus's own labeled turns (``merge``): a judged turn whose text matches a labeled turn adds its
cards to that turn's labels and overrides the grade of a card both name (the owner's judgment is the newer word); a
judged turn no labeled turn matches becomes a new labeled turn (category ``judged``) when at least one of its grades
is above 0; judgments of cards the corpus no longer holds are left out.

Files (BEIR ``queries.jsonl`` + ``qrels/test.tsv``, TREC qrels) and the command line: ``retrieval.judgment_files``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from retrieval.corpus import LabeledQuery
from retrieval.query import QueryError, clean_query
from retrieval.settings import Settings

log = logging.getLogger(__name__)

COLLECTION = "judgments"
GRADES = (0, 1, 2, 3)
JUDGED = "judged"  # the category of a labeled turn that only judgments made
LABEL = "label"  # the scope of the judgments a corpus is scored on
CLI = "cli"  # who made a judgment from the command line (the machine's owner)
SHIPPED = "shipped"  # the shipped cards' identity (``retrieval.corpora.SHIPPED``)
PAGE = 1000  # records per read: far below SQLite's 32,766 variables
STREAM = 50_000  # judgments folded into their records per write: each write touches at most 4,096 records
CHUNK = 4000  # records per Chroma call (its largest batch is about 5,400)
WRITE_RECORDS = 500  # records read, changed and written back at a time
MAX_MARKS = 500  # judgments one page session may keep (its marks and, as a corpus's owner, its labels)
MAX_CARDS_PER_TURN = 5000  # judged cards of one turn in one scope
HISTORY = 20  # changes kept per record for undo
_WRITE_LOCK = threading.Lock()  # read-modify-write of a turn's record, in this process


def turn_key(text: str) -> str:
    """A turn's text with case and runs of white space ignored (``retrieval.corpora.turn_key``'s rule)."""
    return " ".join(str(text).lower().split())


def query_id(turn: str) -> str:
    """A stable id for a judged turn: ``j-`` and 12 hex digits of its ``turn_key``."""
    return "j-" + hashlib.sha256(turn_key(turn).encode()).hexdigest()[:12]


def corpus_identity(data: Any) -> str:
    """What judgments bind to: a loaded corpus's key (its fingerprint and when it was added; for an attached
    collection its name and fingerprint), or ``shipped`` for the shipped cards (``None`` too)."""
    return (getattr(data, "key", None) if data is not None else None) or SHIPPED


def mark_scope(judge: str) -> str:
    """The scope of one session's own marks (``judge``: the hash of its owner token)."""
    return f"mark:{judge}"


@dataclass(frozen=True)
class Judgment:
    """One graded judgment: how relevant ``card_id`` is to ``turn`` in ``corpus`` (0 not relevant .. 3 perfect);
    ``corpus`` is the corpus identity, ``by`` who made it (``cli`` or an owner-token hash), ``scope`` whose it is."""

    corpus: str
    turn: str
    card_id: str
    grade: int
    made_at: str
    fingerprint: str = ""
    by: str = CLI
    scope: str = LABEL

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
    if not isinstance(corpus, str) or not corpus.strip() or len(corpus) > 300:
        raise ValueError("judgments belong to a corpus: give its identity (e.g. shipped).")
    return corpus.strip()


def _clean_turn(turn: Any) -> str:
    try:
        return clean_query(turn)
    except QueryError as exc:
        raise ValueError(f"the judged turn is not valid: {exc}") from None


def bucket_of(turn: str) -> str:
    """The bucket a turn's judgments are kept in: 3 hex digits of its ``turn_key``'s hash (``BUCKETS`` of them)."""
    return hashlib.sha256(turn_key(turn).encode()).hexdigest()[:3]


def _record_id(corpus: str, scope: str, turn: str) -> str:
    return hashlib.sha256("\x00".join((corpus, scope, bucket_of(turn))).encode()).hexdigest()[:40]


def _tally_id(by: str) -> str:
    return "tally-" + hashlib.sha256(by.encode()).hexdigest()[:34]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _judgments_of(meta: dict[str, Any], body: dict[str, Any], only: str | None = None) -> list[Judgment]:
    turns = body["turns"] if only is None else {only: body["turns"][only]} if only in body["turns"] else {}
    return [
        Judgment(meta["corpus"], t["turn"], card, int(g[0]), g[1], g[3], g[2], meta["scope"])
        for _, t in sorted(turns.items())
        for card, g in sorted(t["grades"].items())
    ]


def _change(entry: dict[str, Any], card: str, after: list[Any] | None, by: str) -> list[Any] | None:
    """Set (or, with ``after`` None, drop) a card's grade in a turn's entry, noting it in its history; the grade
    before. A grade is ``[grade, when (UTC), by, fingerprint]``."""
    before = entry["grades"].get(card)
    if after is None:
        entry["grades"].pop(card, None)
    else:
        entry["grades"][card] = after
    if by != CLI:  # the command line's changes (an import of 100,000 lines) are not undone card by card
        entry["history"] = [*entry["history"], {"card": card, "before": before, "by": by}][-HISTORY:]
    return before


def _meta(meta: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {
        "corpus": meta["corpus"],
        "scope": meta["scope"],
        "cards": sum(len(t["grades"]) for t in body["turns"].values()),
        "made_at": _now(),
        "data": json.dumps(body, ensure_ascii=False, separators=(",", ":")),
    }


def _fold(body: dict[str, Any], j: Judgment) -> bool:
    """Set one judgment in a bucket's body; True if its card was not judged on that turn before."""
    entry = body["turns"].setdefault(turn_key(j.turn), {"turn": j.turn, "grades": {}, "history": []})
    new = _change(entry, j.card_id, [j.grade, j.made_at, j.by, j.fingerprint], j.by) is None
    if len(entry["grades"]) > MAX_CARDS_PER_TURN:
        raise ValueError(
            f"the turn {j.turn[:80]!r} would have more than {MAX_CARDS_PER_TURN:,} judged cards, the limit per turn."
        )
    return new


class _Records:
    """The records of the ``judgments`` collection: read by id or page by page, written back, and the page sessions'
    tallies. ``JudgmentStore`` adds the changes."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._collection: Any = None  # a Chroma collection, made on first use

    @property
    def collection(self) -> Any:
        if self._collection is None:
            from retrieval.corpus_store import client_for

            client = client_for(self.settings)
            self._collection = client.get_or_create_collection(COLLECTION, metadata={"purpose": "relevance judgments"})
        return self._collection

    # --------------------------------------------------------------------------------------------- records
    def _records(self, ids: list[str]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        out: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for lo in range(0, len(ids), CHUNK):
            got = self.collection.get(ids=ids[lo : lo + CHUNK], include=["metadatas"])
            out.update((rid, (meta, json.loads(meta["data"]))) for rid, meta in zip(got["ids"], got["metadatas"]))
        return out

    def _upsert(self, records: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """Write records back (the JSON in metadata ``data``: a document would be full-text indexed, 3x slower);
        a record left without a grade is deleted."""
        gone = [rid for rid, (_, body) in records.items() if not any(t["grades"] for t in body["turns"].values())]
        for lo in range(0, len(gone), CHUNK):
            self.collection.delete(ids=gone[lo : lo + CHUNK])
        ids = [rid for rid in records if rid not in set(gone)]
        for lo in range(0, len(ids), CHUNK):
            part = ids[lo : lo + CHUNK]
            metas = [_meta(*records[rid]) for rid in part]
            self.collection.upsert(ids=part, embeddings=[[1.0]] * len(part), metadatas=metas)

    def _tally(self, by: str, delta: int) -> None:
        """Keep count of the judgments a page session made (``count_by``): one small record per session."""
        if not delta:
            return
        n = max(0, self.count_by(by) + delta)
        self.collection.upsert(ids=[_tally_id(by)], embeddings=[[1.0]], metadatas=[{"tally": n}])

    def _edit(self, corpus: str, turn: str, scope: str, edit: Callable[[dict[str, Any]], Any]) -> Any:
        """Read a turn's entry, let ``edit(entry)`` change it (its result is returned), write it back."""
        rid, key = _record_id(_check_corpus(corpus), scope, turn), turn_key(turn)
        with _WRITE_LOCK:
            found = self._records([rid]).get(rid)
            if found is None or key not in found[1]["turns"]:
                return None
            entry = found[1]["turns"][key]
            out = edit(entry)
            if not entry["grades"]:
                found[1]["turns"].pop(key)
            self._upsert({rid: found})
        return out

    # --------------------------------------------------------------------------------------------- reading
    def turn_judgments(self, corpus: str, turn: str, scope: str = LABEL) -> list[Judgment]:
        """The judgments of one turn in one scope, from its bucket's record read by id (nothing else is read)."""
        rid = _record_id(_check_corpus(corpus), scope, turn)
        found = self._records([rid]).get(rid)
        return _judgments_of(*found, only=turn_key(turn)) if found else []

    def for_turn(self, corpus: str, turn: str, scope: str = LABEL) -> dict[str, int]:
        """Card id -> grade for one turn (matched without case or extra spaces) in ``scope`` (the labels)."""
        return {j.card_id: j.grade for j in self.turn_judgments(corpus, turn, scope)}

    def iter_all(self, corpus: str, scope: str = LABEL) -> Iterator[Judgment]:
        """Every judgment of ``corpus`` in ``scope``, read ``PAGE`` records at a time."""
        where = {"$and": [{"corpus": _check_corpus(corpus)}, {"scope": scope}]}
        offset = 0
        while True:
            got = self.collection.get(where=where, include=["metadatas"], limit=PAGE, offset=offset)
            for meta in got["metadatas"]:
                yield from _judgments_of(meta, json.loads(meta["data"]))
            if len(got["ids"]) < PAGE:
                return
            offset += PAGE

    def all(self, corpus: str, scope: str = LABEL) -> list[Judgment]:
        """Every judgment of ``corpus`` in ``scope`` (the labels), by turn then card."""
        return sorted(self.iter_all(corpus, scope), key=lambda j: (turn_key(j.turn), j.card_id))

    def has_labels(self, corpus: str) -> bool:
        """True if ``corpus`` has at least one label judgment (one record read)."""
        got = self.collection.get(
            where={"$and": [{"corpus": _check_corpus(corpus)}, {"scope": LABEL}]}, include=[], limit=1
        )
        return bool(got["ids"])

    def count_by(self, by: str) -> int:
        """How many judgments the page session ``by`` has made and not undone (its tally: one record read)."""
        got = self.collection.get(ids=[_tally_id(by)], include=["metadatas"])
        return int(got["metadatas"][0].get("tally", 0)) if got["ids"] else 0


class JudgmentStore(_Records):
    """The judgments in the Chroma store the dense branch uses (``CHROMA_HOST`` if set, else ``CHROMA_PATH``)."""

    # --------------------------------------------------------------------------------------------- writing
    def put(
        self,
        corpus: str,
        turn: str,
        card_id: str,
        grade: Any,
        *,
        fingerprint: str = "",
        made_at: str | None = None,
        by: str = CLI,
        scope: str = LABEL,
    ) -> Judgment:
        """Record (or replace) one judgment in ``scope`` (the corpus's labels, or a session's marks), made ``by``.
        Raises ``ValueError`` for a bad corpus, turn, card id or grade, or a page session past ``MAX_MARKS``."""
        if by != CLI and self.count_by(by) >= MAX_MARKS:
            raise ValueError(
                f"this session keeps {MAX_MARKS} judgments already, the most one session may: undo some first (the "
                "command line `python -m retrieval judgments` has no such limit)."
            )
        return self.put_many([(corpus, turn, card_id, grade, fingerprint, made_at)], by=by, scope=scope)[0]

    def put_many(self, rows: Iterable[tuple], *, by: str = CLI, scope: str = LABEL) -> list[Judgment]:
        """Record many ``(corpus, turn, card_id, grade[, fingerprint[, made_at]])`` at once (all validated first):
        a turn's earlier judgments in the same scope are kept, the same card's replaced."""
        made: list[Judgment] = []
        for row in rows:
            corpus, turn, card_id, grade, fp, when = (*row, "", None)[:6]
            made.append(
                Judgment(
                    _check_corpus(corpus),
                    _clean_turn(turn),
                    check_card_id(card_id),
                    check_grade(grade),
                    when or _now(),
                    str(fp or ""),
                    by,
                    scope,
                )
            )
        for lo in range(0, len(made), STREAM):
            self._write(made[lo : lo + STREAM])
        return made

    def _write(self, part: Sequence[Judgment]) -> None:
        """Fold ``part`` into the records of their buckets, ``WRITE_RECORDS`` records at a time (read by id,
        changed, written back): only those are held in memory, never all of a corpus's."""
        groups: dict[str, list[Judgment]] = {}
        for j in part:
            groups.setdefault(_record_id(j.corpus, j.scope, j.turn), []).append(j)
        rids, new = list(groups), 0
        with _WRITE_LOCK:
            for lo in range(0, len(rids), WRITE_RECORDS):
                current = self._records(rids[lo : lo + WRITE_RECORDS])
                for rid in rids[lo : lo + WRITE_RECORDS]:
                    items = groups[rid]
                    meta, body = current.get(rid) or (
                        {"corpus": items[0].corpus, "scope": items[0].scope},
                        {"turns": {}},
                    )
                    new += sum(_fold(body, j) for j in items)
                    current[rid] = (meta, body)
                self._upsert(current)
            if part and part[0].by != CLI:
                self._tally(part[0].by, new)

    def remove(self, corpus: str, turn: str, card_id: str, *, by: str = CLI, scope: str = LABEL) -> bool:
        """Forget one judgment (False if there is none); noted in the turn's history, so it can be undone."""
        card_id = check_card_id(card_id)

        def edit(entry: dict[str, Any]) -> bool:
            return card_id in entry["grades"] and _change(entry, card_id, None, by) is not None

        done = bool(self._edit(corpus, turn, scope, edit))
        if done and by != CLI:
            self._tally(by, -1)
        return done

    def undo(self, corpus: str, turn: str, *, by: str, scope: str) -> str | None:
        """Undo the latest change ``by`` made to ``turn``'s judgments in ``scope``: the card's grade before it comes
        back (or the card is unjudged again). Returns the card id, or None when ``by`` has nothing to undo there."""

        def edit(entry: dict[str, Any]) -> dict[str, Any] | None:
            mine = [i for i, change in enumerate(entry["history"]) if change["by"] == by]
            if not mine:
                return None
            change = entry["history"].pop(mine[-1])
            if change["before"] is None:
                entry["grades"].pop(change["card"], None)
            else:
                entry["grades"][change["card"]] = change["before"]
            return change

        change = self._edit(corpus, turn, scope, edit)
        if change is None:
            return None
        if by != CLI and change["before"] is None:
            self._tally(by, -1)
        return str(change["card"])

    def drop(self, corpus: str) -> int:
        """Forget every judgment of a corpus identity (its labels and everyone's marks), page by page; returns how
        many records (buckets) went."""
        dropped = 0
        while True:
            got = self.collection.get(where={"corpus": _check_corpus(corpus)}, include=[], limit=PAGE)
            if not got["ids"]:
                return dropped
            self.collection.delete(ids=got["ids"])
            dropped += len(got["ids"])


def judged_turn(settings: Settings, corpus: str, turn: str) -> dict[str, int]:
    """The labels of one turn of the corpus identity ``corpus`` (``JudgmentStore.for_turn``), or {} when the store
    cannot be read (logged): the corpus's own labels still show without them."""
    try:
        return JudgmentStore(settings).for_turn(corpus, turn)
    except Exception as exc:
        log.warning("judgments of %s unavailable (%s: %s)", corpus, type(exc).__name__, exc)
        return {}


def drop_corpus(settings: Settings, corpus: str) -> int:
    """Forget a deleted corpus's judgments (logged, 0, when the store cannot be written: the identity of a new
    corpus never matches them anyway)."""
    try:
        return JudgmentStore(settings).drop(corpus)
    except Exception as exc:
        log.warning("judgments of %s not dropped (%s: %s)", corpus, type(exc).__name__, exc)
        return 0


# ------------------------------------------------------------------------------------------------ merging
def merge(
    queries: Sequence[LabeledQuery], judgments: Iterable[Judgment], cards: Iterable[str] | None = None
) -> tuple[LabeledQuery, ...]:
    """A corpus's labeled turns with its label judgments folded in (the rule in the module docstring). ``cards``,
    when given, are the corpus's card ids: judgments of other ids are left out."""
    known = set(cards) if cards is not None else None
    judged: dict[str, dict[str, int]] = {}
    text: dict[str, str] = {}
    for j in judgments:
        if (known is not None and j.card_id not in known) or j.scope != LABEL:
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
