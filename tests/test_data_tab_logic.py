"""The Data tab's CSV and .zip-of-Markdown uploads below the page: what a turn on each answers from (moved from
tests/test_e2e_data.py, whose browser test keeps the uploads through the real file input, the bar reaching 100%
and the session's active corpus; a turn's columns shown in the page are checked there on an uploaded JSONL).

The upload handler adds the file (as the page's Add does), its indexing job runs to the end, and the Run handler
runs a turn on the corpus. Real models, a real Chroma in tmp, no mocks."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from tests.conftest import MINI_CARDS, PATIENT


def write_csv(path: Path) -> Path:
    """A team's knowledge base as CSV (three rows, ids kb-1..kb-3), the file the Data tab's browser test uploads."""
    path.write_text(
        "ID,Title,Text\nkb-1,Refill reminder,Order the refill a week before the last strip.\n"
        "kb-2,Pharmacy hours,The pharmacy closes at eight on weekdays.\nkb-3,Pill cutter,Use a pill cutter for "
        "scored tablets only.\n",
        encoding="utf-8",
    )
    return path


def write_zip(path: Path) -> Path:
    """A .zip of three Markdown notes (one without a heading), the file the Data tab's browser test uploads."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("notes/sharps.md", "# Sharps disposal\n\nPut used needles in a rigid sharps container.\n")
        zf.writestr("notes/sick-days.md", "# Sick day rules\n\nKeep drinking fluids when you are ill.\n")
        zf.writestr("notes/logbook.md", "Write each glucose reading in the logbook.\n")
    return path


def chunk_ids(html: str) -> list[str]:
    """The ids of a column's rows, in order (the page test read ``#list-<column> [data-chunk]``)."""
    return re.findall(r'data-chunk="([^"]+)"', html)


@pytest.fixture()
def data_tab(tmp_path):
    from inspector import controls
    from retrieval.settings import Settings

    settings = Settings.from_env(
        {},
        corpus_path=str(MINI_CARDS),
        chroma_path=str(tmp_path / "chroma"),
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "eval"),
        **PATIENT,
    )
    controls.use_base_settings(settings)
    yield settings
    controls.use_base_settings(None)


def add_and_index(path, settings) -> str:
    """The page's Add on ``path``, then its indexing job to the end: the corpus's name."""
    from inspector.data_adding import upload_corpus
    from inspector.data_panels import get_registry
    from retrieval.index_jobs import job_for

    message, _, _, pending, *_ = upload_corpus(str(path), None, None)
    assert pending, message
    snap = job_for(get_registry().open(pending), settings).wait(600)
    assert snap["status"] == "done", snap
    return pending


def test_a_turn_on_an_uploaded_csv_then_on_a_zip_of_markdown_answers_from_each(data_tab, tmp_path):
    from inspector import handlers

    name = add_and_index(write_csv(tmp_path / "team-kb.csv"), data_tab)
    assert name == "team-kb"
    dense = chunk_ids(handlers.run_turn("when does the pharmacy close", corpus=name).dense)
    assert dense and all(i.startswith("kb-") for i in dense), dense

    name = add_and_index(write_zip(tmp_path / "notes.zip"), data_tab)
    assert name == "notes"
    reranked = chunk_ids(handlers.run_turn("where do used needles go", corpus=name).reranked)
    assert reranked and reranked[0] == "notes/sharps#0", reranked
