"""The evaluator end to end on the mini corpus (real models, real Chroma), the CLI, TREC files scored by ranx,
the BEIR loader's error messages, and sweeps."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from retrieval.corpus import CorpusError, Dataset, LabeledQuery, load_beir, load_cards
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.metrics import METRICS, ndcg_at_k
from retrieval.evaluation.prepare import parse_set
from retrieval.evaluation.report_text import format_report
from retrieval.evaluation.run_files import save_runs
from retrieval.evaluation.scoring import aggregate
from retrieval.evaluation.sweeps import parse_sweep, sweep
from retrieval.evaluation.turn_runs import CONFIGS, eval_settings, latency, run_turns
from retrieval.parents import best_per_parent
from retrieval.settings import Settings
from tests.conftest import MINI_CARDS, ROOT

MINI_TURNS = [
    {"id": "t1", "text": "GS-40 E-07", "lang": "en", "category": "lexical", "relevant": {"gs40-e07": 2}},
    {
        "id": "t2",
        "text": "my glucose meter is too cold",
        "lang": "en",
        "category": "semantic",
        "relevant": {"gs60-e09": 2},
    },
    {
        "id": "t3",
        "text": "I forgot my Glucavex tablet",
        "lang": "en",
        "category": "mixed",
        "relevant": {"metformin-missed": 2, "olvido-dosis": 1},
    },
    {
        "id": "t4",
        "text": "olvidé tomar mi pastilla",
        "lang": "es",
        "category": "multilingual",
        "relevant": {"olvido-dosis": 2, "metformin-missed": 1},
    },
    {
        "id": "t5",
        "text": "where do I keep my insulin pen",
        "lang": "en",
        "category": "semantic",
        "relevant": {"insulin-storage": 2},
    },
    {"id": "t6", "text": "who won the football match last night", "lang": "en", "category": "no_match", "relevant": {}},
]


def mini_dataset() -> Dataset:
    queries = tuple(
        LabeledQuery(id=t["id"], text=t["text"], lang=t["lang"], category=t["category"], relevant=t["relevant"])
        for t in MINI_TURNS
    )
    return Dataset(name="mini", cards=tuple(load_cards(MINI_CARDS)), queries=queries)


@pytest.fixture(scope="module")
def mini_report(mini, mini_settings):
    ds = mini_dataset()
    runs = run_turns(ds, mini, mini_settings)
    return ds, runs, evaluate(ds, mini, mini_settings, runs=runs, seed=5, resamples=1000)


def test_report_shape_and_json(mini_report):
    _, _, report = mini_report
    assert report["dataset"] == "mini" and report["turns"] == 6 and report["answerable_turns"] == 5
    assert list(report["configs"]) == list(CONFIGS)
    for row in report["configs"].values():
        assert set(row) == {"ndcg@10", "recall@10", "recall@100", "mrr@10", "ms_per_turn"}
        assert all(0.0 <= row[m] <= 1.0 for m in METRICS) and row["ms_per_turn"] > 0
    assert list(report["categories"]) == ["lexical", "semantic", "mixed", "multilingual"]
    assert report["categories"]["semantic"]["turns"] == 2
    assert report["refusal"]["no_match_turns"] == 1
    assert set(report["refusal"]["refusal_rate"]) == {"dense", "rrf", "full", "full (cosine rule)"}
    assert report["significance"]["baseline"] in {"bm25", "dense"}
    json.dumps(report)  # JSON-ready
    text = format_report(report)
    assert (
        "ndcg@10" in text
        and "nDCG@10 by category" in text
        and "refusals by REFUSAL_RULE=evidence (thresholds: defaults) at MIN_SIMILARITY=0.3" in text
    )


def test_lists_are_the_pipelines_own_lists_deduped_to_parents(mini, mini_settings, mini_report):
    ds, runs, _ = mini_report
    deep = eval_settings(mini_settings)
    for q, run in zip(ds.queries, runs):
        r = mini.retrieve(q.text, deep)
        assert run.ranked["bm25"] == [h.parent_id for h in best_per_parent(r.bm25.hits)]
        assert run.ranked["dense"] == [h.parent_id for h in best_per_parent(r.dense.hits)]
        assert run.ranked["rrf"] == [h.parent_id for h in best_per_parent(r.fused)]
        assert run.ranked["full"] == [h.parent_id for h in r.final] and r.reranked
        assert len(run.ranked["dense"]) == 5  # every card of the mini corpus, each once
        assert run.refused["full"] == mini.retrieve(q.text, mini_settings).refused


def test_means_are_means_of_the_metric_functions(mini_report):
    ds, runs, report = mini_report
    answerable = [r for r in runs if r.answerable]
    for c in CONFIGS:
        expected = sum(ndcg_at_k(r.ranked[c], r.query.relevant, 10) for r in answerable) / len(answerable)
        assert report["configs"][c]["ndcg@10"] == pytest.approx(expected, abs=1e-6)
    sem = [r for r in answerable if r.query.category == "semantic"]
    assert report["categories"]["semantic"]["dense"]["mrr@10"] == pytest.approx(
        aggregate(sem, ["dense"])["dense"]["mrr@10"]
    )


@pytest.mark.parametrize(("threshold", "refused"), [(-1.0, 0.0), (0.99, 1.0)])
def test_refusal_rates_follow_the_configured_threshold(mini, mini_settings, threshold, refused):
    ds = mini_dataset()
    s = mini_settings.replace(min_similarity=threshold, refusal_rule="cosine")  # the threshold alone decides
    report = evaluate(ds, mini, s, seed=0, resamples=1000)
    assert "full (cosine rule)" not in report["refusal"]["refusal_rate"]  # the baseline is the configured rule
    assert report["refusal"]["min_similarity"] == threshold
    for c in ("dense", "rrf", "full"):
        assert report["refusal"]["refusal_rate"][c] == refused  # the one no_match turn
        assert report["refusal"]["false_refusal_rate"][c] == refused  # the five answerable turns
    levels = {row["id"]: row["level"] for row in report["per_turn"]}
    assert set(levels.values()) == ({"no_match"} if refused else {"full"})


def test_latency_combines_stage_timings():
    t = {"bm25": 2.0, "embed_query": 10.0, "chroma_query": 3.0, "fusion": 0.5, "dedup_threshold": 0.25, "rerank": 100.0}
    assert latency(t) == {"bm25": 2.0, "dense": 13.0, "rrf": 13.75, "full": 113.75}


def test_eval_settings_depth():
    s = eval_settings(Settings(), 200)
    assert (s.top_k, s.candidate_depth, s.min_similarity) == (100, 200, -1.0)
    assert s.refusal_rule == "cosine", "the scored lists are ranked lists: no refusal may empty them"
    assert eval_settings(Settings(), 50).candidate_depth == 50
    assert eval_settings(Settings(), 150).candidate_depth == 150
    with pytest.raises(ValueError, match="depth must be a whole number"):
        eval_settings(Settings(), 0)


def test_set_parsing():
    assert parse_set(["rrf_k=20", "RERANKER_MAX_INPUT=10", "min_similarity=0.4", "hybrid_enabled=false"]) == {
        "rrf_k": 20,
        "reranker_max_input": 10,
        "min_similarity": 0.4,
        "hybrid_enabled": False,
    }
    with pytest.raises(ValueError, match="unknown setting"):
        parse_set(["nope=1"])
    with pytest.raises(ValueError, match="write KEY=VALUE"):
        parse_set(["rrf_k"])
    with pytest.raises(ValueError, match="RRF_K"):  # a bad value is rejected, naming the variable
        Settings.from_env({}, **parse_set(["rrf_k=x"]))
    assert parse_sweep("rrf_k=1, 5") == ("rrf_k", [1, 5])
    assert parse_sweep("depth")[1] == [10, 20, 50, 100, 200]
    with pytest.raises(ValueError, match="give values"):
        parse_sweep("bm25_weight")


def test_sweep_over_rrf_k_and_reranker_input(mini, mini_settings):
    ds = mini_dataset()
    by_k = sweep(ds, mini, mini_settings, "rrf_k", [1, 60], ["bm25", "rrf"])
    assert [row["value"] for row in by_k["rows"]] == [1, 60]
    assert by_k["rows"][0]["bm25"] == by_k["rows"][1]["bm25"]  # k does not touch a branch alone
    off = sweep(ds, mini, mini_settings, "reranker_max_input", [0], ["rrf", "full"])
    assert off["rows"][0]["full"] == off["rows"][0]["rrf"]  # no reranker: full is the fused order
    assert off["rows"][0]["reranker_missing_turns"] == 6
    with pytest.raises(ValueError, match="cannot sweep 'colour'"):
        sweep(ds, mini, mini_settings, "colour", [1])


def test_trec_files_scored_by_ranx_match_our_metrics(tmp_path, mini_report):
    ranx = pytest.importorskip("ranx")
    _, runs, report = mini_report
    written = save_runs(tmp_path, runs, report, CONFIGS)
    assert {p.name for p in written} == {
        "bm25.trec",
        "dense.trec",
        "rrf.trec",
        "full.trec",
        "qrels.trec",
        "report.json",
    }
    first = (tmp_path / "rrf.trec").read_text().splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "rrf"
    all_qrels = ranx.Qrels.from_file(str(tmp_path / "qrels.trec"), kind="trec")
    ours = {r.query.id: r for r in runs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in CONFIGS:
            run = ranx.Run.from_file(str(tmp_path / f"{c}.trec"), kind="trec")
            judged = [q for q in all_qrels.keys() if q in run.keys()]  # no_match turns have no judgements
            for q in set(all_qrels.keys()) - set(judged):  # a turn the list found nothing for scores 0
                assert ours[q].ranked[c] == []
            qrels = ranx.Qrels({q: all_qrels[q] for q in judged})
            run = ranx.Run({q: run[q] for q in judged})
            theirs = ranx.evaluate(qrels, run, ["ndcg@10", "mrr@10", "recall@10"], return_mean=False)
            for metric, values in theirs.items():
                expected = dict(zip(qrels.keys(), values))
                for q, value in expected.items():
                    got = METRICS[metric](ours[q].ranked[c], ours[q].query.relevant)
                    assert got == pytest.approx(value, abs=1e-9), (c, metric, q)
    assert json.loads((tmp_path / "report.json").read_text())["dataset"] == "mini"


# ------------------------------------------------------------------------------------------------------ CLI
def run_cli(*args, tmp_path, env_extra=None):
    env = dict(
        os.environ,
        CORPUS_PATH=str(tmp_path / "corpus" / "cards.jsonl"),
        CHROMA_PATH=str(tmp_path / "chroma"),
        MIN_SIMILARITY="0.3",
    )
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


def labeled_mini_folder(folder):
    """``folder/corpus/`` with the mini cards and ``MINI_TURNS`` as queries.jsonl, for CLI runs."""
    (folder / "corpus").mkdir()
    shutil.copy(MINI_CARDS, folder / "corpus" / "cards.jsonl")
    (folder / "corpus" / "queries.jsonl").write_text("\n".join(json.dumps(t) for t in MINI_TURNS) + "\n")
    return folder


@pytest.fixture(scope="module")
def mini_folder(tmp_path_factory):
    return labeled_mini_folder(tmp_path_factory.mktemp("cli"))


def test_cli_eval_json_runs_and_sweep(mini_folder):
    out = run_cli(
        "eval",
        "--json",
        "--save-runs",
        str(mini_folder / "runs"),
        "--sweep",
        "rrf_k=2,60",
        "--set",
        "reranker_max_input=5",
        "--chart-dir",
        str(mini_folder / "charts"),
        tmp_path=mini_folder,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["dataset"] == "shipped" and data["turns"] == 6
    assert set(data["configs"]) == {"bm25", "dense", "rrf", "full"}
    assert set(data["configs"]["full"]) >= {"ndcg@10", "recall@10", "recall@100", "mrr@10", "ms_per_turn"}
    assert data["settings"]["configured"]["reranker_max_input"] == 5
    assert data["sweeps"][0]["param"] == "rrf_k" and len(data["sweeps"][0]["rows"]) == 2
    assert "eval: 6/6 turns" in out.stderr  # progress goes to stderr
    assert (mini_folder / "runs" / "full.trec").exists()
    assert (mini_folder / "charts" / "sweep-shipped-rrf_k.html").stat().st_size > 1000


def test_cli_eval_table_and_errors(mini_folder):
    out = run_cli("eval", "--configs", "bm25,rrf", "--no-refusals", "--limit", "2", tmp_path=mini_folder)
    assert out.returncode == 0, out.stderr
    assert "bm25" in out.stdout and "rrf" in out.stdout and "dense   " not in out.stdout
    bad = run_cli("eval", "--set", "rrf_k=0", tmp_path=mini_folder)
    assert bad.returncode == 2 and "RRF_K=0 is out of range" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli("eval", "--configs", "bm25,magic", tmp_path=mini_folder)
    assert bad.returncode == 2 and "unknown configurations ['magic']" in bad.stderr
    bad = run_cli("eval", "--sweep", "rrf_k=2,a", tmp_path=mini_folder)  # refused before any turn runs
    assert bad.returncode == 2 and "RRF_K='a' is not a whole number" in bad.stderr and "eval:" not in bad.stderr


def write_beir(folder: Path, corpus: list, queries: list, qrels: str) -> Path:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in corpus) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in queries) + "\n")
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


DOCS = [
    {"_id": "d1", "title": "Insulin storage", "text": "Keep unopened insulin pens in the refrigerator."},
    {"_id": "d2", "title": "Meter too cold", "text": "Error E-09 means the meter is too cold."},
    {"_id": "d3", "title": "", "text": "Take a missed dose with the next meal."},
]
QUERIES = [{"_id": "q1", "text": "where to store insulin"}, {"_id": "q2", "text": "E-09 error"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n"


def test_cli_eval_beir_folder(tmp_path):
    beir = write_beir(tmp_path / "tiny", DOCS, QUERIES, QRELS)
    (tmp_path / "corpus").mkdir()
    shutil.copy(MINI_CARDS, tmp_path / "corpus" / "cards.jsonl")
    out = run_cli("eval", "--beir", str(beir), "--split", "test", "--json", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["dataset"] == "tiny-test" and data["turns"] == 2 and data["settings"]["documents"] == 3
    assert data["configs"]["bm25"]["ndcg@10"] == 1.0  # both turns name their document's words
    assert (tmp_path / "chroma" / "beir-tiny").is_dir()  # a BEIR set gets its own Chroma folder
    assert [set(t) & {"text"} for t in data["per_turn"]] == [set(), set()]  # ids only: the set's text stays put


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "message"),
    [
        ([DOCS[0], "{oops"], QUERIES, QRELS, r"corpus.jsonl:2: invalid JSON"),
        ([{"title": "x", "text": "y"}], QUERIES, QRELS, r"corpus.jsonl:1: missing field '_id'"),
        ([DOCS[0], DOCS[0]], QUERIES, QRELS, r"corpus.jsonl:2: field '_id': duplicate id 'd1'"),
        ([dict(DOCS[0], title=3)], QUERIES, QRELS, r"corpus.jsonl:1: field 'title' must be a string"),
        (DOCS, [QUERIES[0], {"_id": "q2"}], QRELS, r"queries.jsonl:2: missing field 'text'"),
        (DOCS, QUERIES, "query-id\tcorpus-id\tscore\nq1\td1\thigh\n", r"test.tsv:2: column 'score' must be an integer"),
        (DOCS, QUERIES, "query-id\tcorpus-id\tscore\nq9\td1\t1\n", r"no query has judgements in .*test.tsv"),
    ],
)
def test_beir_loader_errors_name_file_and_line(tmp_path, corpus, queries, qrels, message):
    with pytest.raises(CorpusError, match=message):
        load_beir(write_beir(tmp_path, corpus, queries, qrels), "test")


def test_beir_loader_skips_empty_documents_and_zero_grades(tmp_path):
    docs = [*DOCS, {"_id": "d4", "title": "", "text": "  "}]
    ds = load_beir(write_beir(tmp_path, docs, QUERIES, QRELS + "q1\td3\t0\n"), "test")
    assert [c.id for c in ds.cards] == ["d1", "d2", "d3"]
    assert ds.queries[0].relevant == {"d1": 1}


def test_cli_beir_error_is_clear(tmp_path):
    beir = write_beir(tmp_path / "bad", [DOCS[0], "{oops"], QUERIES, QRELS)
    out = run_cli("eval", "--beir", str(beir), tmp_path=tmp_path)
    assert out.returncode == 2 and "corpus.jsonl:2: invalid JSON" in out.stderr and "Traceback" not in out.stderr


# ------------------------------------------------------------------------------------------- Evaluation tab
@pytest.fixture(scope="module")
def cached_runs(tmp_path_factory, mini_report):
    _, runs, report = mini_report
    report = json.loads(json.dumps(report))
    report["per_turn"][0]["text"] = "<script>alert(1)</script> GS-40 E-07"  # must reach the page as text
    report["written_at"] = "2026-01-01T00:00:00"
    report["command"] = "python -m retrieval eval --save-runs runs/mini"
    folder = tmp_path_factory.mktemp("runs")
    save_runs(folder / "mini", runs, report, CONFIGS)
    (folder / "broken").mkdir()
    (folder / "broken" / "report.json").write_text("{not json")
    return folder


def test_tab_sources_and_cached_report(cached_runs):
    from inspector.evaluation_reports import LIVE, list_sources
    from inspector.evaluation_tab import show

    choices = list_sources(cached_runs)
    assert choices[0][1] == LIVE and len(choices) == 2  # the broken file is skipped, not fatal
    label, path = choices[1]
    assert "mini: cached file mini/report.json (2026-01-01T00:00:00)" == label
    summary, metrics, categories, wins, sweep_update, sweep_fig, state = show(
        path, ["bm25", "dense", "rrf"], "rrf", progress=None, runs_dir=cached_runs
    )
    assert "Shown: the cached file" in summary and "Not re-run here" in summary
    assert "python -m retrieval eval --save-runs runs/mini" in summary
    assert [t.name for t in metrics.data] == ["bm25", "dense", "rrf"]
    assert [t.name for t in categories.data] == ["bm25", "dense", "rrf"]
    assert "<script>" not in summary + wins
    assert sweep_update["choices"] == [] and sweep_fig.layout.annotations  # says how to get a sweep
    assert state["report"]["dataset"] == "mini"


def test_wins_and_losses_match_per_turn_scores(mini_report):
    from inspector.evaluation_tables import best_branch, wins_losses, wins_losses_html

    _, _, report = mini_report
    base = best_branch(report)
    assert base == report["significance"]["baseline"]
    wl = wins_losses(report, "full", base)
    expected_fixed = {
        t["id"] for t in report["per_turn"] if "ndcg@10" in t and t["ndcg@10"]["full"] > t["ndcg@10"][base] + 1e-12
    }
    assert {r["id"] for r in wl["fixed"]} == expected_fixed
    assert all(r["delta"] < 0 for r in wl["broke"])
    html_out = wins_losses_html(report, "full")
    assert f"{len(wl['fixed'])} turns fixed, {len(wl['broke'])} broken" in html_out


def test_tab_errors_are_messages(tmp_path):
    from inspector.evaluation_tab import redraw, redraw_sweep, show

    out = show(str(tmp_path / "missing.json"), ["rrf"], "rrf", progress=None, runs_dir=tmp_path)
    assert "is not a dataset of this page" in out[0] and out[1].layout.annotations  # only what the menu lists
    assert "Press Show first" in redraw(None, ["rrf"])[0]
    assert redraw_sweep(None, None).layout.annotations


@pytest.mark.browser
def test_evaluation_tab_in_a_real_browser(cached_runs):
    import gradio as gr

    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("no chromium at /usr/bin/chromium")
    from playwright.sync_api import expect, sync_playwright

    from inspector.evaluation_tab import build_evaluation_tab

    with gr.Blocks() as app:
        build_evaluation_tab(cached_runs)
    app.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(app.local_url)
            page.locator("#eval-source input").click()
            page.get_by_role("option", name="mini: cached file").click()
            page.locator("#eval-run").click()
            summary = page.locator("#eval-summary")
            expect(summary).to_contain_text("Shown: the cached file", timeout=60_000)
            expect(summary).to_contain_text("beats each branch alone")
            expect(page.locator("#eval-wins")).to_contain_text("Per-turn nDCG@10 of rrf")
            expect(page.locator("#eval-metrics .js-plotly-plot")).to_have_count(
                1, timeout=30_000
            )  # drawn after the summary
            page.get_by_label("full").last.check()  # the hybrid radio: wins and losses of full
            expect(page.locator("#eval-wins")).to_contain_text("Per-turn nDCG@10 of full", timeout=30_000)
            browser.close()
    finally:
        app.close()
