"""The map below the columns: the PCA projection kept with the corpus in its store, the turn and its lists placed on
it, and the figure marking the same cards as the columns (the shipped cards and an uploaded corpus)."""

from __future__ import annotations

import copy
import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from inspector import handlers, map_view, turn_view
from inspector.render import doc_colors
from inspector.turn import Turn
from retrieval import projection
from retrieval.corpora import Registry
from retrieval.corpus_retrievers import retriever_for
from retrieval.index_jobs import start_index
from retrieval.settings import Settings
from tests.conftest import MINI_CARDS, PATIENT

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r'<div class="(hit[^"]*)" style="[^"]*" data-chunk="([^"]*)"')


# ------------------------------------------------------------------------------------------------ the projection
def test_pca_agrees_with_numpy_svd_and_places_a_new_point_exactly():
    rng = np.random.default_rng(7)
    x = (rng.normal(size=(500, 12)) * np.linspace(3, 0.1, 12)).astype(np.float32)
    mean, comps, explained = projection.fit(x)
    centred = x.astype(np.float64) - x.mean(axis=0)
    _, sv, vt = np.linalg.svd(centred, full_matrices=False)  # the independent way
    for k in range(2):
        assert abs(float(comps[k] @ vt[k])) == pytest.approx(1.0, abs=1e-9)
        assert explained[k] == pytest.approx(sv[k] ** 2 / (sv**2).sum(), rel=1e-9)
    fitted = projection.fit_projection(x, "k", "m")
    assert np.allclose(fitted.coords, projection.project(x, mean, comps), atol=1e-5)
    assert fitted.place(x[3]) == pytest.approx(tuple(fitted.coords[3]), abs=1e-4)  # a new point lands as a stored one
    again = projection.fit_projection(x.copy(), "k", "m")
    assert np.array_equal(again.coords, fitted.coords)  # deterministic: signs fixed


def test_fit_refuses_no_vectors():
    with pytest.raises(ValueError, match="non-empty"):
        projection.fit(np.zeros((0, 4)))


_SECOND_PROCESS = """
import json, sys
from retrieval import projection
from retrieval.pipeline import HybridRetriever
from retrieval.settings import Settings
s = Settings(corpus_path=sys.argv[1], chroma_path=sys.argv[2], min_similarity=0.3)
r = HybridRetriever(s, progress=lambda done, total: None)
p = projection.request(r.dense).wait(120)
print(json.dumps({"fits": projection.FITS, "loaded": p.loaded, "coords": p.coords.tolist(), "key": p.key}))
"""


def test_the_map_is_kept_in_the_store_and_another_process_loads_it(tmp_path):
    from retrieval.pipeline import HybridRetriever

    settings = Settings(corpus_path=str(MINI_CARDS), chroma_path=str(tmp_path / "chroma"), min_similarity=0.3)
    retriever = HybridRetriever(settings, progress=lambda done, total: None)
    fits = projection.FITS
    made = projection.request(retriever.dense).wait(120)
    assert made is not None and not made.loaded and projection.FITS == fits + 1
    assert projection.request(retriever.dense).wait(0) is made  # one job per store in a process
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _SECOND_PROCESS, str(MINI_CARDS), str(tmp_path / "chroma")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    other = json.loads(out.stdout.strip().splitlines()[-1])
    assert other["fits"] == 0 and other["loaded"] and other["key"] == made.key  # loaded, not fitted again
    assert np.allclose(np.array(other["coords"]), made.coords)
    assert projection.load(retriever.dense.client, made.key, len(made.coords) + 1) is None  # another size: refit


def test_a_long_build_reports_each_stage_with_the_sub_chunks_it_has_done(tmp_path):
    import chromadb

    x = np.random.default_rng(3).normal(size=(20_000, 24)).astype(np.float32)
    heard: list[tuple[str, int, int]] = []
    made = projection.fit_projection(x, "pca-v1-progress", "m", lambda *step: heard.append(step))
    projection.save(chromadb.PersistentClient(path=str(tmp_path / "chroma")), made, lambda *step: heard.append(step))
    stages = [stage for stage, _, _ in heard]
    assert stages == sorted(stages, key=[projection.FITTING, projection.PLACING, projection.KEEPING].index)
    for stage in (projection.FITTING, projection.PLACING):  # 20,000 in blocks of 4,096: five steps each
        done = [d for s, d, total in heard if s == stage and total == 20_000]
        assert done == sorted(done) and len(done) == 5 and done[-1] == 20_000, (stage, done)
    assert heard[-2:] == [(projection.KEEPING, 0, 20_000), (projection.KEEPING, 20_000, 20_000)]


