"""Someone else's collection, as people actually save it: a byte-order mark (Excel, Notepad), numeric ids, no title
field, a CSV written with semicolons (Excel in most of Europe). Each is read as the person meant it, or refused
with a message naming the file and the line."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from retrieval.formats import load_any

BOM = "\ufeff"
ROWS = [
    {"id": "b1", "title": "Tyre pressure", "text": "Road tyres run at 80 to 100 psi. Check them weekly."},
    {"id": "b2", "title": "Chain", "text": "Lubricate the chain every 300 km and wipe off the excess."},
]


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def lines(rows: list[dict], end: str = "\n") -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + end for r in rows)


def test_a_byte_order_mark_is_not_part_of_the_first_card(tmp_path):
    write(
        tmp_path / "queries.jsonl",
        BOM
        + lines(
            [{"id": "q1", "text": "chain oil", "lang": "en", "category": "semantic", "relevant": {"b2": 2}}], "\r\n"
        ),
    )
    loaded = load_any(write(tmp_path / "cards.jsonl", BOM + lines(ROWS, "\r\n")))  # the CLI reads queries beside
    assert [c.id for c in loaded.cards] == ["b1", "b2"]
    assert [(q.id, q.relevant) for q in loaded.queries] == [("q1", {"b2": 2})]


def test_a_folder_in_the_projects_own_layout_is_its_cards_and_labeled_turns(tmp_path):
    """corpus/ and corpus/eval/* hold cards.jsonl + queries.jsonl: `eval --corpus corpus/eval/bicycles` names the
    folder (it was refused as "a folder without corpus.jsonl")."""
    write(
        tmp_path / "queries.jsonl",
        lines([{"id": "q1", "text": "chain oil", "lang": "en", "category": "semantic", "relevant": {"b2": 2}}]),
    )
    write(tmp_path / "cards.jsonl", lines(ROWS))
    loaded = load_any(tmp_path)
    assert loaded.format == "cards-jsonl" and [c.id for c in loaded.cards] == ["b1", "b2"]
    assert [(q.id, q.relevant) for q in loaded.queries] == [("q1", {"b2": 2})]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="a folder without corpus.jsonl or cards.jsonl"):
        load_any(empty)
    missing = tmp_path / "no such dir" / "cards.jsonl"  # the CLI names the path it was given, not "cards.jsonl"
    with pytest.raises(ValueError) as err:
        load_any(missing)
    assert f"{missing}: file not found" in str(err.value)


def test_a_beir_folder_saved_with_byte_order_marks_keeps_its_labeled_turns(tmp_path):
    folder = tmp_path / "set"
    (folder / "qrels").mkdir(parents=True)
    write(
        folder / "corpus.jsonl", BOM + lines([{"_id": r["id"], "title": r["title"], "text": r["text"]} for r in ROWS])
    )
    write(folder / "queries.jsonl", BOM + lines([{"_id": "q1", "text": "how often do I oil the chain"}]))
    write(folder / "qrels" / "test.tsv", BOM + "q1\tb2\t1\n")  # no header row: the first row is data
    loaded = load_any(folder)
    assert [c.id for c in loaded.cards] == ["b1", "b2"]
    assert [(q.id, q.relevant) for q in loaded.queries] == [("q1", {"b2": 1})]
    alone = load_any(folder / "corpus.jsonl", display="my set.jsonl")  # uploaded alone: still read as BEIR
    assert alone.format == "beir" and [c.id for c in alone.cards] == ["b1", "b2"]


def test_numeric_ids_are_read_as_text_and_still_checked_for_duplicates(tmp_path):
    loaded = load_any(write(tmp_path / "cards.jsonl", lines([{**r, "id": n} for n, r in enumerate(ROWS, 1)])))
    assert [c.id for c in loaded.cards] == ["1", "2"]
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    write(folder / "corpus.jsonl", lines([{"_id": n, "title": "", "text": r["text"]} for n, r in enumerate(ROWS, 1)]))
    write(folder / "queries.jsonl", lines([{"_id": 7, "text": "chain oil"}]))
    write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n7\t2\t1\n")
    assert [(q.id, q.relevant) for q in load_any(folder).queries] == [("7", {"2": 1})]
    dup = write(tmp_path / "dup.jsonl", lines([{**ROWS[0], "id": 1}, {**ROWS[1], "id": "1"}]))
    try:
        load_any(dup)
    except ValueError as exc:
        assert "dup.jsonl:2: field 'id': duplicate id '1' (first seen at dup.jsonl:1)" in str(exc)
    else:
        raise AssertionError("a duplicate id was accepted")
    bad = write(tmp_path / "bad.jsonl", lines([{**ROWS[0], "id": 1.5}, {**ROWS[1], "id": True}]))
    try:
        load_any(bad)
    except ValueError as exc:
        assert "bad.jsonl:1: field 'id' must be a string or a whole number, got float" in str(exc)
        assert "bad.jsonl:2: field 'id' must be a string or a whole number, got bool" in str(exc)
    else:
        raise AssertionError("a float id was accepted")


def test_cards_without_titles_are_read_in_every_format(tmp_path):
    untitled = [{"id": r["id"], "text": r["text"]} for r in ROWS]
    assert [c.title for c in load_any(write(tmp_path / "cards.jsonl", lines(untitled))).cards] == ["", ""]
    csv_cards = load_any(write(tmp_path / "cards.csv", "id,text\nb1,Road tyres run at 80 psi.\n")).cards
    assert [(c.id, c.title, c.text) for c in csv_cards] == [("b1", "", "Road tyres run at 80 psi.")]


def test_a_semicolon_csv_with_quoted_newlines_and_extra_columns_is_read(tmp_path):
    path = write(
        tmp_path / "cards.csv",
        BOM + 'ID;Title;Text;Author\r\nb1;Tyre pressure;"Road tyres, 80 psi.\r\n'
        'Check weekly.";x\r\nb2;Kette;"Öl alle 300 km; Überschuss abwischen.";y\r\n',
    )
    loaded = load_any(path)
    assert [(c.id, c.title) for c in loaded.cards] == [("b1", "Tyre pressure"), ("b2", "Kette")]
    assert loaded.cards[0].text == "Road tyres, 80 psi.\r\nCheck weekly."
    assert loaded.cards[1].text == "Öl alle 300 km; Überschuss abwischen."


def test_a_zip_of_markdown_with_byte_order_marks_and_crlf(tmp_path):
    path = tmp_path / "notes.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("docs/a/chain.md", BOM + "# Chain\r\n\r\nLubricate it every 300 km.\r\n")
        zf.writestr("docs/b/frenos.md", "# Frenos\n\nLas pastillas se cambian a 1,5 mm.")
    loaded = load_any(path)
    assert [(c.id, c.title, c.text) for c in loaded.cards] == [
        ("docs/a/chain", "Chain", "Lubricate it every 300 km."),
        ("docs/b/frenos", "Frenos", "Las pastillas se cambian a 1,5 mm."),
    ]


def test_judgements_that_name_unknown_ids_are_skipped_and_said(tmp_path):
    folder = tmp_path / "set"
    (folder / "qrels").mkdir(parents=True)
    write(folder / "corpus.jsonl", lines([{"_id": r["id"], "title": r["title"], "text": r["text"]} for r in ROWS]))
    write(folder / "queries.jsonl", lines([{"_id": "q1", "text": "chain oil"}, {"_id": "q2", "text": "gone"}]))
    write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\tb2\t1\nq2\tzz9\t1\nq7\tb1\t1\n")
    loaded = load_any(folder)
    assert [q.id for q in loaded.queries] == ["q1"]
    said = " ".join(loaded.notes)
    assert "1 judgement in qrels/test.tsv names a card id not in corpus.jsonl (e.g. 'zz9')" in said
    assert "1 judged query id is not in queries.jsonl (e.g. 'q7')" in said


def test_an_upload_says_what_it_skipped(tmp_path):
    from inspector import data_adding, data_panels, handlers
    from retrieval.corpora import Registry
    from retrieval.index_jobs import job_for
    from retrieval.settings import Settings
    from tests.conftest import MINI_CARDS, PATIENT

    handlers.use_base_settings(
        Settings(
            corpus_path=str(MINI_CARDS),
            chroma_path=str(tmp_path / "chroma"),
            data_dir=str(tmp_path / "data"),
            data_root=str(tmp_path / "eval"),
            min_similarity=0.3,
            **PATIENT,
        )
    )
    try:
        path = tmp_path / "upload.zip"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("manual/chain.md", "# Chain\n\nLubricate the chain every 300 km.")
            zf.writestr("manual/brakes.pdf", b"%PDF-1.4")
            zf.writestr("manual/wheels.docx", b"PK")

        class Upload:
            name, orig_name = str(path), "bike <manual>.zip"

        message = data_adding.upload_corpus(Upload(), "manual", None)[0]
        assert "1 cards" in message and "2 entries that are not .txt/.md were skipped" in message
        assert "bike &lt;manual&gt;.zip" in message
        job = job_for(Registry(data_panels.get_settings()).open("manual"), data_panels.get_settings())
        assert job is None or job.wait(600)["status"] == "done"
    finally:
        handlers.use_base_settings(None)


def test_the_same_cards_again_with_labeled_turns_keep_their_turns(tmp_path):
    from retrieval.corpora import Registry
    from retrieval.settings import Settings
    from tests.conftest import MINI_CARDS, PATIENT

    reg = Registry(
        Settings(
            corpus_path=str(MINI_CARDS),
            chroma_path=str(tmp_path / "chroma"),
            data_dir=str(tmp_path / "data"),
            data_root=str(tmp_path / "eval"),
            **PATIENT,
        )
    )
    folder = tmp_path / "set"
    (folder / "qrels").mkdir(parents=True)
    write(folder / "corpus.jsonl", lines([{"_id": r["id"], "title": r["title"], "text": r["text"]} for r in ROWS]))
    first, new = reg.add(folder / "corpus.jsonl", display="corpus.jsonl", copy=True)  # the cards alone first
    assert new and first.entry.turns == 0
    write(folder / "queries.jsonl", lines([{"_id": "q1", "text": "how often do I oil the chain"}]))
    write(folder / "qrels" / "test.tsv", "q1\tb2\t1\n")
    labeled, new = reg.add(folder, "bikes")  # then the whole folder: its turns must not be dropped
    assert new and labeled.entry.name == "bikes" and labeled.entry.turns == 1 and len(labeled.queries) == 1
    again, new = reg.add(folder, "bikes-again")  # the same cards and turns again: reused
    assert not new and again.entry.name == "bikes"


def test_a_cycling_corpus_answers_the_cycling_questions_of_the_out_of_domain_pool(tmp_path):
    """The pool of out-of-domain examples was written for the medication cards: it holds cycling questions. On a
    cycling corpus they are its own questions, not examples of what it does not cover."""
    from retrieval.corpora import Registry
    from retrieval.corpus_retrievers import retriever_for
    from retrieval.settings import Settings
    from tests.conftest import MINI_CARDS, PATIENT

    s = Settings(
        corpus_path=str(MINI_CARDS),
        chroma_path=str(tmp_path / "chroma"),
        data_dir=str(tmp_path / "data"),
        data_root=str(tmp_path / "eval"),
        **PATIENT,
    )
    data, _ = Registry(s).add(Path(__file__).resolve().parent.parent / "corpus" / "eval" / "bicycles" / "cards.jsonl")
    retriever = retriever_for(data, s)
    assert "how do I adjust the gears on my road bike" in retriever.ood_covered
    assert "why did my bread come out dense and flat" not in retriever.ood_covered
    for turn, card in (
        ("how should I adjust the gears on my road bike", "bike-gear-indexing"),
        ("is it safe to ride my e-bike in the rain?", "bike-ebike-rain"),
    ):
        result = retriever.retrieve(turn, s)
        assert result.hybrid_path == "full" and result.final[0].parent_id == card, (turn, result.reason)
    assert retriever.retrieve("why did my bread come out so dense and flat", s).hybrid_path == "no_match"


def test_a_collection_without_lang_is_stemmed_in_its_own_language(tmp_path):
    """BM25 stems each card in its ``lang`` and a turn in its detected language: a Spanish collection saved without
    a lang column must not be stemmed as English, or a Spanish turn's words never meet its cards' words."""
    from retrieval.bm25 import BM25Index
    from retrieval.corpus import split_cards

    path = write(
        tmp_path / "taller.csv",
        "id;title;text\n"
        "es1;Cadenas;Lubrique las cadenas de la bicicleta cada 300 kilómetros y limpie el exceso.\n"
        "es2;Frenos;Cambie las pastillas de freno cuando midan menos de 1,5 mm.\n"
        "en1;Tyres;Check the tyre pressure every week with a floor pump.\n",
    )
    cards = load_any(path).cards
    assert [c.lang for c in cards] == ["es", "es", "en"]
    hits = BM25Index(split_cards(cards), "snowball").search("¿cada cuánto hay que lubricar la cadena?", 3)
    assert [h.parent_id for h in hits][:1] == ["es1"]


def test_a_zip_without_text_files_names_what_it_holds(tmp_path):
    from retrieval.formats import LoadError

    for files, named in (
        ({"cards.jsonl": lines(ROWS), "logo.png": b"\x89PNG"}, "'cards.jsonl'"),
        ({"export/2024/set/corpus.jsonl": lines([{"_id": "d1", "text": "x"}])}, "'export/2024/set/corpus.jsonl'"),
    ):
        path = tmp_path / "upload.zip"
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in files.items():
                zf.writestr(name, data)
        try:
            load_any(path)
        except LoadError as exc:
            assert f"upload.zip: no .txt or .md files (it holds {named}" in str(exc), str(exc)
            assert "a cards .jsonl or a .csv is uploaded as it is, not zipped" in str(exc)
        else:
            raise AssertionError("read a zip without cards")


def test_a_json_file_holding_one_array_of_cards_is_read_and_its_items_named(tmp_path):
    from retrieval.formats import LoadError

    pretty = write(tmp_path / "export.json", BOM + json.dumps(ROWS, indent=2, ensure_ascii=False))
    assert [c.id for c in load_any(pretty).cards] == ["b1", "b2"]
    bad = write(tmp_path / "bad.json", json.dumps([ROWS[0], {"id": "b9", "title": "no text"}], indent=2))
    try:
        load_any(bad)
    except LoadError as exc:
        assert "bad.json item 2: missing field 'text'." in str(exc) and len(exc.problems) == 1
    else:
        raise AssertionError("a card without text was accepted")
    broken = write(tmp_path / "broken.json", '[\n  {"id": "b1", "title": "t", "text": "x"},\n  {"id": \n]')
    try:
        load_any(broken)
    except LoadError as exc:
        assert exc.problems[0].startswith("broken.json:4: invalid JSON (Expecting value at column 1)")
    else:
        raise AssertionError("broken JSON was accepted")


def test_a_header_naming_a_column_twice_is_refused_by_name(tmp_path):
    from retrieval.formats import LoadError

    path = write(tmp_path / "cards.csv", "id,title,Text,text\nb1,t,first text,second text\n")
    try:
        load_any(path)
    except LoadError as exc:
        assert "cards.csv:1: column 'text' appears twice in the header (columns 3 and 4)" in str(exc), str(exc)
    else:
        raise AssertionError("a header naming text twice was read")


def test_someone_elses_cards_at_corpus_path_do_not_speak_of_medication(tmp_path):
    """CORPUS_PATH is "the cards JSONL": pointed at a bicycle collection, the shipped slot must not carry the
    medication banner, the GlucoSense examples and placeholder, or the pharmacist refusal."""
    from inspector import corpus_words
    from retrieval.context import REFUSAL
    from retrieval.corpora import Registry
    from retrieval.corpus_entries import NEUTRAL_REFUSAL
    from retrieval.settings import Settings
    from tests.conftest import MINI_CARDS, PATIENT

    bikes = Path(__file__).resolve().parent.parent / "corpus" / "eval" / "bicycles" / "cards.jsonl"
    for cards, medication in ((bikes, False), (MINI_CARDS, True)):
        s = Settings(
            corpus_path=str(cards),
            chroma_path=str(tmp_path / "chroma"),
            data_dir=str(tmp_path / "data"),
            data_root=str(tmp_path / "eval"),
            **PATIENT,
        )
        assert Registry(s).get("shipped").refusal == (REFUSAL if medication else NEUTRAL_REFUSAL)
        words = corpus_words._words(Registry(s).open("shipped"))
        banner, shown = corpus_words.banner(words), " ".join([words.placeholder, *(st.text for st in words.steps)])
        assert ("not medical advice" in banner) == medication and ("GlucoSense" in shown) == medication
        if not medication:
            assert words.steps and all("bike" in (st.card or "") for st in words.steps)  # its own labeled turns


def refused(path: Path, **kw) -> str:
    from retrieval.formats import LoadError

    try:
        loaded = load_any(path, **kw)
    except LoadError as exc:
        return str(exc)
    raise AssertionError(f"{path.name} was read: {[(c.id, c.text) for c in loaded.cards]}")


def test_excel_encodings_utf16_is_read_and_windows_1252_says_how_to_save_as_utf8(tmp_path):
    """Excel's "Unicode Text" and Notepad's "Unicode" are UTF-16 with a byte-order mark: no guess, read them. Excel's
    "CSV (Comma delimited)" is Windows-1252 ("café" holds the byte 0xE9): refused, saying what the byte would be and
    how to save as UTF-8 in Excel, never decoded by a guess."""
    table = "ID\tTitle\tText\r\nc1\tCafé\tLe café est chaud.\r\n"
    (tmp_path / "export.tsv").write_bytes(table.encode("utf-16"))
    assert [(c.id, c.title, c.text) for c in load_any(tmp_path / "export.tsv").cards] == [
        ("c1", "Café", "Le café est chaud.")
    ]
    (tmp_path / "cards.jsonl").write_bytes(lines(ROWS, "\r\n").encode("utf-16-le").join([b"\xff\xfe", b""]))
    assert [c.id for c in load_any(tmp_path / "cards.jsonl").cards] == ["b1", "b2"]
    (tmp_path / "excel.csv").write_bytes("id,title,text\r\nc1,Café,Le café est chaud.\r\n".encode("cp1252"))
    said = refused(tmp_path / "excel.csv")
    assert "excel.csv:2: not valid UTF-8 (byte 0xE9 at byte 7 of the line: 'é' in Windows-1252" in said, said
    assert 'in Excel, Save As > "CSV UTF-8 (Comma delimited)"' in said
    (tmp_path / "export.txt").write_bytes(table.encode("utf-16"))
    assert "rename it to .tsv" in refused(tmp_path / "export.txt")


def test_a_csv_row_is_never_cut_short_or_swallowed_by_its_quotes(tmp_path):
    """An unquoted comma made a fourth cell that was dropped ("Oil it" kept, ", then wipe it." lost); an unclosed
    quote swallowed every row after it into one card's text. Both are refused naming the row; Excel's own quoting
    (a field in quotes holding commas, newlines and doubled quotes) and its ``sep=;`` first line are read."""
    said = refused(write(tmp_path / "comma.csv", "id,title,text\nc1,Chain,Oil it, then wipe it.\nc2,Tyres,Pump.\n"))
    assert "comma.csv:2: the row has 4 cells but the header names 3 columns: 'then wipe it.' would be lost" in said
    said = refused(write(tmp_path / "open.tsv", 'id\ttitle\ttext\nc1\tT\tfine\nc2\tT\t"Unclosed\nc3\tT\tthird\n'))
    assert "open.tsv:3: unreadable TSV row (unexpected end of data, reading on to line 4)" in said, said
    excel = write(
        tmp_path / "excel.csv",
        'sep=;\r\nid;title;text\r\nc1;"A; B";"He said ""oil it"",\r\nweekly."\r\nc2;T;plain;;\r\n',
    )
    assert [(c.id, c.title, c.text) for c in load_any(excel).cards] == [
        ("c1", "A; B", 'He said "oil it",\r\nweekly.'),
        ("c2", "T", "plain"),
    ]


def test_a_header_with_other_column_names_says_which_to_rename(tmp_path):
    said = refused(write(tmp_path / "export.csv", "doc_id,title,content\nc1,T,some text\n"))
    assert "Rename 'doc_id' to id and 'content' to text if those are the columns meant." in said, said


def test_a_null_field_is_not_called_missing(tmp_path):
    said = refused(write(tmp_path / "cards.jsonl", lines([{**ROWS[0], "text": None}])))
    assert "cards.jsonl:1: field 'text' is null; give it a string." in said, said


def test_markdown_front_matter_and_a_mac_zip_s_names(tmp_path):
    """A .md with YAML front matter (Jekyll, Hugo, Obsidian) got its file name as title and the metadata as text;
    macOS's Archive Utility writes UTF-8 names without the zip's UTF-8 flag (read as cp437: "CafÃ©") and
    decomposed. A text that merely opens with a rule keeps it."""
    path = tmp_path / "notes.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("Notes/Cafe__ brew.md", "# Café\n\nBrew at 94 degrees.")
        zf.writestr("Notes/post.md", '---\r\ntitle: "Chain: oiling"\r\ntags: [bike]\r\n---\r\n\r\nOil it weekly.')
        zf.writestr("Notes/rule.md", "---\n\nA text that opens with a rule.\n\n---\n\nMore.")
        zf.writestr("__MACOSX/Notes/._post.md", b"\x00\x05\x16\x07")
        zf.writestr("Notes/.DS_Store", b"\x00\x00\x00\x01Bud1")
    path.write_bytes(path.read_bytes().replace(b"Cafe__", "Cafe\u0301".encode()))  # UTF-8 bytes, no flag
    loaded = load_any(path)
    assert [(c.id, c.title, c.text) for c in loaded.cards] == [
        ("Notes/Caf\u00e9 brew", "Café", "Brew at 94 degrees."),
        ("Notes/post", "Chain: oiling", "Oil it weekly."),
        ("Notes/rule", "rule", "--- A text that opens with a rule. --- More."),
    ]
    assert loaded.notes == ()  # the Finder's files are not "entries that are not .txt/.md"


def test_a_card_in_chinese_is_counted_against_the_context_budget():
    """A CJK text has no spaces: counted in whitespace words, a 3,000-character Chinese card was 2 tokens and every
    such card fit any CONTEXT_TOKEN_BUDGET. English counts as before (words x 1.3)."""
    from retrieval.context import count_tokens

    assert count_tokens("自行车链条需要定期润滑。" * 250) == 3_575  # 2,750 letters (the 250 。 are not) x 1.3
    assert count_tokens("Oil the chain 每周 weekly") == 8  # 4 words + 2 characters = 6 x 1.3
    assert count_tokens("a b c d e f g h i j") == 13
