"""inspector.handlers called directly, over the real pipeline (bundled models, embedded Chroma).

Most tests use the 5-card mini corpus; the curated examples and the per-model thresholds are checked on the
shipped corpus, since that is what they claim something about.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import gradio as gr
import pytest

from inspector import handlers
from inspector.controls import EMBEDDING_MODELS
from inspector.examples import EXAMPLES
from retrieval.context import REFUSAL
from retrieval.fusion import reciprocal_rank_fusion
from retrieval.retriever_cache import get_retriever
from retrieval.settings import DEFAULT_MIN_SIMILARITY
from tests.conftest import control_values

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "corpus" / "queries.jsonl"
INJECTION = "<img src=x onerror=alert(1)>"
TURN = "GlucoSense GS-40 error E-07"
HTML_FIELDS = ("message", "status", "bm25", "dense", "rrf", "reranked", "explain", "context")


controls = control_values


def row_ids(html: str) -> list[str]:
    return re.findall(r'<div class="hit[^"]*" style="--doc:[^"]+" data-chunk="([^"]+)"', html)


def test_a_turn_fills_all_four_columns_the_badge_the_charts_and_the_export(ui):
    view = ui.run_turn(TURN, *controls())
    assert view.message == ""
    assert "level-full" in view.status
    for column in (view.bm25, view.dense, view.rrf, view.reranked):
        assert row_ids(column), column[:300]
    k = handlers.base_settings().rrf_k
    assert f"/({k}+" in view.rrf
    assert all(len(fig.data) > 0 for fig in (view.rank_flow, view.contributions, view.k_sensitivity))
    assert view.last_turn == {
        "query": TURN,
        "controls": dict(zip(handlers.CONTROLS, controls())),
        "export": view.export,
    }
    record = json.loads(Path(view.export).read_text(encoding="utf-8"))
    assert record["inputs"]["query"] == TURN and record["inputs"]["rrf_k"] == k
    assert record["settings"]["corpus_path"].endswith("mini_cards.jsonl")
    assert record["hybrid_path"] == "full" and "total" in record["timings_ms"]
    for key in ("bm25", "dense", "fused", "reranked", "final", "cut"):
        assert key in record["result"]
    assert record["result"]["fused"][0]["chunk_id"] == row_ids(view.rrf)[0]
    assert "<card id=" in record["context"]["text"]


def test_the_fused_column_follows_rrf_k_and_matches_reciprocal_rank_fusion(ui):
    orders = {}
    for k in (1, 60, 200):
        turn = ui.execute(TURN, dict(zip(handlers.CONTROLS, controls(rrf_k=k))))
        rankings = {b.name: [h.chunk_id for h in b.hits] for b in (turn.result.bm25, turn.result.dense)}
        expected = [cid for cid, _ in reciprocal_rank_fusion(rankings, k=k, weights=turn.result.weights)]
        view = ui.run_turn(TURN, *controls(rrf_k=k))
        assert row_ids(view.rrf) == expected
        assert f"/({k}+" in view.rrf
        orders[k] = view.rrf
    assert orders[1] != orders[60] != orders[200]


def test_controls_that_do_not_change_a_branch_list_run_no_model_again(ui):
    ui.run_turn(TURN, *controls())
    retriever = get_retriever(handlers.base_settings())
    cached = len(retriever._cache)  # every embedding, branch list and cross-encoder score lands in this cache
    for changes in (
        {"rrf_k": 5},
        {"min_similarity": 0.1},
        {"bm25_weight": 2.5},
        {"dense_weight": 0.5},
        {"simulate_reranker_failure": True},
        {"reranker_max_input": 3},
        {"context_token_budget": 100},
        {"hybrid_enabled": False},
    ):
        record = json.loads(Path(ui.run_turn(TURN, *controls(**changes)).export).read_text(encoding="utf-8"))
        timings = record["timings_ms"]
        assert timings.get("embed_query") == 0.0 and timings.get("chroma_query") == 0.0, (changes, timings)
        assert timings.get("bm25", 0.0) == 0.0, (changes, timings)
        assert len(retriever._cache) == cached, f"{changes} computed something new"
    # top_k changes each branch's depth (top_k x multiplier): BM25 and Chroma run again, the embedder does not.
    record = json.loads(Path(ui.run_turn(TURN, *controls(top_k=2)).export).read_text(encoding="utf-8"))
    assert record["timings_ms"]["embed_query"] == 0.0


def test_reranker_failure_shows_rrf_only_with_its_reason(ui):
    view = ui.run_turn(TURN, *controls(simulate_reranker_failure=True))
    assert "level-rrf_only" in view.status and "reranker load failure (simulated)" in view.status
    assert "not reranked" in view.reranked and row_ids(view.reranked)


@pytest.mark.parametrize(
    "changes, status", [({"hybrid_enabled": False}, "disabled"), ({"simulate_empty_bm25": True}, "empty")]
)
def test_a_dropped_bm25_branch_is_shown_as_dropped_with_its_reason(ui, changes, status):
    view = ui.run_turn(TURN, *controls(**changes))
    assert "level-dense_only" in view.status
    assert 'class="dropped"' in view.bm25 and status in view.bm25 and row_ids(view.bm25) == []
    assert row_ids(view.dense) and row_ids(view.reranked)


def test_no_match_ends_in_the_refusal_and_keeps_cut_candidates_visible(ui):
    view = ui.run_turn(TURN, *controls(min_similarity=0.99))
    assert "level-no_match" in view.status
    assert "Refusal" in view.reranked and 'class="hit cut"' in view.reranked
    assert "MIN_SIMILARITY 0.99" in view.reranked
    assert html.escape(REFUSAL) in view.context and "&lt;card" not in view.context


@pytest.mark.parametrize(
    "turn, message", [("", "empty"), ("   \n\t ", "empty"), ("x" * 20_000, "20,000 characters"), (None, "must be text")]
)
def test_bad_turns_give_a_clear_message_not_a_stack_trace(ui, turn, message):
    with pytest.warns(UserWarning):  # gr.Warning outside a request is a Python warning; in the page, a toast
        view = ui.run_turn(turn, *controls())
    assert message in view.message and 'class="message error"' in view.message
    assert "Traceback" not in view.message
    assert "level-idle" in view.status and view.export is None and view.last_turn is None


def test_control_characters_are_cleaned_and_the_turn_runs(ui):
    view = ui.run_turn("GS-40\x00\x1b[31m error\u0007 E-07", *controls())
    assert view.message == "" and "level-full" in view.status
    assert view.last_turn["query"] == "GS-40 [31m error E-07"


def test_an_impossible_setting_is_a_message(ui):
    with pytest.warns(UserWarning):
        view = ui.run_turn(TURN, *controls(bm25_weight=0, dense_weight=0))
    assert "BM25_WEIGHT and DENSE_WEIGHT are both 0" in view.message


def test_the_injection_string_renders_as_text(ui):
    view = ui.run_turn(INJECTION, *controls(min_similarity=-1.0))
    for name in HTML_FIELDS:
        assert "<img" not in getattr(view, name), name
    assert "Turn searched:</b> &lt;img src=x onerror=alert(1)&gt;" in view.status


def test_explain_reuses_the_last_turn(ui):
    view = ui.run_turn(TURN, *controls())
    chunk = row_ids(view.dense)[-1]
    panel = ui.explain(view.last_turn, chunk)
    assert chunk in panel and "RRF fused" in panel and "Dense" in panel
    assert "Run a turn" in ui.explain(None, chunk)


def test_a_control_change_keeps_the_explained_document(ui):
    view = ui.run_turn(TURN, *controls())
    chosen = row_ids(view.dense)[-1]
    again = ui.rerun_turn(TURN, *controls(rrf_k=2), chosen)
    assert again.explain_doc.value == chosen and chosen in again.explain and "/(2+" in again.rrf


def test_a_control_moved_before_any_turn_changes_nothing(ui):
    out = ui.rerun_turn("  ", *controls(rrf_k=3))
    assert len(out) == len(handlers.TurnView._fields)
    assert all(isinstance(x, type(gr.skip())) for x in out)


def test_each_model_gets_a_threshold_on_its_own_scale(ui):
    """MiniLM's cosines sit far lower than bge's: one threshold cannot serve both models (mini corpus, dense only)."""
    minilm, bge = "all-MiniLM-L6-v2", "bge-small-en-v1.5"

    def answered(model: str, threshold: float, turn: str) -> bool:
        view = ui.run_turn(turn, embedding_model=model, min_similarity=threshold, hybrid_enabled=False)
        assert view.message == "", view.message
        return "level-no_match" not in view.status

    suggested = ui.on_model_change(minilm)
    for turn in ("GlucoSense GS-40 error E-07", "where do I keep my insulin pens", "the meter says it is too cold"):
        assert answered(minilm, suggested, turn), turn
    for turn in ("what is the capital of Australia", "give me a recipe for banana bread"):
        assert not answered(minilm, suggested, turn), turn
    # bge's threshold refuses an in-domain paraphrase on MiniLM's scale; MiniLM's lets nonsense through on bge's
    # when the cosine is the only rule. The evidence rule (the default) still refuses it: none of its words occurs
    # in the cards.
    assert not answered(minilm, DEFAULT_MIN_SIMILARITY[bge], "the meter says it is too cold")
    assert not answered(bge, suggested, "who won the football match last night")


def test_switching_model_moves_the_threshold_to_that_models_scale(ui):
    assert ui.on_model_change("all-MiniLM-L6-v2") == DEFAULT_MIN_SIMILARITY["all-MiniLM-L6-v2"]
    assert ui.on_model_change("bge-small-en-v1.5") == handlers.base_settings().min_similarity == 0.3  # mini base
    assert set(EMBEDDING_MODELS) >= {"bge-small-en-v1.5", "all-MiniLM-L6-v2"}


def test_run_turn_takes_the_turn_then_every_control_by_name_and_defaults_to_the_base(ui):
    import inspect

    assert tuple(inspect.signature(ui.run_turn).parameters) == ("query", *handlers.CONTROLS, "corpus")
    view = ui.run_turn(TURN, rrf_k=7)
    assert view.last_turn["controls"] == {**handlers.default_controls(), "rrf_k": 7}
    assert "/(7+" in view.rrf


def test_the_app_exposes_run_turn_with_plain_inputs_and_the_stable_ids(ui):
    from inspector.ui import build_app

    app = build_app()
    config = app.get_config_file()
    ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
    for elem_id in (
        "query",
        "run",
        "list-bm25",
        "list-dense",
        "list-rrf",
        "list-reranked",
        "hybrid-path",
        "rrf-k",
        "hybrid-enabled",
        "simulate-reranker-failure",
        "simulate-empty-bm25",
        "top-k",
        "export",
    ):
        assert elem_id in ids, elem_id
    run = [d for d in config["dependencies"] if d.get("api_name") == "run_turn"]
    assert len(run) == 1 and len(run[0]["inputs"]) == 1 + len(handlers.CONTROLS) + 1  # + the session's corpus
    tabs = [c["props"].get("label") for c in config["components"] if c.get("type") == "tabitem"]
    assert tabs[0] == "Inspector"


def test_every_elem_id_on_the_page_is_unique(ui):
    """An id names one element: two components sharing one (the inspector's and the classroom's k slider both
    were ``rrf-k``) make ``#id`` selectors, labels and CSS hit the wrong one."""
    from collections import Counter

    from inspector.ui import build_app

    config = build_app().get_config_file()
    ids = Counter(c.get("props", {}).get("elem_id") for c in config["components"])
    ids.pop(None, None)
    assert len(ids) > 50
    assert [i for i, n in ids.items() if n > 1] == []


