"""Judgments nobody can poison (retrieval/judgments.py, inspector/judge_view.py): only whoever may change a corpus
changes the labels others are scored on (the shipped set's never from the page); any other session's grades stay
its own marks; each change says who made it and can be undone; judgments bind to the corpus's identity, so a
deleted corpus takes them along and a new one under its name inherits nothing; a session's judgments are bounded;
and a corpus's judgments are read past SQLite's 32,766-variable limit. Real Chroma, the real bundled models."""

from __future__ import annotations

import json

import pytest

from retrieval import judgments
from retrieval.corpora import Registry
from retrieval.corpus_entries import owner_hash
from retrieval.evaluation.labeled import labeled_dataset, labeled_entries
from retrieval.judgment_files import import_files
from retrieval.judgments import LABEL, JudgmentStore, corpus_identity, mark_scope
from retrieval.settings import Settings
from tests.test_corpus_owner import CARDS, _upload, page  # noqa: F401  (the fixture)

TURN = "what does error E-07 mean"


def test_a_visitor_grading_the_shipped_cards_changes_no_one_else_s_evaluation(page):  # noqa: F811
    from inspector import judge_view

    html, token = judge_view.save(TURN, "gs40-e07", "3", None, None)  # a session that never uploaded: a token made
    assert token and "your own mark" in html and "read-only from the page" in html
    assert "<td>your mark (counts for no one else)</td>" in html
    store = JudgmentStore(page)
    assert store.for_turn("shipped", TURN) == {}  # no label of the shipped set changed
    assert store.for_turn("shipped", TURN, mark_scope(owner_hash(token))) == {"gs40-e07": 3}
    with pytest.raises(ValueError, match="no labeled turns"):  # (before: the visitor's grade made a labeled turn)
        labeled_dataset(None, page)
    assert "gs40-e07" not in judge_view.judged_html(TURN, None, {}, "another session")
    assert "gs40-e07" in judge_view.judged_html(TURN.upper(), None, {}, token)
    assert "Undid your latest change to gs40-e07" in judge_view.undo(TURN, None, token)
    assert store.for_turn("shipped", TURN, mark_scope(owner_hash(token))) == {}
    assert "Nothing of yours to undo" in judge_view.undo(TURN, None, token)


def test_the_owner_changes_its_corpus_s_labels_others_only_mark_and_undo_takes_back(page, tmp_path):  # noqa: F811
    from inspector import judge_view

    owner, _ = _upload(tmp_path, "notes", None)
    html, _ = judge_view.save(TURN, "w1", "2", "notes", owner)
    assert "Saved as a label of notes" in html and "label, by you" in html
    html, visitor = judge_view.save(TURN, "w2", "3", "notes", None)
    assert "your own mark" in html and "only the session that uploaded this corpus" in html
    data = Registry(page).open("notes")
    labels = JudgmentStore(page).all(corpus_identity(data))
    assert [(j.card_id, j.grade, j.by) for j in labels] == [("w1", 2, owner_hash(owner))]  # who: a hash, no name
    _, dataset = labeled_dataset("notes", page)
    assert [q.relevant for q in dataset.queries] == [{"w1": 2}]  # the visitor's w2 is in no one's evaluation
    assert "label, by the corpus&#x27;s owner" in judge_view.judged_html(TURN, "notes", {}, visitor)
    judge_view.save(TURN, "w1", "0", "notes", owner)
    assert JudgmentStore(page).for_turn(corpus_identity(data), TURN) == {"w1": 0}
    assert "Undid your latest change to w2" in judge_view.undo(TURN, "notes", visitor)
    assert JudgmentStore(page).for_turn(corpus_identity(data), TURN) == {"w1": 0}  # a visitor's undo: its own mark
    judge_view.undo(TURN, "notes", owner)
    assert JudgmentStore(page).for_turn(corpus_identity(data), TURN) == {"w1": 2}
    judge_view.undo(TURN, "notes", owner)
    assert JudgmentStore(page).for_turn(corpus_identity(data), TURN) == {}


def test_a_deleted_corpus_takes_its_judgments_and_its_name_s_next_upload_inherits_nothing(page, tmp_path):  # noqa: F811
    from inspector import data_tab, judge_view

    first, _ = _upload(tmp_path, "notes", None)
    judge_view.save(TURN, "w1", "3", "notes", first)
    judge_view.save(TURN, "w2", "1", "notes", "a visitor")
    ident = corpus_identity(Registry(page).open("notes"))
    assert "Deleted notes" in data_tab.delete("notes", "notes", first)[0]
    store = JudgmentStore(page)
    assert store.collection.get(where={"corpus": ident}, include=[])["ids"] == []  # labels and marks gone
    rows = [{"id": "w1", "title": "Other", "text": "Someone else's card about E-07 error codes."}]
    _upload(tmp_path, "notes", "someone else", rows=rows)
    data = Registry(page).open("notes")
    assert corpus_identity(data) != ident and "notes" not in [e.name for e in labeled_entries(page)]
    with pytest.raises(ValueError, match="no labeled turns"):
        labeled_dataset("notes", page)


def test_one_session_keeps_a_bounded_number_of_judgments(page, monkeypatch):  # noqa: F811
    monkeypatch.setattr(judgments, "MAX_MARKS", 2)
    store, me = JudgmentStore(page), owner_hash("a script")
    for card in ("gs40-e07", "gs60-e09"):
        store.put("shipped", TURN, card, 1, by=me, scope=mark_scope(me))
    with pytest.raises(ValueError, match="keeps 2 judgments already, the most one session may"):
        store.put("shipped", "another turn", "gs40-e07", 1, by=me, scope=mark_scope(me))
    store.undo("shipped", TURN, by=me, scope=mark_scope(me))
    store.put("shipped", "another turn", "gs40-e07", 1, by=me, scope=mark_scope(me))  # room again
    store.put("shipped", TURN, "gs40-e07", 2)  # the command line has no such bound


def test_more_judgments_than_sqlite_has_variables(tmp_path):
    """33,000 judgments of one corpus (past SQLite's 32,766 variables per statement): listed, exported, merged."""
    settings = Settings.from_env({}, chroma_path=str(tmp_path / "chroma"), data_dir=str(tmp_path / "data"))
    n_turns, per_turn = 1000, 33
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{t}", "text": f"question number {t}"}) + "\n" for t in range(n_turns))
    )
    (tmp_path / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"q{t}\tc{t % 97}-{k}\t{1 + k % 3}\n" for t in range(n_turns) for k in range(per_turn))
    )
    store = JudgmentStore(settings)
    assert import_files(store, "big", tmp_path / "qrels.tsv", tmp_path / "queries.jsonl") == 33_000
    rows = store.all("big")
    assert len(rows) == 33_000 and {j.scope for j in rows} == {LABEL}
    assert store.for_turn("big", "QUESTION number 7") == {f"c{7 % 97}-{k}": 1 + k % 3 for k in range(per_turn)}
    assert store.has_labels("big") and not store.has_labels("other")
    assert 0 < store.drop("big") <= n_turns and store.all("big") == []  # one record per bucket of turns
