"""Who may change a corpus (issue 19, defects 2 and 7) and what it says when it refuses (issue 18 item 5): a corpus
uploaded from the page is deleted (or its refusal text changed) from the page only by the session that uploaded it,
the shipped cards, BEIR folders and CLI-indexed corpora never from the page, the CLI any; a link never starts
indexing; nothing of an upload is left readable by others under DATA_DIR. Real Chroma, the real bundled models."""

from __future__ import annotations

import json
import os
import stat

import pytest

from retrieval.context import REFUSAL
from retrieval.corpora import Registry
from retrieval.corpus_entries import NEUTRAL_REFUSAL
from retrieval.corpus_turns import open_within
from retrieval.index_jobs import job_for, start_index
from retrieval.settings import Settings
from tests.conftest import MINI_CARDS, PATIENT

CARDS = [
    {"id": "w1", "title": "Water", "text": "Drink a full glass of water with every tablet."},
    {"id": "w2", "title": "Alarm", "text": "Set a phone alarm for the evening dose."},
]


class Upload:
    """What Gradio hands a handler for an uploaded file."""

    def __init__(self, path, orig_name):
        self.name, self.orig_name = str(path), orig_name


@pytest.fixture()
def page(tmp_path):
    from inspector import handlers

    beir = tmp_path / "eval" / "tiny"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "A", "text": "Aspirin."}) + "\n")
    s = Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=str(tmp_path / "chroma"),
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "eval"),
        min_similarity=0.3,
        **PATIENT,
    )
    handlers.use_base_settings(s)
    yield s
    handlers.use_base_settings(None)


def _upload(tmp_path, name: str, token: str | None, rows=CARDS, wait: bool = True):
    from inspector import data_adding, data_panels

    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = data_adding.upload_corpus(Upload(path, f"{name}.jsonl"), name, None, token)
    if wait:
        job = job_for(Registry(data_panels.get_settings()).open(name), data_panels.get_settings())
        assert job is not None and job.wait(600)["status"] == "done", out[0]
    return out[-1], out[0]  # the session's token (made if it had none), the message


def test_only_the_uploading_session_deletes_from_the_page(page, tmp_path):
    from inspector import data_tab

    token_a, message = _upload(tmp_path, "class-notes", None)
    assert token_a and "class-notes" in message and "Validate" not in message
    token_b, _ = _upload(tmp_path, "other", None, rows=[{**CARDS[0], "id": "x1"}])
    assert token_b != token_a  # each session gets its own secret
    shown, corpus, _ = data_tab.delete("class-notes", "class-notes", token_b)
    assert "uploaded or attached from another browser session" in shown
    assert "only the browser session that uploaded or attached a corpus may delete it from the page" in shown
    assert "a corpus can be deleted" not in shown  # the old sentence said a session "can be deleted"
    assert corpus == "class-notes" and "class-notes" in [e.name for e in Registry(page).entries()]
    shown, _, _ = data_tab.delete("class-notes", None, None)  # a session that never uploaded
    assert "only the browser session that uploaded or attached a corpus may" in shown
    for other in ("shipped", "tiny"):
        shown, _, _ = data_tab.delete(other, None, token_a)
        assert "only corpora uploaded or indexed here can be deleted" in shown
    shown, corpus, _ = data_tab.delete("class-notes", "class-notes", token_a)
    assert shown.startswith('<div class="message info"') and "Deleted class-notes" in shown and corpus == "shipped"
    assert "class-notes" not in [e.name for e in Registry(page).entries()]


def test_cli_indexed_never_from_the_page_but_the_cli_deletes_any(page, tmp_path):
    from inspector import data_tab

    path = tmp_path / "team.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in CARDS), encoding="utf-8")
    Registry(page).add(path, "team")  # what `python -m retrieval index` does
    token, _ = _upload(tmp_path, "mine", None, rows=[{**CARDS[1], "id": "m1"}])
    shown, _, _ = data_tab.delete("team", None, token)
    assert "was added from the command line" in shown and "python -m retrieval index --delete team" in shown
    assert Registry(page).delete("team").startswith("deleted team")
    assert Registry(page).delete("mine").startswith("deleted mine")  # the CLI: any corpus of the store
    assert [e.name for e in Registry(page).entries()] == ["shipped", "tiny"]


