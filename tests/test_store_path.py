"""CHROMA_PATH faults with real files (issue 13, defects 4 and 5).

A path that is a file, or a folder holding things that are not a Chroma store, is a configuration error with a
clear message and nothing is moved. A damaged store is recovered by moving aside only its own files (the SQLite
database and its segment folders); healthy neighbours in the same folder, such as the ``beir-*`` stores the
evaluation keeps there, stay where they are, and the warning says what moved where.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.pipeline import HybridRetriever
from tests.app_server import free_port
from tests.conftest import MINI_CARDS, ROOT
from tests.test_faults import assert_same_answers, moved_aside, run_app

QUIET = {"progress": lambda done, total: None}


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path) -> sha256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def healthy_store(tmp_path_factory) -> Path:
    """A healthy mini store, written by another process (as the app would)."""
    store = tmp_path_factory.mktemp("healthy") / "mini"
    out = run_app(store, 5)
    assert out.returncode == 0, out.stderr[-2000:]
    return store


def test_a_file_as_chroma_path_is_a_configuration_error_and_is_left_alone(mini_settings, tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_bytes(MINI_CARDS.read_bytes())  # e.g. CHROMA_PATH set to the corpus by mistake
    with pytest.raises(ValueError, match=r"CHROMA_PATH=.*cards\.jsonl is a file, not a folder"):
        HybridRetriever(mini_settings.replace(chroma_path=str(path)), **QUIET)
    assert path.read_bytes() == MINI_CARDS.read_bytes()
    assert not moved_aside(path) and sorted(p.name for p in tmp_path.iterdir()) == ["cards.jsonl"]


def test_a_path_under_a_file_is_a_configuration_error(mini_settings, tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_text("{}\n")
    with pytest.raises(ValueError, match=r"inside .*cards\.jsonl, which is a file"):
        HybridRetriever(mini_settings.replace(chroma_path=str(path / "store")), **QUIET)
    assert path.read_text() == "{}\n"


def test_a_folder_of_other_things_is_a_configuration_error_and_is_left_alone(mini_settings, tmp_path):
    folder = tmp_path / "documents"
    (folder / "photos").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes")
    (folder / "photos" / "a.jpg").write_bytes(b"\xff\xd8")
    before = tree_digest(folder)
    with pytest.raises(ValueError, match=r"not part of a Chroma store.*notes\.txt.*nothing was changed"):
        HybridRetriever(mini_settings.replace(chroma_path=str(folder)), **QUIET)
    assert tree_digest(folder) == before and sorted(p.name for p in folder.iterdir()) == ["notes.txt", "photos"]
    assert not moved_aside(folder)


def test_the_app_refuses_to_start_on_a_file_as_chroma_path(tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_bytes(MINI_CARDS.read_bytes())
    env = {
        **os.environ,
        "CORPUS_PATH": str(MINI_CARDS),
        "CHROMA_PATH": str(path),
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(free_port()),
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    done = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "is a file, not a folder" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert path.read_bytes() == MINI_CARDS.read_bytes()


def test_an_empty_folder_and_a_folder_of_beir_stores_are_fine(healthy_store, mini, mini_settings, tmp_path):
    folder = tmp_path / "chroma"
    (folder / "beir-scifact").mkdir(parents=True)
    retriever = HybridRetriever(mini_settings.replace(chroma_path=str(folder)), **QUIET)
    assert retriever.dense is not None and retriever.dense.built, retriever.dense_error
    assert (folder / "chroma.sqlite3").exists() and (folder / "beir-scifact").is_dir()


def test_recovery_moves_only_the_damaged_store_and_says_what_moved_where(
    healthy_store, mini, mini_settings, tmp_path, caplog
):
    import shutil

    store = tmp_path / "chroma"
    shutil.copytree(healthy_store, store)
    shutil.copytree(healthy_store, store / "beir-scifact")  # a healthy neighbour: another store in the folder
    neighbour = tree_digest(store / "beir-scifact")
    damaged = {p.name for p in store.iterdir() if p.name != "beir-scifact"}
    db = store / "chroma.sqlite3"
    db.write_bytes(b"\0" * db.stat().st_size)

    caplog.set_level(logging.WARNING)
    s = mini_settings.replace(chroma_path=str(store))
    retriever = HybridRetriever(s, **QUIET)
    assert retriever.dense is not None and retriever.dense.built, retriever.dense_error
    (aside,) = moved_aside(store)
    assert {p.name for p in aside.iterdir()} == damaged  # the database and its segment folder, nothing else
    assert (store / "beir-scifact").is_dir() and tree_digest(store / "beir-scifact") == neighbour
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert str(aside) in warning and "chroma.sqlite3" in warning and "beir-scifact" in warning, warning
    assert_same_answers(retriever, s, mini)
