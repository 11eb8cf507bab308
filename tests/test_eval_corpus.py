"""Scoring a registry corpus by name (issues 10 and 11): ``retrieval.evaluation.corpus_eval`` on a tiny BEIR folder
made in tmp (real bundled models, real Chroma in tmp), the loader it shares with ``eval --corpus``, every refusal's
message, and the Evaluation tab's callbacks over it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from retrieval.corpora import Registry
from retrieval.evaluation.compare import METRIC
from retrieval.evaluation.corpus_eval import compare_corpus, evaluate_corpus, open_labeled
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.labeled import describe, labeled_dataset, labeled_entries
from retrieval.evaluation.prepare import load_dataset
from retrieval.evaluation.turn_runs import CONFIGS
from retrieval.index_jobs import start_index
from retrieval.settings import Settings
from tests.conftest import MINI_CARDS, PATIENT

DOCS = [
    {"_id": "tb-aspirin", "title": "Aspirin", "text": "Low-dose aspirin thins the blood."},
    {"_id": "tb-statin", "title": "Statins", "text": "Statins lower LDL cholesterol."},
    {"_id": "tb-walk", "title": "Walking", "text": "A daily walk lowers blood pressure."},
]
# q2 shares no word with its card: BM25 alone cannot find it, so B = BM25 only changes that turn.
TURNS = [
    ("q1", "what lowers cholesterol", "tb-statin"),
    ("q2", "exercise for hypertension", "tb-walk"),
    ("q3", "medicine that prevents clots", "tb-aspirin"),
]
NOT_INDEXED = "open it in the Data tab first: it is indexed there with a progress bar"


def make_beir(folder: Path, docs: list[dict], turns: list[tuple[str, str, str]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    if turns:
        (folder / "qrels").mkdir()
        (folder / "queries.jsonl").write_text(
            "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t, _ in turns), encoding="utf-8"
        )
        (folder / "qrels" / "test.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, d in turns), encoding="utf-8"
        )
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Settings:
    """tinybeir (3 labeled turns, indexed), later (labeled, never indexed), plain (no labeled turns)."""
    root = tmp_path_factory.mktemp("eval-corpus")
    make_beir(root / "eval" / "tinybeir", DOCS, TURNS)
    make_beir(root / "eval" / "later", DOCS[:2], TURNS[:1])
    make_beir(root / "eval" / "plain", DOCS, [])
    settings = Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=str(root / "chroma"),
        data_dir=str(root / "data"),
        data_root=str(root / "eval"),
        **PATIENT,
    )
    registry = Registry(settings)
    snap = start_index(registry.load(registry.get("tinybeir")), settings).wait(300)
    assert snap["status"] == "done", snap
    return settings


def test_labeled_corpora_are_listed_honestly(tiny):
    entries = {e.name: e for e in labeled_entries(tiny)}
    assert set(entries) == {"later", "tinybeir"}  # plain has no queries; the mini cards have none beside them
    assert describe(entries["later"]) == (
        "BEIR folder under the data root; its labeled turns are counted when it is loaded"
    )


def test_evaluate_corpus_is_evaluate_over_its_turns(tiny):
    report = evaluate_corpus("tinybeir", tiny)
    dataset, retriever, total = open_labeled("tinybeir", tiny)
    want = evaluate(dataset, retriever, tiny, CONFIGS)
    assert report["dataset"] == report["corpus"] == "tinybeir"
    assert report["turns"] == report["total_turns"] == total == len(TURNS)
    assert [t["id"] for t in report["per_turn"]] == [q for q, _, _ in TURNS]
    assert [t["relevant"] for t in report["per_turn"]] == [{d: 1} for _, _, d in TURNS]
    assert report["settings"]["documents"] == len(DOCS)  # the corpus's own retriever, not the mini cards
    for c in CONFIGS:
        got = {m: v for m, v in report["configs"][c].items() if m != "ms_per_turn"}
        assert got == {m: v for m, v in want["configs"][c].items() if m != "ms_per_turn"}
    assert report["wall_seconds"] >= 0 and report["written_at"]


def test_at_most_n_turns(tiny):
    report = evaluate_corpus("tinybeir", tiny, ["bm25", "dense"], limit=2)
    assert report["turns"] == 2 and report["total_turns"] == 3 and list(report["configs"]) == ["bm25", "dense"]
    ids = [t["id"] for t in report["per_turn"]]  # a seeded sample: the same turns every run, in the set's order
    assert len(ids) == 2 and set(ids) <= {"q1", "q2", "q3"} and ids == sorted(ids)
    assert [t["id"] for t in evaluate_corpus("tinybeir", tiny, ["bm25"], limit=2)["per_turn"]] == ids
    with pytest.raises(ValueError, match=r"the number of turns must be a whole number, 0 for all, got -1"):
        evaluate_corpus("tinybeir", tiny, limit=-1)


def test_compare_corpus_scores_both_sides_per_turn(tiny):
    b = tiny.replace(dense_weight=0.0, reranker_max_input=0)  # BM25's order alone
    report = compare_corpus("tinybeir", tiny, b)
    assert report["corpus"] == report["dataset"] == "tinybeir" and report["total_turns"] == 3
    assert [t["id"] for t in report["turns"]] == ["q1", "q2", "q3"]
    for side, settings in (("a", tiny), ("b", b)):
        alone = evaluate_corpus("tinybeir", settings, ["full"])["per_turn"]
        assert [t[f"{side}_{METRIC}"] for t in report["turns"]] == [round(t[METRIC]["full"], 6) for t in alone]
    assert any(t["delta"] for t in report["turns"])  # q2: BM25 cannot find its card
    assert report["changed"] == {
        "dense_weight": {"a": 2.0, "b": 0.0},
        "reranker_max_input": {"a": tiny.reranker_max_input, "b": 0},
    }
    assert len(compare_corpus("tinybeir", tiny, b, limit=1)["turns"]) == 1


def test_each_refusal_says_what_to_do(tiny):
    for call in (lambda name: evaluate_corpus(name, tiny), lambda name: compare_corpus(name, tiny, tiny)):
        with pytest.raises(ValueError, match=r"no corpus named 'nope': choose one of shipped, later, plain, tinybeir"):
            call("nope")
        with pytest.raises(ValueError, match=r"corpus 'plain' has no labeled turns: evaluation needs"):
            call("plain")
        with pytest.raises(ValueError, match=r"corpus 'later' is not indexed for .* in this app yet: " + NOT_INDEXED):
            call("later")
        with pytest.raises(ValueError, match=r"no corpus named"):  # the page names corpora; it never opens a path
            call(str(Path(tiny.data_root) / "tinybeir"))
        with pytest.raises(
            ValueError,
            match=r"the shipped cards \(.*mini_cards.jsonl\) have no labeled turns: "
            r"evaluation needs queries.jsonl beside them",
        ):
            call("shipped")


def test_the_cli_uses_the_same_loader(tiny):
    args = argparse.Namespace(corpus="tinybeir", beir=None, limit=2, queries=None, split="test")
    assert load_dataset(args, tiny) == labeled_dataset("tinybeir", tiny, limit=2)[1]
    by_path = argparse.Namespace(corpus=str(Path(tiny.data_root) / "tinybeir"), beir=None, limit=None, queries=None)
    assert [q.id for q in load_dataset(by_path, tiny).queries] == ["q1", "q2", "q3"]  # the CLI may name a path
    with pytest.raises(ValueError, match="corpus 'plain' has no labeled turns"):
        load_dataset(argparse.Namespace(corpus="plain", beir=None, limit=None, queries=None), tiny)


# ------------------------------------------------------------------------------------------- Evaluation tab
@pytest.fixture()
def page_settings(tiny):
    from inspector import handlers

    handlers.use_base_settings(tiny)
    yield tiny
    handlers.use_base_settings(None)


def test_tab_offers_labeled_corpora_and_follows_the_session(page_settings, tmp_path):
    from inspector import compare_eval
    from inspector import evaluation_tab as tab
    from inspector.evaluation_reports import LIVE, corpus_sources, list_sources

    values = [v for _, v in list_sources(tmp_path, corpus_sources())]
    assert values == [LIVE, "live:later", "live:tinybeir"]
    assert tab.follow_corpus("tinybeir", LIVE, tmp_path)["value"] == "live:tinybeir"
    assert tab.follow_corpus("plain", "live:later", tmp_path)["value"] == "live:later"  # no turns: keep the choice
    assert tab.follow_corpus("", "live:tinybeir", tmp_path)["value"] == LIVE
    assert [v for _, v in compare_eval.corpus_choices()] == ["shipped", "later", "tinybeir"]
    assert compare_eval.follow_corpus("tinybeir", "shipped")["value"] == "tinybeir"


def test_tab_scores_a_corpus_and_says_how_many_turns(page_settings):
    from inspector import evaluation_tab as tab

    summary, metrics, *_, state = tab.show("live:tinybeir", list(CONFIGS), "rrf", 2, progress=None)
    assert "a live run of corpus tinybeir" in summary and "a sample of 2 of its 3 labeled turns" in summary
    assert "<caption>tinybeir: 2 answerable turns</caption>" in summary and "tinybeir" in metrics.layout.title.text
    assert state["report"]["turns"] == 2
    summary = tab.show("live:tinybeir", ["bm25"], "rrf", 0, progress=None)[0]
    assert "all 3 labeled turns scored" in summary
    out = tab.show("live:later", list(CONFIGS), "rrf", 0, progress=None)
    assert NOT_INDEXED in out[0] and out[1].layout.annotations and out[-1] is None


def test_a_vs_b_links_carry_the_corpus(page_settings):
    from inspector import compare_eval, state

    summary, turns, report = compare_eval.show_ab(
        "tuned defaults",
        "",
        "tuned defaults",
        "dense_weight=0,reranker_max_input=0",
        "most broken first",
        "tinybeir",
        0,
        progress=None,
    )
    assert "Corpus tinybeir: 3 labeled turns" in summary and report["corpus"] == "tinybeir"
    hrefs = turns.split("href='")[1:]
    assert hrefs and all("corpus=tinybeir" in h.split("'")[0] for h in hrefs)
    first = state.decode(
        state.parse_query_string(hrefs[0].split("'")[0].removeprefix("./").replace("&amp;", "&")),
        compare_eval.handlers.default_controls(),
    )[0]
    assert first.corpus == "tinybeir" and first.compare and first.b["dense_weight"] == 0.0
    msg = compare_eval.show_ab("tuned defaults", "", "k=60", "", "most broken first", "later", 0, progress=None)[0]
    assert NOT_INDEXED in msg


def test_the_cli_refuses_an_uploaded_corpus_with_its_stored_calibration_as_the_page_does(tmp_path, monkeypatch, capsys):
    """`eval --corpus NAME` used to judge refusals with the default thresholds while the page's turns on that corpus
    used its stored calibration: the same corpus, two refusal rates. Both now use it, and the report says which."""
    from inspector.evaluation_tables import summary_html
    from retrieval import calibration
    from retrieval.cli import main as cli_main
    from retrieval.evaluation.cli import register
    from retrieval.refusal_thresholds import RefusalThresholds

    def main(argv: list[str]) -> int:  # ``python -m retrieval`` in this process
        return cli_main(argv, registrars=(register,))

    from retrieval import corpus_retrievers

    monkeypatch.setattr(corpus_retrievers, "CALIBRATION_REREAD_S", 0.0)  # the page reads the store at every open
    make_beir(tmp_path / "eval" / "calbeir", DOCS, TURNS)
    settings = Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=str(tmp_path / "chroma"),
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "eval"),
        **PATIENT,
    )
    registry = Registry(settings)
    data = registry.load(registry.get("calbeir"))
    assert start_index(data, settings).wait(300)["status"] == "done"
    for name, value in (
        ("CORPUS_PATH", settings.corpus_path),
        ("CHROMA_PATH", settings.chroma_path),
        ("DATA_DIR", settings.data_dir),
        ("DATA_ROOT", settings.data_root),
    ):
        monkeypatch.setenv(name, value)

    def cli_refusal() -> dict:
        assert main(["eval", "--corpus", "calbeir", "--configs", "full", "--json"]) == 0
        return json.loads(capsys.readouterr().out)["refusal"]

    before = cli_refusal()
    assert before["thresholds"] == "defaults" and before["false_refusal_rate"]["full"] < 1.0
    # A calibration no turn passes (a cross-encoder score of 49, a cosine of 0.999), kept in the corpus's store.
    strict = RefusalThresholds(
        min_cross_encoder=49.0,
        min_rescue_cosine=0.999,
        min_fallback_cosine=0.999,
        min_dense_only_cosine=0.999,
        source="calibrated for <b>calbeir</b> (test)",
    )
    calibration.save(
        settings,
        data.chunks,
        calibration.Calibration(strict, {"embedder": settings.embedding_model, "reranker": settings.reranker_model}),
    )
    after = cli_refusal()
    report = evaluate_corpus("calbeir", settings, ["full"])
    page = report["refusal"]
    assert after["thresholds"] == page["thresholds"] == "calibrated for <b>calbeir</b> (test)"
    assert after["false_refusal_rate"]["full"] == page["false_refusal_rate"]["full"] == 1.0
    assert main(["eval", "--corpus", "calbeir", "--configs", "full"]) == 0  # the text report names them too
    assert "REFUSAL_RULE=evidence (thresholds: calibrated for <b>calbeir</b> (test))" in capsys.readouterr().out
    html = summary_html(report, "", ["full"])  # and the Evaluation tab, escaped
    assert "(thresholds: calibrated for &lt;b&gt;calbeir&lt;/b&gt; (test))" in html and "<b>calbeir" not in html
