"""Your own data (issue 10): every format loads, every refusal names the file, the line or row and the field, and
the registry reuses, resumes and deletes stores. Real files in tmp, real Chroma, the real bundled embedder."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from retrieval import corpus_adding, corpus_loading
from retrieval.corpora import Registry
from retrieval.corpus import split_cards
from retrieval.corpus_entries import sanitise
from retrieval.formats import Limits, LoadError, load_any
from retrieval.index_jobs import start_index
from retrieval.settings import Settings
from tests.conftest import MINI_CARDS, PATIENT

CARD = {"id": "c1", "title": "Pill organiser", "text": "Fill the weekly pill organiser on Sunday. Check each slot."}


def jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def make_zip(path: Path, files: dict[str, bytes | str], links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return path


def problems(exc: pytest.ExceptionInfo) -> str:
    return str(exc.value)


# ------------------------------------------------------------------------------------------------ formats
def test_cards_jsonl_with_optional_lang_and_topic(tmp_path):
    path = jsonl(tmp_path / "cards.jsonl", [CARD, {**CARD, "id": "c2", "lang": "es", "topic": "dosing"}])
    loaded = load_any(path)
    assert loaded.format == "cards-jsonl"
    assert [(c.id, c.lang, c.topic) for c in loaded.cards] == [("c1", "en", "general"), ("c2", "es", "dosing")]


def test_beir_folder_with_queries_and_qrels(tmp_path):
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Aspirin", "text": "Aspirin thins the blood."},
            {"_id": "d2", "title": "", "text": "Statins lower cholesterol."},
        ],
    )
    jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "what lowers cholesterol"}, {"_id": "q2", "text": "x"}])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n", encoding="utf-8")
    loaded = load_any(folder)
    assert loaded.format == "beir" and [c.id for c in loaded.cards] == ["d1", "d2"]
    assert [(q.id, q.relevant) for q in loaded.queries] == [("q1", {"d2": 1})]
    alone = load_any(folder / "corpus.jsonl", display="corpus.jsonl")  # an uploaded corpus.jsonl, no siblings
    assert alone.format == "beir" and alone.queries == ()


def test_beir_zip_is_read_in_memory(tmp_path):
    path = make_zip(
        tmp_path / "set.zip",
        {
            "tiny/corpus.jsonl": json.dumps({"_id": "d1", "title": "T", "text": "Some text."}) + "\n",
            "tiny/queries.jsonl": json.dumps({"_id": "q1", "text": "some"}) + "\n",
            "tiny/qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t2\n",
        },
    )
    loaded = load_any(path)
    assert loaded.format == "beir" and loaded.queries[0].relevant == {"d1": 2}
    assert not (tmp_path / "tiny").exists()  # nothing unpacked to disk


@pytest.mark.parametrize("delimiter,suffix", [(",", "csv"), ("\t", "tsv")])
def test_csv_and_tsv_headers_match_in_any_case(tmp_path, delimiter, suffix):
    path = tmp_path / f"cards.{suffix}"
    path.write_text(
        delimiter.join(["ID", "Title", "TEXT", "Lang"])
        + "\n"
        + delimiter.join(["a1", "First", "One sentence. Two sentences.", "pt"])
        + "\n",
        encoding="utf-8",
    )
    loaded = load_any(path)
    assert loaded.format == suffix and [(c.id, c.title, c.lang) for c in loaded.cards] == [("a1", "First", "pt")]


def test_zip_of_markdown_and_text_one_card_per_file(tmp_path):
    path = make_zip(
        tmp_path / "notes.zip",
        {
            "notes/insulin.md": "# Insulin storage\n\nKeep unopened pens in the fridge.\n",
            "notes/walk.txt": "Walk after meals.\n",
            "notes/image.png": b"\x89PNG",
            "__MACOSX/notes/._insulin.md": "junk",
        },
    )
    loaded = load_any(path)
    assert loaded.format == "zip-text"
    assert [(c.id, c.title, c.text) for c in loaded.cards] == [
        ("notes/insulin", "Insulin storage", "Keep unopened pens in the fridge."),
        ("notes/walk", "walk", "Walk after meals."),
    ]
    assert "1 entries that are not .txt/.md were skipped" in loaded.notes[0]


# ------------------------------------------------------------------------------------------------ refusals
def test_bad_utf8_names_the_line(tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_bytes(json.dumps(CARD).encode() + b"\n" + b'{"id": "c2", "title": "caf\xe9"}\n')
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert "cards.jsonl:2: not valid UTF-8" in problems(exc)


@pytest.mark.parametrize("where", ["first line", "later line", "beir zip"])
def test_brackets_nested_100000_deep_name_the_file_and_line(tmp_path, where):
    """Issue 19, defect 6: the upload loader gave a bare RecursionError (the format sniffing parsed the first line
    unguarded); now every loader says file:line, as the shipped-corpus loader does."""
    deep = "[" * 100_000
    if where == "beir zip":
        beir = {"_id": "d1", "title": "t", "text": "x"}
        path = make_zip(tmp_path / "set.zip", {"set/corpus.jsonl": json.dumps(beir) + "\n" + deep + "\n"})
        expected = "corpus.jsonl:2: invalid JSON (brackets nested too deeply"
    else:
        path = jsonl(tmp_path / "cards.jsonl", [deep] if where == "first line" else [CARD, deep])
        expected = f"cards.jsonl:{1 if where == 'first line' else 2}: invalid JSON (brackets nested too deeply"
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert expected in problems(exc)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "beir zip"])
def test_a_card_id_with_the_sub_chunk_separator_is_refused_with_file_and_line(tmp_path, fmt):
    """Issue 19, defect 8: the page splits sub-chunk ids (<card id>#<n>) on '#', so a card id holding '#' would be
    shown as another card; every loader refuses it, naming the file, the line and the field."""
    if fmt == "jsonl":
        path, expected = jsonl(tmp_path / "cards.jsonl", [CARD, {**CARD, "id": "a#b"}]), "cards.jsonl:2: field 'id'"
    elif fmt == "csv":
        path = tmp_path / "cards.csv"
        path.write_text("id,title,text\nok,t,fine\nx#1,t,text\n", encoding="utf-8")
        expected = "cards.csv:3: field 'id'"
    else:
        doc = {"_id": "d#1", "title": "t", "text": "x"}
        path = make_zip(tmp_path / "set.zip", {"set/corpus.jsonl": json.dumps(doc) + "\n"})
        expected = "corpus.jsonl:1: field '_id'"
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert expected in problems(exc) and "contains '#', which separates a card id from its sub-chunk" in problems(exc)


def test_bad_utf8_in_csv_names_the_row(tmp_path):
    path = tmp_path / "cards.csv"
    path.write_bytes(b"id,title,text\na,b,fine\nc,d,caf\xe9\n")
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert "cards.csv:3: not valid UTF-8" in problems(exc)


def test_broken_json_line_and_missing_field_are_all_reported(tmp_path):
    path = jsonl(tmp_path / "cards.jsonl", [CARD, '{"id": "c2", "title": "x", "text": "y"', {"id": "c3", "title": "t"}])
    with pytest.raises(LoadError) as exc:
        load_any(path)
    text = problems(exc)
    assert text.startswith("2 problems found; nothing was indexed:")
    assert "cards.jsonl:2: invalid JSON" in text and "cards.jsonl:3: missing field 'text'." in text


def test_missing_csv_column_names_the_header(tmp_path):
    path = tmp_path / "cards.csv"
    path.write_text("Id,Body\n1,text\n", encoding="utf-8")
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert "cards.csv:1: missing column text in the header (found 'Id', 'Body')" in problems(exc)


def test_duplicate_ids_name_both_lines(tmp_path):
    path = jsonl(tmp_path / "cards.jsonl", [CARD, CARD])
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert "cards.jsonl:2: field 'id': duplicate id 'c1' (first seen at cards.jsonl:1)." in problems(exc)


def test_many_problems_show_the_first_twenty_and_the_count(tmp_path):
    path = jsonl(tmp_path / "cards.jsonl", ["not json"] * 25)
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert len(exc.value.problems) == 25
    assert problems(exc).count("invalid JSON") == 20 and "... and 5 more (first 20 shown)" in problems(exc)


def test_zip_path_traversal_is_refused(tmp_path):
    path = make_zip(tmp_path / "evil.zip", {"../../outside.md": "# x\n\ntext", "ok.md": "# ok\n\ntext"})
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert "entry '../../outside.md' points outside the zip's folder; refused." in problems(exc)
    assert not (tmp_path.parent / "outside.md").exists()


def test_zip_symlink_is_refused(tmp_path):
    path = make_zip(tmp_path / "link.zip", {"ok.md": "# ok\n\ntext"}, links=("passwd.md",))
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert "entry 'passwd.md' is a symbolic link; links are refused." in problems(exc)


def test_zip_bomb_is_refused_before_unpacking(tmp_path):
    """10 MB of zeros compress to ~10 kB; with a 5 MB unpacked limit the directory alone refuses it."""
    path = make_zip(tmp_path / "bomb.zip", {"zeros.txt": b"\0" * 10_000_000})
    assert path.stat().st_size < 100_000
    with pytest.raises(LoadError) as exc:
        load_any(path, Limits(max_unpacked_mb=5))
    assert (
        "bomb.zip: the zip would unpack to 10.0 MB; the limit is 5 MB (MAX_UNPACKED_MB). Nothing was unpacked."
        in problems(exc)
    )


def test_zip_with_too_many_entries_is_refused(tmp_path):
    path = make_zip(tmp_path / "many.zip", {f"n{i}.txt": "x" for i in range(12)})
    with pytest.raises(LoadError) as exc:
        load_any(path, Limits(max_zip_entries=10))
    assert "many.zip: the zip has 12 entries; the limit is 10 (MAX_ZIP_ENTRIES)." in problems(exc)


def test_oversize_upload_is_refused(tmp_path):
    path = jsonl(tmp_path / "big.jsonl", [{**CARD, "id": f"c{i}", "text": "word " * 500} for i in range(500)])
    with pytest.raises(LoadError) as exc:
        load_any(path, Limits(max_upload_mb=1))
    assert "big.jsonl: the file is 1.3 MB; the limit is 1 MB (MAX_UPLOAD_MB)." in problems(exc)


def test_card_too_long_and_too_many_cards(tmp_path):
    path = jsonl(
        tmp_path / "cards.jsonl", [{**CARD, "id": f"c{i}", "text": "x" * (50 if i else 200)} for i in range(4)]
    )
    with pytest.raises(LoadError) as exc:
        load_any(path, Limits(max_card_chars=100, max_cards=2))
    text = problems(exc)
    assert "cards.jsonl:1: field 'text' has 200 characters; the limit is 100 (MAX_CARD_CHARS)." in text
    assert "cards.jsonl:4: more than 2 cards (MAX_CARDS)" in text


def test_unsupported_type_says_what_is_supported(tmp_path):
    path = tmp_path / "deck.pptx"
    path.write_bytes(b"PK")
    with pytest.raises(LoadError) as exc:
        load_any(path)
    assert "deck.pptx: unsupported file type '.pptx'" in problems(exc) and ".csv/.tsv" in problems(exc)


def test_limits_from_env_are_checked():
    assert Limits.from_env({"MAX_UPLOAD_MB": "5"}).max_upload_mb == 5
    with pytest.raises(ValueError, match="MAX_CARDS='many' is not a number"):
        Limits.from_env({"MAX_CARDS": "many"})


def test_sanitise_keeps_names_inside_the_folder():
    assert sanitise("../../etc/passwd") == "etc-passwd"
    assert sanitise("<img src=x onerror=alert(1)>") == "img-src-x-onerror-alert-1"
    assert sanitise("...") == "corpus"


# ------------------------------------------------------------------------------------------------ registry
@pytest.fixture()
def registry_settings(tmp_path):
    beir = tmp_path / "eval" / "tiny"
    (beir / "qrels").mkdir(parents=True)
    jsonl(beir / "corpus.jsonl", [{"_id": "d1", "title": "Aspirin", "text": "Aspirin thins the blood."}])
    jsonl(beir / "queries.jsonl", [{"_id": "q1", "text": "blood thinner"}])
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    return Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=str(tmp_path / "chroma"),
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "eval"),
        min_similarity=0.3,
        **PATIENT,
    )


def test_registry_lists_shipped_indexed_and_beir_and_reuses_same_content(registry_settings, tmp_path):
    reg = Registry(registry_settings)
    assert [(e.name, e.kind) for e in reg.entries()] == [("shipped", "shipped"), ("tiny", "beir")]
    upload = jsonl(tmp_path / "upload-xyz.jsonl", [CARD])
    data, new = reg.add(upload, display="my cards.jsonl", copy=True)
    assert new and data.entry.name == "my-cards" and data.entry.kind == "indexed"
    assert data.entry.source == "" and not (tmp_path / "data" / "uploads").exists()  # the store keeps it, no file
    upload.unlink()  # the upload's temporary file goes away: the corpus opens from the store alone
    corpus_loading._LOADED.clear()
    fresh = Registry(registry_settings).load(Registry(registry_settings).get("my-cards"))
    assert (
        fresh.cards == data.cards and fresh.chunks == data.chunks and fresh.entry.fingerprint == data.entry.fingerprint
    )
    upload = jsonl(upload, [CARD])
    again, new = reg.add(upload, display="other name.jsonl", copy=True)
    assert not new and again.entry.name == "my-cards"
    assert [e.name for e in Registry(registry_settings).entries()] == ["shipped", "my-cards", "tiny"]
    assert data.chunks == tuple(split_cards(data.cards))
    beir = reg.load(reg.get("tiny"))
    assert beir.entry.turns == 1 and beir.chunks[0].chunk_id == "d1#0"


def test_a_corpus_stored_by_the_chunker_before_opens_with_todays_split(registry_settings, tmp_path, monkeypatch):
    """A Chinese corpus stored before CJK sentence ends were split (its record's fingerprint from the chunker
    before) opens with today's sub-chunks and records their fingerprint; cards that give neither are damage."""
    from retrieval import corpus_store
    from retrieval.corpus import fingerprint

    card = {"id": "zh1", "title": "说明", "lang": "zh", "topic": "", "text": "本品为白色片剂。" * 40}
    monkeypatch.setattr(corpus_adding, "split_cards", lambda cards, words=60: split_cards(cards, words, legacy=True))
    data, _ = Registry(registry_settings).add(jsonl(tmp_path / "zh.jsonl", [card]), copy=True)
    assert data.entry.chunks == 1  # the chunker before: one sub-chunk of 320 characters
    monkeypatch.undo()
    corpus_loading._LOADED.clear()
    reopened = Registry(registry_settings).open("zh")
    assert len(reopened.chunks) == 3 and reopened.chunks == tuple(split_cards(reopened.cards))
    assert corpus_store.meta_of(registry_settings, "zh")["fingerprint"] == fingerprint(reopened.chunks)
    corpus_loading._LOADED.clear()
    assert Registry(registry_settings).open("zh").entry.fingerprint == fingerprint(reopened.chunks)
    corpus_store.update(registry_settings, "zh", fingerprint="0" * 16)  # neither chunker gives it
    corpus_loading._LOADED.clear()
    with pytest.raises(LoadError, match="do not give the fingerprint recorded with them"):
        Registry(registry_settings).open("zh")


def test_failed_upload_changes_nothing(registry_settings, tmp_path):
    reg = Registry(registry_settings)
    before = [e.name for e in reg.entries()]
    with pytest.raises(LoadError):
        reg.add(jsonl(tmp_path / "bad.jsonl", ["{oops"]), copy=True)
    assert [e.name for e in reg.entries()] == before
    assert not (tmp_path / "data" / "uploads").exists() or not any((tmp_path / "data" / "uploads").iterdir())


def test_index_job_shared_by_two_requests_then_query_then_delete(registry_settings, tmp_path):
    reg = Registry(registry_settings)
    path = jsonl(
        tmp_path / "cards.jsonl",
        [CARD, {**CARD, "id": "c2", "title": "Water", "text": "Drink a glass of water with each tablet."}],
    )
    data, _ = reg.add(path, copy=True)
    job = start_index(data, registry_settings)
    assert start_index(data, registry_settings) is job  # a second request attaches to the same job
    snap = job.wait(600)
    assert snap["status"] == "done" and snap["done"] == snap["total"] == 2, snap
    from retrieval.corpus_retrievers import retriever_for

    retriever = retriever_for(data, registry_settings)
    result = retriever.retrieve("glass of water", registry_settings)
    assert result.final and result.final[0].parent_id == "c2"
    assert {h.chunk_id for h in result.bm25.hits} <= {"c1#0", "c2#0"}
    message = reg.delete(data.entry.name)
    assert message == f"deleted {data.entry.name} (1 Chroma collection removed)"
    assert [e.name for e in reg.entries()] == ["shipped", "tiny"]
    with pytest.raises(ValueError, match="only corpora uploaded or indexed here can be deleted"):
        reg.delete("shipped")


def test_the_number_of_corpora_kept_is_capped(registry_settings, tmp_path):
    """MAX_CORPORA: uploads cannot fill the disk; the same content again is still reused, and a deletion frees a
    place."""
    reg = Registry(registry_settings, Limits(max_corpora=1))
    first = jsonl(tmp_path / "one.jsonl", [CARD])
    data, _ = reg.add(first, copy=True)
    with pytest.raises(
        LoadError,
        match=r"two.jsonl: this app already keeps 1 corpora, its limit \(MAX_CORPORA=1\): the next place frees up "
        r"in about 7 days",
    ) as full:
        reg.add(jsonl(tmp_path / "two.jsonl", [{**CARD, "id": "c9"}]), copy=True)
    assert "delete one" not in str(full.value)  # this session uploaded none: it is not told to delete one
    assert reg.add(first, copy=True)[1] is False  # the same content: reused, not a new corpus
    reg.delete(data.entry.name)
    assert reg.add(tmp_path / "two.jsonl", copy=True)[1] is True
    assert Limits.from_env({"MAX_CORPORA": "3"}).max_corpora == 3


def test_unknown_corpus_lists_the_names(registry_settings):
    with pytest.raises(ValueError, match="no corpus named 'nope': choose one of shipped, tiny"):
        Registry(registry_settings).get("nope")


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc", "../corpus/cards.jsonl"])
def test_the_page_and_links_never_open_a_path(registry_settings, tmp_path, path):
    """A corpus from a browser, an API call or a link is a name in the registry, never a file or folder on the server
    (only the CLI, run by the machine's owner, takes paths)."""
    from retrieval.corpus_turns import open_for_turns

    secret = jsonl(tmp_path / "secret.jsonl", [{"id": "s1", "title": "token", "text": "hunter2"}])
    for wanted in (path, str(secret)):
        with pytest.raises(ValueError, match=r"no corpus named .*: choose one of shipped, tiny") as exc:
            open_for_turns(wanted, registry_settings)
        assert "hunter2" not in str(exc.value)
    assert Registry(registry_settings).get(str(secret), paths=True).source == str(secret.resolve())


def test_cli_index_then_query_and_eval_on_the_corpus(tmp_path, monkeypatch, capsys):
    """`index PATH --name` registers and embeds; `query --corpus` and `eval --corpus` run on it."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    folder = tmp_path / "set"
    (folder / "qrels").mkdir(parents=True)
    jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Water", "text": "Drink a glass of water with each tablet."},
            {"_id": "d2", "title": "Alarm", "text": "Set a phone alarm for the evening dose."},
            {"_id": "d3", "title": "Travel", "text": "Pack spare doses in hand luggage."},
        ],
    )
    jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "glass of water with pills"}])
    (folder / "qrels" / "test.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path / "data"),
        "CHROMA_PATH": str(tmp_path / "chroma"),
        "DATA_ROOT": str(tmp_path / "none"),
        "HF_HUB_OFFLINE": "1",
    }

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "retrieval", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
        )

    out = cli("index", str(folder), "--name", "My set")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["name"] == "My-set" and json.loads(out.stdout)["sub_chunks"] == 3
    # The index is a process of its own, so what follows finds what another process stored; the commands after it
    # need none (each cost ~2 s of imports and a model load): this process's `main`, the same parser and handlers
    # as `python -m retrieval`, with the same environment.
    from retrieval.cli import main
    from retrieval.evaluation.cli import register

    for name in ("DATA_DIR", "CHROMA_PATH", "DATA_ROOT", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, env[name])
    capsys.readouterr()
    code = main(["query", "glass of water", "--corpus", "My-set", "--json"], (register,))
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert json.loads(printed.out)["bm25"][0]["chunk_id"] == "d1#0"
    code = main(
        ["eval", "--corpus", "My-set", "--configs", "bm25", "--no-refusals", "--json", "--resamples", "10"], (register,)
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert json.loads(printed.out)["turns"] == 1
    code = main(["query", "x", "--corpus", "nope"], (register,))
    assert code == 2 and "no corpus named 'nope': choose one of shipped, My-set" in capsys.readouterr().err
