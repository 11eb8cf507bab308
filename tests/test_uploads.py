"""The upload route's ledger (issue 19, defect 5): one client and all clients together keep a bounded amount, an
upload no corpus adopted is deleted after UPLOAD_UNUSED_S, and only uploads the route recorded are ever deleted.
Real files in tmp; the launched app's route: tests/test_app_cache.py."""

from __future__ import annotations

import time
from pathlib import Path

from inspector.uploads import Ledger
from retrieval.formats import Limits

MB = 1_000_000


def _upload(folder: Path, name: str, size: int) -> str:
    sub = folder / name.replace(".", "-")  # Gradio puts each upload in its own folder
    sub.mkdir()
    path = sub / name
    path.write_bytes(b"x" * size)
    return str(path)


def test_one_client_and_all_clients_keep_a_bounded_amount(tmp_path):
    book = Ledger(Limits(upload_client_mb=2, upload_total_mb=3))
    assert book.admit("alice", MB) is None
    assert book.admit("alice", MB) is None  # two requests in flight: both reserved
    status, why = book.admit("alice", MB)
    assert status == 429 and "UPLOAD_CLIENT_MB" in why and "2 MB" in why
    book.settle("alice", MB, [_upload(tmp_path, "a1.jsonl", MB)])
    book.settle("alice", MB, [])  # a request that failed releases its reservation and keeps nothing
    assert book.admit("bob", MB) is None
    book.settle("bob", MB, [_upload(tmp_path, "b1.jsonl", MB)])
    assert book.admit("carol", MB) is None
    book.settle("carol", MB, [_upload(tmp_path, "c1.jsonl", MB)])
    status, why = book.admit("dave", MB)
    assert status == 507 and "UPLOAD_TOTAL_MB" in why and "3.0 MB" in why


def test_an_upload_no_corpus_adopted_is_deleted_after_the_unused_time(tmp_path):
    book = Ledger(Limits(upload_client_mb=1, upload_unused_s=60))
    old, adopted = _upload(tmp_path, "old.jsonl", MB // 2), _upload(tmp_path, "adopted.jsonl", MB // 2)
    book.admit("alice", MB)
    book.settle("alice", MB, [old, adopted])
    assert book.admit("alice", MB // 2)[0] == 429
    assert book.discard(adopted) and not Path(adopted).exists() and not Path(adopted).parent.exists()
    assert book.sweep() == 0 and Path(old).exists()  # younger than a minute
    assert book.sweep(now=time.time() + 61) == 1 and not Path(old).exists()
    assert book.admit("alice", MB) is None  # deleted uploads no longer count


def test_the_same_file_uploaded_twice_stays_until_both_uploads_are_added(tmp_path):
    """Gradio names an upload by its content: two people uploading one file share its path. The first Add must not
    delete it from under the second ("no longer on the server")."""
    book = Ledger(Limits())
    shared = _upload(tmp_path, "class-corpus.jsonl", 100)
    book.settle("alice", 100, [shared])
    book.settle("bob", 100, [shared])  # the same bytes: the same path
    assert book.discard(shared) and Path(shared).exists()  # alice's Add: bob's upload still waits
    assert book.discard(shared) and not Path(shared).exists()  # bob's Add: now it goes
    assert not book.discard(shared)  # and is no longer known


def test_only_recorded_uploads_are_ever_deleted(tmp_path):
    book = Ledger(Limits())
    mine = tmp_path / "corpus.jsonl"
    mine.write_text("{}\n")
    assert not book.discard(mine) and mine.exists()
    assert not book.discard(None) and not book.discard("")


def test_the_data_tab_drops_an_upload_once_a_corpus_adopted_it_or_refused_it(tmp_path, monkeypatch):
    """The Data tab reads a valid upload into the store, so the route's copy goes at once; a refused one too.
    An upload already swept gets a message saying to upload it again."""
    from inspector import data_adding, handlers, uploads
    from retrieval.settings import Settings
    from tests.conftest import MINI_CARDS, PATIENT

    book = Ledger(Limits())
    monkeypatch.setattr(uploads, "_LEDGER", book)
    handlers.use_base_settings(
        Settings(
            corpus_path=str(MINI_CARDS),
            chroma_path=str(tmp_path / "chroma"),
            data_dir=str(tmp_path / "data"),
            data_root=str(tmp_path / "eval"),
            **PATIENT,
        )
    )
    try:
        good = _upload(tmp_path, "cards.jsonl", 0)
        Path(good).write_text('{"id": "c1", "title": "Pill organiser", "text": "Fill it on Sunday."}\n')
        bad = _upload(tmp_path, "broken.jsonl", 0)
        Path(bad).write_text('{"id": "c1"\n')
        book.settle("alice", 0, [good, bad])
        out = data_adding.upload_corpus(bad, "", None)
        assert "invalid JSON" in out[0] and not Path(bad).exists()
        out = data_adding.upload_corpus(good, "", None)
        assert "1 cards" in out[0] and not Path(good).exists()
        out = data_adding.upload_corpus(good, "", None)
        assert "no longer on the server" in out[0] and "Upload it again" in out[0]
    finally:
        handlers.use_base_settings(None)
