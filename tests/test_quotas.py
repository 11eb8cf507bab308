"""What one visitor may keep in the store (``retrieval.quotas``): a session's and an address's share of MAX_CORPORA,
the page's uploads no one opened for UPLOAD_IDLE_HOURS giving their place up, messages that say what the visitor can
do, and who may attach a collection made elsewhere (ATTACH_FROM_PAGE). Real embedded Chroma; no model runs (adding
a corpus keeps its cards; indexing is not started here)."""

from __future__ import annotations

import json
import time

import pytest

from retrieval import corpus_store, quotas
from retrieval.corpora import Registry
from retrieval.formats import Limits, LoadError
from retrieval.settings import Settings
from tests.conftest import MINI_CARDS


def _settings(tmp_path, **knobs) -> Settings:
    return Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=str(tmp_path / "chroma"),
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "none"),
        **knobs,
    )


def _file(tmp_path, name: str) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps({"id": name, "title": name, "text": f"Cards about {name} only."}) + "\n")
    return str(path)


def _add(registry: Registry, tmp_path, name: str, token: str, address: str = "10.0.0.1"):
    return registry.add(_file(tmp_path, name), name, copy=True, owner=token, address=address)[0].entry.name


def test_one_session_keeps_its_share_and_is_told_which_to_delete(tmp_path):
    registry = Registry(_settings(tmp_path, corpora_per_session=2, corpora_per_address=10), Limits(max_corpora=50))
    _add(registry, tmp_path, "one", "token-a")
    _add(registry, tmp_path, "two", "token-a")
    with pytest.raises(LoadError) as refused:
        _add(registry, tmp_path, "three", "token-a")
    text = str(refused.value)
    assert "CORPORA_PER_SESSION=2" in text and "delete one of yours (one, two)" in text
    assert _add(registry, tmp_path, "other", "token-b")  # another session of the same address still may


def test_one_address_keeps_its_share_whatever_sessions_it_makes(tmp_path):
    registry = Registry(_settings(tmp_path, corpora_per_session=5, corpora_per_address=3), Limits(max_corpora=50))
    for i in range(3):
        _add(registry, tmp_path, f"s{i}", f"token-{i}")  # a script minting a new session per upload
    with pytest.raises(LoadError, match=r"your address already keeps 3 corpora .*CORPORA_PER_ADDRESS=3"):
        _add(registry, tmp_path, "s9", "token-9")
    assert _add(registry, tmp_path, "elsewhere", "token-9", address="10.0.0.2")
    kept = corpus_store.records(registry.settings)
    assert all("10.0.0" not in json.dumps(r) for r in kept)  # the address itself is never kept, only a hash


def test_a_full_store_gives_the_place_of_an_upload_no_one_opened(tmp_path):
    settings = _settings(tmp_path, corpora_per_session=5, corpora_per_address=50, upload_idle_hours=24.0)
    registry = Registry(settings, Limits(max_corpora=2))
    _add(registry, tmp_path, "old", "token-a")
    _add(registry, tmp_path, "recent", "token-b")
    with pytest.raises(LoadError) as full:  # none idle yet: when a place frees up, and no "delete one" it cannot
        _add(registry, tmp_path, "new", "token-c")
    text = str(full.value)
    assert "MAX_CORPORA=2" in text and "next place frees up in about 24 h" in text
    assert "delete one" not in text.replace("delete one of yours", "")  # token-c owns none: not told to delete
    corpus_store.update(settings, "old", opened=time.time() - 25 * 3600)  # no one opened it for 25 h
    assert _add(registry, tmp_path, "new", "token-c") == "new"
    assert {e.name for e in registry.entries()} == {"shipped", "recent", "new"}  # "old" gave its place up


def test_opening_a_corpus_keeps_it(tmp_path, monkeypatch):
    settings = _settings(tmp_path, upload_idle_hours=24.0)
    registry = Registry(settings, Limits(max_corpora=2))
    _add(registry, tmp_path, "used", "token-a")
    _add(registry, tmp_path, "unused", "token-b")
    for name in ("used", "unused"):
        corpus_store.update(settings, name, opened=time.time() - 48 * 3600)
    monkeypatch.setattr(quotas, "_TOUCHED", {})
    quotas.touch(settings, registry.get("used"), wait=True)  # someone opened it (the Data tab's Open, a turn)
    _add(registry, tmp_path, "new", "token-c")
    assert {e.name for e in registry.entries()} == {"shipped", "used", "new"}


def test_the_command_lines_corpora_never_expire(tmp_path):
    settings = _settings(tmp_path, upload_idle_hours=0.0)
    registry = Registry(settings, Limits(max_corpora=1))
    registry.add(_file(tmp_path, "owners"), "owners")  # the CLI: copy=False
    with pytest.raises(LoadError, match="added by the machine's owner.*--delete NAME"):
        _add(registry, tmp_path, "visitor", "token-a")


def test_attaching_from_the_page_follows_attach_from_page(tmp_path):
    embedded = _settings(tmp_path)
    shared = _settings(tmp_path, chroma_host="127.0.0.1", chroma_port=9)
    assert quotas.attach_refusal(embedded) is None  # this app's own folder: the page may attach
    refused = quotas.attach_refusal(shared)
    assert refused and "ATTACH_FROM_PAGE=embedded" in refused and "python -m retrieval index --attach" in refused
    assert quotas.attach_refusal(shared.replace(attach_from_page="always")) is None
    assert "ATTACH_FROM_PAGE=never" in (quotas.attach_refusal(embedded.replace(attach_from_page="never")) or "")


def test_the_page_refuses_an_attach_the_policy_forbids(tmp_path):
    from inspector import data_adding, handlers

    handlers.use_base_settings(_settings(tmp_path, attach_from_page="never"))
    try:
        assert data_adding.attachable_choices() == []  # the picker offers nothing
        out = data_adding.attach_collection("someone-elses", None, "", None, "token-a")
        assert "ATTACH_FROM_PAGE=never" in out[0]
    finally:
        handlers.use_base_settings(None)
