import pytest

from retrieval.bm25 import BM25Index
from retrieval.tokenize import analyze, base_language, detect_language, spans, tokenize
from retrieval.types import Chunk


def test_plain_is_lowercase_and_punctuation_stripping():
    assert tokenize("GlucoSense GS-40: error E-07!") == ["glucosense", "gs", "40", "error", "e", "07"]
    assert tokenize("Olvidé la dosis, ¿qué hago?") == ["olvidé", "la", "dosis", "qué", "hago"]
    assert tokenize("snake_case") == ["snake", "case"]


def test_spans_point_at_the_tokens():
    text = "Take 10 units."
    assert [(text[a:b], t) for a, b, t in spans(text)] == [("Take", "take"), ("10", "10"), ("units", "units")]


def test_snowball_stems_and_drops_stop_words_per_language():
    assert analyze("Missed doses of the insulin pens", "snowball", "en") == ["miss", "dose", "insulin", "pen"]
    assert analyze("Olvidé tomar las pastillas", "snowball", "es-419") == ["olvid", "tom", "pastill"]
    assert analyze("Esqueci de tomar os remédios", "snowball", "pt-BR") == ["esquec", "tom", "remédi"]
    assert analyze("GS-40 E-07", "snowball", "en") == ["gs", "40", "e", "07"]


def test_unknown_tokenizer():
    with pytest.raises(ValueError, match="unknown tokenizer 'porter'"):
        analyze("x", "porter")


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("what should I do if I miss a dose", "en"),
        ("¿qué hago si olvido una dosis?", "es"),
        ("o que faço se esqueci a dose do remédio", "pt"),
        ("GS-40 E-07", "en"),
    ],
)
def test_detect_language(text, lang):
    assert detect_language(text) == lang


def test_base_language():
    assert [base_language(x) for x in ("es-419", "pt-BR", "en", "fr", "")] == ["es", "pt", "en", "en", "en"]


def test_snowball_bm25_matches_inflections_plain_does_not():
    chunks = [
        Chunk("a#0", "a", "Reminders", "en", "Snoozing reminders on your phone."),
        Chunk("b#0", "b", "Storage", "en", "Keep tablets dry."),
        Chunk("c#0", "c", "Travel", "en", "Pack tablets in hand luggage."),
    ]
    assert BM25Index(chunks, "plain").search("reminder snoozed", 5) == []
    assert [h.parent_id for h in BM25Index(chunks, "snowball").search("reminder snoozed", 5)] == ["a"]


# ------------------------------------------------------------------------------------------ Chinese, Japanese, Korean
# A CJK run is split into overlapping character bigrams (Lucene's CJKAnalyzer / Elasticsearch's ``cjk``): these
# scripts write no spaces between words, so a whole run as one token matched only a verbatim repeat of it.
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("糖尿病の薬を飲み忘れた", ["糖尿", "尿病", "病の", "の薬", "薬を", "を飲", "飲み", "み忘", "忘れ", "れた"]),
        ("忘记吃药了怎么办？", ["忘记", "记吃", "吃药", "药了", "了怎", "怎么", "么办"]),
        (
            "인슐린을 냉장고에 보관하세요",
            ["인슐", "슐린", "린을", "냉장", "장고", "고에", "보관", "관하", "하세", "세요"],
        ),
        ("コーヒーは人々に", ["コー", "ーヒ", "ヒー", "ーは", "は人", "人々", "々に"]),  # prolonged sound mark, 々
        ("薬", ["薬"]),  # a lone character stays a unigram
        ("GS-40の薬, E-07。", ["gs", "40", "の薬", "e", "07"]),
        ("GS40の", ["gs40", "の"]),  # a Latin run and the CJK run right after it are two tokens
        ("薬・インスリン", ["薬", "イン", "ンス", "スリ", "リン"]),  # the katakana middle dot separates
        ("ｲﾝｽﾘﾝ 𠮷野家", ["ｲﾝ", "ﾝｽ", "ｽﾘ", "ﾘﾝ", "𠮷野", "野家"]),  # half-width katakana, a supplementary-plane Han
    ],
)
def test_cjk_runs_are_split_into_overlapping_bigrams(text, tokens):
    assert tokenize(text) == tokens
    assert [t for _, _, t in spans(text)] == tokens
    # every token is a span of its own characters, so highlighting a bigram marks exactly its two characters
    assert all(text[a:b].lower() == t for a, b, t in spans(text))


