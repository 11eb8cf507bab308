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


@pytest.mark.parametrize(("text", "lang"), [("what should I do if I miss a dose", "en"),
                                            ("¿qué hago si olvido una dosis?", "es"),
                                            ("o que faço se esqueci a dose do remédio", "pt"),
                                            ("GS-40 E-07", "en")])
def test_detect_language(text, lang):
    assert detect_language(text) == lang


def test_base_language():
    assert [base_language(x) for x in ("es-419", "pt-BR", "en", "fr", "")] == ["es", "pt", "en", "en", "en"]


def test_snowball_bm25_matches_inflections_plain_does_not():
    chunks = [Chunk("a#0", "a", "Reminders", "en", "Snoozing reminders on your phone."),
              Chunk("b#0", "b", "Storage", "en", "Keep tablets dry."),
              Chunk("c#0", "c", "Travel", "en", "Pack tablets in hand luggage.")]
    assert BM25Index(chunks, "plain").search("reminder snoozed", 5) == []
    assert [h.parent_id for h in BM25Index(chunks, "snowball").search("reminder snoozed", 5)] == ["a"]
