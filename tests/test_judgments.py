"""Judgments (retrieval/judgments.py): kept in the Chroma store, seen by another process, merged into a corpus's
labeled turns for `eval --corpus`, exported as BEIR and TREC qrels and imported back to the same qrels."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from retrieval.corpus import LabeledQuery
from retrieval.judgment_files import export_beir, export_trec, import_files
from retrieval.judgments import JUDGED, Judgment, JudgmentStore, merge
from retrieval.settings import Settings
from tests.conftest import ROOT

LABELED = "what does E-07 mean on a GS-60 meter"  # the shipped labeled turn q002 (device-gs60-e07: 2)
NEW = "which cards cover a refill"


@pytest.fixture()
def settings(tmp_path):
    return Settings.from_env({}, chroma_path=str(tmp_path / "chroma"), data_dir=str(tmp_path / "data"))


def _qrels(rows):
    return sorted((j.qid, j.card_id, j.grade) for j in rows)


def test_another_process_sees_judgments_and_they_survive_it(settings):
    env = dict(os.environ, CHROMA_PATH=settings.chroma_path, DATA_DIR=settings.data_dir)
    cmd = [sys.executable, "-m", "retrieval", "judgments"]
    out = subprocess.run(
        [*cmd, "set", "--turn", NEW, "--card", "refill-timing", "--grade", "3"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["grade"] == 3 and made["made_at"].endswith("Z")
    # This process, reading the same store after that process ended.
    store = JudgmentStore(settings)
    assert store.for_turn("shipped", "  Which cards COVER a refill ") == {"refill-timing": 3}
    store.put("shipped", NEW, "refill-timing-es", 1)
    out = subprocess.run([*cmd, "list", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    listed = json.loads(out.stdout)
    assert [(r["card_id"], r["grade"]) for r in listed] == [("refill-timing", 3), ("refill-timing-es", 1)]
    bad = subprocess.run(
        [*cmd, "set", "--turn", NEW, "--card", "refill-timing", "--grade", "4"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "a grade must be 0, 1, 2 or 3" in bad.stderr


def test_eval_corpus_merges_judgments_into_the_labeled_turns(settings):
    from retrieval.evaluation.prepare import load_dataset

    store = JudgmentStore(settings)
    store.put("shipped", LABELED.upper(), "device-gs60-e07", 3)  # overrides the label's 2
    store.put("shipped", LABELED, "device-gs40-e07", 1)  # adds a card to the labeled turn
    store.put("shipped", NEW, "refill-timing", 2)  # a new labeled turn
    store.put("shipped", "only zeros here", "refill-timing", 0)  # nothing relevant: not a turn to score
    store.put("shipped", NEW, "no-such-card", 3)  # a card the corpus lacks: left out
    args = argparse.Namespace(corpus="shipped", beir=None, limit=None, split="test", queries=None)
    ds = load_dataset(args, settings)
    by_text = {q.text: q for q in ds.queries}
    assert by_text[LABELED].relevant == {"device-gs60-e07": 3, "device-gs40-e07": 1}
    assert by_text[NEW].relevant == {"refill-timing": 2} and by_text[NEW].category == JUDGED
    assert "only zeros here" not in by_text
    assert len(ds.queries) == 71 + 1  # the shipped set's 71 turns and one judged turn


def test_merge_rule_by_hand():
    shipped = (LabeledQuery("q1", "A b", relevant={"x": 2, "y": 1}),)
    judged = [
        Judgment("c", "a  B", "y", 0, "t"),
        Judgment("c", "new turn", "z", 1, "t"),
        Judgment("c", "new turn", "gone", 3, "t"),
    ]
    out = merge(shipped, judged, cards={"x", "y", "z"})
    assert out[0] == LabeledQuery("q1", "A b", relevant={"x": 2, "y": 0})
    assert out[1].text == "new turn" and out[1].relevant == {"z": 1} and out[1].id.startswith("j-")


def test_export_beir_and_trec_import_back_to_the_same_qrels(settings, tmp_path):
    store = JudgmentStore(settings)
    store.put_many(
        [
            ("shipped", LABELED, "device-gs60-e07", 3),
            ("shipped", LABELED, "device-gs40-e07", 0),
            ("shipped", NEW, "refill-timing", 2),
        ]
    )
    rows = store.all("shipped")
    export_beir(rows, tmp_path / "beir")
    trec = export_trec(rows, tmp_path / "qrels.trec")
    assert (tmp_path / "beir" / "qrels" / "test.tsv").read_text().splitlines()[0] == "query-id\tcorpus-id\tscore"
    assert len(trec.read_text().splitlines()) == 3
    assert (
        import_files(store, "from-beir", tmp_path / "beir" / "qrels" / "test.tsv", tmp_path / "beir" / "queries.jsonl")
        == 3
    )
    assert import_files(store, "from-trec", trec, tmp_path / "beir" / "queries.jsonl") == 3
    assert _qrels(store.all("from-beir")) == _qrels(store.all("from-trec")) == _qrels(rows)
    with pytest.raises(ValueError, match="card ids are not in corpus"):
        import_files(store, "shipped", trec, tmp_path / "beir" / "queries.jsonl", cards={"refill-timing"})


@pytest.mark.parametrize(
    "row,message",
    [
        (("shipped", NEW, "refill-timing", 7), "a grade must be 0, 1, 2 or 3"),
        (("shipped", NEW, "two words", 1), "ids have no spaces"),
        (("shipped", "   ", "refill-timing", 1), "turn is empty"),
        (("", NEW, "refill-timing", 1), "give its identity"),
    ],
)
def test_bad_judgments_say_what_to_fix(settings, row, message):
    with pytest.raises(ValueError, match=message):
        JudgmentStore(settings).put(*row)
