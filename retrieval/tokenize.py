"""BM25 tokenization. ``plain`` is the ADR's lowercase + punctuation stripping (one function, also used for
highlighting); ``snowball`` adds stop-word removal and Snowball stemming chosen by language (en, es, pt).

Chinese, Japanese and Korean are analysed as Lucene's ``CJKAnalyzer`` (Elasticsearch's ``cjk`` analyzer) does: a
run of CJK characters (Han, Hiragana, Katakana, Hangul) is split into overlapping character bigrams, a lone
character staying a unigram. These scripts write no spaces between words, so a whole run as one token would match
only a verbatim repeat of it; a bigram is the unit a two-character word ("冷蔵", "忘记", "인슐") is matched by.
Snowball has no stemmer for them: their bigrams pass through the ``snowball`` analyzer unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+")
# The characters analysed as CJK (as far as they are letters: the lookahead below keeps punctuation such as the
# katakana middle dot ・ or 、。 a separator): Hangul jamo and syllables, the ideographic iteration marks 々 〻 and
# 〆 〇, Hiragana (with ゝゞ), Katakana (with the prolonged sound mark ー and ヽヾ), half-width Katakana and Hangul,
# and the Han ideographs of every plane.
_CJK = ("\u1100-\u11ff\u3005-\u3007\u303b\u3041-\u309f\u30a1-\u30ff\u3131-\u318e\u31f0-\u31ff"
        "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uffdc"
        "\U00020000-\U0003ffff")
_HAS_CJK = re.compile(f"[{_CJK}]")
# A CJK run (letters only), or a run of any other letters and digits: the two are separate tokens ("GS40の" ->
# "gs40", "の"), so every character ``_WORD`` keeps is still kept, and nothing else.
_TOKEN = re.compile(f"(?P<cjk>(?:(?![\\W_])[{_CJK}])+)|[^\\W_{_CJK}]+")
# By script, for telling Korean (Hangul) and Japanese (any kana) from Chinese (Han alone).
_HANGUL = re.compile("[\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7ff\uffa0-\uffdc]")
_KANA = re.compile("[\u3041-\u309f\u30a1-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
# Version of the analysis: anything kept that was computed from these tokens of a text with CJK characters in it
# (a refusal calibration) carries it, so that nothing built by the whole-run tokenizer (before it) is reused.
CJK_ANALYSIS = "cjk-bigrams-1"

TOKENIZERS = ("plain", "snowball")

# Short stop-word lists (the most frequent function words of each language). Digits and codes are never stop words.
STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "a about above after again against all am an and any are as at be because been before being below between "
        "both but by can could did do does doing down during each few for from further had has have having he her "
        "here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only "
        "or other our ours out over own same she should so some such than that the their theirs them then there "
        "these they this those through to too under until up very was we were what when where which while who whom "
        "why will with would you your yours".split()
    ),
    "es": frozenset(
        "a al algo algunas algunos ante antes como con contra cual cuando de del desde donde durante e el ella ellas "
        "ellos en entre era es esa esas ese eso esos esta estas este esto estos fue ha hay la las le les lo los mas "
        "me mi mis mucho muy nada ni no nos o os otra otro para pero poco por porque que quien se sea ser si sin "
        "sobre su sus también te tu tus un una uno unos y ya yo".split()
    ),
    "pt": frozenset(
        "a ao aos as até com como da das de dela dele do dos e ela elas ele eles em entre era essa esse esta este "
        "eu foi há isso isto já lhe mais mas me meu minha muito na nas nem no nos não o os ou para pela pelo por "
        "quando que quem se sem ser seu sua são também te tem um uma você".split()
    ),
}
_STEMMER_NAMES = {"en": "english", "es": "spanish", "pt": "portuguese"}


def has_cjk(text: str) -> bool:
    """True if ``text`` holds a Chinese, Japanese or Korean character (its tokens include bigrams)."""
    return _HAS_CJK.search(text) is not None


def cjk_language(text: str) -> tuple[str, int]:
    """``(language, letters)``: ``ko`` if most CJK letters of ``text`` are Hangul, else ``ja`` if any is kana, else
    ``zh``; and how many CJK letters it has (``("", 0)`` for none)."""
    if not _HAS_CJK.search(text):
        return "", 0
    letters = sum(m.end() - m.start() for m in _TOKEN.finditer(text) if m.lastgroup == "cjk")
    if not letters:
        return "", 0
    hangul = len(_HANGUL.findall(text))
    if 2 * hangul > letters:
        return "ko", letters
    return ("ja" if _KANA.search(text) else "zh"), letters


def _pieces(text: str):
    """``(start, end)`` of every token of ``text``: a CJK run as its overlapping bigrams (a lone character
    alone), any other run of letters and digits whole."""
    for m in _TOKEN.finditer(text):
        a, b = m.span()
        if m.lastgroup == "cjk" and b - a > 2:
            yield from ((i, i + 2) for i in range(a, b - 1))
        else:
            yield a, b


def tokenize(text: str) -> list[str]:
    """Lowercase ``text`` and split it on everything that is not a letter or digit (unicode-aware); a run of
    Chinese, Japanese or Korean characters becomes its overlapping bigrams (a lone character a unigram).

    >>> tokenize("GlucoSense GS-40: error E-07!")
    ['glucosense', 'gs', '40', 'error', 'e', '07']
    >>> tokenize("GS-40の薬を")
    ['gs', '40', 'の薬', '薬を']
    """
    low = text.lower()
    if not _HAS_CJK.search(low):
        return _WORD.findall(low)
    return [low[a:b] for a, b in _pieces(low)]


def spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of ``tokenize(text)``, in order, for highlighting query terms in a
    snippet. CJK bigrams overlap: ``"冷蔵庫"`` gives ``(0, 2, "冷蔵")`` and ``(1, 3, "蔵庫")``."""
    return [(a, b, text[a:b].lower()) for a, b in _pieces(text)]


