"""The lab contract: one JSON object with kind, seed, inputs, decisions, result, evidence and limitations;
the same seed gives the same bytes, across processes too."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from retrieval.corpus import load_shipped
from retrieval.evaluation.lab import run_lab
from retrieval.settings import Settings
from tests.conftest import ROOT, SHIPPED_CARDS
from tests.test_evaluate import labeled_mini_folder

CONTRACT = {"kind", "seed", "lab_version", "inputs", "decisions", "result", "evidence", "limitations"}


@pytest.fixture(scope="module")
def lab_folder(tmp_path_factory):
    return labeled_mini_folder(tmp_path_factory.mktemp("lab"))


def run_lab_cli(folder, *args):
    env = dict(
        os.environ,
        CORPUS_PATH=str(folder / "corpus" / "cards.jsonl"),
        CHROMA_PATH=str(folder / "chroma"),
        MIN_SIMILARITY="0.3",
    )
    out = subprocess.run(
        [sys.executable, "-m", "retrieval", "lab", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def seven(lab_folder):
    return run_lab_cli(lab_folder, "--seed", "7")


def test_same_seed_same_bytes_across_processes(lab_folder, seven):
    assert run_lab_cli(lab_folder, "--seed", "7") == seven


def test_contract_fields(seven):
    data = json.loads(seven)
    assert set(data) == CONTRACT
    assert data["kind"] == "retrieval" and data["seed"] == 7
    assert data["inputs"]["cards"] == 5 and data["inputs"]["labeled_turns"] == 6
    assert data["inputs"]["classroom_lists"] == {"BM25": ["A", "B", "C", "D"], "Dense": ["C", "A", "E", "B"]}
    assert data["decisions"]["rrf_k"] == Settings().rrf_k  # the configured value, whatever the default is
    assert data["decisions"]["refusal_threshold_min_similarity"] == 0.3
    assert set(data["result"]["metrics"]) == {"bm25", "dense", "rrf", "full"}
    for row in data["result"]["metrics"].values():
        assert "ms_per_turn" not in row  # timings are not part of the contract
    assert data["result"]["classroom"]["order"] == ["A", "C", "B", "E", "D"]
    assert data["result"]["classroom"]["scores"]["A"] == round(1 / (60 + 1) + 1 / (60 + 2), 6)
    assert data["result"]["raw_score_demo"]["raw_sum"] == ["A", "B", "C", "D", "E"]
    assert data["result"]["raw_score_demo"]["min_max"] == ["A", "C", "E", "B", "D"]
    assert len(data["limitations"]) >= 3 and all(isinstance(x, str) and x for x in data["limitations"])


def test_evidence_is_checkable(seven):
    data = json.loads(seven)
    evidence = data["evidence"]
    assert len(evidence) >= 8
    for item in evidence:
        assert set(item) == {"fact", "value", "check"} and item["fact"] and item["check"]
        assert isinstance(item["value"], (int, float)) and not isinstance(item["value"], bool)
    by_start = {e["fact"].split(":")[0]: e for e in evidence}
    assert by_start["Class example, k=60"]["value"] == round(1 / 61 + 1 / 62, 6)
    correction = next(e for e in evidence if e["fact"].startswith("Correction to the class text"))
    assert correction["value"] == 1  # A is first in BM25 as printed
    metrics = data["result"]["metrics"]
    rrf_vs_bm25 = next(e for e in evidence if e["fact"].startswith("Shipped set: rrf nDCG@10 minus bm25"))
    assert rrf_vs_bm25["value"] == pytest.approx(metrics["rrf"]["ndcg@10"] - metrics["bm25"]["ndcg@10"], abs=1e-6)
    refusal = next(e for e in evidence if e["fact"].startswith("Refusal rate"))
    assert refusal["value"] == data["result"]["refusal"]["refusal_rate"]["full"]


def test_another_seed_changes_only_what_the_seed_drives(lab_folder, seven):
    a, b = json.loads(seven), json.loads(run_lab_cli(lab_folder, "--seed", "8"))
    assert b["seed"] == 8 and b["result"]["significance"]["seed"] == 8
    assert a["result"]["metrics"] == b["result"]["metrics"]
    assert a["result"]["classroom"] == b["result"]["classroom"]


def test_shipped_subset_in_process_twice_is_identical(shipped, shipped_settings):
    """The lab on shipped turns (two per category): a cold run and a cached run print the same bytes."""
    full = load_shipped(SHIPPED_CARDS)
    picked, seen = [], {}
    for q in full.queries:
        if seen.get(q.category, 0) < 2:
            picked.append(q)
            seen[q.category] = seen.get(q.category, 0) + 1
    ds = dataclasses.replace(full, queries=tuple(picked))
    first = json.dumps(run_lab(3, shipped_settings, shipped, ds, resamples=2000), ensure_ascii=False, indent=2)
    second = json.dumps(run_lab(3, shipped_settings, shipped, ds, resamples=2000), ensure_ascii=False, indent=2)
    assert first == second
    data = json.loads(first)
    assert data["inputs"]["cards"] == len(full.cards) and data["inputs"]["labeled_turns"] == len(picked)
    assert set(data["result"]["ndcg@10_by_category"]) == {"lexical", "semantic", "mixed", "multilingual"}
    timed = run_lab(3, shipped_settings, shipped, ds, resamples=2000, with_timings=True)
    assert set(timed) == CONTRACT | {"timings"}
    assert {k: v for k, v in timed.items() if k != "timings"} == data


def test_bad_seed():
    with pytest.raises(ValueError, match="--seed must be a whole number"):
        run_lab("7")  # type: ignore[arg-type]