def test_snowball_passes_cjk_bigrams_through_unchanged():
    for lang in ("en", "es", "pt"):
        assert analyze("GS-40の薬を飲む the pens", "snowball", lang)[:5] == ["gs", "40", "の薬", "薬を", "を飲"]
    assert analyze("인슐린 pens", "snowball", "en") == ["인슐", "슐린", "pen"]


def _cjk_cards(texts: dict[str, str]) -> list[Chunk]:
    return [Chunk(f"{cid}#0", cid, "", "en", text) for cid, text in texts.items()]


# Synthetic cards: the turns share a two-character word with the right card but are no card's whole run.
JAPANESE = _cjk_cards(
    {
        "storage": "インスリンは冷蔵庫で保管してください。開封後は室温で四週間使えます。",
        "missed": "薬を飲み忘れたときは、気づいたときにすぐ一回分を飲んでください。",
        "meter": "血糖値を測る前に手を洗ってください。エラーE-07は試験紙の不良です。",
        "travel": "旅行のときは薬を手荷物に入れてください。",
        "hypo": "低血糖の症状は、ふるえ、冷や汗、動悸です。ブドウ糖をとってください。",
    }
)
CHINESE = _cjk_cards(
    {
        "missed": "如果忘记吃药，请尽快补服。",
        "storage": "胰岛素应放在冰箱里保存。",
        "travel": "旅行时请把药放在随身行李中。",
        "hypo": "低血糖时会出汗和发抖。",
    }
)


@pytest.mark.parametrize(
    ("cards", "turn", "best"),
    [
        (JAPANESE, "冷蔵庫は必要ですか", "storage"),
        (JAPANESE, "試験紙が悪いのかな", "meter"),
        (CHINESE, "我忘记吃药了怎么办", "missed"),
        (CHINESE, "冰箱", "storage"),
    ],
)
@pytest.mark.parametrize("tokenizer", ["plain", "snowball"])
def test_bm25_finds_the_cjk_card_sharing_a_word(cards, turn, best, tokenizer):
    hits = BM25Index(cards, tokenizer).search(turn, 5)
    assert hits and hits[0].parent_id == best, hits


def test_cjk_analysis_keeps_exactly_the_characters_plain_tokenizing_kept():
    """Each character alone: a token if and only if it was one before (punctuation such as 、。・「」 and a lone
    combining sound mark stay separators), in normal form C (a compatibility ideograph is its unified one); only the
    grouping of CJK letters changed."""
    import re
    import unicodedata

    text = " ".join(
        chr(c)
        for c in [*range(0x1100, 0x3400), *range(0xA960, 0xFFFF), *range(0x20000, 0x40000, 7)]
        if not 0xD800 <= c < 0xE000
    )
    assert set(tokenize(text)) == {unicodedata.normalize("NFC", t) for t in re.findall(r"[^\W_]+", text.lower())}


