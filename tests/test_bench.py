"""Smoke test of ``python -m retrieval bench --json`` on the mini corpus with tiny run counts (not a timed test:
it checks the report's shape and the facts it must state, never how fast anything was)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from retrieval.corpus import load_cards, split_cards
from retrieval.evaluation.bench import format_table, parse_scale
from retrieval.evaluation.machine import percentile
from retrieval.evaluation.replicas import ReplicaEmbedder, replicate_chunks
from retrieval.evaluation.turn_timing import STAGES, settle
from retrieval.settings import Settings
from tests.conftest import MINI_CARDS, ROOT

TURNS = ["GlucoSense GS-40 error E-07", "my insulin pen got warm in the car", "olvidé una dosis"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    queries = tmp / "queries.jsonl"
    queries.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "text": t, "lang": "en", "category": "mixed", "relevant": {}}) + "\n"
            for i, t in enumerate(TURNS)
        )
    )
    env = dict(os.environ, CORPUS_PATH=str(MINI_CARDS), CHROMA_PATH=str(tmp / "unused"), MIN_SIMILARITY="0.3")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrieval",
            "bench",
            "--json",
            "--runs",
            "2",
            "--scale",
            "12",
            "--before",
            "--queries",
            str(queries),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert not (tmp / "unused").exists(), "the bench must use its own temporary store, not CHROMA_PATH"
    return json.loads(out.stdout)


def test_json_has_the_documented_shape(report):
    assert report["turn_ms"]["p50"] > 0 and report["turn_ms"]["p95"] >= report["turn_ms"]["p50"]
    assert set(report["stages_ms"]) == set(STAGES)
    for stage in STAGES:
        assert report["stages_ms"][stage]["p95"] >= report["stages_ms"][stage]["p50"] >= 0
    assert report["cached_control_ms"]["p50"] >= 0 and report["rerank_floor_ms"]["p50"] > 0
    assert report["rerank_overhead_ratio"] > 0
    assert report["cold_start_s"]["persisted"] > 0 and report["cold_start_s"]["fresh"] > 0
    assert report["peak_rss_mb"] > 50
    assert report["hardware"]["nproc"] == os.cpu_count() and report["hardware"]["cpu_model"]
    assert report["date"][:4].isdigit()


def test_report_states_what_was_measured(report):
    assert report["corpus"]["cards"] == 5 and report["corpus"]["chunks"] == 5 and report["corpus"]["turns"] == 3
    assert report["runs"] == 2 and report["samples"] == 6 and sum(report["levels"].values()) == 6
    assert report["stages_ms"]["bm25"]["n"] == 6 and report["rerank_floor_ms"]["n"] == 6
    detail = report["cold_start_detail"]
    assert detail["fresh"]["dense_built"] and not detail["persisted"][0]["dense_built"]
    assert detail["fresh"]["level"] == "full" and report["indexing"]["chunks"] == 5


def test_cached_control_change_reruns_no_model(report):
    """Same turn, other rrf_k: every model output comes from the per-turn cache."""
    control = report["cached_control_ms"]
    assert control["rrf_k"][0] == Settings.from_env().rrf_k != control["rrf_k"][1] and control["n"] == 6
    assert set(control["model_calls"]) == {
        "OnnxEmbedder.embed_query",
        "BM25Index.search",
        "DenseStore.search",
        "OnnxCrossEncoder.score",
        "OnnxCrossEncoder.score_many",
    }
    assert sum(control["model_calls"].values()) == 0


def test_full_turn_over_reference_floor_is_a_field_of_its_own(report):
    """Issue 20's measure: the full turn p50 over the reference floor's p50 (the bare model, one two-thread session,
    one pair per call) of the same run, and the before/after of the pipeline in that run."""
    assert report["full_turn_p50_ms"] == report["turn_ms"]["p50"]
    assert report["reference_floor_p50_ms"] == report["rerank_floor_ms"]["p50"] > 0
    assert report["turn_over_floor"] == round(report["full_turn_p50_ms"] / report["reference_floor_p50_ms"], 3)
    assert report["turn_over_floor_target"] == 0.5
    assert "two intra-op threads" in report["rerank_floor_note"]
    assert report["before"]["turn_ms"]["n"] == report["before"]["rerank_ms"]["n"] == 6
    assert report["prescore_wait_ms"]["n"] == 6
    assert report["settled"] is True and report["settle_ms"]["n"] == 6 + 6  # after each floor and each before turn
    table = format_table(report)
    assert "Full turn p50 / reference floor p50" in table and "before: full turn scored as before issue 20" in table


def test_scale_section_replicates_the_corpus(report):
    (row,) = report["scale"]
    assert row["target"] == 12 and row["chunks"] == 15 and row["distinct_texts_embedded"] == 5
    assert "embedded once" in report["scale_note"]
    assert row["stages_ms"]["bm25"]["n"] == 3 and row["turn_ms"]["p50"] > 0


def test_table_is_ready_for_the_readme(report):
    table = format_table(report, "python -m retrieval bench --runs 2")
    assert "AMD" in table or report["hardware"]["cpu_model"] in table
    assert "5 cards / 5 sub-chunks" in table and "3 labeled turns x 2 runs" in table
    assert "| Measure | p50 | p95 |" in table and "Cold start to first answer, persisted store (s)" in table
    assert "15 sub-chunks: BM25 / dense / full turn (ms)" in table
    assert table.count("\n|") >= 16


def test_replicate_chunks_keeps_ids_unique():
    base = split_cards(load_cards(MINI_CARDS))
    chunks = replicate_chunks(base, 12)
    assert len(chunks) == 15 and chunks[:5] == base
    assert len({c.chunk_id for c in chunks}) == 15
    assert chunks[5].chunk_id == "gs40-e07~r1#0" and chunks[5].parent_id == "gs40-e07~r1"
    assert chunks[5].text == base[0].text
    with pytest.raises(ValueError, match="empty corpus"):
        replicate_chunks([], 10)


def test_marked_replicas_get_vectors_of_their_own_near_their_original():
    """The dense store keeps one row per distinct text: the scale runs mark replicas' titles, and their vectors are
    their original's nudged (deterministically), so Chroma holds a row per sub-chunk."""
    from retrieval.dense_rows import stored_rows
    from retrieval.encoders import load_embedder

    base = split_cards(load_cards(MINI_CARDS))
    chunks = replicate_chunks(base, 15, mark_titles=True)
    assert chunks[:5] == base and chunks[5].title == base[0].title + " ~r1" and chunks[5].text == base[0].text
    assert len(stored_rows(chunks)) == 15 and len(stored_rows(replicate_chunks(base, 15))) == 5
    embedder = ReplicaEmbedder(load_embedder("bge-small-en-v1.5"))
    original, r1, r2 = (np.asarray(embedder.embed_document(chunks[i].indexed_text)) for i in (0, 5, 10))
    assert np.allclose(original, embedder.inner.embed_document(base[0].indexed_text))
    assert 0.99 < float(r1 @ original) < 0.999 and 0.98 < float(r1 @ r2) < 0.999
    assert abs(float(np.linalg.norm(r1)) - 1) < 1e-5
    assert np.array_equal(r1, embedder.embed_document(chunks[5].indexed_text)) and embedder.distinct == 1


def test_percentile_matches_numpy():
    values = [5.0, 1.0, 9.0, 3.0, 7.5, 2.0]
    for q in (0, 50, 95, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_settle_waits_while_a_thread_of_the_process_burns_cpu():
    """After the floor, a spinning worker thread must not share the next turn's cores: settle waits it out (here a
    real thread busy for 80 ms), and returns at once when nothing runs."""
    import threading
    import time

    def spin(until: float) -> None:
        while time.perf_counter() < until:
            pass

    worker = threading.Thread(target=spin, args=(time.perf_counter() + 0.08,))
    worker.start()
    waited = settle()
    worker.join()
    assert 50 <= waited < 300
    assert settle() < 50


def test_parse_scale():
    assert parse_scale("10000,50_000") == [10000, 50000] and parse_scale(None) == []
    with pytest.raises(ValueError, match="--scale"):
        parse_scale("10k")
