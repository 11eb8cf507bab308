import json
import os

import pytest

from retrieval.corpus import (
    MAX_CARD_CHARS,
    MAX_LINE_BYTES,
    CorpusError,
    load_beir,
    load_cards,
    load_queries,
    split_card,
    split_cards,
)
from retrieval.types import Card
from tests.conftest import MINI_CARDS

GOOD = {"id": "a", "title": "T", "lang": "en", "topic": "drug", "text": "Some text."}


def write(tmp_path, lines, name="cards.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_loads_mini_corpus():
    cards = load_cards(MINI_CARDS)
    assert len(cards) == 5 and cards[0].id == "gs40-e07"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([GOOD, "{not json"], r"cards.jsonl:2: invalid JSON"),
        ([{k: v for k, v in GOOD.items() if k != "title"}], r"cards.jsonl:1: missing field 'title'"),
        ([GOOD, dict(GOOD, text="x")], r"cards.jsonl:2: field 'id': duplicate id 'a' \(first seen on line 1\)"),
        ([dict(GOOD, text="   ")], r"cards.jsonl:1: field 'text' is empty"),
        ([dict(GOOD, text=5)], r"cards.jsonl:1: field 'text' must be a string"),
        ([dict(GOOD, text="word " * 30_000)], r"cards.jsonl:1: field 'text' has 150,000 characters"),
        (["[1, 2]"], r"cards.jsonl:1: expected a JSON object"),
        ([""], r"no cards found"),
    ],
)
def test_validation_errors_name_file_line_and_field(tmp_path, lines, message):
    with pytest.raises(CorpusError, match=message):
        load_cards(write(tmp_path, lines))


def test_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="file not found"):
        load_cards(tmp_path / "nope.jsonl")


def test_split_card_ids_are_stable_and_cover_the_text():
    text = " ".join(f"Sentence number {i} has five words." for i in range(20))
    card = Card("c1", "Title", "en", "drug", text)
    chunks = split_card(card, max_words=20)
    assert [c.chunk_id for c in chunks] == [f"c1#{i}" for i in range(len(chunks))]
    assert len(chunks) == 7  # 20 sentences of 6 words, at most 3 (18 words) per chunk: ceil(20/3)
    assert " ".join(c.text for c in chunks) == text
    assert split_card(card, max_words=20) == chunks
    assert [c.text for c in split_card(card, max_words=None)] == [text]


def test_a_long_sentence_is_cut_and_chinese_sentences_end_at_their_own_marks():
    """A text without full stops (a transcript) or a Chinese paragraph (。 and no space) was one sub-chunk of any
    length, of which the embedder and the cross-encoder read about 512 tokens: now cut into pieces of max_words."""
    words = [f"w{i}" for i in range(1000)]
    plain = split_card(Card("t", "Transcript", "en", "", " ".join(words)), max_words=60)
    assert [len(c.text.split()) for c in plain] == [60] * 16 + [40]
    assert " ".join(c.text for c in plain).split() == words  # every word, in order
    zh = "本品为白色片剂。" * 400  # 400 sentences of 8 characters (about 4 words each)
    chunks = split_card(Card("zh", "说明", "zh", "", zh), max_words=60)
    assert len(chunks) == 27 and all(len(c.text) <= 120 and c.text.endswith("。") for c in chunks)
    assert "".join(c.text for c in chunks) == zh  # no space put between Chinese sentences
    run = split_card(Card("r", "r", "zh", "", "糖" * 3000), max_words=60)  # no sentence end at all
    assert [len(c.text) for c in run] == [120] * 25
    # A sentence of up to 4 x max_words words still stands whole (SciFact's longest is 218 words at 60).
    long = " ".join(["word"] * 200) + ". Next one."
    assert [len(c.text.split()) for c in split_card(Card("l", "l", "en", "", long), max_words=60)] == [200, 2]