def test_an_unknown_embedding_model_is_a_message_not_a_download(ui):
    with pytest.warns(UserWarning):
        view = ui.run_turn(TURN, embedding_model="some-org/huge-model")
    assert "not available here" in view.message and "bge-small-en-v1.5" in view.message


# ------------------------------------------------------------------------------------------ shipped corpus
def _best(hits, card: str) -> int | None:
    return next((h.rank for h in hits if h.parent_id == card), None)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.label for e in EXAMPLES])
def test_each_example_really_shows_what_it_claims(example, shipped, shipped_settings):
    texts = {json.loads(line)["text"] for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()}
    assert example.text in texts, "examples are picked from corpus/queries.jsonl"
    r = shipped.retrieve(example.text, shipped_settings)
    if example.kind == "no_match":
        assert r.hybrid_path == "no_match" and r.final == ()
        return
    bm25, dense = _best(r.bm25.hits, example.card), _best(r.dense.hits, example.card)
    assert r.final and r.final[0].parent_id == example.card, (r.hybrid_path, [h.parent_id for h in r.final])
    if example.kind == "lexical":
        assert bm25 == 1 and (dense is None or dense > 1), (bm25, dense)
    elif example.kind == "semantic":
        assert dense == 1 and (bm25 is None or bm25 > 1), (bm25, dense)
    elif example.kind == "consensus":
        assert r.fused[0].parent_id == example.card and r.fused[0].chunk_id in r.consensus
    elif example.kind == "multilingual":
        card_lang = shipped.by_id[r.final[0].chunk_id].lang
        assert card_lang.split("-")[0] in {"es", "pt"}
