"""Cards JSONL (the shipped schema) and BEIR (``corpus.jsonl`` with ``queries.jsonl`` and ``qrels/*.tsv``)."""

from __future__ import annotations

from retrieval.corpus import LabeledQuery
from retrieval.formats.common import (
    Limits,
    Loaded,
    LoadError,
    Reader,
    _Cards,
    _Collector,
    _id_field,
    _json_objects,
    _lines,
    _text_field,
)
from retrieval.types import Card


def parse_cards_jsonl(data: bytes, name: str, limits: Limits) -> Loaded:
    """Cards JSONL, the shipped schema: ``id`` (a string or a whole number) and ``text`` required; ``title``
    (default empty, as in BEIR), ``lang`` (default: detected, en/es/pt) and ``topic`` (default ``general``)
    optional."""
    out = _Collector()
    cards = _Cards(limits, out)
    for where, obj in _json_objects(data, name, out):
        card_id = _id_field(obj, "id", where, out)
        text = _text_field(obj, "text", where, out)
        title = _text_field(obj, "title", where, out, required=False)
        lang = _text_field(obj, "lang", where, out, required=False)
        topic = _text_field(obj, "topic", where, out, required=False, default="general")
        if card_id is None or text is None or title is None or lang is None or topic is None:
            continue
        cards.add(where, card_id, title, text, lang, topic)
    if not cards.cards and not out.problems:
        out.add(f"{name}: no cards found. The file must hold one JSON card per line (id, title, text).")
    out.check()
    return Loaded("cards-jsonl", tuple(cards.cards))


def _load_beir_files(corpus: bytes, name: str, reader: Reader, limits: Limits) -> Loaded:
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