def test_texts_without_cjk_or_giant_sentences_split_as_before_so_stored_fingerprints_hold():
    """Every shipped and bundled corpus gives the sub-chunks of the chunker before (``legacy=True``): their stored
    corpora, dense collections and calibrations keep their names."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "corpus"
    for path in (root / "cards.jsonl", *sorted((root / "eval").glob("*/cards.jsonl"))):
        cards = load_cards(path)
        assert split_cards(cards) == split_cards(cards, legacy=True), path


def test_split_cards_keeps_parent_ids():
    chunks = split_cards(load_cards(MINI_CARDS))
    assert {c.parent_id for c in chunks} == {c.id for c in load_cards(MINI_CARDS)}


def test_queries_validation(tmp_path):
    good = {"id": "q1", "text": "hi", "lang": "en", "category": "lexical", "relevant": {"a": 2}}
    assert load_queries(write(tmp_path, [good], "q.jsonl"))[0].relevant == {"a": 2}
    with pytest.raises(CorpusError, match=r"q.jsonl:1: field 'category'"):
        load_queries(write(tmp_path, [dict(good, category="other")], "q.jsonl"))
    with pytest.raises(CorpusError, match=r"q.jsonl:1: field 'relevant'"):
        load_queries(write(tmp_path, [dict(good, relevant=["a"])], "q.jsonl"))


def make_beir(tmp_path, qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n"):
    (tmp_path / "qrels").mkdir()
    write(
        tmp_path,
        [{"_id": "d1", "title": "One", "text": "first"}, {"_id": "d2", "title": "", "text": "second"}],
        "corpus.jsonl",
    )
    write(tmp_path, [{"_id": "q1", "text": "first?"}, {"_id": "q2", "text": "unjudged"}], "queries.jsonl")
    (tmp_path / "qrels" / "test.tsv").write_text(qrels)
    return tmp_path


def test_beir_loader(tmp_path):
    ds = load_beir(make_beir(tmp_path), "test")
    assert [c.id for c in ds.cards] == ["d1", "d2"]
    assert [(q.id, q.relevant) for q in ds.queries] == [("q1", {"d1": 1})]
    assert ds.chunk_words is None


def test_beir_bad_qrels_line(tmp_path):
    with pytest.raises(CorpusError, match=r"test.tsv:2: expected 3 tab-separated columns"):
        load_beir(make_beir(tmp_path, "query-id\tcorpus-id\tscore\nq1 d1 1\n"), "test")


def test_beir_missing_split(tmp_path):
    with pytest.raises(CorpusError, match=r"dev.tsv: file not found. Available splits: \['test'\]"):
        load_beir(make_beir(tmp_path), "dev")


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"id": "b\xff"}\n')
    with pytest.raises(CorpusError, match=r"cards.jsonl:2: not valid UTF-8"):
        load_cards(path)


def test_lone_surrogate_escape_is_refused(tmp_path):
    with pytest.raises(CorpusError, match=r"cards.jsonl:1: field 'text' holds a lone surrogate"):
        load_cards(write(tmp_path, ['{"id": "a", "title": "T", "lang": "en", "topic": "drug", "text": "x \\ud800"}']))


# ---------------------------------------------------------------- hostile files: each is a clear file:line error
def test_a_folder_as_corpus_path_is_named(tmp_path):
    with pytest.raises(CorpusError, match=r"is a folder, not a file.*CORPUS_PATH"):
        load_cards(tmp_path)


def test_a_card_id_with_the_sub_chunk_separator_names_the_line(tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "id": "c#2"}) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"cards.jsonl:2: field 'id': id 'c#2' contains '#'"):
        load_cards(path)


def test_deeply_nested_json_names_the_line(tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + "[" * 200_000 + "]" * 200_000 + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"cards.jsonl:2: .*nested too deeply"):
        load_cards(path)


def test_huge_integer_names_the_line(tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + '{"id": ' + "7" * 5_000 + "}\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"cards.jsonl:2: invalid JSON .*4300 digits"):
        load_cards(path)


def test_overlong_line_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "cards.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b" " * (MAX_LINE_BYTES + 10) + b"\n")
    with pytest.raises(CorpusError, match=rf"cards.jsonl:2: line is longer than {MAX_LINE_BYTES:,} bytes"):
        load_cards(path)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_file_without_newline_stops_at_the_line_limit():
    with pytest.raises(CorpusError, match=rf"/dev/zero:1: line is longer than {MAX_LINE_BYTES:,} bytes"):
        load_cards("/dev/zero")


def test_a_card_at_the_character_limit_fits_in_a_line(tmp_path):
    # The line limit must never refuse a card the card limit allows, even with every character escaped as a
    # surrogate pair (an emoji is 12 bytes as \ud83d\ude00).
    card = dict(GOOD, text="\U0001f600" * MAX_CARD_CHARS)
    path = tmp_path / "cards.jsonl"
    path.write_text(json.dumps(card, ensure_ascii=True) + "\n", encoding="utf-8")
    assert len(load_cards(path)[0].text) == MAX_CARD_CHARS


def test_huge_qrels_field_names_the_line(tmp_path):
    folder = make_beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\t" + "d" * 200_000 + "\t1\n")
    with pytest.raises(CorpusError, match=r"test.tsv:2: "):
        load_beir(folder, "test")