def test_a_maps_status_goes_queued_building_ready_for_its_corpus(mini):
    job = projection.request(mini.dense, "mini-status")
    assert job.wait(120) is not None
    done = projection.status("mini-status")
    assert done is not None and done.state == projection.READY and done.states == ("queued", "building", "ready")
    assert done.points == done.total == len(mini.chunks) and done.when and done.model == mini.dense.embedder.name
    assert projection.status("mini-status", done.model) == done  # per corpus and model
    assert projection.status("mini-status", "another-model") is None
    assert projection.status("never-asked") is None
    projection.forget("mini-status")  # (the corpus was deleted)
    assert projection.status("mini-status") is None


def test_a_map_that_cannot_be_made_fails_with_its_reason(mini):
    # Vectors with NaN in them (a damaged store, a collection attached from elsewhere) are made here by damaging the
    # vectors of a copy of a real store: the store keeps them as they were given, so no real store is damaged.
    damaged = copy.copy(mini.dense)
    damaged.embeddings = np.array(mini.dense.embeddings, copy=True)
    damaged.embeddings[1, 0] = np.nan
    damaged.fingerprint = "damaged-" + mini.dense.fingerprint
    assert projection.request(damaged, "damaged").wait(120) is None
    failed = projection.status("damaged")
    assert failed is not None and failed.state == projection.FAILED and failed.states[-1] == "failed"
    assert "ValueError" in failed.error and "NaN or infinity" in failed.error and failed.points == 0
    projection.forget("damaged")


def test_the_data_tab_says_where_the_map_is_escaped():
    from inspector.data_panels import map_html

    odd = "<b>x</b> & co"
    base = dict(corpus=odd, model="bge-small", total=50_000, elapsed_s=3.0)
    assert "not asked for" in map_html(None, odd) and "&lt;b&gt;x&lt;/b&gt; &amp; co" in map_html(None, odd)
    queued = map_html(projection.MapStatus(state="queued", stage="waiting", done=0, **base), odd)
    assert "queued" in queued and "50,000 sub-chunks" in queued
    building = map_html(projection.MapStatus(state="building", stage=projection.FITTING, done=12_288, **base), odd)
    assert "fitting the map (PCA), 12,288/50,000 sub-chunks (25%)" in building and "<progress" in building
    ready = map_html(
        projection.MapStatus(
            state="ready", stage="ready", done=50_000, points=50_000, when="2026-12-02 11:12 UTC", **base
        ),
        odd,
    )
    assert "ready: 50,000 points, fitted 2026-12-02 11:12 UTC" in ready
    failed = map_html(
        projection.MapStatus(state="failed", stage="failed", done=0, error="OSError: <disk>", **base), odd
    )
    assert "failed: OSError: &lt;disk&gt;" in failed
    for shown in (queued, building, ready, failed):
        assert "<b>x</b>" not in shown and "&lt;b&gt;x&lt;/b&gt; &amp; co" in shown


# ---------------------------------------------------------------------------------------------- the figure
def _column_ids(html_text: str, keep_cut: bool = False) -> list[str]:
    return [html.unescape(cid) for classes, cid in ROW.findall(html_text) if keep_cut or " cut" not in classes]


def _trace(fig, name: str):
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, f"one trace named {name!r}"
    return found[0]


def _ids(trace) -> list[str]:
    return [html.unescape(c[0]) for c in (trace.customdata if trace.customdata is not None else [])]


def check_map_marks_the_columns(turn: Turn) -> None:
    """The map of an executed turn marks exactly the columns' cards, at their stored places, with their cosines."""
    fig = turn_view.render_details(turn)["turn_map"]
    columns = turn_view.columns_html(turn)
    result, retriever = turn.result, turn.retriever
    store = retriever.dense
    made = projection.ready(store)
    assert made is not None
    assert [t.name for t in fig.data] == list(map_view.TRACES)
    assert _ids(_trace(fig, "BM25")) == _column_ids(columns["bm25"]) == [h.chunk_id for h in result.bm25.hits]
    assert _ids(_trace(fig, "dense")) == _column_ids(columns["dense"]) == [h.chunk_id for h in result.dense.hits]
    assert _ids(_trace(fig, "fused")) == _column_ids(columns["rrf"]) == [h.chunk_id for h in result.fused]
    assert _ids(_trace(fig, "final")) == _column_ids(columns["reranked"]) == [h.chunk_id for h in result.final]
    starred = [cid for cid in _column_ids(columns["bm25"]) if cid in set(_column_ids(columns["dense"]))]
    assert _ids(_trace(fig, "both")) == starred and set(starred) == set(result.consensus) and starred
    assert columns["bm25"].count("★ both") == len(starred)
    row = {c.chunk_id: i for i, c in enumerate(retriever.chunks)}
    qvec = retriever.embed_query(result.query).value
    for name in ("BM25", "dense", "both", "fused", "final"):
        t = _trace(fig, name)
        for cid, x, y, data in zip(_ids(t), t.x, t.y, t.customdata):
            assert (x, y) == pytest.approx(tuple(made.coords[row[cid]]), abs=1e-6)
            assert data[2] == f"{store.similarity(qvec, cid):.3f}"  # the true cosine, next to the map position
    turn_point = _trace(fig, "turn")
    assert (turn_point.x[0], turn_point.y[0]) == pytest.approx(made.place(qvec), abs=1e-6)
    colors = doc_colors(result)
    assert list(_trace(fig, "final").marker.color) == [colors[h.parent_id] for h in result.final]
    assert len(_trace(fig, "corpus").x) == len(retriever.chunks)