# ------------------------------------------------------------------------------- combining marks, normal form C
# Python's \w matches no combining mark (Mn, Mc, Me): "[^\W_]+" cut Hindi, Thai or pointed Arabic and Hebrew words
# at every vowel sign and dropped it, and a decomposed "cafe\u0301" lost its accent. A token keeps its marks, in NFC.
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("मैं अपनी दवा की खुराक भूल गया", ["मैं", "अपनी", "दवा", "की", "खुराक", "भूल", "गया"]),  # Hindi: matras, anusvara
        ("আমি ওষুধ খেতে ভুলে গেছি", ["আমি", "ওষুধ", "খেতে", "ভুলে", "গেছি"]),  # Bengali
        ("நான் மருந்து சாப்பிட மறந்துவிட்டேன்", ["நான்", "மருந்து", "சாப்பிட", "மறந்துவிட்டேன்"]),  # Tamil: virama
        ("ลืมกินยา อินซูลิน", ["ลืมกินยา", "อินซูลิน"]),  # Thai: vowels and tone marks (a run without spaces is one token)
        ("كَيْفَ أَحْفَظُ الأَنْسُولِين؟", ["كَيْفَ", "أَحْفَظُ", "الأَنْسُولِين"]),  # Arabic with harakat
        ("שָׁלוֹם, אִינְסוּלִין", ["שָׁלוֹם", "אִינְסוּלִין"]),  # Hebrew with niqqud
        ("GS-40: दवा 冷蔵庫 E-07", ["gs", "40", "दवा", "冷蔵", "蔵庫", "e", "07"]),  # codes and CJK bigrams around them
        ("snake_दवा_case", ["snake", "दवा", "case"]),  # "_" still separates
    ],
)
def test_a_token_keeps_its_combining_marks(text, tokens):
    import unicodedata

    assert tokenize(text) == tokens
    assert [t for _, _, t in spans(text)] == tokens
    assert all(unicodedata.normalize("NFC", text[a:b].lower()) == t for a, b, t in spans(text))
    assert tokenize(unicodedata.normalize("NFD", text)) == tokens  # the same terms whatever the normal form


@pytest.mark.parametrize("word", ["café", "Olvidé", "remédio", "naïve", "Ångström", "Việt"])
def test_nfd_and_nfc_forms_of_a_word_are_one_term_and_spans_point_into_the_original(word):
    import unicodedata

    nfc, nfd = unicodedata.normalize("NFC", word), unicodedata.normalize("NFD", word)
    text = f"«{nfd}» y {nfc}."
    (a, b, first), (_, _, y), (c, d, second) = spans(text)
    assert first == second == tokenize(nfc)[0] == nfc.lower() and y == "y"
    assert text[a:b] == nfd and text[c:d] == nfc  # offsets into the text as given, for highlighting
    assert tokenize(text) == [first, "y", second]


@pytest.mark.parametrize("text", ["薬を飲み忘れたがぎぐ", "インスリンをジェットで", "인슐린을 냉장고에 보관하세요"])
def test_decomposed_japanese_and_korean_make_the_same_bigrams(text):
    """NFD kana carry a combining sound mark (か + ゙) and NFD Hangul is jamo (인 = ᄋ ᅵ ᆫ), as macOS writes file
    names: a bigram is of two characters with what extends them, so the terms are those of the composed text."""
    import unicodedata

    nfd = unicodedata.normalize("NFD", text)
    assert nfd != text and tokenize(nfd) == tokenize(text) == [t for _, _, t in spans(nfd)]
    assert all(unicodedata.normalize("NFC", nfd[a:b]) == t for a, b, t in spans(nfd))


def test_bm25_matches_words_with_marks_and_across_normal_forms():
    import unicodedata

    chunks = [
        Chunk("hi#0", "hi", "", "hi", "दवा की खुराक भूल जाने पर अगली खुराक समय पर लें।"),
        Chunk("hi2#0", "hi2", "", "hi", "दिन में दो बार भोजन के साथ लें।"),
        Chunk("fr#0", "fr", "", "en", unicodedata.normalize("NFD", "Le café et les médicaments.")),
    ]
    for tokenizer in ("plain", "snowball"):
        index = BM25Index(chunks, tokenizer)
        assert [h.parent_id for h in index.search("खुराक", 5)] == ["hi"]  # a word with a vowel sign (was 'ख', 'र', 'क')
        assert [h.parent_id for h in index.search("café", 5)] == ["fr"]  # NFC turn, NFD card


def test_words_with_marks_count_as_one_word_each():
    from retrieval.tokenize import word_count

    assert word_count("मैं अपनी दवा की खुराक भूल गया") == 7
    assert word_count("cafe\u0301 cafe\u0301") == 2