def word_count(text: str) -> int:
    """About how many words ``text`` has: its non-CJK tokens, and a CJK run as one word per two characters (the
    usual length of a Chinese or Japanese word; its bigram count would call a 13-character question 12 words)."""
    if not _HAS_CJK.search(text):
        return len(_WORD.findall(text))
    return sum((m.end() - m.start() + 1) // 2 if m.lastgroup == "cjk" else 1 for m in _TOKEN.finditer(text))


def base_language(lang: str) -> str:
    """``es-419`` -> ``es``, ``pt-BR`` -> ``pt``; anything unknown -> ``en``."""
    base = (lang or "en").split("-")[0].lower()
    return base if base in _STEMMER_NAMES else "en"


def detect_language(text: str) -> str:
    """The language (en, es, pt) whose stop words the turn uses most (at least two); else ``en``.

    Cheap and explainable: a turn has no ``lang`` field, and the stemmer must match the one its cards used.
    """
    tokens = tokenize(text)
    counts = {lang: sum(t in words for t in tokens) for lang, words in STOPWORDS.items()}
    accents = sum(ch in "ñ¿¡" for ch in text), sum(ch in "ãõç" for ch in text)
    counts["es"] += 2 * accents[0]
    counts["pt"] += 2 * accents[1]
    best = max(counts, key=lambda lang: (counts[lang], lang == "en"))
    return best if counts[best] > counts["en"] and counts[best] >= 2 else "en"


@lru_cache(maxsize=8)
def _stemmer(lang: str):
    import Stemmer

    return Stemmer.Stemmer(_STEMMER_NAMES[lang])


def analyze(text: str, tokenizer: str = "plain", lang: str = "en") -> list[str]:
    """BM25 terms of ``text``: ``plain`` tokens, or ``snowball`` (stop words removed, stemmed for ``lang``; CJK
    bigrams unchanged)."""
    tokens = tokenize(text)
    if tokenizer == "plain":
        return tokens
    if tokenizer != "snowball":
        raise ValueError(f"unknown tokenizer {tokenizer!r}: use one of {TOKENIZERS}.")
    base = base_language(lang)
    stop = STOPWORDS[base]
    words = [t for t in tokens if t not in stop]
    if not _HAS_CJK.search(text):
        return _stemmer(base).stemWords(words)
    stem = _stemmer(base).stemWord  # CJK tokens are no word of a Snowball language: never stemmed
    return [t if _HAS_CJK.match(t) else stem(t) for t in words]


def analyzer(tokenizer: str, lang: str = "en") -> Callable[[str], list[str]]:
    """``analyze`` with its options bound, for one language."""
    return lambda text: analyze(text, tokenizer, lang)
