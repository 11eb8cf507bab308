"""Compare mode's handlers and rendering over the real pipeline on the mini corpus: one side re-runs only when its
own inputs change, every row is escaped, relevance marks follow the session's ticks, and the export records the
share link."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inspector import compare_callbacks, compare_render, handlers, share_link, state
from retrieval.compare import diff_lists
from tests.conftest import control_values

INJECTION = "<img src=x onerror=alert(1)>"
TURN = "GlucoSense GS-40 error E-07"


values = control_values


def test_each_side_reruns_only_when_its_own_inputs_change(ui, monkeypatch):
    calls: list[dict] = []
    real = handlers.execute
    monkeypatch.setattr(handlers, "execute", lambda q, c, *a: calls.append(dict(c)) or real(q, c, *a))
    html, boxes, kept, link, _ = compare_callbacks.refresh(
        TURN, True, {}, {}, None, "http://h/", *values(), *values(rrf_k=60)
    )
    assert len(calls) == 2 and 'id="cmp-rrf-b"' in html and "rrf_k 10 → 60" in html
    assert link.startswith("http://h/?q=GlucoSense") and "b.rrf_k=60" in link and "compare=1" in link
    calls.clear()
    html2, _, kept2, _, _ = compare_callbacks.refresh(TURN, True, {}, kept, None, "", *values(), *values(rrf_k=3))
    assert [c["rrf_k"] for c in calls] == [3]  # only B ran
    assert kept2["a"] is not kept["a"] and kept2["a"]["result"] is kept["a"]["result"]
    calls.clear()
    compare_callbacks.refresh(TURN, True, {}, kept2, None, "", *values(top_k=2), *values(rrf_k=3))
    assert [c["top_k"] for c in calls] == [2]  # only A ran


def test_compare_off_only_updates_the_link(ui):
    html, boxes, kept, link, _ = compare_callbacks.refresh(
        TURN, False, {}, {}, "doc#1", "", *values(rrf_k=5), *values()
    )
    assert html is not None and kept == {} and link == "?q=GlucoSense+GS-40+error+E-07&rrf_k=5&doc=doc%231"


def test_untrusted_text_is_escaped_everywhere(ui):
    html, _, _, _, _ = compare_callbacks.refresh(INJECTION, True, {}, {}, None, "", *values(), *values(rrf_k=2))
    assert 'id="cmp-final-b"' in html and "<img" not in html
    d = diff_lists([INJECTION], ['"><script>x</script>#0'])
    row = compare_render._row('"><script>x</script>#0', 1, d, "b", {'"><script>x</script>': INJECTION}, set())
    assert "<script>" not in row and "&lt;script&gt;" in row and "<img" not in row and "&lt;img" in row
    msg = compare_render.compare_message(INJECTION)
    assert "<img" not in msg


def test_ticked_cards_replace_the_labels_and_no_ticks_mean_no_metric(ui):
    args = (TURN, True, {}, {}, None, "", *values(), *values(rrf_k=60))
    html, boxes, kept, _, _ = compare_callbacks.refresh(*args)
    assert "nDCG@10" not in html  # the mini corpus has no labeled turns
    top = kept["a"]["result"].final[0].parent_id
    ticked = compare_callbacks.tick(TURN, [top], {})
    html, boxes, _, _, _ = compare_callbacks.refresh(TURN, True, ticked, kept, None, "", *values(), *values(rrf_k=60))
    assert "nDCG@10 1.000" in html and "first relevant #1" in html and "this session&#x27;s marks" in html
    assert top in [c[1] for c in boxes.choices] or top in str(boxes.choices)
    html, _, _, _, _ = compare_callbacks.refresh(
        TURN, True, compare_callbacks.tick(TURN, [], ticked), kept, None, "", *values(), *values(rrf_k=60)
    )
    assert "nDCG@10" not in html


def test_labeled_turns_of_the_shipped_corpus_are_found(shipped_settings):
    handlers.use_base_settings(shipped_settings)
    try:
        qrels = compare_callbacks.labeled_qrels("  What does E-07 mean on a GS-60 METER ")
        assert qrels == {"device-gs60-e07": 2}
        assert compare_callbacks.labeled_qrels("not a labeled turn") == {}
        assert compare_callbacks.labeled_qrels("What does E-07 mean on a GS-60 meter", "no-such-corpus") == {}
    finally:
        handlers.use_base_settings(None)


def test_the_export_records_the_share_link(ui):
    view = handlers.run_turn(TURN, *values(rrf_k=7, fusion="convex"))
    record = json.loads(Path(view.export).read_text(encoding="utf-8"))
    page, problems = state.decode(state.parse_query_string(record["link"]), handlers.default_controls())
    assert problems == [] and page.query == TURN and page.a["rrf_k"] == 7 and page.a["fusion"] == "convex"
    assert page.a == {**handlers.default_controls(), "rrf_k": 7, "fusion": "convex"}


def test_the_export_follows_the_page_link_with_b_and_the_explained_document(ui):
    """The page's export records the page's own link: A, B, compare on and the explained document (not only A)."""
    view = handlers.run_turn(TURN, *values(rrf_k=7))
    kept: dict = {}
    out = compare_callbacks.refresh(
        TURN, True, {}, kept, "x#0", "http://h/", *values(rrf_k=7), *values(rrf_k=60), "", view.last_turn
    )
    link, export = out[3], out[4]
    record = json.loads(Path(export).read_text(encoding="utf-8"))
    assert record["link"] == link and link.startswith("http://h/?")
    page, problems = state.decode(state.parse_query_string(link.split("?", 1)[1]), handlers.default_controls())
    assert problems == [] and page.compare and page.a["rrf_k"] == 7 and page.b["rrf_k"] == 60 and page.doc == "x#0"
    assert record["inputs"]["rrf_k"] == 7 and record["result"]["query"] == TURN
    again = compare_callbacks.refresh(
        TURN, True, {}, out[2], "x#0", "http://h/", *values(rrf_k=7), *values(rrf_k=60), "", view.last_turn
    )
    assert again[4] is not None and again[3] == link  # same turn, same link: the export is not written again
    import gradio as gr

    assert again[4] == gr.skip()
    moved = compare_callbacks.refresh(
        TURN, True, {}, again[2], "x#0", "http://h/", *values(rrf_k=7), *values(rrf_k=20), "", view.last_turn
    )
    assert json.loads(Path(moved[4]).read_text(encoding="utf-8"))["link"] == moved[3] and "b.rrf_k=20" in moved[3]


@pytest.fixture()
def data_root_ui(tmp_path, mini_settings):
    """The inspector's base settings with a data root holding a small BEIR folder (``set``) of 200 documents."""
    folder = tmp_path / "eval" / "set"
    (folder / "qrels").mkdir(parents=True)
    docs = [
        {"_id": f"d{i}", "title": f"Note {i}", "text": f"Reminder number {i}: take dose {i} with water."}
        for i in range(200)
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "Dose 7 With Water"}) + "\n", encoding="utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text("q1\td7\t1\n", encoding="utf-8")
    handlers.use_base_settings(
        mini_settings.replace(
            chroma_path=str(tmp_path / "chroma"), data_dir=str(tmp_path / "data"), data_root=str(tmp_path / "eval")
        )
    )
    yield tmp_path
    handlers.use_base_settings(None)