def test_a_link_never_starts_indexing(page, tmp_path):
    path = tmp_path / "linked.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in CARDS), encoding="utf-8")
    data, _ = Registry(page).add(path, "linked", copy=True, owner="t")  # registered, never opened
    with pytest.raises(ValueError, match="a link opens only corpora already indexed; open it in the Data tab"):
        open_within(data, page, 5.0)
    assert job_for(data, page) is None  # nothing started
    assert start_index(data, page).wait(600)["status"] == "done"  # a person asked in the Data tab
    assert open_within(data, page, 60.0) is None


def test_nothing_of_an_upload_is_readable_by_others_under_data_dir(page, tmp_path):
    _upload(tmp_path, "private", None)
    data_dir = tmp_path / "data"
    loose = []
    for folder, dirs, files in os.walk(data_dir):
        for name in [*dirs, *files]:
            mode = os.stat(os.path.join(folder, name)).st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                loose.append((os.path.join(folder, name), oct(mode & 0o777)))
    assert not loose, f"readable by group or others: {loose}"


def test_legacy_registry_is_imported_once_and_kept_private(page, tmp_path):
    """A DATA_DIR/corpora.json of an earlier version, with its 0644 copy of an upload: its corpora are added to the
    store, the file renamed 0600, the old uploads folder made 0700 and its files 0600."""
    data_dir = tmp_path / "data"
    (data_dir / "uploads").mkdir(parents=True)
    path = data_dir / "uploads" / "old-1234abcd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in CARDS), encoding="utf-8")
    os.chmod(path, 0o644)
    os.chmod(data_dir / "uploads", 0o755)
    (data_dir / "corpora.json").write_text(
        json.dumps([{"name": "old", "source": str(path)}, {"name": "x", "source": ""}])
    )
    assert "old" in [e.name for e in Registry(page).entries()]
    done = data_dir / "corpora.json.imported"
    assert not (data_dir / "corpora.json").exists() and stat.S_IMODE(done.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE((data_dir / "uploads").stat().st_mode) == 0o700


def test_refusal_text_kept_with_the_corpus_and_used_by_its_turns(page, tmp_path):
    from inspector import data_refusal, handlers, turn_view
    from tests.conftest import control_values

    assert Registry(page).get("shipped").refusal == REFUSAL and "medication" in REFUSAL
    token, _ = _upload(tmp_path, "garden", None)
    assert Registry(page).get("garden").refusal == NEUTRAL_REFUSAL and "medication" not in NEUTRAL_REFUSAL
    shown, kept = data_refusal.save_refusal("garden", "Nothing on that in the <b>garden</b> notes.", "someone-else")
    assert "only the browser session that uploaded or attached a corpus may" in shown
    shown, kept = data_refusal.save_refusal("garden", "Nothing on that in the <b>garden</b> notes.", token)
    assert "Refusal text of garden set" in shown and kept == "Nothing on that in the <b>garden</b> notes."
    assert Registry(page).get("garden").refusal == kept  # kept in the store: any process reads it
    turn = handlers.execute(
        "quantum chromodynamics lattice gauge", dict(zip(handlers.CONTROLS, control_values())), "garden"
    )
    assert turn.result.hybrid_path == "no_match", turn.result.reason
    assert turn.context.text == kept
    view = turn_view.render_turn(turn)
    assert "Nothing on that in the &lt;b&gt;garden&lt;/b&gt; notes." in view.reranked
    assert "medication" not in view.reranked
    data_refusal.save_refusal("garden", "", token)
    assert Registry(page).get("garden").refusal == NEUTRAL_REFUSAL