def test_the_map_marks_the_columns_cards_on_the_shipped_corpus(shipped_settings):
    handlers.use_base_settings(shipped_settings)
    try:
        turn = handlers.execute("metformin and kidney function", handlers.default_controls())
        assert turn.result.hybrid_path == "full"
        check_map_marks_the_columns(turn)
        # the map rides in the turn's second event, never in the streamed columns, within its 50 ms: measured as
        # this thread's CPU time (the wall time on two shared cores moves with the load; bench-map gives both)
        assert "turn_map" in handlers.DETAILS and "turn_map" not in handlers.COLUMNS
        cpu = []
        for _ in range(5):
            started = time.thread_time()
            map_view.for_turn(turn.retriever, turn.result).to_json()
            cpu.append((time.thread_time() - started) * 1000)
        assert sorted(cpu)[2] < 50, cpu
    finally:
        handlers.use_base_settings(None)


def test_the_map_marks_the_columns_cards_on_an_uploaded_corpus_and_escapes_titles(tmp_path):
    cards = [json.loads(line) for line in MINI_CARDS.read_text(encoding="utf-8").splitlines() if line.strip()]
    cards.append(
        {
            "id": "odd-title",
            "title": "<img src=x onerror=alert(1)> & GlucoSense strips",
            "lang": "en",
            "topic": "device",
            "text": "GlucoSense test strips are stored dry, below thirty degrees, in their closed tube.",
        }
    )
    upload = tmp_path / "tiny.jsonl"
    upload.write_text("".join(json.dumps(c) + "\n" for c in cards), encoding="utf-8")
    settings = Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=str(tmp_path / "chroma"),
        data_dir=str(tmp_path / "data"),
        min_similarity=0.0,
        refusal_calibrate_on_index=False,
        **PATIENT,
    )
    data, _ = Registry(settings).add(upload, display="tiny.jsonl", copy=True)
    assert start_index(data, settings).wait(300)["status"] == "done"
    retriever = retriever_for(data, settings)
    assert projection.request(retriever.dense).wait(120) is not None  # started by the indexing job
    handlers.use_base_settings(settings)
    try:
        turn = handlers.execute("GlucoSense strips error", handlers.default_controls(), data.entry.name)
        check_map_marks_the_columns(turn)
        fig = turn_view.render_details(turn)["turn_map"]
        corpus = _trace(fig, "corpus")
        odd = [t.split("<br>")[0] for t in corpus.text if "onerror" in t]
        assert odd == ["&lt;img src=x onerror=alert(1)&gt; &amp; GlucoSense strips"]  # escaped for plotly
        assert list(corpus.ids) == [c.chunk_id for c in turn.retriever.chunks]
    finally:
        handlers.use_base_settings(None)


def test_the_stage_buttons_tell_the_story_in_four_steps():
    steps = {label: dict(zip(map_view.TRACES, map_view._visible(shown))) for label, shown in map_view.STEPS}
    assert [label for label, _ in map_view.STEPS][1:] == ["1 · BM25", "2 · dense", "3 · fused", "4 · reranked"]
    shown = {label: {n for n, v in vis.items() if v} - set(map_view.ALWAYS) for label, vis in steps.items()}
    assert shown["1 · BM25"] == {"BM25"}
    assert shown["2 · dense"] == {"BM25", "dense", "both"}
    assert shown["3 · fused"] == {"fused"}
    assert shown["4 · reranked"] == {"final"}
    assert all(vis["turn"] and vis["corpus"] for vis in steps.values())


def test_a_map_being_made_says_how_far_it_is():
    base = dict(corpus="c", model="m", total=1000, elapsed_s=1.0)
    building = projection.MapStatus(state="building", stage=projection.FITTING, done=250, **base)
    text = map_view.progress_text(building)
    assert "fitting the map (PCA) (250 of 1,000 sub-chunks, 25%)" in text and "next turn" in text
    failed = map_view.progress_text(
        projection.MapStatus(state="failed", stage="", done=0, error="OSError: disk", **base)
    )
    assert "could not be made (OSError: disk)" in failed
    assert "waits for another" in map_view.progress_text(projection.MapStatus(state="queued", stage="", done=0, **base))


def test_the_maps_collection_is_the_apps_own_never_offered_to_attach():
    from retrieval.attach import own_collection

    assert own_collection(projection.COLLECTION)