def test_a_link_opens_its_corpus_or_says_why_not(data_root_ui, monkeypatch):
    """corpus= in a link: a name the Data tab lists is opened for the session once it is indexed; a corpus never
    indexed (a link never starts indexing, issue 19 defect 2), still indexing or unknown leaves the shipped cards and
    says so; a path is never opened."""
    import gradio as gr

    from retrieval.corpora import Registry
    from retrieval.index_jobs import job_for, start_index

    monkeypatch.setattr(share_link, "LINK_WAIT_S", 0.0)
    registry = Registry(handlers.base_settings())
    data = registry.load(registry.get("set"))
    value, problem = share_link.link_corpus("set")
    assert value == gr.skip() and "a link opens only corpora already indexed; open it in the Data tab" in problem
    assert job_for(data, handlers.base_settings()) is None  # the link started nothing
    job = start_index(data, handlers.base_settings())  # a person asked in the Data tab
    value, problem = share_link.link_corpus("set")
    assert value == gr.skip() and "corpus='set' is still being indexed here" in problem and "/200 sub-chunks" in problem
    job.wait(600)
    assert share_link.link_corpus("set") == ("set", None)
    for bad in ("nope", "/etc/passwd", str(data_root_ui / "eval" / "set")):
        value, problem = share_link.link_corpus(bad)
        assert value == gr.skip() and f"no corpus named {bad[:80]!r} here" in problem  # names cut at 80
        assert problem.endswith("The shipped cards are shown instead.")
        # only what the link asked for: the names of the server's other corpora are not a link's business
        assert "'set'" not in problem and "set," not in problem and "shipped," not in problem
    assert share_link.link_corpus("") == (gr.skip(), None)
    # compare mode on that corpus: both sides run on it, its labeled turn marks the relevant card, the link names it
    html, _, kept, link, _ = compare_callbacks.refresh(
        "dose 7 with water", True, {}, {}, None, "", *values(), *values(rrf_k=60), "set"
    )
    assert "corpus=set" in link and "nDCG@10" in html and 'data-id="d7#0"' in html
    assert all(h.parent_id.startswith("d") for h in kept["b"]["result"].final)


def test_a_link_keeps_b_s_preset_and_reopening_selects_it(ui):
    """B from a preset: the page's link says b=PRESET, and opening it puts the preset back in B's dropdown with
    B's values (a real starlette request carrying the link as its Referer, as the browser sends it)."""
    import gradio as gr
    from starlette.requests import Request

    from retrieval.compare import preset_values
    from retrieval.settings import CONTROLS

    defaults = handlers.default_controls()
    b = preset_values("ADR recipe", defaults, defaults)
    _, _, _, link, _ = compare_callbacks.refresh(
        TURN, False, {}, {}, None, "http://h/", *values(), *(b[n] for n in CONTROLS), "", None, "ADR recipe"
    )
    assert "b=" not in link and "compare" not in link  # compare off: no B in the link
    _, _, _, link, _ = compare_callbacks.refresh(
        TURN, True, {}, {}, None, "http://h/", *values(), *(b[n] for n in CONTROLS), "", None, "ADR recipe"
    )
    assert "b=ADR+recipe" in link and "compare=1" in link
    request = gr.Request(
        Request(
            {
                "type": "http",
                "method": "GET",
                "path": "/",
                "query_string": b"",
                "headers": [(b"referer", link.encode()), (b"host", b"h")],
            }
        )
    )
    restored = share_link.restore(request)
    n = len(CONTROLS)
    assert restored[0] == TURN and restored[1 + n] is True and restored[-1] == "ADR recipe"
    assert dict(zip(CONTROLS, restored[2 + n : 2 + 2 * n], strict=False)) == b
    assert restored[-4] == ""  # no problem to report
